"""The tutorial's gallery of eight synthetic attention-head patterns.

Each pattern is a (L, L) matrix of attention weights: row ``i`` says how much query ``i``
looks at each key ``j``. They are drawn by hand, not learned, to show the kinds of
relation different heads of a multi-head layer can specialise in.
"""

from __future__ import annotations

import numpy as np

from attention_core.validation import check_int

MAX_PATTERN_LEN = 512
RANDOM_HEADS = 4
PATTERN_NAMES = (
    "local",
    "global",
    "forward",
    "backward",
    *(f"random_{i + 1}" for i in range(RANDOM_HEADS)),
)


def _normalise_rows(pattern: np.ndarray) -> np.ndarray:
    """Divide each row of a non-negative (L, L) matrix by its sum (every row has a 1)."""
    return pattern / pattern.sum(axis=1, keepdims=True)  # (L, L) / (L, 1)


def head_patterns(seq_len: int = 10, seed: int = 0) -> dict[str, np.ndarray]:
    """Return the tutorial's eight synthetic head patterns, as valid attention weights.

    The patterns, in order:

    * ``local``: a band, each query sees itself and its two neighbours (eye + off-diagonals
      at +1 and -1);
    * ``global``: uniform, every query spreads 1/L over all keys;
    * ``forward``: upper-triangular, query i sees keys j >= i (itself and the future);
    * ``backward``: lower-triangular, query i sees keys j <= i (itself and the past, the
      causal pattern of a decoder);
    * ``random_1`` … ``random_4``: uniform random scores in [0, 1), seeded, row-normalised.

    The tutorial left the band and triangular patterns unnormalised (rows summing to 2, 3
    or up to L); here every row is divided by its sum so that each pattern is a valid set of
    attention weights (non-negative, rows summing to 1), the same as a softmax produces.

    Args:
        seq_len: L, the number of tokens, in [1, 512].
        seed: seed of the random heads (non-negative); the same seed gives the same
            patterns on every machine.

    Returns:
        dict from pattern name (see :data:`PATTERN_NAMES`, in that order) to a float64
        (L, L) numpy array whose rows sum to 1.

    Raises:
        ValueError: when seq_len or seed is not a whole number in range.
    """
    L = check_int("seq_len", seq_len, low=1, high=MAX_PATTERN_LEN)
    rng = np.random.default_rng(check_int("seed", seed, low=0))
    band = np.eye(L) + np.eye(L, k=1) + np.eye(L, k=-1)  # (L, L), 1 on |i - j| <= 1
    patterns = {
        "local": _normalise_rows(band),
        "global": np.full((L, L), 1.0 / L),
        "forward": _normalise_rows(np.triu(np.ones((L, L)))),
        "backward": _normalise_rows(np.tril(np.ones((L, L)))),
    }
    for i in range(RANDOM_HEADS):
        # draws in [0, 1): shift away from 0 so no row can sum to 0
        scores = rng.random((L, L)) + np.finfo(np.float64).tiny  # (L, L)
        patterns[f"random_{i + 1}"] = _normalise_rows(scores)
    return patterns
