"""Byte-level BPE rebuilt from a GGUF file's vocabulary and merges, and how tokens are spelled.

A GGUF file of a GPT-2-style model (``tokenizer.ggml.model == "gpt2"``) carries its tokens
spelled in GPT-2's byte alphabet (every byte shown as one printable character, e.g. a space
as ``Ġ``), the merges in priority order, and a type per token (3 = control, such as
``<|endoftext|>``). :func:`build_bpe_tokenizer` turns them into a ``tokenizers.Tokenizer``
with the pre-tokeniser ``tokenizer.ggml.pre`` names, as llama.cpp's ``src/llama-vocab.cpp``
splits text for it and HuggingFace's ``tokenizer.json`` writes it:

* ``"smollm"`` (SmolLM, SmolLM2): every digit alone, then GPT-2's regex;
* ``"llama-bpe"`` (Llama 3.x): Llama 3's regex (numbers in runs of up to 3 digits), whole
  words found in the vocabulary taken without merging (``ignore_merges``);
* ``"qwen2"`` (Qwen2, Qwen2.5, Qwen3): Qwen2's regex (every digit alone), text NFC-normalised
  first as Qwen2's ``tokenizer.json`` does;
* ``"gpt-2"``: GPT-2's own regex;
* ``"default"``: what llama.cpp does for a file that names no family of its own: runs of
  punctuation, then GPT-2's regex, then runs of digits, then groups of 3 digits, each split
  kept apart.

Every split is a ``Split(Regex, "isolated")`` followed by ``ByteLevel(use_regex=False)``
(SmolLM and GPT-2 use ``ByteLevel``'s own GPT-2 regex). No BOS token is added here.

Tokens are turned back into bytes for display by :func:`token_bytes` in one of two
spellings: ``"byte_level"`` (GPT-2's alphabet) or ``"sentencepiece"`` (``▁`` is a space,
``<0xE4>`` the byte 0xE4, any other piece its UTF-8). A token often holds part of a UTF-8
character (a Chinese character is 3 bytes and may be cut between tokens), so
:func:`group_by_character` groups token positions into whole characters.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from functools import cache

import tokenizers
from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers

from attention_core.validation import check_choice

BYTE_LEVEL_MODEL = "gpt2"
MERGE_SEPARATOR = " "
BYTE_COUNT = 256
# GPT-2's printable bytes map to themselves: "!".."~", "¡".."¬", "®".."ÿ"
_PRINTABLE_RANGES = ((ord("!"), ord("~")), (ord("¡"), ord("¬")), (ord("®"), ord("ÿ")))

# tokenizer.ggml.token_type values (llama.cpp's llama_token_type)
NORMAL_TOKEN_TYPE = 1
UNKNOWN_TOKEN_TYPE = 2
CONTROL_TOKEN_TYPE = 3
USER_DEFINED_TOKEN_TYPE = 4
BYTE_TOKEN_TYPE = 6
WHOLE_TOKEN_TYPES = (UNKNOWN_TOKEN_TYPE, CONTROL_TOKEN_TYPE, USER_DEFINED_TOKEN_TYPE)
"""Token types matched whole in the text (llama.cpp's special-token partition)."""

# token spellings
BYTE_LEVEL = "byte_level"
SENTENCEPIECE = "sentencepiece"
SPELLINGS = (BYTE_LEVEL, SENTENCEPIECE)
SPACE_PIECE = "\u2581"  # "▁", SentencePiece's space
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
HEX_BASE = 16

# pre-tokeniser regexes, as HuggingFace's tokenizer.json files write them
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
DEFAULT_PATTERNS = (r"[\p{P}\$\+<=>\^~\|]+", GPT2_PATTERN, r"\p{N}+", r"[0-9][0-9][0-9]")


@dataclass(frozen=True)
class PreTokenizerSpec:
    """How one ``tokenizer.ggml.pre`` value splits and merges text.

    Attributes:
        patterns: regexes applied in order, each splitting every piece with matches kept
            apart ("isolated"); empty: ``ByteLevel``'s own GPT-2 regex.
        digits_alone: split every digit off first (SmolLM).
        ignore_merges: take a whole piece found in the vocabulary without merging.
        nfc: NFC-normalise the text first.
        add_bos: whether llama.cpp adds BOS when ``tokenizer.ggml.add_bos_token`` is unset.
    """

    patterns: tuple[str, ...] = ()
    digits_alone: bool = False
    ignore_merges: bool = False
    nfc: bool = False
    add_bos: bool = False


PRE_TOKENIZERS = {
    "smollm": PreTokenizerSpec(digits_alone=True),
    "llama-bpe": PreTokenizerSpec(patterns=(LLAMA3_PATTERN,), ignore_merges=True, add_bos=True),
    "qwen2": PreTokenizerSpec(patterns=(QWEN2_PATTERN,), nfc=True),
    "gpt-2": PreTokenizerSpec(),
    "default": PreTokenizerSpec(patterns=DEFAULT_PATTERNS),
}
"""The supported ``tokenizer.ggml.pre`` values of byte-level files."""


@cache
def byte_alphabet() -> dict[int, str]:
    """GPT-2's byte -> character map (``bytes_to_unicode``): 256 printable characters.

    Returns:
        byte value (0..255) -> one character; printable Latin-1 bytes map to themselves, the
        others to characters from U+0100 upwards in byte order (so a space, 0x20, is ``Ġ``).
    """
    printable = [b for low, high in _PRINTABLE_RANGES for b in range(low, high + 1)]
    alphabet = {b: chr(b) for b in printable}
    shifted = 0
    for b in range(BYTE_COUNT):
        if b not in alphabet:
            alphabet[b] = chr(BYTE_COUNT + shifted)
            shifted += 1
    return alphabet


@cache
def _byte_of_character() -> dict[str, int]:
    return {char: b for b, char in byte_alphabet().items()}


def _byte_level_bytes(token: str) -> bytes:
    """The bytes of a token spelled in GPT-2's byte alphabet."""
    lookup = _byte_of_character()
    try:
        return bytes(lookup[char] for char in token)
    except KeyError as err:
        raise ValueError(f"token {token!r} is not spelled in the byte-level alphabet") from err


def _sentencepiece_bytes(token: str) -> bytes:
    """The bytes of a SentencePiece piece: ``<0xNN>`` one byte, ``▁`` a space."""
    match = _BYTE_PIECE.fullmatch(token)
    if match:
        return bytes([int(match.group(1), HEX_BASE)])
    return token.replace(SPACE_PIECE, " ").encode("utf-8")


def token_bytes(token: str, spelling: str = BYTE_LEVEL) -> bytes:
    """The raw bytes a token stands for.

    Args:
        token: a token string, e.g. ``"Ġcat"`` or ``"åı"`` (byte-level), ``"▁cat"`` or
            ``"<0xE5>"`` (SentencePiece).
        spelling: ``"byte_level"`` (GPT-2's byte alphabet) or ``"sentencepiece"``
            (``▁`` is a space, ``<0xNN>`` that byte, other pieces their UTF-8).

    Returns:
        Its bytes, e.g. ``b" cat"``.

    Raises:
        ValueError: for an unknown spelling, or a byte-level token holding a character
            outside the byte alphabet.
    """
    check_choice("spelling", spelling, SPELLINGS)
    if spelling == SENTENCEPIECE:
        return _sentencepiece_bytes(token)
    return _byte_level_bytes(token)


def _byte_level_pre_tokenizer(spec: PreTokenizerSpec) -> pre_tokenizers.PreTokenizer:
    """The splits of ``spec`` then the byte mapping, as a ``tokenizer.json`` would hold them."""
    steps = [pre_tokenizers.Digits(individual_digits=True)] if spec.digits_alone else []
    steps += [
        pre_tokenizers.Split(Regex(pattern), behavior="isolated") for pattern in spec.patterns
    ]
    byte_level_regex = not spec.patterns
    steps.append(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=byte_level_regex))
    return pre_tokenizers.Sequence(steps)


def add_whole_tokens(tokenizer: tokenizers.Tokenizer, tokens: list[str], token_types) -> None:
    """Match unknown, control and user-defined tokens whole in the text, as llama.cpp does.

    Args:
        tokenizer: the tokenizer to extend (in place).
        tokens: the vocabulary in id order (V strings).
        token_types: one llama.cpp token type per token (V ints); unknown (2) and control
            (3) tokens become special tokens (left out of decoded text), user-defined ones
            (4) plain added tokens.
    """
    whole = [
        AddedToken(token, normalized=False, special=int(kind) != USER_DEFINED_TOKEN_TYPE)
        for token, kind in zip(tokens, token_types, strict=True)
        if int(kind) in WHOLE_TOKEN_TYPES
    ]
    tokenizer.add_special_tokens([token for token in whole if token.special])
    tokenizer.add_tokens([token for token in whole if not token.special])


def _merge_pairs(merges: list[str], vocab: dict[str, int]) -> list[tuple[str, str]]:
    """``"left right"`` strings as pairs of tokens whose join is a token too."""
    pairs = [tuple(merge.split(MERGE_SEPARATOR)) for merge in merges]
    bad = [merge for merge, pair in zip(merges, pairs, strict=True) if len(pair) != 2]
    if bad:
        raise ValueError(f"tokenizer.ggml.merges: {len(bad)} are not two tokens, e.g. {bad[0]!r}")
    outside = [
        merge
        for merge, (left, right) in zip(merges, pairs, strict=True)
        if left not in vocab or right not in vocab or left + right not in vocab
    ]
    if outside:
        raise ValueError(
            f"tokenizer.ggml.merges: {len(outside)} join tokens outside the vocabulary, "
            f"e.g. {outside[0]!r}"
        )
    return pairs


def check_bpe_fields(
    tokens: list[str],
    merges: list[str],
    token_types,
    *,
    model: str = BYTE_LEVEL_MODEL,
    pre_tokenizer: str = "smollm",
) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Check a GGUF file's byte-level BPE fields without building anything from them.

    Args:
        tokens, merges, token_types, model, pre_tokenizer: as for :func:`build_bpe_tokenizer`.

    Returns:
        (vocab, pairs): token -> id, and the merges as ``(left, right)`` pairs, what
        :func:`bpe_tokenizer_from` builds the tokenizer from.

    Raises:
        ValueError: as :func:`build_bpe_tokenizer` does.
    """
    if model != BYTE_LEVEL_MODEL:
        raise ValueError(f"tokenizer.ggml.model must be {BYTE_LEVEL_MODEL!r} here, got {model!r}")
    if pre_tokenizer not in PRE_TOKENIZERS:
        raise ValueError(
            f"tokenizer.ggml.pre {pre_tokenizer!r} is not supported; "
            f"supported: {', '.join(PRE_TOKENIZERS)}"
        )
    if len(token_types) != len(tokens):
        raise ValueError(f"{len(token_types)} token types for a vocabulary of {len(tokens)} tokens")
    vocab = {token: index for index, token in enumerate(tokens)}
    if len(vocab) != len(tokens):
        raise ValueError(f"the vocabulary repeats {len(tokens) - len(vocab)} tokens")
    return vocab, _merge_pairs(merges, vocab)


def bpe_tokenizer_from(
    vocab: dict[str, int],
    pairs: list[tuple[str, str]],
    token_types,
    *,
    pre_tokenizer: str = "smollm",
    max_length: int | None = None,
) -> tokenizers.Tokenizer:
    """Build the tokenizer from fields :func:`check_bpe_fields` checked (the slow part: the
    BPE model and its added tokens, a fraction of a second for 128k tokens).

    Args:
        vocab, pairs: :func:`check_bpe_fields`'s. token_types, pre_tokenizer, max_length: as
            for :func:`build_bpe_tokenizer`.

    Returns:
        The tokenizer, as :func:`build_bpe_tokenizer` returns it.
    """
    spec = PRE_TOKENIZERS[pre_tokenizer]
    bpe = models.BPE(vocab=vocab, merges=pairs, fuse_unk=False, ignore_merges=spec.ignore_merges)
    tokenizer = tokenizers.Tokenizer(bpe)
    if spec.nfc:
        tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = _byte_level_pre_tokenizer(spec)
    tokenizer.decoder = decoders.ByteLevel()
    add_whole_tokens(tokenizer, list(vocab), token_types)
    if max_length is not None:
        tokenizer.enable_truncation(max_length=max_length)
    return tokenizer


def build_bpe_tokenizer(
    tokens: list[str],
    merges: list[str],
    token_types,
    *,
    model: str = BYTE_LEVEL_MODEL,
    pre_tokenizer: str = "smollm",
    max_length: int | None = None,
) -> tokenizers.Tokenizer:
    """Build a byte-level BPE ``tokenizers.Tokenizer`` from a GGUF file's tokenizer fields
    (:func:`check_bpe_fields`, then :func:`bpe_tokenizer_from`).

    Args:
        tokens: ``tokenizer.ggml.tokens``, the vocabulary in id order (V strings).
        merges: ``tokenizer.ggml.merges``, ``"left right"`` pairs in priority order.
        token_types: ``tokenizer.ggml.token_type``, one int per token; control tokens (3)
            become special tokens and user-defined ones (4) added tokens, matched whole in
            the text.
        model: ``tokenizer.ggml.model``; only ``"gpt2"`` (byte-level BPE) is supported.
        pre_tokenizer: ``tokenizer.ggml.pre``, one of :data:`PRE_TOKENIZERS`.
        max_length: cut texts at this many tokens (None: no cut).

    Returns:
        The tokenizer (no padding, no BOS/EOS added, byte-level decoder).

    Raises:
        ValueError: for another model or pre-tokeniser, a merge that is not two tokens of
            the vocabulary joining into a third, a token-type list of another length than
            the vocabulary, or a duplicate token.
    """
    vocab, pairs = check_bpe_fields(
        tokens, merges, token_types, model=model, pre_tokenizer=pre_tokenizer
    )
    return bpe_tokenizer_from(
        vocab, pairs, token_types, pre_tokenizer=pre_tokenizer, max_length=max_length
    )


@dataclass(frozen=True)
class CharacterGroup:
    """Consecutive tokens that together spell whole characters.

    Attributes:
        text: the characters they spell (U+FFFD for bytes that never complete one).
        start: index of the first token in the group.
        stop: index one past the last token (``stop - start`` tokens).
    """

    text: str
    start: int
    stop: int


def group_by_character(tokens: list[str], spelling: str = BYTE_LEVEL) -> list[CharacterGroup]:
    """Group tokens so that each group spells whole UTF-8 characters.

    A token that ends in the middle of a multi-byte character is joined with the following
    tokens until the character is complete; a token made of whole characters is a group of
    its own. Special tokens such as ``<|endoftext|>`` or ``<s>`` are spelled in plain ASCII
    and stay alone.

    Args:
        tokens: token strings (``Tokenized.tokens``).
        spelling: how the tokens are spelled, ``"byte_level"`` or ``"sentencepiece"``
            (see :func:`token_bytes`).

    Returns:
        Groups covering ``range(len(tokens))`` in order, without gaps.

    Raises:
        ValueError: for an unknown spelling, or a byte-level token holding a character
            outside the byte alphabet.
    """
    check_choice("spelling", spelling, SPELLINGS)
    groups: list[CharacterGroup] = []
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text, start = "", 0
    for index, token in enumerate(tokens):
        text += decoder.decode(token_bytes(token, spelling))
        pending, _ = decoder.getstate()
        if not pending:
            groups.append(CharacterGroup(text=text, start=start, stop=index + 1))
            text, start = "", index + 1
    if start < len(tokens):
        text += decoder.decode(b"", final=True)
        groups.append(CharacterGroup(text=text, start=start, stop=len(tokens)))
    return groups
