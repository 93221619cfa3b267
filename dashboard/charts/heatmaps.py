"""Heatmaps: one look (:class:`HeatmapSpec`, its cell size and colour scale) for the canvas
heatmap on screen (:func:`heatmap_canvas_spec`, matrices in) and its Altair twin for exports
and small annotated matrices (:func:`dashboard.charts.heatmap_altair.heatmap_chart`, a long
table in). No Streamlit, no torch."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass

import altair as alt
import numpy as np

from dashboard.charts.base import (
    DIVERGING_SCHEME,
    FORMAT_PRECISION,
    LABEL_LIMIT_PX,
    MAX_CELL_PX,
    MAX_CHART_ROWS,
    MIN_CELL_PX,
    PANEL_WIDTH,
    SCHEME_STOPS,
    SEQUENTIAL_SCHEME,
    SINGLE_WIDTH,
    default_domain,
)


def heatmap_columns(panel_title: str | None, score_title: str | None) -> list[str]:
    """The columns a heatmap table needs: panels and scores only when they are shown."""
    optional = {"panel": panel_title, "score": score_title}
    return ["row", "col", "value"] + [name for name, title in optional.items() if title is not None]


def cell_px(n_rows: int, n_cols: int, faceted: bool, width: int | None) -> tuple[int, int]:
    """(width, height) in pixels of one heatmap cell: about ``width`` (default: a panel's or
    a single chart's width) per panel side, within [MIN_CELL_PX, MAX_CELL_PX]; square cells
    for a square matrix."""
    total = width or (PANEL_WIDTH if faceted else SINGLE_WIDTH)

    def side(n_cells: int) -> int:
        return min(MAX_CELL_PX, max(MIN_CELL_PX, total // max(n_cells, 1)))

    cell_w, cell_h = side(n_cols), side(n_rows)
    return (cell_w, cell_w) if n_rows == n_cols else (cell_w, cell_h)


@dataclass(frozen=True)
class _ColourScale:
    """A heatmap's colour scale: Vega scheme, scale type, domain and direction."""

    scheme: str
    kind: str
    domain: tuple[float, float]
    reverse: bool

    def altair(self) -> alt.Scale:
        """The scale as Altair's (the domain is explicit, so panels can share it)."""
        if self.reverse:
            return alt.Scale(scheme=self.scheme, domain=list(self.domain), reverse=True)
        return alt.Scale(type=self.kind, scheme=self.scheme, domain=list(self.domain))

    def canvas(self) -> dict:
        """The scale for the canvas heatmap: the scheme's colour stops, as Vega samples it."""
        return {
            "type": self.kind,
            "domain": list(self.domain),
            "colors": SCHEME_STOPS[self.scheme],
            "reverse": self.reverse,
        }


def colour_scale(values: np.ndarray, spec: HeatmapSpec) -> _ColourScale:
    """Red-blue centred on 0 for signed data (``spec.diverging``); else yellow-green-blue
    from ``spec.domain`` (default: 0..max of the finite values), square-root when
    ``spec.sqrt`` and the domain starts at or above 0."""
    if spec.domain is not None:
        lo, hi = spec.domain
    else:
        lo, hi = default_domain(values, spec.diverging)
    sqrt, diverging = spec.sqrt, spec.diverging
    if diverging:
        bound = max(abs(lo), abs(hi)) or 1.0
        return _ColourScale(DIVERGING_SCHEME, "linear", (-bound, bound), True)
    kind = "sqrt" if sqrt and lo >= 0 else "linear"
    return _ColourScale(SEQUENTIAL_SCHEME, kind, (lo, hi if hi > lo else lo + 1.0), False)


@dataclass(frozen=True)
class HeatmapSpec:
    """How one heatmap looks: what both heatmap builders (the canvas one on screen and the
    Altair one for PNG/SVG export) take, so that screen and export agree.

    Attributes:
        title: chart title; subtitle: e.g. "pooled to 64×64".
        x_title, y_title, value_title: translated axis and legend titles.
        row_order, col_order: axis labels, top-to-bottom and left-to-right.
        score_title: title of a second value shown in tooltips (e.g. raw scores), or None.
        panel_title: title of the panel field when there are several panels (e.g. heads).
        domain: explicit colour domain (lo, hi); the same one for every panel shares one
            scale. Default: the data range (0..max for sequential data).
        diverging: a red-blue scale centred on 0 (for signed values such as outputs).
        sqrt: square-root colour scale for non-negative data, so that small weights next to
            a dominant one (e.g. the first row of a causal mask) stay visible.
        columns: panels per row when there are panels.
        annotate: print each value in its cell (Altair only; small matrices).
        value_format: d3 format of values in tooltips and annotations.
        width: total width in pixels of one panel (default depends on panels).
        highlight: (row label, column label) of one cell outlined in :data:`CHOSEN_STROKE`,
            the cell a page takes apart (Altair only), or None.
        sqrt_note: what the legend's title adds on a square-root colour scale (translated
            by :func:`dashboard.charts.weights_spec`), so a learner knows it is not linear.
        missing_text: what an annotated cell without a finite value prints (``"−∞"`` for a
            score the mask removed; the cell is left unpainted), or None (Altair only).
    """

    title: str
    x_title: str
    y_title: str
    value_title: str
    row_order: tuple[str, ...] = ()
    col_order: tuple[str, ...] = ()
    score_title: str | None = None
    panel_title: str | None = None
    subtitle: str | None = None
    domain: tuple[float, float] | None = None
    diverging: bool = False
    sqrt: bool = True
    columns: int = 4
    annotate: bool = False
    value_format: str = ".3f"
    width: int | None = None
    highlight: tuple[str, str] | None = None
    sqrt_note: str = "√"
    missing_text: str | None = None

    def legend_title(self, kind: str) -> str:
        """The colour legend's title on a scale of ``kind``: the value's title, with
        :attr:`sqrt_note` on a square-root scale."""
        return f"{self.value_title} ({self.sqrt_note})" if kind == "sqrt" else self.value_title


MAX_GRID_CELLS = 72 * 32 * 32
"""Cells of a :class:`PanelGrid` at most (all-MiniLM's 72 maps at 32 tokens, 288 KB of
float32): each panel is drawn as one image, so the paint does not grow per cell as Vega's
marks do; the limit bounds what travels to the browser."""


@dataclass(frozen=True)
class PanelGrid:
    """Panels laid out as a table, as BertViz's model view lays out a model's heads: one row
    per ``row_names`` entry (layers), one column per ``col_names`` entry (heads), panels in
    row-major order; row and column headers instead of panel titles, no tick labels, and
    ``gap_px`` between panels of ``panel_px`` a side (or less, to fit the page's width).

    Attributes:
        row_title, col_title: translated header titles (e.g. "Layer", "Head").
        row_names, col_names: the headers, top to bottom and left to right.
        panel_px: one panel's side in pixels at most. gap_px: pixels between panels.
    """

    row_title: str
    col_title: str
    row_names: tuple[str, ...]
    col_names: tuple[str, ...]
    panel_px: int
    gap_px: int = 4

    def cell_px(self, n_rows: int, n_cols: int) -> float:
        """One cell's side, so that an ``n_rows`` × ``n_cols`` map fills at most ``panel_px``
        a side (fractional pixels: the canvas scales one image per panel)."""
        return self.panel_px / max(n_rows, n_cols, 1)

    def canvas(self) -> dict:
        """The grid's titles, headers and gap for the canvas heatmap."""
        return {
            "row_title": self.row_title,
            "col_title": self.col_title,
            "row_names": list(self.row_names),
            "col_names": list(self.col_names),
            "gap": self.gap_px,
        }


def _panel_stack(
    values: np.ndarray, spec: HeatmapSpec, what: str, limit: int = MAX_CHART_ROWS
) -> np.ndarray:
    """``values`` as a (P, R, C) float array whose R and C match the spec's axis orders.

    Raises:
        ValueError: for another shape, repeated labels or more than ``limit`` cells.
    """
    stack = np.asarray(values, dtype=np.float64)
    stack = stack[None] if stack.ndim == 2 else stack
    if stack.ndim != 3:
        raise ValueError(f"heatmap {what} must be 2-D or 3-D, got shape {np.shape(values)}")
    expected = (len(spec.row_order), len(spec.col_order))
    if stack.shape[1:] != expected:
        raise ValueError(
            f"heatmap {what} of shape {stack.shape[1:]} do not match the axis orders {expected}"
        )
    for name, order in (("row", spec.row_order), ("col", spec.col_order)):
        if len(set(order)) != len(order):
            repeated = sorted({label for label in order if order.count(label) > 1})
            raise ValueError(f"the {name} order repeats labels {repeated}")
    if stack.size > limit:
        raise ValueError(
            f"heatmap has {stack.size} cells, over the limit of {limit}; pool it first"
        )
    return stack


def heatmap_canvas_spec(
    values: np.ndarray,
    spec: HeatmapSpec,
    *,
    scores: np.ndarray | None = None,
    panels: Sequence[str] | None = None,
    grid: PanelGrid | None = None,
) -> dict:
    """The same heatmap as :func:`heatmap_chart`, as data for the canvas heatmap component,
    straight from the matrices (no long table).

    The canvas draws every cell as one pixel of an image scaled up, and finds the hovered
    cell by arithmetic, so a repaint costs about the same at 64 tokens as at 8, where Vega
    builds, encodes and draws one mark per cell (about 10 µs each in Streamlit).

    Args:
        values: (R, C) or (P, R, C) matrices, rows and columns in ``spec``'s axis orders;
            NaN where there is no cell.
        spec: titles, axis orders, colour scale and layout (``annotate`` is ignored).
        scores: optional array of the same shape, shown in tooltips under
            ``spec.score_title`` (which must then be given).
        panels: P panel names (needed, with ``spec.panel_title``, for several panels).
        grid: lay the P panels out as a table of ``len(grid.row_names)`` ×
            ``len(grid.col_names)`` (then ``panels`` and ``spec.panel_title`` are not used).

    Returns:
        A JSON-ready dict: titles, ``rows``/``cols``/``panels`` labels in order, the colour
        scale (domain, type and the scheme's colour stops), cell size in pixels, and
        ``values`` (and ``scores``) as base64 float32 arrays of shape (P, R, C) in row-major
        order.

    Raises:
        ValueError: for shapes that do not match the axis orders or each other, repeated
            labels, more than :data:`MAX_CHART_ROWS` cells (:data:`MAX_GRID_CELLS` in a
            grid), scores without a title, or a grid whose size is not the number of panels.
    """
    limit = MAX_CHART_ROWS if grid is None else MAX_GRID_CELLS
    stack = _panel_stack(values, spec, "values", limit)  # (P, R, C)
    score_stack = None
    if scores is not None or spec.score_title is not None:
        if scores is None or spec.score_title is None:
            raise ValueError("scores and spec.score_title must be given together")
        score_stack = _panel_stack(scores, spec, "scores", limit)
        if score_stack.shape != stack.shape:
            raise ValueError(f"scores shape {score_stack.shape} != values shape {stack.shape}")
    if grid is not None:
        names = [f"{r} · {c}" for r in grid.row_names for c in grid.col_names]
        if len(names) != stack.shape[0]:
            raise ValueError(
                f"a grid of {len(grid.row_names)} × {len(grid.col_names)} for "
                f"{stack.shape[0]} panels"
            )
    else:
        names = [""] if panels is None else [str(p) for p in panels]
    if len(names) != stack.shape[0]:
        raise ValueError(f"{len(names)} panel names for {stack.shape[0]} panels")
    n_rows, n_cols = len(spec.row_order), len(spec.col_order)
    if grid is None:
        cell_w, cell_h = cell_px(n_rows, n_cols, spec.panel_title is not None, spec.width)
    else:
        cell_w = cell_h = grid.cell_px(n_rows, n_cols)
    colours = colour_scale(stack, spec)
    precision = FORMAT_PRECISION.search(spec.value_format)
    kind, digits = ("f", 3) if precision is None else (precision.group(2), int(precision.group(1)))
    return {
        "title": spec.title,
        "subtitle": spec.subtitle or "",
        "x_title": spec.x_title,
        "y_title": spec.y_title,
        "value_title": spec.value_title,
        "legend_title": spec.legend_title(colours.kind),
        "score_title": spec.score_title,
        "panel_title": None if grid is not None else spec.panel_title,
        "grid": None if grid is None else grid.canvas(),
        "rows": [str(label) for label in spec.row_order],
        "cols": [str(label) for label in spec.col_order],
        "panels": names,
        "values": _float32_base64(stack),
        "scores": None if score_stack is None else _float32_base64(score_stack),
        "scale": colours.canvas(),
        "cell": [cell_w, cell_h],
        "columns": max(1, min(spec.columns, len(names))) if grid is None else len(grid.col_names),
        "label_limit": LABEL_LIMIT_PX,
        # the tooltip shows one more decimal than a ".Nf" format, as the Altair heatmap does
        "value_format": {"kind": kind, "digits": digits + 1 if kind == "f" else digits},
    }


def _float32_base64(stack: np.ndarray) -> str:
    """A (P, R, C) array as base64 of its little-endian float32 bytes, row-major (what a
    JavaScript Float32Array reads)."""
    return base64.b64encode(np.ascontiguousarray(stack, dtype="<f4").tobytes()).decode("ascii")
