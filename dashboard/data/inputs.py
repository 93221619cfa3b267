"""The inputs of a layer run: tokens of a sentence, their embeddings, random vectors, masks."""

from __future__ import annotations

import math
import re
import zlib

import torch

from attention_core import masks
from attention_core.validation import check_choice, check_int

MAX_SEQ_LEN = 1024
MAX_SENTENCE_TOKENS = 128
MASK_KINDS = ("none", "causal", "padding")
INPUT_KINDS = ("random", "preset_en", "preset_zh", "typed")
PRESET_SENTENCES = {
    "preset_en": "the cat sat on the mat because it was comfortable",
    "preset_zh": "那只猫坐在垫子上，它看起来很舒服。",
}
POSITION_BASE = 10000.0
_CJK = (
    "\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
)
_TOKEN_RE = re.compile(rf"[{_CJK}]|(?:(?![{_CJK}])\w)+|[^\w\s]")


def tokens_for(sentence: str) -> tuple[str, ...]:
    """Split a sentence into tokens: words for Latin text, characters for CJK, punctuation alone.

    Args:
        sentence: any text.

    Returns:
        The tokens in order, e.g. ``("the", "cat", ".")`` or ``("那", "只", "猫", "，")``.
    """
    return tuple(_TOKEN_RE.findall(sentence))


def has_words(tokens: tuple[str, ...]) -> bool:
    """True when some token holds a letter, digit or CJK character (not only punctuation)."""
    return any(any(c.isalnum() for c in tok) for tok in tokens)


def input_tokens(input_kind: str, sentence: str, seq_len: int) -> tuple[str, ...]:
    """Return the token labels of an input: positions for random vectors, else the tokens.

    Args:
        input_kind: one of :data:`INPUT_KINDS`.
        sentence: the typed sentence (used only for ``"typed"``).
        seq_len: number of random vectors (used only for ``"random"``).

    Returns:
        Token strings; at most :data:`MAX_SENTENCE_TOKENS` for sentences. A typed sentence
        without a word (empty, blank or punctuation only) gives the English preset.

    Raises:
        ValueError: for an unknown input kind or a bad sequence length.
    """
    if input_kind == "random":
        check_int("seq_len", seq_len, low=1, high=MAX_SEQ_LEN)
        return tuple(str(i) for i in range(seq_len))
    if input_kind == "typed":
        tokens = tokens_for(sentence)
        if not has_words(tokens):
            tokens = tokens_for(PRESET_SENTENCES["preset_en"])
    elif input_kind in PRESET_SENTENCES:
        tokens = tokens_for(PRESET_SENTENCES[input_kind])
    else:
        check_choice("input_kind", input_kind, INPUT_KINDS)
    return tokens[:MAX_SENTENCE_TOKENS]


def axis_labels(tokens: tuple[str, ...]) -> list[str]:
    """Return unique axis labels ``"<position> <token>"`` (a word may repeat in a sentence)."""
    return [tok if tok == str(i) else f"{i} {tok}" for i, tok in enumerate(tokens)]


def sinusoidal_positions(seq_len: int, d_model: int) -> torch.Tensor:
    """Return the (L, D) sinusoidal position code of "Attention Is All You Need"."""
    pos = torch.arange(seq_len, dtype=torch.float32)[:, None]  # (L, 1)
    dims = torch.arange(0, d_model, 2, dtype=torch.float32)  # (ceil(D/2),)
    freq = torch.exp(-math.log(POSITION_BASE) * dims / d_model)  # (ceil(D/2),)
    angles = pos * freq  # (L, ceil(D/2))
    code = torch.zeros(seq_len, d_model)
    code[:, 0::2] = torch.sin(angles)
    code[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return code


def token_embeddings(tokens: tuple[str, ...], d_model: int, seed: int) -> torch.Tensor:
    """Return (L, D) embeddings: a seeded random vector per token text plus positions.

    The vector of a token depends only on its lower-cased text and ``seed``, so repeated
    words share it; the sinusoidal position code tells them apart.
    """
    rows = []
    for tok in tokens:
        token_id = zlib.crc32(tok.lower().encode("utf-8"))
        gen = torch.Generator().manual_seed(token_id * 1_000_003 + seed)
        rows.append(torch.randn(d_model, generator=gen))  # (D,)
    return torch.stack(rows) + sinusoidal_positions(len(tokens), d_model)  # (L, D)


def build_input(
    input_kind: str, sentence: str, seq_len: int, d_model: int, seed: int
) -> tuple[torch.Tensor, tuple[str, ...]]:
    """Return the input x (1, L, D) and its token labels.

    Raises:
        ValueError: for an unknown input kind or bad sizes.
    """
    tokens = input_tokens(input_kind, sentence, seq_len)
    if input_kind == "random":
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(1, len(tokens), d_model, generator=gen)  # (1, L, D)
    else:
        x = token_embeddings(tokens, d_model, seed)[None]  # (1, L, D)
    return x, tokens


def build_mask(mask_kind: str, seq_len: int, pad_len: int) -> torch.Tensor | None:
    """Return the bool mask (True = may attend) for a mask kind, or ``None``.

    Args:
        mask_kind: ``"none"``, ``"causal"`` ((L, L)) or ``"padding"`` ((1, 1, L): the last
            ``L - pad_len`` keys are padding).
        seq_len: L.
        pad_len: number of real tokens for ``"padding"``, in [1, L].

    Raises:
        ValueError: for an unknown kind or ``pad_len`` out of range.
    """
    if mask_kind == "none":
        return None
    if mask_kind == "causal":
        return masks.causal(seq_len)  # (L, L)
    if mask_kind == "padding":
        check_int("pad_len", pad_len, low=1, high=seq_len)
        return masks.padding([pad_len], seq_len)  # (1, 1, L)
    check_choice("mask_kind", mask_kind, MASK_KINDS)
    return None
