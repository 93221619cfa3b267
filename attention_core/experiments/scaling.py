"""Why attention divides the scores by sqrt(d_k): the tutorial's experiment, and more.

With q and k of d_k independent N(0, 1) entries, a score q·k is a sum of d_k products of
unit variance, so its standard deviation is sqrt(d_k). Dividing by sqrt(d_k) brings it back
to 1. The tutorial shows the mean and std; this module also measures what that does to the
softmax: without scaling the weights saturate (entropy -> 0, max weight -> 1) and the
softmax Jacobian diag(p) - p pᵀ -> 0, so almost no gradient flows back to Q and K.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd
import torch

from attention_core.validation import check_int

MAX_D_K = 4096
MAX_SCALING_LEN = 256
MAX_TRIALS = 10_000
# q and k together may hold at most this many float64 numbers (2 * trials * L * d_k)
MAX_ELEMENTS = 2**24
DRAW_ELEMENTS = 2**20
"""Numbers drawn per tensor at a time (8 MiB of float64): q and k for 100 trials × 64 tokens ×
d_k 1,024 were 105 MiB at once."""
SCALING_COLUMNS = (
    "d_k",
    "mean_unscaled",
    "std_unscaled",
    "mean_scaled",
    "std_scaled",
    "theory_std_unscaled",
    "entropy_unscaled",
    "entropy_scaled",
    "max_entropy",
    "max_weight_unscaled",
    "max_weight_scaled",
    "jacobian_norm_unscaled",
    "jacobian_norm_scaled",
)


def check_d_ks(d_ks: Iterable[int], high: int = MAX_D_K) -> tuple[int, ...]:
    """Validate a non-empty list of head sizes d_k, each a whole number in [1, high].

    Returns:
        the sizes as a sorted tuple of distinct ints.

    Raises:
        ValueError: for an empty list or any size that is not a whole number in range.
    """
    if isinstance(d_ks, str | bytes) or not isinstance(d_ks, Iterable):
        raise ValueError(f"d_ks must be a list of whole numbers, got {d_ks!r}")
    values = tuple(d_ks)
    if not values:
        raise ValueError("d_ks must hold at least one size, got an empty list")
    return tuple(sorted({check_int("d_k", d, low=1, high=high) for d in values}))


def derived_seed(seed: int, *parts: int) -> int:
    """A seed for one cell of an experiment, independent of which other cells are run."""
    return int(np.random.SeedSequence([seed, *parts]).generate_state(1)[0])


def softmax_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of each row of weights (..., S), with 0·log 0 = 0.

    Returns:
        (...) tensor; ln S for a uniform row, 0 for a one-hot row.
    """
    return torch.special.entr(weights).sum(dim=-1)  # (..., S) -> (...)


def softmax_jacobian_norm(weights: torch.Tensor) -> torch.Tensor:
    """Frobenius norm of the softmax Jacobian J = diag(p) - p pᵀ of each row p of weights.

    Uses the closed form ||J||² = Σ_i p_i²(1 - p_i)² + (Σ_i p_i²)² - Σ_i p_i⁴ (the first
    term is the diagonal, the rest the off-diagonal p_i² p_j², i ≠ j), so no (S, S) matrix is
    formed per row.

    Args:
        weights: (..., S) rows of a softmax (non-negative, summing to 1).

    Returns:
        (...) tensor of norms; 0 for a one-hot row, largest for a spread-out row.
    """
    sq = weights.square()  # (..., S)
    diagonal = (sq * (1.0 - weights).square()).sum(dim=-1)  # (...)
    sum_sq = sq.sum(dim=-1)  # (...)
    off_diagonal = (sum_sq.square() - sq.square().sum(dim=-1)).clamp_min(0.0)  # (...)
    return (diagonal + off_diagonal).sqrt()


def _unscaled_scores(seed: int, trials: int, L: int, d_k: int) -> torch.Tensor:
    """QKᵀ of ``trials`` independent N(0, 1) pairs q, k of shape (L, d_k), in float64.

    The pairs are drawn a group of trials at a time (q then k, from one generator), each
    group at most :data:`DRAW_ELEMENTS` numbers per tensor, so the (T, L, d_k) inputs never
    exist whole: only the (T, L, L) scores do. A single group (the usual sizes) draws exactly
    as ``randn(T, L, d_k)`` for q then for k.

    Returns:
        (T, L, L) float64 scores.
    """
    generator = torch.Generator().manual_seed(seed)
    group = max(1, DRAW_ELEMENTS // (L * d_k))  # trials per draw
    parts = []
    for start in range(0, trials, group):
        count = min(group, trials - start)
        q = torch.randn(count, L, d_k, generator=generator, dtype=torch.float64)  # (t, L, E)
        k = torch.randn(count, L, d_k, generator=generator, dtype=torch.float64)  # (t, L, E)
        parts.append(q @ k.transpose(-2, -1))  # (t, L, E) @ (t, E, L) -> (t, L, L)
    return torch.cat(parts) if len(parts) > 1 else parts[0]  # (T, L, L)


def measure_scaling(
    d_ks: Iterable[int] = (32, 64, 128, 256),
    seq_len: int = 10,
    seed: int = 0,
    trials: int = 200,
) -> pd.DataFrame:
    """Measure the scores QKᵀ and their softmax with and without the 1/sqrt(d_k) scale.

    For each d_k, draws ``trials`` independent pairs q, k of shape (L, d_k) with N(0, 1)
    entries (as the tutorial does, which used a single pair), computes the scores QKᵀ
    (L, L) in float64 without scaling and divided by sqrt(d_k), and reports statistics
    pooled over every score, row and trial.

    Args:
        d_ks: head sizes, whole numbers in [1, 4096]; duplicates are dropped, rows sorted.
        seq_len: L, tokens per sequence, in [1, 256].
        seed: non-negative seed; each d_k draws from its own seed derived from it, so a
            row does not change when other d_k are added.
        trials: independent (q, k) pairs per d_k, in [1, 10000].

    Returns:
        DataFrame with one row per d_k and the columns :data:`SCALING_COLUMNS`:
        ``mean_*``/``std_*`` of the scores without and with scaling; ``theory_std_unscaled``
        = sqrt(d_k) (the scaled theory is 1); ``entropy_*`` the mean softmax row entropy in
        nats, with ``max_entropy`` = ln L for a uniform row; ``max_weight_*`` the mean
        largest weight of a row (1/L uniform, 1 one-hot); ``jacobian_norm_*`` the mean
        Frobenius norm of the softmax Jacobian diag(p) - p pᵀ per row (0 = no gradient).

    Raises:
        ValueError: for a bad d_k list, seq_len, seed or trials, or when 2·trials·L·d_k
            exceeds 2**24 numbers.
    """
    sizes = check_d_ks(d_ks)
    L = check_int("seq_len", seq_len, low=1, high=MAX_SCALING_LEN)
    seed = check_int("seed", seed, low=0, high=2**63 - 1)
    trials = check_int("trials", trials, low=1, high=MAX_TRIALS)
    if 2 * trials * L * sizes[-1] > MAX_ELEMENTS:
        raise ValueError(
            f"trials={trials} x seq_len={L} x d_k={sizes[-1]} is too large "
            f"(2·trials·L·d_k must be at most {MAX_ELEMENTS}); lower trials"
        )
    rows = []
    for d_k in sizes:
        unscaled = _unscaled_scores(derived_seed(seed, d_k), trials, L, d_k)  # (T, L, L)
        scaled = unscaled / math.sqrt(d_k)  # (T, L, L)
        row = {"d_k": d_k}
        for tag, scores in (("unscaled", unscaled), ("scaled", scaled)):
            weights = torch.softmax(scores, dim=-1)  # (T, L, L), rows sum to 1
            row[f"mean_{tag}"] = scores.mean().item()
            row[f"std_{tag}"] = scores.std().item()
            row[f"entropy_{tag}"] = softmax_entropy(weights).mean().item()
            row[f"max_weight_{tag}"] = weights.amax(dim=-1).mean().item()
            row[f"jacobian_norm_{tag}"] = softmax_jacobian_norm(weights).mean().item()
        row["theory_std_unscaled"] = math.sqrt(d_k)
        row["max_entropy"] = math.log(L)
        rows.append(row)
    return pd.DataFrame(rows, columns=list(SCALING_COLUMNS))
