"""Inputs of a teaching attention layer: tokens, token embeddings and positional codes.

A sentence is split into tokens (words for Latin text, one token per CJK character,
punctuation alone). Each token gets a deterministic pseudo-random vector seeded by its
lower-cased text, so a repeated word gets the same vector, plus the sinusoidal position code
of "Attention Is All You Need", which tells the repeats apart. The alternative input is plain
seeded random vectors, one per position.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from attention_core.validation import check_choice, check_int

MAX_INPUT_LEN = 1024
MAX_EMBED_DIM = 1024
MAX_SENTENCE_TOKENS = 128
MAX_SEED = 2**32 - 1
SINUSOID_BASE = 10_000.0
# token text -> seed of its vector: crc32(text) * TOKEN_SEED_STRIDE + seed
TOKEN_SEED_STRIDE = 1_000_003
INPUT_KINDS = ("random", "preset_en", "preset_zh", "typed")
PRESET_SENTENCES = {
    "preset_en": "the cat sat on the mat because it was comfortable",
    "preset_zh": "那只猫坐在垫子上，它看起来很舒服。",
}
FALLBACK_PRESET = "preset_en"
_CJK = (
    "\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
)
_TOKEN_RE = re.compile(rf"[{_CJK}]|(?:(?![{_CJK}])\w)+|[^\w\s]")


@dataclass(frozen=True)
class LayerInput:
    """The input of one attention layer and the labels of its positions.

    Attributes:
        x: float32 tensor (1, L, D).
        tokens: the L token strings (positions ``"0"``, ``"1"``, … for random vectors).
    """

    x: torch.Tensor
    tokens: tuple[str, ...]


def tokens_for(sentence: str) -> tuple[str, ...]:
    """Split a sentence into tokens: words for Latin text, characters for CJK, punctuation alone.

    Args:
        sentence: any text.

    Returns:
        The tokens in order, e.g. ``("the", "cat", ".")`` or ``("那", "只", "猫", "，")``;
        empty for blank text.

    Raises:
        ValueError: when ``sentence`` is not a string.
    """
    if not isinstance(sentence, str):
        raise ValueError(f"sentence must be a string, got {sentence!r}")
    return tuple(_TOKEN_RE.findall(sentence))


def has_words(tokens: Sequence[str]) -> bool:
    """True when some token holds a letter, digit or CJK character (not only punctuation)."""
    return any(any(c.isalnum() for c in tok) for tok in tokens)


def preset_tokens(sentence_kind: str) -> tuple[str, ...]:
    """Return the tokens of a preset sentence.

    Args:
        sentence_kind: a key of :data:`PRESET_SENTENCES` (``"preset_en"``, ``"preset_zh"``).

    Returns:
        The sentence's tokens (10 in English, 17 in Chinese).

    Raises:
        ValueError: for an unknown sentence kind, listing the valid ones.
    """
    check_choice("sentence_kind", sentence_kind, PRESET_SENTENCES)
    return tokens_for(PRESET_SENTENCES[sentence_kind])


def input_tokens(input_kind: str, sentence: str, seq_len: int) -> tuple[str, ...]:
    """Return the token labels of an input: positions for random vectors, else the tokens.

    Args:
        input_kind: one of :data:`INPUT_KINDS`.
        sentence: the typed sentence (used only for ``"typed"``).
        seq_len: number of random vectors, in [1, 1024] (used only for ``"random"``).

    Returns:
        Token strings; at most :data:`MAX_SENTENCE_TOKENS` for sentences. A typed sentence
        without a word (empty, blank or punctuation only) gives the English preset.

    Raises:
        ValueError: for an unknown input kind, a bad sequence length, or a typed sentence
            that is not a string.
    """
    check_choice("input_kind", input_kind, INPUT_KINDS)
    if input_kind == "random":
        L = check_int("seq_len", seq_len, low=1, high=MAX_INPUT_LEN)
        return tuple(str(i) for i in range(L))
    if input_kind == "typed":
        tokens = tokens_for(sentence)
        if not has_words(tokens):
            tokens = preset_tokens(FALLBACK_PRESET)
    else:
        tokens = preset_tokens(input_kind)
    return tokens[:MAX_SENTENCE_TOKENS]


def sinusoidal_positions(
    seq_len: int, embed_dim: int, *, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Sinusoidal positional encodings of "Attention Is All You Need".

    PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(pos / 10000^(2i/D)).

    Args:
        seq_len: L, in [1, 1024].
        embed_dim: D, in [1, 1024] (odd D is fine: the last column is a sine).
        dtype: ``torch.float32`` or ``torch.float64``; the codes are computed and returned
            in it.

    Returns:
        tensor (L, D) of ``dtype``.

    Raises:
        ValueError: for a size out of range or another dtype.
    """
    L = check_int("seq_len", seq_len, low=1, high=MAX_INPUT_LEN)
    D = check_int("embed_dim", embed_dim, low=1, high=MAX_EMBED_DIM)
    check_choice("dtype", dtype, (torch.float32, torch.float64))
    position = torch.arange(L, dtype=dtype).unsqueeze(1)  # (L, 1)
    even = torch.arange(0, D, 2, dtype=dtype)  # (ceil(D/2),)
    freq = torch.exp(-math.log(SINUSOID_BASE) * even / D)  # (ceil(D/2),)
    angles = position * freq  # (L, 1) * (ceil(D/2),) -> (L, ceil(D/2))
    pe = torch.zeros(L, D, dtype=dtype)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles[:, : D // 2])
    return pe


def check_tokens(
    tokens: Sequence[str], *, low: int = 1, high: int = MAX_INPUT_LEN
) -> tuple[str, ...]:
    """Return ``tokens`` as a tuple after checking it holds ``low`` to ``high`` strings.

    Raises:
        ValueError: for a non-sequence (a bare string included), a count out of range, or
            a token that is not a string.
    """
    if isinstance(tokens, str) or not isinstance(tokens, Sequence):
        raise ValueError(f"tokens must be a sequence of strings, got {tokens!r}")
    values = tuple(tokens)
    if not low <= len(values) <= high:
        raise ValueError(f"tokens must hold {low} to {high} strings, got {len(values)}: {values!r}")
    if not all(isinstance(tok, str) for tok in values):
        raise ValueError(f"tokens must all be strings, got {values!r}")
    return values


def token_vector(token: str, d_model: int, seed: int) -> torch.Tensor:
    """The seeded random vector of one token text (its lower case), before positions.

    Args:
        token: the token's text. d_model: D, in [1, 1024]. seed: in [0, 2**32 - 1].

    Returns:
        float32 tensor (D,) of N(0, 1) entries; the same for the same lower-cased text and seed.

    Raises:
        ValueError: for a non-string token or a size or seed out of range.
    """
    if not isinstance(token, str):
        raise ValueError(f"token must be a string, got {token!r}")
    D = check_int("d_model", d_model, low=1, high=MAX_EMBED_DIM)
    seed = check_int("seed", seed, low=0, high=MAX_SEED)
    token_id = zlib.crc32(token.lower().encode("utf-8"))
    generator = torch.Generator().manual_seed(token_id * TOKEN_SEED_STRIDE + seed)
    return torch.randn(D, generator=generator)  # (D,)


def token_embeddings(tokens: Sequence[str], d_model: int, seed: int) -> torch.Tensor:
    """Return (L, D) embeddings: a seeded random vector per token text plus positions.

    The vector of a token depends only on its lower-cased text and ``seed`` (see
    :func:`token_vector`), so repeated words share it; the sinusoidal position code
    (:func:`sinusoidal_positions`, float32) tells them apart.

    Args:
        tokens: L strings, 1 <= L <= 1024. d_model: D, in [1, 1024]. seed: in [0, 2**32 - 1].

    Returns:
        float32 tensor (L, D).

    Raises:
        ValueError: for an empty or non-string token list, or a size or seed out of range.
    """
    values = check_tokens(tokens)
    rows = [token_vector(tok, d_model, seed) for tok in values]  # L x (D,)
    return torch.stack(rows) + sinusoidal_positions(len(values), d_model)  # (L, D)


def make_input(input_kind: str, sentence: str, seq_len: int, d_model: int, seed: int) -> LayerInput:
    """Return the input x (1, L, D) of a layer and its token labels.

    ``"random"`` draws (1, L, D) N(0, 1) vectors from a generator seeded with ``seed``; the
    other kinds embed the tokens of :func:`input_tokens` with :func:`token_embeddings`.

    Args:
        input_kind: one of :data:`INPUT_KINDS`. sentence: the typed text (``"typed"`` only).
        seq_len: L for ``"random"``, in [1, 1024]. d_model: D, in [1, 1024].
        seed: in [0, 2**32 - 1].

    Returns:
        :class:`LayerInput` with x (1, L, D) float32 and the L token labels.

    Raises:
        ValueError: for an unknown input kind or a size or seed out of range.
    """
    tokens = input_tokens(input_kind, sentence, seq_len)
    if input_kind != "random":
        return LayerInput(x=token_embeddings(tokens, d_model, seed)[None], tokens=tokens)
    D = check_int("d_model", d_model, low=1, high=MAX_EMBED_DIM)
    generator = torch.Generator().manual_seed(check_int("seed", seed, low=0, high=MAX_SEED))
    x = torch.randn(1, len(tokens), D, generator=generator)  # (1, L, D)
    return LayerInput(x=x, tokens=tokens)
