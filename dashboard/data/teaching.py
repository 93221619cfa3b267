"""Cached teaching computations: the eight synthetic head patterns, per-head statistics,
and the explicit Q, K, V walkthrough of the Step-by-step page."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st
import torch

import attention_core as core
from attention_core import masks
from attention_core.validation import check_int
from dashboard.config import StepConfig
from dashboard.data.inputs import PRESET_SENTENCES, token_embeddings, tokens_for
from dashboard.data.tables import Heatmap, heatmap_grid, readonly


def head_entropy(weights: np.ndarray) -> np.ndarray:
    """Mean row entropy (nats) of each head.

    Args:
        weights: (H, L, S) or (L, S) non-negative weights with rows summing to 1 or 0.

    Returns:
        (H,) array (or a 0-d array for 2-D input): mean over query rows of -Σ w log w.
    """
    w = np.asarray(weights, dtype=np.float64)
    safe = np.where(w > 0, w, 1.0)
    return -(w * np.log(safe)).sum(axis=-1).mean(axis=-1)  # (H, L) -> (H,)


def mean_distance(weights: np.ndarray) -> np.ndarray:
    """Mean attention distance of each head: Σ_j w_ij |i - j|, averaged over queries i.

    Args:
        weights: (H, L, S) or (L, S) weights.

    Returns:
        (H,) array (or 0-d) in token positions.
    """
    w = np.asarray(weights, dtype=np.float64)
    L, S = w.shape[-2:]
    dist = np.abs(np.arange(L)[:, None] - np.arange(S)[None, :])  # (L, S)
    return (w * dist).sum(axis=-1).mean(axis=-1)  # (H, L) -> (H,)


@st.cache_data(max_entries=16, show_spinner=False)
def pattern_gallery(seq_len: int, seed: int) -> tuple[Heatmap, pd.DataFrame]:
    """The tutorial's eight synthetic head patterns as one heatmap table plus statistics.

    Args:
        seq_len: L in [2, 64]. seed: seed of the four random heads.

    Returns:
        (heatmap with panels named by pattern, table with columns ``pattern``, ``entropy``,
        ``mean_distance``).

    Raises:
        ValueError: when seq_len or seed is out of range.
    """
    from attention_core.experiments.patterns import head_patterns

    patterns = head_patterns(seq_len, seed)
    names = list(patterns)
    stack = np.stack([patterns[n] for n in names])  # (8, L, L)
    labels = [str(i) for i in range(seq_len)]
    heatmap = heatmap_grid(stack, labels, labels, panels=names)
    stats = pd.DataFrame(
        {"pattern": names, "entropy": head_entropy(stack), "mean_distance": mean_distance(stack)}
    )
    return heatmap, stats


STEP_D_MODEL = 8


@dataclass(frozen=True)
class StepByStep:
    """Every intermediate of single-head attention on a few tokens (float64, read-only).

    Attributes:
        tokens: the n tokens.
        matrices: name -> array, in teaching order: ``X`` (n, D), ``W_Q``/``W_K``/``W_V``
            (D, d_k), ``Q``/``K``/``V`` (n, d_k), ``scores`` = QKᵀ (n, n), ``scaled`` =
            scores/√d_k, ``mask`` (1 = may attend), ``weights`` (softmax rows), ``output``
            = weights·V (n, d_k).
        d_k: key width.
        library_max_diff: max |weights - attention_core.attend weights| (a cross-check).
    """

    tokens: tuple[str, ...]
    matrices: dict[str, np.ndarray]
    d_k: int
    library_max_diff: float


@st.cache_resource(max_entries=32, show_spinner=False)
def step_by_step(cfg: StepConfig) -> StepByStep:
    """Compute the tutorial's Q, K, V walkthrough explicitly, in float64.

    Args:
        cfg: the preset sentence, n_tokens in [2, 12], d_k in [1, 8], causal, seed.

    Returns:
        A :class:`StepByStep`.

    Raises:
        ValueError: for an unknown sentence or sizes out of range.
    """
    sentence_kind, n_tokens, seed, d_k, causal = (
        cfg.sentence, cfg.n_tokens, cfg.seed, cfg.d_k, cfg.causal
    )  # fmt: skip
    if sentence_kind not in PRESET_SENTENCES:
        raise ValueError(
            f"unknown sentence {sentence_kind!r}; valid: {', '.join(PRESET_SENTENCES)}"
        )
    tokens = tokens_for(PRESET_SENTENCES[sentence_kind])
    check_int("n_tokens", n_tokens, low=2, high=min(12, len(tokens)))
    check_int("d_k", d_k, low=1, high=STEP_D_MODEL)
    tokens = tokens[:n_tokens]
    x = token_embeddings(tokens, STEP_D_MODEL, seed).double()  # (n, D)
    gen = torch.Generator().manual_seed(seed)
    w_q, w_k, w_v = (
        torch.randn(STEP_D_MODEL, d_k, generator=gen, dtype=torch.float64) / math.sqrt(STEP_D_MODEL)
        for _ in range(3)
    )  # each (D, d_k)
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # (n, D) @ (D, d_k) -> (n, d_k)
    scores = q @ k.T  # (n, d_k) @ (d_k, n) -> (n, n)
    scaled = scores / math.sqrt(d_k)
    mask = masks.causal(n_tokens) if causal else torch.ones(n_tokens, n_tokens, dtype=torch.bool)
    masked = scaled.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(masked, dim=-1)  # (n, n)
    output = weights @ v  # (n, n) @ (n, d_k) -> (n, d_k)
    check = core.attend(q, k, v, "scaled", mask=mask, need_weights=True)
    diff = float((check.weights - weights).abs().max())
    named = {
        "X": x,
        "W_Q": w_q,
        "W_K": w_k,
        "W_V": w_v,
        "Q": q,
        "K": k,
        "V": v,
        "scores": scores,
        "scaled": scaled,
        "mask": mask.double(),
        "weights": weights,
        "output": output,
    }
    return StepByStep(
        tokens=tokens,
        matrices={name: readonly(t.numpy().copy()) for name, t in named.items()},
        d_k=d_k,
        library_max_diff=diff,
    )


def cell_breakdown(result: StepByStep, i: int, j: int) -> dict[str, float | bool]:
    """The numbers behind one weight: q_i·k_j, ÷√d_k, mask, exp, row sum, weight.

    Uses the numerically stable form: ``exp(s_ij - max_j s_ij)`` over the allowed keys.

    Args:
        result: a :class:`StepByStep`.
        i, j: query and key positions.

    Returns:
        dict with ``dot``, ``sqrt_d_k``, ``scaled``, ``allowed``, ``row_max``, ``exp``,
        ``row_sum``, ``weight``.

    Raises:
        ValueError: when i or j is out of range.
    """
    n = len(result.tokens)
    check_int("i", i, low=0, high=n - 1)
    check_int("j", j, low=0, high=n - 1)
    m = result.matrices
    allowed_row = m["mask"][i] > 0
    scaled_row = m["scaled"][i]
    row_max = float(scaled_row[allowed_row].max())
    exps = np.where(allowed_row, np.exp(scaled_row - row_max), 0.0)
    return {
        "dot": float(m["Q"][i] @ m["K"][j]),
        "sqrt_d_k": math.sqrt(result.d_k),
        "scaled": float(scaled_row[j]),
        "allowed": bool(allowed_row[j]),
        "row_max": row_max,
        "exp": float(exps[j]),
        "row_sum": float(exps.sum()),
        "weight": float(m["weights"][i, j]),
    }
