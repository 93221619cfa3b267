"""How a decoder's tokens read on a page: whole characters as they are, the bytes of a
character not (yet) complete in hex (``⟨E7 9D⟩``), never U+FFFD; a space as ␣ and a newline
as ↵ where a token stands alone. Pure functions of token strings and their spelling
(``Decoder.token_spelling``): byte-level BPE or SentencePiece."""

from __future__ import annotations

from attention_core import pretrained
from attention_core.pretrained.bpe import BYTE_LEVEL
from dashboard.data.inputs import axis_labels

SHOWN_NEWLINE, SHOWN_EMPTY, SHOWN_SPACE = "↵", "∅", "␣"


def _utf8_runs(raw: bytes) -> list[tuple[str, bool]]:
    """Split bytes into runs of whole UTF-8 characters, ``("猫", False)``, and runs of bytes
    that form no character (yet), ``("⟨E7 9D⟩", True)``."""
    pieces: list[tuple[bytes, bool]] = []  # (bytes, True when they form no character)
    while raw:
        try:
            raw.decode("utf-8")
            start = stop = len(raw)
        except UnicodeDecodeError as err:
            start, stop = err.start, err.end
        for piece, broken in ((raw[:start], False), (raw[start:stop], True)):
            if piece and pieces and pieces[-1][1] == broken:
                pieces[-1] = (pieces[-1][0] + piece, broken)
            elif piece:
                pieces.append((piece, broken))
        raw = raw[stop:]
    return [(_hex(piece) if broken else piece.decode("utf-8"), broken) for piece, broken in pieces]


def _hex(raw: bytes) -> str:
    """Bytes in hex between angle brackets, e.g. ``⟨E7 9D⟩``."""
    return "⟨" + " ".join(f"{byte:02X}" for byte in raw) + "⟩"


def _shown(raw: bytes, replacements: tuple[tuple[str, str], ...]) -> str:
    """Bytes as :func:`_utf8_runs` splits them, ``replacements`` applied to the characters
    only (never to the hex), :data:`SHOWN_EMPTY` for nothing."""
    shown = []
    for text, is_bytes in _utf8_runs(raw):
        for old, new in () if is_bytes else replacements:
            text = text.replace(old, new)
        shown.append(text)
    return "".join(shown) or SHOWN_EMPTY


_LABEL_REPLACEMENTS = (("\n", SHOWN_NEWLINE),)
_TOKEN_REPLACEMENTS = ((" ", SHOWN_SPACE), ("\n", SHOWN_NEWLINE))


def token_labels(tokens: tuple[str, ...], *, spelling: str = BYTE_LEVEL) -> list[str]:
    """Unique axis labels that show characters, not byte fragments.

    Tokens that together spell one character (or several) share its text, numbered
    ``(k/n)``; a newline shows as ↵. Tokens whose bytes never complete a character (the
    newest tokens of a half-generated one) show their own bytes in hex, e.g. ``⟨E7⟩``, as
    the top-5 chart does (:func:`shown_token`), never U+FFFD. Positions make the labels
    unique (``axis_labels``). ``spelling`` is the tokens' (``Decoder.token_spelling``).
    """
    shown: list[str] = []
    for group in pretrained.group_by_character(list(tokens), spelling):
        members = tokens[group.start : group.stop]
        raw = b"".join(pretrained.token_bytes(token, spelling) for token in members)
        if any(is_bytes for _, is_bytes in _utf8_runs(raw)):
            shown += [
                _shown(pretrained.token_bytes(t, spelling), _LABEL_REPLACEMENTS) for t in members
            ]
            continue
        text = _shown(raw, _LABEL_REPLACEMENTS)
        count = group.stop - group.start
        shown += [text] if count == 1 else [f"{text}({k}/{count})" for k in range(1, count + 1)]
    return axis_labels(tuple(shown))


def shown_token(token: str, spelling: str = BYTE_LEVEL) -> str:
    """A token as text: its whole UTF-8 characters as they are (a space shows as ␣, a
    newline as ↵), the bytes of a part character in hex, e.g. ``⟨E5 9D⟩`` for part of 坐 and
    ``好⟨E7⟩`` for 好 and the first byte of 猫. ``spelling``: ``Decoder.token_spelling``."""
    return _shown(pretrained.token_bytes(token, spelling), _TOKEN_REPLACEMENTS)


def shown_text(
    tokens: tuple[str, ...], *, hidden: frozenset[str] = frozenset(), spelling: str = BYTE_LEVEL
) -> str:
    """The text that byte-level tokens spell, as the page shows generated text: whole
    characters as they are, the bytes of a character not (yet) complete in hex (``⟨E7 9D⟩``,
    as :func:`shown_token` writes them), never U+FFFD.

    Args:
        tokens: token strings. hidden: tokens left out (the control tokens, as
            ``Decoder.decode`` leaves them out). spelling: the tokens' (``Decoder.token_spelling``).

    Returns:
        The text ("" for no tokens).

    Raises:
        ValueError: when a token holds a character outside the byte alphabet.
    """
    raw = b"".join(
        pretrained.token_bytes(token, spelling) for token in tokens if token not in hidden
    )
    return "".join(text for text, _ in _utf8_runs(raw))
