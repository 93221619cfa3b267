"""DataFrame -> Altair line and bar chart builders (no Streamlit, no torch); heatmaps are in
:mod:`dashboard.charts.heatmaps`, the real model's charts in :mod:`dashboard.charts.model_views`
(pages reach all three as ``charts.<builder>``, see :mod:`dashboard.charts`).

Every title, axis label and tooltip title is passed in already translated. Heatmaps refuse
tables over :data:`MAX_CHART_ROWS` rows: the data layer pools big matrices first.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from dashboard.charts.base import check_rows, finish, header, header_config
from dashboard.numbers import LARGEST_PLAIN, SMALLEST_PLAIN, plain_number

SUPERSCRIPT_DIGITS = "⁰¹²³⁴⁵⁶⁷⁸⁹"


def _power_label_expr() -> str:
    """A Vega expression writing an axis value as :func:`dashboard.numbers.plain_number`
    does: a decimal between 10⁻³ and 10⁵ (``0.001``, ``1,000``), else a power of ten with a
    superscript exponent (``10⁻⁸``, ``3 × 10⁻⁸``), never e-notation (``1e-8``)."""
    exponent = "floor(log(datum.value) / LN10 + 1e-9)"
    size = f"abs({exponent})"

    def digit(index: str) -> str:
        return f"substring('{SUPERSCRIPT_DIGITS}', {index}, {index} + 1)"

    superscript = (
        f"({exponent} < 0 ? '⁻' : '') + ({size} >= 10 ? {digit(f'floor({size} / 10)')} : '')"
        f" + {digit(f'{size} % 10')}"
    )
    mantissa = f"datum.value / pow(10, {exponent})"
    power = f"(abs({mantissa} - 1) < 1e-6 ? '' : format({mantissa}, '.2~r') + ' × ') + '10'"
    return (
        f"datum.value >= {SMALLEST_PLAIN} && datum.value < {LARGEST_PLAIN:.0f}"
        f" ? format(datum.value, ',~r') : {power} + {superscript}"
    )


POWER_LABEL_EXPR = _power_label_expr()
"""Every log axis's labels (:func:`log_axis`): plain decimals and powers of ten (10⁻⁸)."""


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
    value_format: str = ".4g",
) -> alt.Chart:
    """A line chart with points and tooltips.

    Args:
        df: tidy table with numeric ``x`` and ``y`` columns and optional ``color`` column.
        title, x_title, y_title, color_title: translated labels.
        log_x, log_y: logarithmic axes.
        points: draw a point per row.
        height: pixels.
        value_format: d3 format of the value in tooltips (plain notation, see
            :func:`value_tooltip`).

    Returns:
        An ``alt.Chart``.

    Raises:
        ValueError: for missing columns or too many rows.
    """
    check_rows(df, [x, y] + ([color] if color else []))
    df, shown_value = value_tooltip(df, y, y_title, value_format)
    enc = {
        "x": alt.X(
            f"{x}:Q",
            title=x_title,
            **log_or_linear(df[x], log_x),
        ),
        "y": alt.Y(
            f"{y}:Q",
            title=y_title,
            **log_or_linear(df[y], log_y),
        ),
        "tooltip": [alt.Tooltip(f"{x}:Q", title=x_title), shown_value],
    }
    if color:
        enc["color"] = alt.Color(f"{color}:N", title=color_title or color)
        enc["tooltip"].insert(0, alt.Tooltip(f"{color}:N", title=color_title or color))
    chart = alt.Chart(df).mark_line(point=points).encode(**enc).properties(height=height)
    return finish(chart, title, None)


BAR_LABEL_ANGLE = -45


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
            # every bar named: Vega would hide labels that overlap (the presentation view's
            # larger labels lost 6 of 8), so they turn steeper instead
            x=alt.X(
                f"{x}:N",
                sort=order,
                title=x_title,
                axis=alt.Axis(labelAngle=BAR_LABEL_ANGLE, labelOverlap=False),
            ),
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

TOOLTIP_DIGITS = 4  # significant digits of a tooltip whose format names none
MIN_DECADES = 2  # a log axis spanning this many decades is labelled at powers of ten only


def log_or_linear(values, log: bool) -> dict:
    """The ``scale`` and ``axis`` of a quantitative channel over ``values``: a log scale with
    :func:`log_axis`'s plain-notation labels, or a linear one."""
    return {
        "scale": alt.Scale(type="log" if log else "linear"),
        "axis": log_axis(values) if log else alt.Axis(),
    }


def log_axis(values, **options) -> alt.Axis:
    """A log axis for ``values``, its labels in plain notation (:data:`POWER_LABEL_EXPR`):
    at each power of ten when the positive values span at least :data:`MIN_DECADES`
    decades, else at Vega's own ticks.

    Args:
        values: the axis's data (a Series or a sequence). **options: other ``alt.Axis``
            properties.

    Returns:
        An ``alt.Axis``.
    """
    options = {"labelExpr": POWER_LABEL_EXPR, **options}
    positive = [float(v) for v in values if v > 0]
    if not positive:
        return alt.Axis(**options)
    low = math.floor(math.log10(min(positive)))
    high = math.ceil(math.log10(max(positive)))
    if high - low < MIN_DECADES:
        return alt.Axis(**options)
    decades = [10.0**k for k in range(low, high + 1)]
    return alt.Axis(values=decades, **options)


def value_tooltip(df: pd.DataFrame, y: str, title: str, value_format: str):
    """The tooltip of a value column: d3's ``value_format`` where it writes plain decimals,
    else a text column of :func:`dashboard.numbers.plain_number` (``3.0 × 10⁻⁸``) with as
    many significant digits: always for an e-notation format (``.2e``), and for a ``g``
    format (``.4g``) when a value lies outside 10⁻³..10⁵, where d3 writes ``2.980e-8``.

    Returns:
        (the table, with the text column added when one is needed; the ``alt.Tooltip``).
    """
    kind = value_format[-1:]
    values = pd.to_numeric(df[y], errors="coerce").to_numpy(dtype=float)
    sizes = np.abs(values[np.isfinite(values) & (values != 0)])
    beyond = bool(((sizes < SMALLEST_PLAIN) | (sizes >= LARGEST_PLAIN)).any())
    if not (kind == "e" or (kind == "g" and beyond)):
        return df, alt.Tooltip(f"{y}:Q", title=title, format=value_format)
    precision = re.search(r"\.(\d+)", value_format)
    digits = int(precision.group(1)) if precision else TOOLTIP_DIGITS
    digits = max(1, digits + 1 if kind == "e" else digits)
    text = f"{y}_text"
    shown = df.assign(**{text: [plain_number(float(v), digits) for v in values]})
    return shown, alt.Tooltip(f"{text}:N", title=title)


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
    df, shown_value = value_tooltip(df, y, y_title, value_format)
    tooltip = [alt.Tooltip(f"{x}:N", title=x_title), alt.Tooltip(f"{color}:N", title=color_title)]
    tooltip.append(shown_value)
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
            **log_or_linear(df[y], log_y),
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


MEASURED_TICKS = 12  # a log x axis with at most this many values is ticked at each of them
LINE_PX = 3  # a measured series
DASHED_PX = 1.5  # a dashed one (a theory curve) drawn over it
ON_TOP_DASH = (5, 7)  # px dash, px gap: more than half of the line under it shows between dashes


def line_x_axis(x_values: Sequence[float], log_x: bool) -> alt.Axis:
    """The x axis of a line chart: on a log axis with few values, exactly the measured values
    (powers of two read badly as 10, 100); on whole-number x (positions, steps, sizes), whole
    ticks only (never 1.2, 1.4 on a short axis)."""
    if log_x:
        if len(x_values) > MEASURED_TICKS:
            return log_axis(x_values)
        return alt.Axis(values=list(x_values), labelExpr=POWER_LABEL_EXPR)
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
    df, shown_value = value_tooltip(df, y, y_title, value_format)
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
                **log_or_linear(df[y], log_y),
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
                shown_value,
            ],
        )
        .properties(height=height)
    )
    if dashed:
        # the dashed series only on top, thin: one that lies on another (bfloat16's overflow
        # curve is float32's, the unscaled std is the √d_k theory) shows as thin dashes along
        # the other's whole thick line, which nothing covers but those dashes
        chosen = alt.FieldOneOfPredicate(field=color, oneOf=list(dashed))
        below = chart.transform_filter(alt.LogicalNotPredicate(**{"not": chosen}))
        on_top = (
            chart.transform_filter(chosen)
            .mark_line(
                point=alt.OverlayMarkDef(shape="diamond", filled=False), strokeWidth=DASHED_PX
            )
            .encode(strokeDash=alt.value(list(ON_TOP_DASH)))
        )
        chart = alt.layer(below, on_top)
    return finish(chart, title, None)
