"""DataFrame -> Altair chart builders, and the data of the canvas heatmap (no Streamlit, no
torch).

Every title, axis label and tooltip title is passed in already translated. Heatmaps refuse
tables over :data:`MAX_CHART_ROWS` rows: the data layer pools big matrices first.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd
from altair.utils.schemapi import debug_mode

MAX_CHART_ROWS = 128 * 128
SEQUENTIAL_SCHEME = "yellowgreenblue"
DIVERGING_SCHEME = "redblue"
# Vega's colour schemes as evenly spaced RGB stops, interpolated linearly in between (how Vega
# samples them); the canvas heatmap draws with these so it matches the Altair heatmaps, and
# tests/dashboard/test_canvas_spec.py checks them against vl-convert's rendering.
SCHEME_STOPS = {
    "yellowgreenblue": "eff9bddbf1b4bde5b594d5b969c5be45b4c22c9ec02182b82163aa23479c1c3185",
    "redblue": "8c0d25bf363adf745ef4ae91fbdbc9f2efeed2e5ef9dcae15da2cb2f78b3134b85",
}
PANEL_WIDTH = 220
SINGLE_WIDTH = 520
MIN_CELL_PX = 3
MAX_CELL_PX = 44
LABEL_LIMIT_PX = 90
MAX_TICK_LABELS = 40
FONT_SIZE = 13


def _check_rows(df: pd.DataFrame, needed: Sequence[str]) -> None:
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise ValueError(f"chart data lacks columns {missing}; has {list(df.columns)}")
    if len(df) > MAX_CHART_ROWS:
        raise ValueError(
            f"chart data has {len(df)} rows, over the limit of {MAX_CHART_ROWS}; pool it first"
        )


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
        lo, hi = _default_domain(values, spec.diverging)
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
    _check_rows(df, _heatmap_columns(spec.panel_title, spec.score_title))
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
    names = _display_names(titles)
    shown = _display_table(df, names, spec.value_format)
    cells = _CellStyle(
        names=names,
        scale=colours.altair(),
        value_title=spec.value_title,
        value_format=spec.value_format,
        cell=(cell_w, cell_h),
        order=(tuple(row_order), tuple(col_order)),
        annotate=(
            _annotation_test(names["value"], lo, hi, spec.diverging) if spec.annotate else None
        ),
        axis_scales=(_ordered(row_order), _ordered(col_order)),
    )
    top = {
        "title": _title(spec.title, spec.subtitle),
        "usermeta": FAST_RENDER_META,
        "config": alt.Config(mark=alt.MarkConfig(aria=False)),
    }
    if not faceted:
        chart = _heatmap_layer(_without_index(shown), cells, spec.x_title, spec.y_title)
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
            _without_index(part.copy()),
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
    precision = _FORMAT_PRECISION.search(spec.value_format)
    kind, digits = ("f", 3) if precision is None else (precision.group(2), int(precision.group(1)))
    return {
        "title": spec.title,
        "subtitle": spec.subtitle or "",
        "x_title": spec.x_title,
        "y_title": spec.y_title,
        "value_title": spec.value_title,
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


def _annotation_test(value_name: str, lo: float, hi: float, diverging: bool) -> str:
    """Vega expression that is true where a cell is dark enough to need white text."""
    value = f"datum[{json.dumps(value_name, ensure_ascii=False)}]"
    if diverging:
        return f"abs({value}) > {abs(hi) / 2}"
    return f"{value} > {(lo + hi) / 2}"


def _heatmap_layer(
    shown: pd.DataFrame, cells: _CellStyle, x_title: str | None, y_title: str | None
) -> alt.Chart:
    """Rect marks (plus value labels when annotating) for one panel of a heatmap.

    A panel given no ``x_title`` (``y_title``) also draws no x (y) tick labels: inside a grid
    only the bottom row and the left column carry them, as in a facet.

    The tooltip is the cell's row itself, its columns named by the translated titles:
    per-field tooltips would make Vega evaluate a formatted object for every cell on every
    repaint (about 50 ms for 16k cells in Streamlit's expression interpreter). Width and
    height are constants for the same reason (no ``bandwidth()`` call per cell).
    """
    names, (cell_w, cell_h), (row_order, col_order) = cells.names, cells.cell, cells.order
    x_labels = len(col_order) <= MAX_TICK_LABELS and x_title is not None
    y_labels = len(row_order) <= MAX_TICK_LABELS and y_title is not None
    position = {
        "x": alt.X(
            field=_field(names["col"]),
            type="nominal",
            scale=cells.axis_scales[1],
            title=x_title,
            axis=alt.Axis(
                labelAngle=-60, labelLimit=LABEL_LIMIT_PX, labels=x_labels, ticks=x_labels
            ),
        ),
        "y": alt.Y(
            field=_field(names["row"]),
            type="nominal",
            scale=cells.axis_scales[0],
            title=y_title,
            axis=alt.Axis(labelLimit=LABEL_LIMIT_PX, labels=y_labels, ticks=y_labels),
        ),
    }
    value_field = _field(names["value"])
    size = {"width": cell_w * len(col_order), "height": cell_h * len(row_order)}
    # built with constructors, not .mark_*/.encode/.properties: each of those deep-copies
    # the chart, 64-label domains included
    rect_mark = alt.MarkDef(
        type="rect", tooltip=alt.TooltipContent("data"), width=cell_w, height=cell_h
    )
    color = alt.Color(
        field=value_field, type="quantitative", scale=cells.scale, title=cells.value_title
    )
    if cells.annotate is None:
        return alt.Chart(
            shown, mark=rect_mark, encoding=alt.FacetedEncoding(**position, color=color), **size
        )
    text_mark = alt.MarkDef(type="text", fontSize=FONT_SIZE - 2, tooltip=alt.TooltipContent("data"))
    text = alt.FacetedEncoding(
        **position,
        text=alt.Text(field=value_field, type="quantitative", format=cells.value_format),
        color=alt.condition(cells.annotate, alt.value("white"), alt.value("black")),
    )
    return alt.LayerChart(
        data=shown,
        layer=[
            alt.Chart(mark=rect_mark, encoding=alt.FacetedEncoding(**position, color=color)),
            alt.Chart(mark=text_mark, encoding=text),
        ],
        **size,
    )


_FORMAT_PRECISION = re.compile(r"\.(\d+)([efg])$")


def _display_names(titles: dict[str, str]) -> dict[str, str]:
    """Map source columns to unique, non-empty display names (their translated titles)."""
    names: dict[str, str] = {}
    for column, title in titles.items():
        name = title.strip() or column
        base, n = name, 2
        while name in names.values():
            name, n = f"{base} ({n})", n + 1
        names[column] = name
    return names


def _field(name: str) -> str:
    """``name`` escaped as a Vega-Lite field (``.``, ``[`` and ``]`` mean nesting there)."""
    return re.sub(r"([\\.\[\]])", r"\\\1", name)


def _display_table(df: pd.DataFrame, names: dict[str, str], value_format: str) -> pd.DataFrame:
    """The columns a heatmap shows, renamed to ``names``; numbers rounded as displayed.

    Rounding follows ``value_format`` (one more decimal for ``.Nf`` so colours stay exact to
    the eye; N significant digits for ``.Ne``/``.Ng``), because the tooltip shows the raw
    cell values. Unused columns (e.g. ``row_index``) are left out: the browser decodes
    every column of every cell.
    """
    shown = df[list(names)].set_axis(list(names.values()), axis=1)
    for column in ("value", "score"):
        if column in names:
            shown[names[column]] = _rounded(df[column].to_numpy(dtype=float), value_format)
    return shown


def _without_index(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with a blank one-category index: Streamlit adds a numeric index to every
    chart datum as ``(index)``, which a whole-row tooltip would then show."""
    frame.index = pd.CategoricalIndex(
        pd.Categorical.from_codes(np.zeros(len(frame), dtype=np.int8), categories=[""])
    )
    return frame


def _rounded(values: np.ndarray, value_format: str) -> np.ndarray:
    """``values`` rounded to the precision of a d3 format such as ``.3f`` or ``.2e``."""
    match = _FORMAT_PRECISION.search(value_format)
    if match is None:
        return values
    digits, kind = int(match.group(1)), match.group(2)
    if kind == "f":
        return np.round(values, digits + 1)
    significant = digits + 1 if kind == "e" else max(digits, 1)
    return np.array([float(f"{v:.{significant - 1}e}") for v in values.tolist()])


def _ordered(labels: Sequence[str]) -> alt.Scale:
    """A nominal scale whose domain is ``labels`` in order (built without Altair's check at
    construction, which costs about 4 ms for 64 labels; ``to_dict`` still validates the spec).

    Ordering with ``sort=[...]`` instead makes Vega-Lite add a per-row calculate of nested
    ``datum.col === '…' ? i : …`` tests, which Streamlit's CSP-safe expression interpreter
    walks for every cell: about 0.1 s per repaint for a 64-token, 4-head grid.
    """
    with debug_mode(False):
        return alt.Scale(domain=list(labels))


def _header() -> alt.Header:
    return alt.Header(labelFontSize=FONT_SIZE, labelFontWeight="bold")


def _default_domain(values: np.ndarray, diverging: bool) -> tuple[float, float]:
    """(min, max) of the finite values (0 and 1 when there are none); lo at most 0 unless
    diverging."""
    finite = np.asarray(values, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if not diverging:
        lo = min(lo, 0.0)
    return lo, hi


# Heatmaps draw on a canvas, without per-mark ARIA nodes: a heatmap has thousands of cells,
# and as SVG each becomes a DOM node the browser must build and lay out on every repaint.
FAST_RENDER_META = {"embedOptions": {"renderer": "canvas"}}


def _title(title: str, subtitle: str | None) -> alt.TitleParams:
    return alt.TitleParams(title, subtitle=subtitle or "", fontSize=FONT_SIZE + 3, anchor="start")


def _finish(chart: alt.Chart, title: str, subtitle: str | None) -> alt.Chart:
    return chart.properties(title=_title(title, subtitle))


def line_chart(
    df: pd.DataFrame,
    *,
    x: str,
    y: str,
    title: str,
    x_title: str,
    y_title: str,
    color: str | None = None,
    color_title: str | None = None,
    log_x: bool = False,
    log_y: bool = False,
    points: bool = True,
    height: int = 300,
) -> alt.Chart:
    """A line chart with points and tooltips.

    Args:
        df: tidy table with numeric ``x`` and ``y`` columns and optional ``color`` column.
        title, x_title, y_title, color_title: translated labels.
        log_x, log_y: logarithmic axes.
        points: draw a point per row.
        height: pixels.

    Returns:
        An ``alt.Chart``.

    Raises:
        ValueError: for missing columns or too many rows.
    """
    _check_rows(df, [x, y] + ([color] if color else []))
    enc = {
        "x": alt.X(f"{x}:Q", title=x_title, scale=alt.Scale(type="log" if log_x else "linear")),
        "y": alt.Y(f"{y}:Q", title=y_title, scale=alt.Scale(type="log" if log_y else "linear")),
        "tooltip": [alt.Tooltip(f"{x}:Q", title=x_title), alt.Tooltip(f"{y}:Q", title=y_title)],
    }
    if color:
        enc["color"] = alt.Color(f"{color}:N", title=color_title or color)
        enc["tooltip"].insert(0, alt.Tooltip(f"{color}:N", title=color_title or color))
    chart = alt.Chart(df).mark_line(point=points).encode(**enc).properties(height=height)
    return _finish(chart, title, None)


def bar_chart(
    df: pd.DataFrame,
    *,
    x: str,
    y: str,
    title: str,
    x_title: str,
    y_title: str,
    sort: Sequence[str] | None = None,
    value_format: str = ".3f",
    height: int = 260,
) -> alt.Chart:
    """A vertical bar chart of a categorical ``x`` against a numeric ``y``, with tooltips.

    Args:
        df: table with columns ``x`` (categories) and ``y`` (numbers).
        title, x_title, y_title: translated labels.
        sort: category order (default: as in ``df``).
        value_format: d3 format of the value in tooltips.
        height: pixels.

    Returns:
        An ``alt.Chart``.

    Raises:
        ValueError: for missing columns or too many rows.
    """
    _check_rows(df, [x, y])
    order = list(sort) if sort is not None else list(dict.fromkeys(df[x]))
    chart = (
        alt.Chart(df)
        .mark_bar()
        .encode(
            x=alt.X(f"{x}:N", sort=order, title=x_title, axis=alt.Axis(labelAngle=-30)),
            y=alt.Y(f"{y}:Q", title=y_title),
            tooltip=[
                alt.Tooltip(f"{x}:N", title=x_title),
                alt.Tooltip(f"{y}:Q", title=y_title, format=value_format),
            ],
        )
        # fit-x: the height is the plot's own, so long rotated labels and a long y title
        # cannot squeeze the bars until the title is pushed out of the chart (Streamlit's
        # default "fit" counts them inside the height)
        .properties(height=height, autosize=alt.AutoSizeParams(type="fit-x", contains="padding"))
    )
    return _finish(chart, title, None)


# --- lab pages ---

SHORT_AXIS = 4
SHORT_LABEL = 3


def _crowded(order: Sequence[str]) -> bool:
    """Whether category labels need tilting: many of them, and not all short."""
    return len(order) > SHORT_AXIS and max(len(str(o)) for o in order) > SHORT_LABEL


def grouped_bar_chart(
    df: pd.DataFrame,
    *,
    x: str,
    y: str,
    color: str,
    title: str,
    x_title: str,
    y_title: str,
    color_title: str,
    facet: str | None = None,
    facet_columns: int = 4,
    log_y: bool = False,
    sort: Sequence[str] | None = None,
    color_sort: Sequence[str] | None = None,
    value_format: str = ".4g",
    width: int = 220,
    height: int = 240,
) -> alt.Chart:
    """Bars of ``y`` per category ``x``, side by side per ``color`` group, optionally faceted.

    Args:
        df: tidy table with categorical ``x``, ``color`` (and ``facet``) and numeric ``y``.
        title, x_title, y_title, color_title: translated labels.
        facet: optional column that splits the chart into panels (titles come from values).
        facet_columns: panels per row.
        log_y: logarithmic value axis (for norms spanning orders of magnitude).
        sort, color_sort: category orders (default: as in ``df``).
        value_format: d3 format of the value in tooltips.
        width, height: pixels of one panel.

    Returns:
        An ``alt.Chart`` (faceted when ``facet`` is given).

    Raises:
        ValueError: for missing columns or too many rows.
    """
    _check_rows(df, [x, y, color] + ([facet] if facet else []))
    order = list(sort) if sort is not None else list(dict.fromkeys(df[x]))
    groups = list(color_sort) if color_sort is not None else list(dict.fromkeys(df[color]))
    tooltip = [
        alt.Tooltip(f"{x}:N", title=x_title),
        alt.Tooltip(f"{color}:N", title=color_title),
        alt.Tooltip(f"{y}:Q", title=y_title, format=value_format),
    ]
    if facet:
        tooltip.insert(0, alt.Tooltip(f"{facet}:N"))
    encoding = {
        "x": alt.X(
            f"{x}:N",
            sort=order,
            title=x_title,
            axis=alt.Axis(labelAngle=-35 if _crowded(order) else 0, labelLimit=120),
        ),
        "xOffset": alt.XOffset(f"{color}:N", sort=groups),
        "y": alt.Y(f"{y}:Q", title=y_title, scale=alt.Scale(type="log" if log_y else "linear")),
        "color": alt.Color(f"{color}:N", sort=groups, title=color_title),
        "tooltip": tooltip,
    }
    if log_y:
        # a log axis has no 0: bars start at the decade below the smallest value instead
        positive = df.loc[df[y] > 0, y]
        floor = 10.0 ** math.floor(math.log10(float(positive.min()))) if len(positive) else 1.0
        encoding["y2"] = alt.datum(floor)
    chart = alt.Chart(df).mark_bar().encode(**encoding).properties(width=width, height=height)
    if facet:
        panels = list(dict.fromkeys(df[facet]))
        chart = chart.facet(
            facet=alt.Facet(f"{facet}:N", title=None, sort=panels, header=_header()),
            columns=facet_columns,
        )
    return _finish(chart, title, None)


def layered_line_chart(
    df: pd.DataFrame,
    *,
    x: str,
    y: str,
    color: str,
    title: str,
    x_title: str,
    y_title: str,
    color_title: str,
    dashed: Sequence[str] = (),
    color_sort: Sequence[str] | None = None,
    log_x: bool = False,
    log_y: bool = False,
    value_format: str = ".4g",
    height: int = 320,
) -> alt.Chart:
    """Lines of ``y`` against numeric ``x``, one per ``color`` series; series named in
    ``dashed`` (e.g. a theory curve) are drawn dashed.

    Args:
        df: tidy table with numeric ``x``, ``y`` and a categorical ``color`` column.
        title, x_title, y_title, color_title: translated labels.
        dashed: series drawn as dashed lines.
        color_sort: series order in the legend (default: as in ``df``).
        log_x, log_y: logarithmic axes.
        value_format: d3 format of the value in tooltips.
        height: pixels.

    Returns:
        An ``alt.Chart``.

    Raises:
        ValueError: for missing columns or too many rows.
    """
    _check_rows(df, [x, y, color])
    groups = list(color_sort) if color_sort is not None else list(dict.fromkeys(df[color]))
    dash = alt.condition(
        alt.FieldOneOfPredicate(field=color, oneOf=list(dashed) or ["\u0000"]),
        alt.value([6, 4]),
        alt.value([1, 0]),
    )
    x_values = sorted({float(v) for v in df[x]})
    # a log axis labels exactly the measured x values (powers of two read badly as 10, 100)
    x_axis = alt.Axis(values=x_values, format="~g") if log_x and len(x_values) <= 12 else alt.Axis()
    chart = (
        alt.Chart(df)
        .mark_line(point=True)
        .encode(
            x=alt.X(
                f"{x}:Q",
                title=x_title,
                scale=alt.Scale(type="log" if log_x else "linear", nice=not log_x),
                axis=x_axis,
            ),
            y=alt.Y(f"{y}:Q", title=y_title, scale=alt.Scale(type="log" if log_y else "linear")),
            color=alt.Color(
                f"{color}:N",
                sort=groups,
                title=color_title,
                legend=alt.Legend(
                    orient="bottom", direction="horizontal", columns=2, labelLimit=220
                ),
            ),
            strokeDash=dash,
            tooltip=[
                alt.Tooltip(f"{color}:N", title=color_title),
                alt.Tooltip(f"{x}:Q", title=x_title),
                alt.Tooltip(f"{y}:Q", title=y_title, format=value_format),
            ],
        )
        .properties(height=height)
    )
    return _finish(chart, title, None)


# --- real model ---

MODEL_VIEW_MAX_CELLS = 72 * 32 * 32
WEIGHT_MILLI = 1000
MODEL_VIEW_RANGE = ("#FFFFFF", "#08306B")  # white = no attention, dark blue = all of it
MODEL_PANEL_PX = 62
HEAD_VIEW_ROW_PX = 22
HEAD_VIEW_WIDTH = 420
HEAD_VIEW_MAX_STROKE = 6.0
HEAD_VIEW_COLOR = "#0B3D91"
HEAD_VIEW_MUTED = "#8A94A6"
HEAD_VIEW_LEFT, HEAD_VIEW_RIGHT = 0.0, 1.0
HEAD_VIEW_GAP = 0.06


def model_view_chart(
    grid: pd.DataFrame,
    tokens: pd.DataFrame,
    *,
    title: str,
    subtitle: str | None,
    layer_title: str,
    head_title: str,
    query_title: str,
    key_title: str,
    weight_title: str,
    panel_px: int = MODEL_PANEL_PX,
) -> alt.Chart:
    """Small multiples of every layer's and head's attention map (BertViz's "model view").

    The payload stays small: each row of ``grid`` carries a whole weight row as text of
    thousandths, expanded in the browser (Vega split, flatten, window), and token labels travel
    once, in ``tokens``, joined in the browser by a lookup.

    Args:
        grid: columns ``layer``, ``head``, ``i`` (query) and ``w`` (text: l comma-separated
            weights in thousandths, keys 0..l-1), as made by
            ``dashboard.data.model_grid_frame``.
        tokens: columns ``i`` and ``token`` (label of each position).
        title, subtitle: translated chart title and note (e.g. the token cap).
        layer_title, head_title, query_title, key_title, weight_title: translated labels.
        panel_px: side of one map in pixels.

    Returns:
        An ``alt.Chart`` with one row per layer and one column per head.

    Raises:
        ValueError: for missing columns or more than :data:`MODEL_VIEW_MAX_CELLS` cells.
    """
    missing = [c for c in ("layer", "head", "i", "w") if c not in grid.columns]
    missing += [c for c in ("i", "token") if c not in tokens.columns]
    if missing:
        raise ValueError(f"model view data lacks columns {missing}")
    cells = int(grid["w"].str.count(",").sum()) + len(grid)
    if cells > MODEL_VIEW_MAX_CELLS:
        raise ValueError(f"model view has {cells} cells, over {MODEL_VIEW_MAX_CELLS}")
    token_lookup = tokens.rename(columns={"i": "pos"})
    chart = (
        alt.Chart(grid)
        # w is text ("12,647,…"): Streamlit ships DataFrames as Arrow, and Vega's flatten
        # expands only plain arrays, which split() makes in the browser.
        .transform_calculate(ws="split(datum.w, ',')")
        .transform_flatten(["ws"])
        .transform_window(rank="row_number()", groupby=["layer", "head", "i"])
        .transform_calculate(j="datum.rank - 1", weight=f"toNumber(datum.ws) / {WEIGHT_MILLI}")
        .transform_lookup(
            lookup="i", from_=alt.LookupData(token_lookup, "pos", ["token"]), as_=["query"]
        )
        .transform_lookup(
            lookup="j", from_=alt.LookupData(token_lookup, "pos", ["token"]), as_=["key"]
        )
        .mark_rect()
        .encode(
            x=alt.X("j:O", axis=None),
            y=alt.Y("i:O", axis=None),
            color=alt.Color(
                "weight:Q",
                scale=alt.Scale(range=list(MODEL_VIEW_RANGE), domain=[0.0, 1.0]),
                title=weight_title,
            ),
            tooltip=[
                alt.Tooltip("layer:O", title=layer_title),
                alt.Tooltip("head:O", title=head_title),
                alt.Tooltip("query:N", title=query_title),
                alt.Tooltip("key:N", title=key_title),
                alt.Tooltip("weight:Q", title=weight_title, format=".3f"),
            ],
        )
        .properties(width=panel_px, height=panel_px)
        .facet(
            row=alt.Row("layer:O", title=layer_title, header=_header()),
            column=alt.Column("head:O", title=head_title, header=_header()),
            spacing=4,
        )
    )
    return _finish(chart, title, subtitle)


def head_view_chart(
    lines: pd.DataFrame,
    tokens: pd.DataFrame,
    *,
    selected: int | None,
    title: str,
    subtitle: str | None,
    query_title: str,
    key_title: str,
    weight_title: str,
) -> alt.Chart:
    """Two columns of tokens joined by lines whose width and opacity are the weights.

    Left: the query tokens (who looks); right: the key tokens (who is looked at). The
    selected query's lines are drawn in colour, the others in faint grey (as BertViz's
    head view does when a token is hovered).

    Args:
        lines: columns ``i``, ``j``, ``query``, ``key``, ``weight`` (one row per line).
        tokens: columns ``i`` and ``token``.
        selected: the highlighted query position, or None to colour every line.
        title, subtitle, query_title, key_title, weight_title: translated labels.

    Returns:
        A layered ``alt.Chart``.

    Raises:
        ValueError: for missing columns or more than :data:`MAX_CHART_ROWS` lines.
    """
    _check_rows(lines, ["i", "j", "query", "key", "weight"])
    n = max(len(tokens), 1)
    height = HEAD_VIEW_ROW_PX * n
    y_scale = alt.Scale(domain=[-0.5, n - 0.5], reverse=True, nice=False, zero=False)
    x_scale = alt.Scale(domain=[HEAD_VIEW_LEFT - 0.5, HEAD_VIEW_RIGHT + 0.5], nice=False)
    frame = lines.assign(
        x0=HEAD_VIEW_LEFT + HEAD_VIEW_GAP,
        x1=HEAD_VIEW_RIGHT - HEAD_VIEW_GAP,
        hot=(lines["i"] == selected) if selected is not None else True,
    )
    # Draw the highlighted lines last so they sit on top.
    frame = frame.sort_values(["hot", "weight"]).reset_index(drop=True)
    rules = (
        alt.Chart(frame)
        .mark_rule(strokeCap="round")
        .encode(
            x=alt.X("x0:Q", scale=x_scale, axis=None),
            x2="x1:Q",
            y=alt.Y("i:Q", scale=y_scale, axis=None),
            y2="j:Q",
            strokeWidth=alt.StrokeWidth(
                "weight:Q",
                scale=alt.Scale(domain=[0, 1], range=[0.3, HEAD_VIEW_MAX_STROKE]),
                legend=None,
            ),
            opacity=alt.Opacity(
                "weight:Q", scale=alt.Scale(domain=[0, 1], range=[0.15, 1.0]), legend=None
            ),
            color=alt.condition(
                "datum.hot", alt.value(HEAD_VIEW_COLOR), alt.value(HEAD_VIEW_MUTED)
            ),
            tooltip=[
                alt.Tooltip("query:N", title=query_title),
                alt.Tooltip("key:N", title=key_title),
                alt.Tooltip("weight:Q", title=weight_title, format=".3f"),
            ],
        )
    )
    token_frame = tokens.assign(hot=(tokens["i"] == selected) if selected is not None else False)
    left_base = alt.Chart(token_frame.assign(x=HEAD_VIEW_LEFT)).encode(
        x=alt.X("x:Q", scale=x_scale, axis=None),
        y=alt.Y("i:Q", scale=y_scale, axis=None),
        text="token:N",
    )
    left = left_base.transform_filter("!datum.hot").mark_text(
        align="right", fontSize=FONT_SIZE, dx=-2, color="#111111"
    )
    left_hot = left_base.transform_filter("datum.hot").mark_text(
        align="right", fontSize=FONT_SIZE, dx=-2, color=HEAD_VIEW_COLOR, fontWeight="bold"
    )
    right = (
        alt.Chart(token_frame.assign(x=HEAD_VIEW_RIGHT))
        .mark_text(align="left", fontSize=FONT_SIZE, dx=2)
        .encode(
            x=alt.X("x:Q", scale=x_scale, axis=None),
            y=alt.Y("i:Q", scale=y_scale, axis=None),
            text="token:N",
            color=alt.value("#111111"),
        )
    )
    columns = (
        alt.Chart(
            pd.DataFrame(
                {"x": [HEAD_VIEW_LEFT, HEAD_VIEW_RIGHT], "label": [query_title, key_title]}
            )
        )
        .mark_text(fontSize=FONT_SIZE, fontWeight="bold", dy=-HEAD_VIEW_ROW_PX)
        .encode(
            x=alt.X("x:Q", scale=x_scale, axis=None),
            y=alt.value(0),
            text="label:N",
        )
    )
    chart = alt.layer(rules, left, left_hot, right, columns).properties(
        width=HEAD_VIEW_WIDTH, height=height, view=alt.ViewBackground(stroke=None)
    )
    return _finish(chart, title, subtitle)


def token_weights_chart(
    weights: pd.DataFrame,
    *,
    title: str,
    token_title: str,
    weight_title: str,
    width: int = 300,
) -> alt.Chart:
    """Horizontal bars of one query's weights over the key tokens, in sentence order.

    Rows have the head view's spacing, so the bars line up with its key column.

    Args:
        weights: columns ``key`` (unique token labels, top to bottom) and ``weight``.
        title, token_title, weight_title: translated labels.
        width: pixels of the bar area.

    Returns:
        An ``alt.Chart``.

    Raises:
        ValueError: for missing columns or too many rows.
    """
    _check_rows(weights, ["key", "weight"])
    order = list(weights["key"])
    chart = (
        alt.Chart(weights)
        .mark_bar(color=HEAD_VIEW_COLOR)
        .encode(
            y=alt.Y("key:N", sort=order, title=token_title, axis=alt.Axis(labelLimit=140)),
            x=alt.X("weight:Q", title=weight_title, scale=alt.Scale(domain=[0, 1])),
            tooltip=[
                alt.Tooltip("key:N", title=token_title),
                alt.Tooltip("weight:Q", title=weight_title, format=".3f"),
            ],
        )
        .properties(width=width, height=HEAD_VIEW_ROW_PX * max(len(order), 1))
    )
    return _finish(chart, title, None)
