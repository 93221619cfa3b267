"""Attention vs explanation: does where a decoder looks say why it predicts what it does?

For the decoder's next token, three per-token importances of the prompt:

* gradient × input saliency: ∂ log P(target) / ∂ e_t · e_t summed over the features of each
  input embedding e_t (signed; its magnitude ranks the tokens);
* the raw attention of the last layer: its heads' mean weights in the last query row;
* attention rollout (Abnar & Zuidema 2020): per layer A' = 0.5 · mean_heads(A) + 0.5 · I,
  rows renormalised, multiplied through the layers (R = A'_N ⋯ A'_1); its last row.

and their Spearman rank agreement (:func:`spearman`, computed here from ranks). Attention
weights are not an explanation by themselves: a high agreement says the map ranks the tokens
as the gradient does on this prompt, a low one that it does not.

Shapes: N layers, H heads, L tokens, D width.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attention_core.experiments.heads import as_ids, readonly
from attention_core.pretrained.llama import Decoder

ROLLOUT_RESIDUAL = 0.5
"""The identity's share in each rollout layer (the residual connection)."""


@dataclass(frozen=True)
class Explanation:
    """Three importances of the prompt tokens for one predicted token.

    Attributes:
        target: the token id explained (the model's most likely next token by default).
        saliency: read-only (L,) gradient × input, summed over features (signed).
        attention: read-only (L,) last layer's head-mean weights in the last query row.
        rollout: read-only (L,) attention rollout's last row.
        attention_vs_saliency, rollout_vs_saliency, attention_vs_rollout: Spearman rank
            correlations (|saliency| is ranked); NaN when one side is constant (e.g. L = 1).
    """

    target: int
    saliency: np.ndarray
    attention: np.ndarray
    rollout: np.ndarray
    attention_vs_saliency: float
    rollout_vs_saliency: float
    attention_vs_rollout: float


def ranks(values) -> np.ndarray:
    """1-based ranks, ties given the mean of the ranks they span (1, 2.5, 2.5, 4).

    Args:
        values: a 1-D sequence of finite numbers.

    Returns:
        float64 array of the same length.

    Raises:
        ValueError: for a non-1-D, empty or non-finite input.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0 or not np.isfinite(x).all():
        raise ValueError(f"values must be a non-empty 1-D array of finite numbers, got {x!r}")
    order = np.argsort(x, kind="stable")
    sorted_x = x[order]
    result = np.empty_like(x)
    start = 0
    while start < x.size:
        stop = start
        while stop + 1 < x.size and sorted_x[stop + 1] == sorted_x[start]:
            stop += 1
        result[order[start : stop + 1]] = (start + stop) / 2 + 1  # mean of ranks start+1..stop+1
        start = stop + 1
    return result


def spearman(a, b) -> float:
    """Spearman's rank correlation: the Pearson correlation of the two rank vectors.

    Args:
        a, b: 1-D sequences of finite numbers of the same length >= 2.

    Returns:
        A float in [−1, 1]; NaN when either side has all values equal.

    Raises:
        ValueError: for different lengths, fewer than 2 values, or non-finite values.
    """
    ra, rb = ranks(a), ranks(b)
    if ra.size != rb.size or ra.size < 2:
        raise ValueError(
            f"spearman needs two sequences of one length >= 2, got {ra.size} and {rb.size}"
        )
    da, db = ra - ra.mean(), rb - rb.mean()
    norm = np.sqrt((da * da).sum() * (db * db).sum())
    return float("nan") if norm == 0 else float((da * db).sum() / norm)


def attention_rollout(attentions) -> np.ndarray:
    """Attention rollout of (N, H, L, L) maps: R = A'_N ⋯ A'_1 with
    A' = rownorm(0.5 · mean_heads(A) + 0.5 · I).

    Args:
        attentions: (N, H, L, L) non-negative weights, rows summing to 1.

    Returns:
        float64 (L, L) array; row i: how much of token i's final state traces to each input.

    Raises:
        ValueError: for a shape that is not (N, H, L, L).
    """
    maps = np.asarray(attentions, dtype=np.float64)
    if maps.ndim != 4 or maps.shape[-1] != maps.shape[-2]:
        raise ValueError(f"attentions must be (N, H, L, L), got shape {maps.shape}")
    eye = np.eye(maps.shape[-1])  # (L, L)
    rollout = eye
    for layer in maps:  # (H, L, L)
        mixed = ROLLOUT_RESIDUAL * eye + (1 - ROLLOUT_RESIDUAL) * layer.mean(axis=0)  # (L, L)
        mixed /= mixed.sum(axis=-1, keepdims=True)
        rollout = mixed @ rollout  # (L, L) @ (L, L)
    return rollout


def explain_next_token(model, input_ids, *, target: int | None = None) -> Explanation:
    """Saliency, last-layer attention and rollout for the decoder's next token.

    One forward pass with weights and autograd, one backward pass of log P(target) at the
    last position.

    Args:
        model: a Decoder with float32 or bfloat16 weights (the int4 kernel has no derivative).
        input_ids: the L prompt token ids.
        target: the token to explain; default the most likely next token.

    Returns:
        :class:`Explanation`.

    Raises:
        ValueError: for an encoder, int4 weights, bad ids or a target outside the vocabulary.
    """
    if not isinstance(model, Decoder):
        raise ValueError(f"explain_next_token needs a Decoder, got {type(model).__name__}")
    if model.weights_dtype == "int4":
        raise ValueError(
            "explain_next_token needs float weights (torch's int4 kernel has no derivative): "
            "load the decoder with weights_dtype='bfloat16' or 'float32'"
        )
    ids = as_ids(input_ids)  # (1, L)
    out = model(ids, need_weights=True, grad=True)
    log_probs = torch.log_softmax(out.logits[0, -1].float(), dim=-1)  # (V,)
    if target is None:
        target = int(log_probs.argmax())
    if not isinstance(target, int) or not 0 <= target < model.config.vocab_size:
        raise ValueError(
            f"target must be a token id in [0, {model.config.vocab_size}), got {target!r}"
        )
    log_probs[target].backward()
    embeddings = out.embeddings  # (1, L, D), its .grad filled
    saliency = (embeddings.grad * embeddings).sum(-1)[0].detach().double().numpy()  # (L,)
    maps = torch.cat([a.detach() for a in out.attentions], dim=0).double().numpy()  # (N, H, L, L)
    attention = maps[-1].mean(axis=0)[-1]  # (L,)
    rollout = attention_rollout(maps)[-1]  # (L,)
    magnitude = np.abs(saliency)
    agree = (
        (spearman(attention, magnitude), spearman(rollout, magnitude), spearman(attention, rollout))
        if ids.shape[1] > 1
        else (float("nan"),) * 3
    )
    return Explanation(
        target, readonly(saliency), readonly(attention), readonly(rollout.copy()), *agree
    )
