"""Single-head attention on a few tokens, every intermediate written out, in float64.

The tutorial's walkthrough: embed the tokens (X), project them (Q = X W_Q, K = X W_K,
V = X W_V), take the scores Q Kᵀ, divide by √d_k, mask, softmax each row, and mix the
values (output = weights V). :func:`walk_through_attention` returns every one of those
matrices in a frozen :class:`Walkthrough`; :func:`explain_cell` breaks one weight down into
the numbers a learner can check by hand.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attention_core import masks
from attention_core.experiments.inputs import check_tokens, preset_tokens, token_embeddings
from attention_core.registry import attend
from attention_core.validation import check_bool, check_int

STEP_D_MODEL = 8
MIN_STEP_TOKENS = 2
MAX_STEP_TOKENS = 12
MATRIX_NAMES = (
    "X",
    "W_Q",
    "W_K",
    "W_V",
    "Q",
    "K",
    "V",
    "scores",
    "scaled",
    "mask",
    "weights",
    "output",
)


@dataclass(frozen=True)
class Walkthrough:
    """Every intermediate of single-head attention on n tokens (float64, read-only arrays).

    Attributes:
        tokens: the n tokens.
        d_k: width of queries, keys and values.
        causal: whether the causal mask was applied.
        X: (n, D) token embeddings, D = :data:`STEP_D_MODEL`.
        W_Q, W_K, W_V: (D, d_k) projection matrices.
        Q, K, V: (n, d_k) = X W_Q, X W_K, X W_V.
        scores: (n, n) = Q Kᵀ.
        scaled: (n, n) = scores / √d_k.
        mask: (n, n), 1.0 where query i may attend to key j, else 0.0.
        weights: (n, n) = softmax of each row of ``scaled`` over the allowed keys.
        output: (n, d_k) = weights V.
        library_max_diff: max |weights - ``attend(Q, K, V, "scaled")`` weights| (a
            cross-check against the library).
    """

    tokens: tuple[str, ...]
    d_k: int
    causal: bool
    X: np.ndarray
    W_Q: np.ndarray
    W_K: np.ndarray
    W_V: np.ndarray
    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    scores: np.ndarray
    scaled: np.ndarray
    mask: np.ndarray
    weights: np.ndarray
    output: np.ndarray
    library_max_diff: float

    @property
    def matrices(self) -> dict[str, np.ndarray]:
        """The matrices by name, in teaching order (:data:`MATRIX_NAMES`)."""
        return {name: getattr(self, name) for name in MATRIX_NAMES}


@dataclass(frozen=True)
class CellBreakdown:
    """The numbers behind one weight w_ij, in the numerically stable form.

    Attributes:
        dot: q_i · k_j.
        sqrt_d_k: √d_k.
        scaled: q_i · k_j / √d_k.
        allowed: whether the mask lets query i attend to key j.
        row_max: max of row i's scaled scores over the allowed keys.
        exp: exp(scaled - row_max) if allowed, else 0.
        row_sum: Σ over the allowed keys of exp(scaled - row_max).
        weight: w_ij, as computed by the walkthrough (equals exp / row_sum).
    """

    dot: float
    sqrt_d_k: float
    scaled: float
    allowed: bool
    row_max: float
    exp: float
    row_sum: float
    weight: float


def _readonly(t: torch.Tensor) -> np.ndarray:
    """A read-only float64 NumPy copy of ``t``."""
    array = t.detach().double().numpy().copy()
    array.flags.writeable = False
    return array


def _projections(seed: int, d_k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """W_Q, W_K, W_V, each (D, d_k) float64 N(0, 1/D), drawn in that order from ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    w_q, w_k, w_v = (
        torch.randn(STEP_D_MODEL, d_k, generator=generator, dtype=torch.float64)
        / math.sqrt(STEP_D_MODEL)
        for _ in range(3)
    )  # each (D, d_k)
    return w_q, w_k, w_v


def walk_through_attention(
    tokens: Sequence[str], *, d_k: int, seed: int, causal: bool = False
) -> Walkthrough:
    """Compute the tutorial's Q, K, V walkthrough explicitly, in float64.

    X is :func:`~attention_core.experiments.inputs.token_embeddings` (float32, widened to
    float64) with D = :data:`STEP_D_MODEL`; W_Q, W_K, W_V are N(0, 1/D) draws from a
    generator seeded with ``seed``.

    Args:
        tokens: the n tokens, 2 <= n <= 12.
        d_k: width of queries, keys and values, in [1, 8].
        seed: seeds the embeddings and the projection matrices, in [0, 2**32 - 1].
        causal: apply a causal mask (query i sees keys j <= i).

    Returns:
        A :class:`Walkthrough` with X (n, D), W_* (D, d_k), Q/K/V (n, d_k), scores, scaled,
        mask and weights (n, n), output (n, d_k).

    Raises:
        ValueError: for too few or too many tokens, or d_k, seed or causal out of range.
    """
    tokens = check_tokens(tokens, low=MIN_STEP_TOKENS, high=MAX_STEP_TOKENS)
    n = len(tokens)
    d_k = check_int("d_k", d_k, low=1, high=STEP_D_MODEL)
    causal = check_bool("causal", causal)
    x = token_embeddings(tokens, STEP_D_MODEL, seed).double()  # (n, D)
    w_q, w_k, w_v = _projections(seed, d_k)
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # (n, D) @ (D, d_k) -> (n, d_k)
    scores = q @ k.T  # (n, d_k) @ (d_k, n) -> (n, n)
    scaled = scores / math.sqrt(d_k)  # (n, n)
    mask = masks.causal(n) if causal else torch.ones(n, n, dtype=torch.bool)  # (n, n)
    weights = torch.softmax(scaled.masked_fill(~mask, float("-inf")), dim=-1)  # (n, n)
    output = weights @ v  # (n, n) @ (n, d_k) -> (n, d_k)
    check = attend(q, k, v, "scaled", mask=mask, need_weights=True)
    matrices = (x, w_q, w_k, w_v, q, k, v, scores, scaled, mask, weights, output)
    return Walkthrough(
        tokens=tokens,
        d_k=d_k,
        causal=causal,
        # each matrix as a read-only float64 array, under its name (MATRIX_NAMES, same order)
        **{name: _readonly(t) for name, t in zip(MATRIX_NAMES, matrices, strict=True)},
        library_max_diff=float((check.weights - weights).abs().max()),
    )


def walk_through_preset(
    sentence_kind: str, n_tokens: int, seed: int, d_k: int, *, causal: bool = False
) -> Walkthrough:
    """The walkthrough on the first ``n_tokens`` tokens of a preset sentence.

    Args:
        sentence_kind: ``"preset_en"`` or ``"preset_zh"``.
        n_tokens: how many leading tokens to use, in [2, min(12, tokens in the sentence)].
        seed, d_k, causal: as in :func:`walk_through_attention`.

    Returns:
        A :class:`Walkthrough`.

    Raises:
        ValueError: for an unknown sentence, or sizes out of range.
    """
    tokens = preset_tokens(sentence_kind)
    n = check_int("n_tokens", n_tokens, low=MIN_STEP_TOKENS, high=min(MAX_STEP_TOKENS, len(tokens)))
    return walk_through_attention(tokens[:n], d_k=d_k, seed=seed, causal=causal)


def explain_cell(result: Walkthrough, i: int, j: int) -> CellBreakdown:
    """The numbers behind one weight: q_i·k_j, ÷√d_k, mask, exp, row sum, weight.

    Uses the numerically stable form ``exp(s_ij - max_j s_ij)`` over the allowed keys (the
    diagonal is always allowed, so the row has at least one key).

    Args:
        result: a :class:`Walkthrough`.
        i, j: query and key positions, each in [0, n - 1].

    Returns:
        A :class:`CellBreakdown`.

    Raises:
        ValueError: when i or j is out of range.
    """
    n = len(result.tokens)
    i = check_int("i", i, low=0, high=n - 1)
    j = check_int("j", j, low=0, high=n - 1)
    allowed_row = result.mask[i] > 0  # (n,)
    scaled_row = result.scaled[i]  # (n,)
    row_max = float(scaled_row[allowed_row].max())
    exps = np.where(allowed_row, np.exp(scaled_row - row_max), 0.0)  # (n,)
    return CellBreakdown(
        dot=float(result.Q[i] @ result.K[j]),
        sqrt_d_k=math.sqrt(result.d_k),
        scaled=float(scaled_row[j]),
        allowed=bool(allowed_row[j]),
        row_max=row_max,
        exp=float(exps[j]),
        row_sum=float(exps.sum()),
        weight=float(result.weights[i, j]),
    )
