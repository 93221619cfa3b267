"""Heatmaps: one look (:class:`HeatmapSpec`) for the canvas heatmap on screen
(:func:`heatmap_canvas_spec`, matrices in) and its Altair twin for exports and small annotated
matrices (:func:`heatmap_chart`, a long table in). No Streamlit, no torch."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd

from dashboard.charts.base import (
    CHOSEN_STROKE,
    DIVERGING_SCHEME,
    FAST_RENDER_META,
    FONT_SIZE,
    FORMAT_PRECISION,
    LABEL_LIMIT_PX,
    MAX_CELL_PX,
    MAX_CHART_ROWS,
    MAX_TICK_LABELS,
    MIN_CELL_PX,
    PANEL_WIDTH,
    SCHEME_STOPS,
    SEQUENTIAL_SCHEME,
    SINGLE_WIDTH,
    check_rows,
    default_domain,
    display_names,
    display_table,
    field_name,
    ordered_scale,
    title_params,
    without_index,
)

TITLE_LABEL_ALLOWANCE_PX = 40  # a single map's title may also span its row labels
# An annotated matrix is drawn at the cell size its builder chose (its printed values need
# it): Streamlit's default autosize ("fit") would squeeze the cells, title, labels and legend
# into the plot's own width and height. A plain heatmap keeps Streamlit's fit to its column.
PAD_AUTOSIZE = alt.AutoSizeParams(type="pad", contains="padding")
ANNOTATED_LEGEND_PX = 120  # the colour bar under an annotated matrix
ANNOTATION_FONT_PX = FONT_SIZE - 3  # "−0.45" in 28 px: a gap in a 32 px cell
OUTLINE_PX = 2.5  # the highlighted cell's outline, as the head grid's chosen head
WIDE_VALUE = 9.995  # from here on a ".2f" value prints as 10.00: five digits and a sign


def _heatmap_columns(panel_title: str | None, score_title: str | None) -> list[str]:
    """The columns a heatmap table needs: panels and scores only when they are shown."""
    optional = {"panel": panel_title, "score": score_title}
    return ["row", "col", "value"] + [name for name, title in optional.items() if title is not None]


def _cell_px(n_rows: int, n_cols: int, faceted: bool, width: int | None) -> tuple[int, int]:
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


def _colour_scale(values: np.ndarray, spec: HeatmapSpec) -> _ColourScale:
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

    def legend_title(self, kind: str) -> str:
        """The colour legend's title on a scale of ``kind``: the value's title, with
        :attr:`sqrt_note` on a square-root scale."""
        return f"{self.value_title} ({self.sqrt_note})" if kind == "sqrt" else self.value_title


def heatmap_chart(df: pd.DataFrame, spec: HeatmapSpec) -> alt.Chart:
    """A heatmap (Altair rect marks) of a long table, optionally one panel per head: the
    PNG/SVG export of what the canvas heatmap draws, and the small annotated matrices.

    Args:
        df: columns ``row``, ``col``, ``value``; optional ``score`` (shown in tooltips when
            ``spec.score_title`` is given) and ``panel`` (one panel per value, in data
            order, when ``spec.panel_title`` is given).
        spec: titles, axis orders, colour scale and layout.

    Returns:
        An ``alt.Chart`` (``alt.LayerChart`` when annotated), or an ``alt.ConcatChart`` of
        them sharing one colour scale when there are panels. The data's columns are named by
        the translated titles (they are the tooltip).

    Raises:
        ValueError: for missing columns or more than :data:`MAX_CHART_ROWS` rows.
    """
    check_rows(df, _heatmap_columns(spec.panel_title, spec.score_title))
    faceted = spec.panel_title is not None
    row_order, col_order = spec.row_order, spec.col_order
    cell_w, cell_h = _cell_px(len(row_order), len(col_order), faceted, spec.width)
    colours = _colour_scale(df["value"].to_numpy(dtype=float), spec)
    lo, hi = colours.domain
    titles = {"row": spec.y_title, "col": spec.x_title, "value": spec.value_title}
    if spec.score_title is not None:
        titles["score"] = spec.score_title
    if faceted:
        titles = {"panel": spec.panel_title, **titles}
    names = display_names(titles)
    shown = display_table(df, names, spec.value_format)
    cells = _CellStyle(
        names=names,
        scale=colours.altair(),
        value_title=spec.legend_title(colours.kind),
        value_format=spec.value_format,
        cell=(cell_w, cell_h),
        order=(tuple(row_order), tuple(col_order)),
        annotate=(
            _annotation_test(names["value"], lo, hi, spec.diverging) if spec.annotate else None
        ),
        axis_scales=(ordered_scale(row_order), ordered_scale(col_order)),
        highlight=_highlight(spec),
    )
    # a single map's title wraps to its cells and y labels (Vega clips it at the chart)
    width_px = None if faceted else cell_w * len(col_order) + TITLE_LABEL_ALLOWANCE_PX
    top = {
        "title": title_params(spec.title, spec.subtitle, width_px),
        "usermeta": FAST_RENDER_META,
        "config": alt.Config(mark=alt.MarkConfig(aria=False)),
    }
    if spec.annotate:
        top["autosize"] = PAD_AUTOSIZE
    if not faceted:
        chart = _heatmap_layer(without_index(shown), cells, spec.x_title, spec.y_title)
        for key, value in top.items():
            setattr(chart, key, value)
        return chart
    # One chart per panel, concatenated in data order (head 1, 2, …, 10): a facet would sort
    # panels as text, or, given a sort list, add a per-cell formula whose result would also
    # show up in the tooltip.
    panels = list(shown.groupby(names["panel"], sort=False))
    n_cols = max(1, min(spec.columns, len(panels)))
    last_row = (len(panels) - 1) // n_cols
    parts = []
    for i, (name, part) in enumerate(panels):
        panel = _heatmap_layer(
            without_index(part.copy()),
            cells,
            spec.x_title if i // n_cols == last_row else None,
            spec.y_title if i % n_cols == 0 else None,
        )
        panel.title = alt.TitleParams(str(name), fontSize=FONT_SIZE, fontWeight="bold")
        parts.append(panel)
    return alt.ConcatChart(
        concat=parts,
        columns=n_cols,
        resolve=alt.Resolve(scale=alt.ScaleResolveMap(color="shared")),
        **top,
    )


def _panel_stack(values: np.ndarray, spec: HeatmapSpec, what: str) -> np.ndarray:
    """``values`` as a (P, R, C) float array whose R and C match the spec's axis orders.

    Raises:
        ValueError: for another shape, repeated labels or more than MAX_CHART_ROWS cells.
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
    if stack.size > MAX_CHART_ROWS:
        raise ValueError(
            f"heatmap has {stack.size} cells, over the limit of {MAX_CHART_ROWS}; pool it first"
        )
    return stack


def heatmap_canvas_spec(
    values: np.ndarray,
    spec: HeatmapSpec,
    *,
    scores: np.ndarray | None = None,
    panels: Sequence[str] | None = None,
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

    Returns:
        A JSON-ready dict: titles, ``rows``/``cols``/``panels`` labels in order, the colour
        scale (domain, type and the scheme's colour stops), cell size in pixels, and
        ``values`` (and ``scores``) as base64 float32 arrays of shape (P, R, C) in row-major
        order.

    Raises:
        ValueError: for shapes that do not match the axis orders or each other, repeated
            labels, more than :data:`MAX_CHART_ROWS` cells, or scores without a title.
    """
    stack = _panel_stack(values, spec, "values")  # (P, R, C)
    score_stack = None
    if scores is not None or spec.score_title is not None:
        if scores is None or spec.score_title is None:
            raise ValueError("scores and spec.score_title must be given together")
        score_stack = _panel_stack(scores, spec, "scores")
        if score_stack.shape != stack.shape:
            raise ValueError(f"scores shape {score_stack.shape} != values shape {stack.shape}")
    names = [""] if panels is None else [str(p) for p in panels]
    if len(names) != stack.shape[0]:
        raise ValueError(f"{len(names)} panel names for {stack.shape[0]} panels")
    faceted = spec.panel_title is not None
    cell_w, cell_h = _cell_px(len(spec.row_order), len(spec.col_order), faceted, spec.width)
    colours = _colour_scale(stack, spec)
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
        "panel_title": spec.panel_title,
        "rows": [str(label) for label in spec.row_order],
        "cols": [str(label) for label in spec.col_order],
        "panels": names,
        "values": _float32_base64(stack),
        "scores": None if score_stack is None else _float32_base64(score_stack),
        "scale": colours.canvas(),
        "cell": [cell_w, cell_h],
        "columns": max(1, min(spec.columns, len(names))),
        "label_limit": LABEL_LIMIT_PX,
        # the tooltip shows one more decimal than a ".Nf" format, as the Altair heatmap does
        "value_format": {"kind": kind, "digits": digits + 1 if kind == "f" else digits},
    }


def _float32_base64(stack: np.ndarray) -> str:
    """A (P, R, C) array as base64 of its little-endian float32 bytes, row-major (what a
    JavaScript Float32Array reads)."""
    return base64.b64encode(np.ascontiguousarray(stack, dtype="<f4").tobytes()).decode("ascii")


@dataclass(frozen=True)
class _CellStyle:
    """What every panel of one heatmap shares: field names, colour scale, cell size, order."""

    names: dict[str, str]
    scale: alt.Scale
    value_title: str
    value_format: str
    cell: tuple[int, int]
    order: tuple[tuple[str, ...], tuple[str, ...]]
    annotate: str | None
    axis_scales: tuple[alt.Scale, alt.Scale]
    highlight: tuple[str, str] | None = None


def _highlight(spec: HeatmapSpec) -> tuple[str, str] | None:
    """The spec's outlined cell, checked against its axes.

    Raises:
        ValueError: for a row or column label that is not on the axes.
    """
    if spec.highlight is None:
        return None
    row, col = (str(label) for label in spec.highlight)
    if row not in spec.row_order or col not in spec.col_order:
        raise ValueError(
            f"highlighted cell {spec.highlight!r} is not on the axes "
            f"{list(spec.row_order)} x {list(spec.col_order)}"
        )
    return row, col


def _outline_layer(cells: _CellStyle, position: dict) -> alt.Chart:
    """One unfilled rect around the highlighted cell, on the same axes as the cells."""
    row, col = cells.highlight
    one = pd.DataFrame({cells.names["row"]: [row], cells.names["col"]: [col]})
    mark = alt.MarkDef(type="rect", fill=None, stroke=CHOSEN_STROKE, strokeWidth=OUTLINE_PX)
    return alt.Chart(one, mark=mark, encoding=alt.FacetedEncoding(**position))


def _annotation_test(value_name: str, lo: float, hi: float, diverging: bool) -> str:
    """Vega expression that is true where a cell is dark enough to need white text."""
    value = f"datum[{json.dumps(value_name, ensure_ascii=False)}]"
    if diverging:
        return f"abs({value}) > {abs(hi) / 2}"
    return f"{value} > {(lo + hi) / 2}"


def _annotation_text(value_field: str, value_format: str) -> dict:
    """The text of an annotated cell, as a Vega expression: ``value_format``, with one
    decimal fewer for values of magnitude 10 or more (``-10.43`` is as wide as two narrow
    cells' ``-0.45``) when the format is ``.Nf`` with N >= 1."""
    value = f"datum[{json.dumps(value_field, ensure_ascii=False)}]"
    plain = f"format({value}, {json.dumps(value_format)})"
    match = FORMAT_PRECISION.search(value_format)
    if match is None or match.group(2) != "f" or int(match.group(1)) < 1:
        return {"expr": plain}
    shorter = value_format[: match.start()] + f".{int(match.group(1)) - 1}f"
    wide = f"format({value}, {json.dumps(shorter)})"
    return {"expr": f"abs({value}) >= {WIDE_VALUE} ? {wide} : {plain}"}


def _heatmap_layer(
    shown: pd.DataFrame, cells: _CellStyle, x_title: str | None, y_title: str | None
) -> alt.Chart:
    """Rect marks (plus value labels when annotating) for one panel of a heatmap.

    A panel given no ``x_title`` (``y_title``) also draws no x (y) tick labels: inside a grid
    only the bottom row and the left column carry them, as in a facet.

    The tooltip is the cell's row itself, its columns named by the translated titles:
    per-field tooltips would make Vega evaluate a formatted object for every cell on every
    repaint (about 50 ms for 16k cells in Streamlit's expression interpreter).

    A rect fills its band, whatever size the chart is drawn at: a constant mark size is right
    only at the size the builder chose, and a chart fitted to a narrower box (Streamlit's
    default ``autosize``) then painted each 44 px rect over its 14 px band's neighbours, the
    colours a row away from their printed numbers.
    """
    names, (cell_w, cell_h), (row_order, col_order) = cells.names, cells.cell, cells.order
    x_labels = len(col_order) <= MAX_TICK_LABELS and x_title is not None
    y_labels = len(row_order) <= MAX_TICK_LABELS and y_title is not None
    position = {
        "x": alt.X(
            field=field_name(names["col"]),
            type="nominal",
            scale=cells.axis_scales[1],
            title=x_title,
            axis=alt.Axis(
                labelAngle=-60, labelLimit=LABEL_LIMIT_PX, labels=x_labels, ticks=x_labels
            ),
        ),
        "y": alt.Y(
            field=field_name(names["row"]),
            type="nominal",
            scale=cells.axis_scales[0],
            title=y_title,
            axis=alt.Axis(labelLimit=LABEL_LIMIT_PX, labels=y_labels, ticks=y_labels),
        ),
    }
    value_field = field_name(names["value"])
    size = {"width": cell_w * len(col_order), "height": cell_h * len(row_order)}
    # built with constructors, not .mark_*/.encode/.properties: each of those deep-copies
    # the chart, 64-label domains included
    rect_mark = alt.MarkDef(type="rect", tooltip=alt.TooltipContent("data"))
    if cells.annotate is None:
        color = alt.Color(
            field=value_field, type="quantitative", scale=cells.scale, title=cells.value_title
        )
        if cells.highlight is None:
            return alt.Chart(
                shown, mark=rect_mark, encoding=alt.FacetedEncoding(**position, color=color), **size
            )
        return alt.LayerChart(
            data=shown,
            layer=[
                alt.Chart(mark=rect_mark, encoding=alt.FacetedEncoding(**position, color=color)),
                _outline_layer(cells, position),
            ],
            **size,
        )
    # an annotated matrix sits in a narrow column: its colour bar goes underneath, so the
    # cells get the width, and values of 10 or more lose a decimal to stay inside their cell
    color = alt.Color(
        field=value_field,
        type="quantitative",
        scale=cells.scale,
        title=cells.value_title,
        legend=alt.Legend(
            orient="bottom", direction="horizontal", gradientLength=ANNOTATED_LEGEND_PX
        ),
    )
    text_mark = alt.MarkDef(
        type="text",
        fontSize=ANNOTATION_FONT_PX,
        tooltip=alt.TooltipContent("data"),
        text=_annotation_text(value_field, cells.value_format),
    )
    text = alt.FacetedEncoding(
        **position,
        color=alt.condition(cells.annotate, alt.value("white"), alt.value("black")),
    )
    layers = [
        alt.Chart(mark=rect_mark, encoding=alt.FacetedEncoding(**position, color=color)),
        alt.Chart(mark=text_mark, encoding=text),
    ]
    if cells.highlight is not None:
        layers.append(_outline_layer(cells, position))
    return alt.LayerChart(data=shown, layer=layers, **size)
