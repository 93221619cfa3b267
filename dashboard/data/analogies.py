"""The Intuition page's meeting and library: a softmax over three scores each, in plain
Python floats.

This module imports neither torch, nor the library, nor pandas, so the landing page draws
these two charts while torch is still loading (see ``dashboard/views/intuition.py``).
Nothing here is cached: three exponentials cost less than a cache lookup. Both are checked
against torch's own softmax and an explicit formula in the tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MEETING_PEOPLE = ("boss", "colleague", "passer_by")
"""Who speaks in the meeting analogy, in the order the scores come."""
MEETING_OTHER_SCORES = (1.0, -1.0)
"""The colleague's and the passer-by's fixed relevance scores."""
LIBRARY_SHELVES = ("cats", "gardens", "cooking")
LIBRARY_KEYS = ((1.0, 0.0), (0.6, 0.8), (0.0, 1.0))
"""Each shelf's catalogue entry (its key) in a two-topic space: cats, food."""
LIBRARY_SHARPNESS = 4.0
"""Length of the query vector: how decided the reader is (a larger dot product, a peakier
softmax)."""


def softmax(scores: tuple[float, ...]) -> tuple[float, ...]:
    """The softmax of a few scores, shifted by their maximum so that no exponent overflows.

    Args:
        scores: n finite real numbers, n ≥ 1.

    Returns:
        n weights in (0, 1] summing to 1: exp(s_i − max s) / Σ_j exp(s_j − max s).

    Raises:
        ValueError: for no scores or a score that is not finite.
    """
    if not scores or not all(math.isfinite(s) for s in scores):
        raise ValueError(f"softmax needs one or more finite scores, got {scores!r}")
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = math.fsum(exps)
    return tuple(e / total for e in exps)


def meeting_weights(boss_score: float) -> tuple[float, ...]:
    """Softmax of the meeting's relevance scores: the boss's, then the fixed others'.

    Args:
        boss_score: how relevant the boss's words are (a finite real number).

    Returns:
        One weight per person of :data:`MEETING_PEOPLE`, summing to 1.

    Raises:
        ValueError: when ``boss_score`` is not finite.
    """
    return softmax((float(boss_score), *MEETING_OTHER_SCORES))


@dataclass(frozen=True)
class LibraryLookup:
    """One lookup in the library, one entry per shelf of :data:`LIBRARY_SHELVES`: the shelf,
    its score (query · key) and its weight (softmax of the scores)."""

    shelves: tuple[str, ...]
    scores: tuple[float, ...]
    weights: tuple[float, ...]


def library_lookup(topic: float) -> LibraryLookup:
    """One attention lookup in the library: a query against each shelf's catalogue entry.

    Args:
        topic: 0 = the reader wants cats, 1 = food; the query is
            :data:`LIBRARY_SHARPNESS` · (cos(topic·π/2), sin(topic·π/2)).

    Returns:
        A :class:`LibraryLookup`: each shelf's score (query · key) and weight (softmax of the
        scores), the share of its books (values) in what the reader takes home.

    Raises:
        ValueError: when ``topic`` is not finite.
    """
    angle = float(topic) * math.pi / 2
    query = (LIBRARY_SHARPNESS * math.cos(angle), LIBRARY_SHARPNESS * math.sin(angle))  # (2,)
    scores = tuple(key[0] * query[0] + key[1] * query[1] for key in LIBRARY_KEYS)  # (3,)
    return LibraryLookup(LIBRARY_SHELVES, scores, softmax(scores))
