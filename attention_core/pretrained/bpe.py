"""Byte-level BPE tokenisation rebuilt from a GGUF file's vocabulary and merges.

A GGUF file of a GPT-2-style model (``tokenizer.ggml.model == "gpt2"``) carries its tokens
spelled in GPT-2's byte alphabet (every byte shown as one printable character, e.g. a space
as ``Ġ``), the merges in priority order, and a type per token (3 = control, such as
``<|endoftext|>``). :func:`build_bpe_tokenizer` turns them into a ``tokenizers.Tokenizer``
with the pre-tokeniser the file names: SmolLM2's ``"smollm"`` splits every digit on its own,
then applies GPT-2's byte-level split. No BOS token is added.

Byte-level tokens often hold part of a UTF-8 character (a Chinese character is 3 bytes and
may be cut between tokens), so :func:`group_by_character` groups token positions into whole
characters for display.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from functools import cache

import tokenizers
from tokenizers import AddedToken, decoders, models, pre_tokenizers

CONTROL_TOKEN_TYPE = 3
BYTE_LEVEL_MODEL = "gpt2"
PRE_TOKENIZERS = ("smollm",)
MERGE_SEPARATOR = " "
BYTE_COUNT = 256
# GPT-2's printable bytes map to themselves: "!".."~", "¡".."¬", "®".."ÿ"
_PRINTABLE_RANGES = ((ord("!"), ord("~")), (ord("¡"), ord("¬")), (ord("®"), ord("ÿ")))


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


def token_bytes(token: str) -> bytes:
    """The raw bytes a byte-level token stands for.

    Args:
        token: a token spelled in GPT-2's byte alphabet, e.g. ``"Ġcat"`` or ``"åı"``.

    Returns:
        Its bytes, e.g. ``b" cat"``.

    Raises:
        ValueError: when ``token`` holds a character outside the byte alphabet.
    """
    lookup = _byte_of_character()
    try:
        return bytes(lookup[char] for char in token)
    except KeyError as err:
        raise ValueError(f"token {token!r} is not spelled in the byte-level alphabet") from err


def build_bpe_tokenizer(
    tokens: list[str],
    merges: list[str],
    token_types,
    *,
    model: str = BYTE_LEVEL_MODEL,
    pre_tokenizer: str = "smollm",
    max_length: int | None = None,
) -> tokenizers.Tokenizer:
    """Build a byte-level BPE ``tokenizers.Tokenizer`` from a GGUF file's tokenizer fields.

    Args:
        tokens: ``tokenizer.ggml.tokens``, the vocabulary in id order (V strings).
        merges: ``tokenizer.ggml.merges``, ``"left right"`` pairs in priority order.
        token_types: ``tokenizer.ggml.token_type``, one int per token; control tokens (3)
            become special tokens, matched whole in the text.
        model: ``tokenizer.ggml.model``; only ``"gpt2"`` (byte-level BPE) is supported.
        pre_tokenizer: ``tokenizer.ggml.pre``; only ``"smollm"`` (every digit alone, then
            GPT-2's byte-level split, no prefix space) is supported.
        max_length: cut texts at this many tokens (None: no cut).

    Returns:
        The tokenizer (no padding, no BOS/EOS added, byte-level decoder).

    Raises:
        ValueError: for another model or pre-tokeniser, a merge that is not two tokens, a
            token-type list of another length than the vocabulary, or a duplicate token.
    """
    if model != BYTE_LEVEL_MODEL:
        raise ValueError(f"tokenizer model must be {BYTE_LEVEL_MODEL!r}, got {model!r}")
    if pre_tokenizer not in PRE_TOKENIZERS:
        raise ValueError(f"pre-tokeniser must be one of {PRE_TOKENIZERS}, got {pre_tokenizer!r}")
    if len(token_types) != len(tokens):
        raise ValueError(f"{len(token_types)} token types for a vocabulary of {len(tokens)} tokens")
    vocab = {token: index for index, token in enumerate(tokens)}
    if len(vocab) != len(tokens):
        raise ValueError(f"the vocabulary repeats {len(tokens) - len(vocab)} tokens")
    pairs = [tuple(merge.split(MERGE_SEPARATOR)) for merge in merges]
    bad = [merge for merge, pair in zip(merges, pairs, strict=True) if len(pair) != 2]
    if bad:
        raise ValueError(f"{len(bad)} merges are not two tokens, e.g. {bad[0]!r}")
    tokenizer = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=pairs, fuse_unk=False))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    control = [
        AddedToken(token, normalized=False, special=True)
        for token, kind in zip(tokens, token_types, strict=True)
        if int(kind) == CONTROL_TOKEN_TYPE
    ]
    tokenizer.add_special_tokens(control)
    if max_length is not None:
        tokenizer.enable_truncation(max_length=max_length)
    return tokenizer


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


def group_by_character(tokens: list[str]) -> list[CharacterGroup]:
    """Group byte-level tokens so that each group spells whole UTF-8 characters.

    A token that ends in the middle of a multi-byte character is joined with the following
    tokens until the character is complete; a token made of whole characters is a group of
    its own. Special tokens such as ``<|endoftext|>`` are spelled in plain ASCII and stay
    alone.

    Args:
        tokens: byte-level token strings (``Tokenized.tokens``).

    Returns:
        Groups covering ``range(len(tokens))`` in order, without gaps.

    Raises:
        ValueError: when a token holds a character outside the byte alphabet.
    """
    groups: list[CharacterGroup] = []
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text, start = "", 0
    for index, token in enumerate(tokens):
        text += decoder.decode(token_bytes(token))
        pending, _ = decoder.getstate()
        if not pending:
            groups.append(CharacterGroup(text=text, start=start, stop=index + 1))
            text, start = "", index + 1
    if start < len(tokens):
        text += decoder.decode(b"", final=True)
        groups.append(CharacterGroup(text=text, start=start, stop=len(tokens)))
    return groups
