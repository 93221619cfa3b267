"""Cached teaching computations: the eight synthetic head patterns with their statistics,
and the explicit Q, K, V walkthrough of the Step-by-step page (both computed by
:mod:`attention_core.experiments`). The Intuition page's meeting and library are in
:mod:`dashboard.data.analogies` (torch-free)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from attention_core import experiments

# STEP_D_MODEL: read by the pages through dashboard.data (its export table names it)
from attention_core.experiments import STEP_D_MODEL, head_entropy, mean_distance  # noqa: F401
from dashboard.config import StepConfig
from dashboard.data.tables import Heatmap, heatmap_grid


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


def masked_scores(result: experiments.Walkthrough) -> np.ndarray:
    """The scaled scores after the mask, as the softmax reads them: ``QKᵀ/√d_k`` where a
    query may attend, ``-inf`` where the mask blocks it (so its weight is exactly 0).

    Returns:
        A new float64 (n, n) array.
    """
    scaled, allowed = result.matrices["scaled"], result.matrices["mask"]
    return np.where(allowed > 0, scaled, -np.inf)  # (n, n)


def cell_breakdown(result: experiments.Walkthrough, i: int, j: int) -> experiments.CellBreakdown:
    """The numbers behind one weight: q_i·k_j, ÷√d_k, mask, exp, row sum, weight.

    Raises:
        ValueError: when i or j is out of range.
    """
    return experiments.explain_cell(result, i, j)
