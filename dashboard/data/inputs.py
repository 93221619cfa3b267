"""The inputs of a layer run: tokens, embeddings or random vectors (from
:mod:`attention_core.experiments.inputs`, the one definition), and the mask of a run."""

from __future__ import annotations

import torch

from attention_core import masks

# the pages read these through dashboard.data (its export table names them)
from attention_core.experiments.inputs import (  # noqa: F401
    INPUT_KINDS,
    MAX_INPUT_LEN,
    MAX_SENTENCE_TOKENS,
    PRESET_SENTENCES,
    has_words,
    input_tokens,
    make_input,
    tokens_for,
)
from attention_core.validation import check_choice, check_int

MASK_KINDS = ("none", "causal", "padding")


def axis_labels(tokens: tuple[str, ...]) -> list[str]:
    """Return unique axis labels ``"<position> <token>"`` (a word may repeat in a sentence)."""
    return [tok if tok == str(i) else f"{i} {tok}" for i, tok in enumerate(tokens)]


def build_input(
    input_kind: str, sentence: str, seq_len: int, d_model: int, seed: int
) -> tuple[torch.Tensor, tuple[str, ...]]:
    """Return the input x (1, L, D) and its token labels.

    Raises:
        ValueError: for an unknown input kind or bad sizes.
    """
    layer_input = make_input(input_kind, sentence, seq_len, d_model, seed)
    return layer_input.x, layer_input.tokens


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
    check_choice("mask_kind", mask_kind, MASK_KINDS)
    if mask_kind == "causal":
        return masks.causal(seq_len)  # (L, L)
    if mask_kind == "padding":
        check_int("pad_len", pad_len, low=1, high=seq_len)
        return masks.padding([pad_len], seq_len)  # (1, 1, L)
    return None
