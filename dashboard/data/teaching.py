"""Cached teaching computations: the eight synthetic head patterns with their statistics,
the explicit Q, K, V walkthrough of the Step-by-step page (both computed by
:mod:`attention_core.experiments`), and the Intuition page's meeting and library."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attention_core import experiments
from attention_core.experiments import STEP_D_MODEL, head_entropy, mean_distance
from dashboard.config import StepConfig
from dashboard.data.tables import Heatmap, heatmap_grid

__all__ = [
    "LIBRARY_SHELVES",
    "MEETING_PEOPLE",
    "MEETING_OTHER_SCORES",
    "STEP_D_MODEL",
    "library_lookup",
    "meeting_weights",
    "cell_breakdown",
    "head_entropy",
    "mean_distance",
    "pattern_gallery",
    "step_by_step",
]


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
    patterns = experiments.head_patterns(seq_len, seed)
    names = list(patterns)
    stack = np.stack([patterns[n] for n in names])  # (8, L, L)
    labels = [str(i) for i in range(seq_len)]
    heatmap = heatmap_grid(stack, labels, labels, panels=names)
    stats = pd.DataFrame(
        {"pattern": names, "entropy": head_entropy(stack), "mean_distance": mean_distance(stack)}
    )
    return heatmap, stats


@st.cache_resource(max_entries=32, show_spinner=False)
def step_by_step(cfg: StepConfig) -> experiments.Walkthrough:
    """The tutorial's Q, K, V walkthrough on a preset sentence, explicitly, in float64.

    Args:
        cfg: the preset sentence, n_tokens in [2, 12], d_k in [1, 8], causal, seed.

    Returns:
        An :class:`attention_core.experiments.Walkthrough` (read-only matrices by name in
        ``.matrices``, the tokens, d_k and the cross-check against ``attend``).

    Raises:
        ValueError: for an unknown sentence or sizes out of range.
    """
    return experiments.walk_through_preset(
        cfg.sentence, cfg.n_tokens, cfg.seed, cfg.d_k, causal=cfg.causal
    )


def cell_breakdown(result: experiments.Walkthrough, i: int, j: int) -> experiments.CellBreakdown:
    """The numbers behind one weight: q_i·k_j, ÷√d_k, mask, exp, row sum, weight.

    Raises:
        ValueError: when i or j is out of range.
    """
    return experiments.explain_cell(result, i, j)


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


@st.cache_data(show_spinner=False)
def meeting_weights(boss_score: float) -> tuple[float, ...]:
    """Softmax of the meeting's relevance scores: the boss's, then the fixed others'.

    Args:
        boss_score: how relevant the boss's words are (any real number).

    Returns:
        One weight per person of :data:`MEETING_PEOPLE`, summing to 1.
    """
    scores = torch.tensor((boss_score, *MEETING_OTHER_SCORES), dtype=torch.float64)  # (3,)
    return tuple(torch.softmax(scores, dim=0).tolist())


@st.cache_data(show_spinner=False)
def library_lookup(topic: float) -> pd.DataFrame:
    """One attention lookup in the library: a query against each shelf's catalogue entry.

    Args:
        topic: 0 = the reader wants cats, 1 = food; the query is
            :data:`LIBRARY_SHARPNESS` · (cos(topic·π/2), sin(topic·π/2)).

    Returns:
        Columns ``shelf``, ``score`` (query · key) and ``weight`` (softmax of the scores):
        the share of each shelf's books (values) in what the reader takes home.
    """
    angle = torch.tensor(topic * math.pi / 2, dtype=torch.float64)
    query = LIBRARY_SHARPNESS * torch.stack([torch.cos(angle), torch.sin(angle)])  # (2,)
    keys = torch.tensor(LIBRARY_KEYS, dtype=torch.float64)  # (3, 2)
    scores = keys @ query  # (3,)
    weights = torch.softmax(scores, dim=0)  # (3,)
    return pd.DataFrame(
        {"shelf": LIBRARY_SHELVES, "score": scores.tolist(), "weight": weights.tolist()}
    )
