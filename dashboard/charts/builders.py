"""DataFrame -> Altair line and bar chart builders (no Streamlit, no torch); heatmaps are in
:mod:`dashboard.charts.heatmaps`, the real model's charts in :mod:`dashboard.charts.model_views`
(pages reach all three as ``charts.<builder>``, see :mod:`dashboard.charts`).

Every title, axis label and tooltip title is passed in already translated. Heatmaps refuse
tables over :data:`MAX_CHART_ROWS` rows: the data layer pools big matrices first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import altair as alt
import pandas as pd

from dashboard.charts.base import check_rows, finish, header, header_config


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
    check_rows(df, [x, y] + ([color] if color else []))
    enc = {
        "x": alt.X(f"{x}:Q", title=x_title, scale=alt.Scale(type="log" if log_x else "linear")),
        "y": alt.Y(f"{y}:Q", title=y_title, scale=alt.Scale(type="log" if log_y else "linear")),
        "tooltip": [alt.Tooltip(f"{x}:Q", title=x_title), alt.Tooltip(f"{y}:Q", title=y_title)],
    }
    if color:
        enc["color"] = alt.Color(f"{color}:N", title=color_title or color)
        enc["tooltip"].insert(0, alt.Tooltip(f"{color}:N", title=color_title or color))
    chart = alt.Chart(df).mark_line(point=points).encode(**enc).properties(height=height)
    return finish(chart, title, None)


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
    check_rows(df, [x, y])
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
    return finish(chart, title, None)


# --- lab pages ---

MIN_DECADES = 2  # a log axis spanning this many decades is labelled at powers of ten only
DECADE_FORMAT = "~e"  # 1e-7, 1e-6, … 1e+1: one notation, never 0.000001 beside 1e-7


def log_axis(values: pd.Series, **options) -> alt.Axis:
    """A log axis for ``values``: labelled at each power of ten in one notation (d3's
    ``~g`` would write 0.000001 beside 1e-7) when the positive values span at least
    :data:`MIN_DECADES` decades, else Vega's own ticks.

    Args:
        values: the axis's data. **options: other ``alt.Axis`` properties.

    Returns:
        An ``alt.Axis``.
    """
    positive = values[values > 0]
    if len(positive) == 0:
        return alt.Axis(**options)
    low = math.floor(math.log10(float(positive.min())))
    high = math.ceil(math.log10(float(positive.max())))
    if high - low < MIN_DECADES:
        return alt.Axis(**options)
    decades = [10.0**k for k in range(low, high + 1)]
    return alt.Axis(values=decades, format=DECADE_FORMAT, **options)


SHORT_AXIS = 4
SHORT_LABEL = 3
LEGEND_LABEL_PX = 220


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
    check_rows(df, [x, y, color] + ([facet] if facet else []))
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
        "y": alt.Y(
            f"{y}:Q",
            title=y_title,
            scale=alt.Scale(type="log" if log_y else "linear"),
            axis=log_axis(df[y]) if log_y else alt.Axis(),
        ),
        # the legend above the panels: beside them it needs width a page's column lacks
        "color": alt.Color(
            f"{color}:N",
            sort=groups,
            title=color_title,
            legend=alt.Legend(orient="top", direction="horizontal", labelLimit=LEGEND_LABEL_PX),
        ),
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
            facet=alt.Facet(f"{facet}:N", title=None, sort=panels, header=header()),
            columns=facet_columns,
        )
        return header_config(finish(chart, title, None))
    return finish(chart, title, None)


LINE_PX = 3  # a measured series
DASHED_PX = 1.5  # a dashed one (a theory curve) drawn over it


def line_x_axis(x_values: Sequence[float], log_x: bool) -> alt.Axis:
    """The x axis of a line chart: on a log axis with few values, exactly the measured values
    (powers of two read badly as 10, 100); on whole-number x (positions, steps, sizes), whole
    ticks only (never 1.2, 1.4 on a short axis)."""
    if log_x:
        return alt.Axis(values=list(x_values), format="~g") if len(x_values) <= 12 else alt.Axis()
    if all(float(v).is_integer() for v in x_values):
        return alt.Axis(tickMinStep=1, format="d")
    return alt.Axis()


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
    legend_columns: int = 2,
    show_legend: bool = True,
) -> alt.Chart:
    """Lines of ``y`` against numeric ``x``, one per ``color`` series; series named in
    ``dashed`` (e.g. a theory curve, or a series that may lie on another) are drawn dashed,
    above the others.

    Args:
        df: tidy table with numeric ``x``, ``y`` and a categorical ``color`` column.
        title, x_title, y_title, color_title: translated labels.
        dashed: series drawn as dashed lines.
        color_sort: series order in the legend (default: as in ``df``).
        log_x, log_y: logarithmic axes.
        value_format: d3 format of the value in tooltips.
        height: pixels.
        legend_columns: columns of the legend under the chart (more columns, fewer rows, for
            many series).
        show_legend: False draws no legend (too many series to tell apart by colour; the
            tooltip still names each).

    Returns:
        An ``alt.Chart``.

    Raises:
        ValueError: for missing columns or too many rows.
    """
    check_rows(df, [x, y, color])
    groups = list(color_sort) if color_sort is not None else list(dict.fromkeys(df[color]))
    dash = alt.condition(
        alt.FieldOneOfPredicate(field=color, oneOf=list(dashed) or ["\u0000"]),
        alt.value([6, 4]),
        alt.value([1, 0]),
    )
    x_values = sorted({float(v) for v in df[x]})
    x_axis = line_x_axis(x_values, log_x)
    chart = (
        alt.Chart(df)
        .mark_line(point=True, strokeWidth=LINE_PX)
        .encode(
            x=alt.X(
                f"{x}:Q",
                title=x_title,
                scale=alt.Scale(type="log" if log_x else "linear", nice=not log_x),
                axis=x_axis,
            ),
            y=alt.Y(
                f"{y}:Q",
                title=y_title,
                scale=alt.Scale(type="log" if log_y else "linear"),
                axis=log_axis(df[y]) if log_y else alt.Axis(),
            ),
            color=alt.Color(
                f"{color}:N",
                sort=groups,
                title=color_title,
                legend=alt.Legend(
                    orient="bottom",
                    direction="horizontal",
                    columns=legend_columns,
                    labelLimit=LEGEND_LABEL_PX,
                )
                if show_legend
                else None,
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
    if dashed:
        # the dashed series drawn again on top, thinner: one that lies on another (bfloat16's
        # overflow curve is float32's, the unscaled std is the √d_k theory) shows as thin
        # dashes along a thicker line instead of hiding it or vanishing under it
        on_top = chart.transform_filter(
            alt.FieldOneOfPredicate(field=color, oneOf=list(dashed))
        ).mark_line(point=False, strokeWidth=DASHED_PX)
        chart = alt.layer(chart, on_top)
    return finish(chart, title, None)
