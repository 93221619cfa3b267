"""Matrices made ready for charts: pooling, heatmap grids with their labels, CSV tables, and
short human-readable figures. numpy and pandas only."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from attention_core.device import format_bytes

FULL_HEATMAP_MAX = 128
POOLED_SIDE = 64
MAX_CHART_ROWS = FULL_HEATMAP_MAX * FULL_HEATMAP_MAX


def readonly(array: np.ndarray) -> np.ndarray:
    """Mark ``array`` read-only (cached arrays are shared by every session) and return it."""
    array.flags.writeable = False
    return array


def pool_edges(n: int, max_side: int) -> np.ndarray:
    """Return ``min(n, max_side) + 1`` bin edges splitting ``range(n)`` into near-equal bins."""
    side = min(n, max_side)
    return np.linspace(0, n, side + 1).round().astype(int)


def pool_matrix(matrix: np.ndarray, max_side: int = POOLED_SIDE) -> np.ndarray:
    """Average-pool a 2-D matrix so that neither side exceeds ``max_side``.

    Args:
        matrix: (R, C) array.
        max_side: the largest side of the result (>= 1).

    Returns:
        (min(R, max_side), min(C, max_side)) array of block means; unchanged when small.

    Raises:
        ValueError: for a non-2-D matrix or ``max_side < 1``.
    """
    if matrix.ndim != 2:
        raise ValueError(f"pool_matrix needs a 2-D matrix, got shape {matrix.shape}")
    if max_side < 1:
        raise ValueError(f"max_side must be >= 1, got {max_side}")
    rows, cols = matrix.shape
    if rows <= max_side and cols <= max_side:
        return matrix
    r_side, c_side = min(rows, max_side), min(cols, max_side)
    if rows % r_side == 0 and cols % c_side == 0:  # equal blocks: one strided sum, 2x faster
        # (R, C) -> (r, R/r, c, C/c) -> (r, c)
        blocks = matrix.reshape(r_side, rows // r_side, c_side, cols // c_side)
        return blocks.sum(axis=(1, 3), dtype=np.float64) / ((rows // r_side) * (cols // c_side))
    r_edges, c_edges = pool_edges(rows, max_side), pool_edges(cols, max_side)
    wide = np.asarray(matrix, dtype=np.float64)
    sums = np.add.reduceat(np.add.reduceat(wide, r_edges[:-1], axis=0), c_edges[:-1], axis=1)
    counts = np.outer(np.diff(r_edges), np.diff(c_edges))  # (r, c) cells per block
    return sums / counts


def heatmap_side(seq_len: int, panels: int = 1) -> int:
    """Return the side each of ``panels`` heatmaps is drawn at (full up to 128, else pooled).

    Full resolution when ``seq_len <= 128`` and all panels together stay within
    :data:`MAX_CHART_ROWS`; otherwise pooled to at most 64 and small enough that
    ``panels * side**2 <= MAX_CHART_ROWS``.
    """
    if seq_len <= FULL_HEATMAP_MAX and panels * seq_len * seq_len <= MAX_CHART_ROWS:
        return seq_len
    return max(1, min(seq_len, POOLED_SIDE, math.isqrt(MAX_CHART_ROWS // max(panels, 1))))


def _bin_labels(labels: list[str], edges: np.ndarray) -> list[str]:
    out = []
    for start, stop in zip(edges[:-1], edges[1:], strict=True):
        out.append(labels[start] if stop - start == 1 else f"{start}–{stop - 1}")
    return out


@dataclass(frozen=True)
class Heatmap:
    """One or more (pooled if needed) matrices with their axis labels: what a heatmap draws.

    The canvas heatmap takes the matrices as they are; the long table (one row per cell) is
    built only on demand, for a PNG/SVG/CSV export (:attr:`frame`).

    Attributes:
        values: (P, r, c) float64 matrices, P panels (e.g. heads), read-only.
        scores: (P, r, c) values shown in tooltips (e.g. raw scores), or ``None``.
        row_order, col_order: the r row and c column labels, top-to-bottom, left-to-right.
        panels: the P panel names, or ``None`` for a single unnamed panel.
        pooled: True when cells are block averages of a bigger matrix.
    """

    values: np.ndarray
    scores: np.ndarray | None
    row_order: tuple[str, ...]
    col_order: tuple[str, ...]
    panels: tuple[str, ...] | None
    pooled: bool

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, cols) drawn per panel."""
        return self.values.shape[1], self.values.shape[2]

    @property
    def frame(self) -> pd.DataFrame:
        """The long table for exports: columns ``row``, ``col``, ``row_index``,
        ``col_index``, ``value``, and ``score``/``panel`` when present; one row per cell."""
        return long_table(self)


def long_table(heatmap: Heatmap) -> pd.DataFrame:
    """One row per cell of ``heatmap`` (see :attr:`Heatmap.frame`)."""
    n_panels, r, c = heatmap.values.shape
    parts = []
    for p in range(n_panels):
        part = {
            "row": np.repeat(heatmap.row_order, c),
            "col": np.tile(heatmap.col_order, r),
            "row_index": np.repeat(np.arange(r), c),
            "col_index": np.tile(np.arange(c), r),
            "value": heatmap.values[p].ravel(),
        }
        if heatmap.scores is not None:
            part["score"] = heatmap.scores[p].ravel()
        if heatmap.panels is not None:
            part["panel"] = heatmap.panels[p]
        parts.append(pd.DataFrame(part))
    return pd.concat(parts, ignore_index=True)


def _pooled_stack(stack: np.ndarray, side: int) -> np.ndarray:
    """(P, R, C) -> (P, r, c) float64 block means, each side at most ``side``."""
    return np.stack([np.asarray(pool_matrix(m, side), dtype=np.float64) for m in stack])


def heatmap_grid(
    values: np.ndarray,
    row_labels: list[str],
    col_labels: list[str],
    *,
    scores: np.ndarray | None = None,
    panels: list[str] | None = None,
    max_side: int | None = None,
) -> Heatmap:
    """Pool one or more (R, C) matrices for drawing, with their labels.

    Args:
        values: (R, C) or (P, R, C) array (P panels, e.g. heads).
        row_labels, col_labels: R and C axis labels (unique).
        scores: optional array of the same shape shown in tooltips (e.g. raw scores).
        panels: P panel names for a 3-D ``values``.
        max_side: side limit; default :func:`heatmap_side` of the larger side and P.

    Returns:
        A :class:`Heatmap` of at most :data:`MAX_CHART_ROWS` cells in all.

    Raises:
        ValueError: when shapes and labels disagree.
    """
    stack = values[None] if values.ndim == 2 else values
    if stack.ndim != 3:
        raise ValueError(f"values must be 2-D or 3-D, got shape {values.shape}")
    n_panels, rows, cols = stack.shape
    if len(row_labels) != rows or len(col_labels) != cols:
        raise ValueError(
            f"labels ({len(row_labels)}, {len(col_labels)}) do not match shape {(rows, cols)}"
        )
    if scores is not None and scores.shape != values.shape:
        raise ValueError(f"scores shape {scores.shape} != values shape {values.shape}")
    if panels is not None and len(panels) != n_panels:
        raise ValueError(f"{len(panels)} panel names for {n_panels} panels")
    side = max_side or heatmap_side(max(rows, cols), n_panels)
    pooled = rows > side or cols > side
    r_lab = _bin_labels(row_labels, pool_edges(rows, side)) if pooled else list(row_labels)
    c_lab = _bin_labels(col_labels, pool_edges(cols, side)) if pooled else list(col_labels)
    score_stack = None if scores is None else (scores[None] if scores.ndim == 2 else scores)
    return Heatmap(
        values=readonly(_pooled_stack(stack, side)),  # (P, r, c)
        scores=None if score_stack is None else readonly(_pooled_stack(score_stack, side)),
        row_order=tuple(str(label) for label in r_lab),
        col_order=tuple(str(label) for label in c_lab),
        panels=None if panels is None else tuple(panels),
        pooled=pooled,
    )


def weights_table(weights: np.ndarray, row_labels: list[str], col_labels: list[str]) -> str:
    """Return a 2-D (or per-head 3-D) weight array as CSV text with labelled rows/columns."""
    if weights.ndim == 2:
        return pd.DataFrame(weights, index=row_labels, columns=col_labels).to_csv()
    frames = [
        pd.DataFrame(w, index=row_labels, columns=col_labels).assign(head=h)
        for h, w in enumerate(weights)
    ]
    return pd.concat(frames).rename_axis("query").reset_index().to_csv(index=False)


def describe_bytes(nbytes: int) -> str:
    """Human-readable size, e.g. ``"4.0 MiB"``."""
    return format_bytes(nbytes)


def describe_seconds(seconds: float) -> str:
    """A short duration that fits a metric tile: ``"0.84 ms"``, ``"12.3 ms"``, ``"315 ms"``,
    ``"2.41 s"``."""
    ms = seconds * 1000.0
    if ms < 10:
        return f"{ms:.2f} ms"
    if ms < 100:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    return f"{seconds:.2f} s"
