"""The Altair heatmap: rect marks of a long table, the twin of the canvas heatmap for PNG/SVG
exports and the small annotated matrices (values printed in their cells, an outlined cell),
with the look of a :class:`dashboard.charts.heatmaps.HeatmapSpec`. No Streamlit, no torch."""

from __future__ import annotations

import json
from dataclasses import dataclass

import altair as alt
import pandas as pd

from dashboard.charts.base import (
    CHOSEN_STROKE,
    FAST_RENDER_META,
    FONT_SIZE,
    FORMAT_PRECISION,
    LABEL_LIMIT_PX,
    MAX_TICK_LABELS,
    check_rows,
    display_names,
    display_table,
    field_name,
    ordered_scale,
    title_params,
    without_index,
)
from dashboard.charts.heatmaps import HeatmapSpec, cell_px, colour_scale, heatmap_columns

TITLE_LABEL_ALLOWANCE_PX = 40  # a single map's title may also span its row labels
# An annotated matrix is drawn at the cell size its builder chose (its printed values need
# it): Streamlit's default autosize ("fit") would squeeze the cells, title, labels and legend
# into the plot's own width and height. A plain heatmap keeps Streamlit's fit to its column.
PAD_AUTOSIZE = alt.AutoSizeParams(type="pad", contains="padding")
ANNOTATED_LEGEND_PX = 120  # the colour bar under an annotated matrix
ANNOTATION_FONT_PX = FONT_SIZE - 3  # "−0.45" in 28 px: a gap in a 32 px cell
OUTLINE_PX = 2.5  # the highlighted cell's outline, as the head grid's chosen head
WIDE_VALUE = 9.995  # from here on a ".2f" value prints as 10.00: five digits and a sign


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
    check_rows(df, heatmap_columns(spec.panel_title, spec.score_title))
    faceted = spec.panel_title is not None
    row_order, col_order = spec.row_order, spec.col_order
    cell_w, cell_h = cell_px(len(row_order), len(col_order), faceted, spec.width)
    colours = colour_scale(df["value"].to_numpy(dtype=float), spec)
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
        missing_text=spec.missing_text,
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
    missing_text: str | None = None


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


def _annotation_text(value_field: str, value_format: str, missing: str | None = None) -> dict:
    """The text of an annotated cell, as a Vega expression: ``value_format``, with one
    decimal fewer for values of magnitude 10 or more (``-10.43`` is as wide as two narrow
    cells' ``-0.45``) when the format is ``.Nf`` with N >= 1; ``missing`` (when given) in a
    cell whose value is missing or not finite."""
    value = f"datum[{json.dumps(value_field, ensure_ascii=False)}]"
    plain = f"format({value}, {json.dumps(value_format)})"
    match = FORMAT_PRECISION.search(value_format)
    if match is not None and match.group(2) == "f" and int(match.group(1)) >= 1:
        shorter = value_format[: match.start()] + f".{int(match.group(1)) - 1}f"
        wide = f"format({value}, {json.dumps(shorter)})"
        plain = f"abs({value}) >= {WIDE_VALUE} ? {wide} : {plain}"
    if missing is None:
        return {"expr": plain}
    finite = f"isValid({value}) && isFinite({value})"
    return {"expr": f"{finite} ? ({plain}) : {json.dumps(missing, ensure_ascii=False)}"}


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
        text=_annotation_text(value_field, cells.value_format, cells.missing_text),
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
