"""Two numbers that describe what an attention head does with its weights.

* Entropy: how spread out each query's weights are, -Σ_j w_ij log w_ij (nats, 0·log 0 = 0),
  averaged over the queries. 0 for a head that looks at one key per query, ln S for a head
  that looks at every key equally.
* Mean attention distance: how far each query looks, Σ_j w_ij |i - j| (in positions),
  averaged over the queries. 0 for a head that looks at itself.
"""

from __future__ import annotations

import numpy as np


def _check_weights(weights: object) -> np.ndarray:
    """Return ``weights`` as float64 (..., L, S) after checking shape, finiteness and sign."""
    try:
        w = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"weights must be an array of numbers, got {weights!r}") from err
    if w.ndim < 2 or 0 in w.shape[-2:]:
        raise ValueError(f"weights must have shape (..., L, S) with L, S >= 1, got {w.shape}")
    if not np.isfinite(w).all():
        raise ValueError(f"weights must be finite, got {np.count_nonzero(~np.isfinite(w))} NaN/inf")
    if (w < 0).any():
        raise ValueError(f"weights must be non-negative, got a minimum of {w.min()!r}")
    return w


def head_entropy(weights: np.ndarray) -> np.ndarray:
    """Mean row entropy (nats) of each head: -Σ_j w_ij log w_ij, averaged over queries i.

    A zero weight adds nothing (0·log 0 = 0).

    Args:
        weights: (..., L, S) non-negative weights, e.g. (H, L, S) or (L, S), rows summing
            to 1 (or 0 for a query with no key); a tensor or anything NumPy reads.

    Returns:
        float64 array (...): (H,) for (H, L, S) input, 0-d for (L, S).

    Raises:
        ValueError: for fewer than 2 dimensions, an empty axis, or a NaN, infinite or
            negative weight.
    """
    w = _check_weights(weights)  # (..., L, S)
    safe = np.where(w > 0, w, 1.0)  # log 1 = 0 where w == 0
    return -(w * np.log(safe)).sum(axis=-1).mean(axis=-1)  # (..., L, S) -> (..., L) -> (...)


def mean_distance(weights: np.ndarray) -> np.ndarray:
    """Mean attention distance of each head: Σ_j w_ij |i - j|, averaged over queries i.

    Args:
        weights: (..., L, S) non-negative weights, e.g. (H, L, S) or (L, S).

    Returns:
        float64 array (...) in token positions: (H,) for (H, L, S) input, 0-d for (L, S).

    Raises:
        ValueError: for fewer than 2 dimensions, an empty axis, or a NaN, infinite or
            negative weight.
    """
    w = _check_weights(weights)  # (..., L, S)
    L, S = w.shape[-2:]
    dist = np.abs(np.arange(L)[:, None] - np.arange(S)[None, :])  # (L, 1) - (1, S) -> (L, S)
    return (w * dist).sum(axis=-1).mean(axis=-1)  # (..., L, S) -> (..., L) -> (...)
