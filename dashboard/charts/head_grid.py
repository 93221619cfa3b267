"""Charts of the Heads at work page: every head of a model as one cell of a layers × heads
grid (a score's colour, the head's label as a letter), and estimated against true effects
as a scatter (no Streamlit, no torch; titles come translated).
"""

from __future__ import annotations

from dataclasses import dataclass

import altair as alt
import pandas as pd

from dashboard.charts.base import SEQUENTIAL_SCHEME, check_rows, finish

CELL_PX = 26
SCATTER_SIZE = 360
LABEL_FONT = 10


@dataclass(frozen=True)
class HeadGridTitles:
    """The translated titles of :func:`head_score_chart`."""

    title: str
    x_title: str
    y_title: str
    value_title: str
    label_title: str


def head_score_chart(
    df: pd.DataFrame, titles: HeadGridTitles, *, marks: dict[str, str], value_format: str
) -> alt.LayerChart:
    """A layers × heads heatmap of a score, each cell lettered with its head's label.

    Args:
        df: one row per head: ``layer``, ``head`` (0-based ints), ``score`` (finite),
            ``label`` (translated label text).
        titles: the translated titles.
        marks: label text -> the short mark drawn in its cell.
        value_format: d3 format of the score in tooltips.

    Returns:
        An Altair layer chart (rects and text), layers as rows, heads as columns.

    Raises:
        ValueError: for missing columns or too many rows.
    """
    check_rows(df, ["layer", "head", "score", "label"])
    shown = df.assign(mark=df["label"].map(marks).fillna(""))
    base = alt.Chart(shown).encode(
        x=alt.X("head:O", title=titles.x_title, axis=alt.Axis(labelAngle=0)),
        y=alt.Y("layer:O", title=titles.y_title),
        tooltip=[
            alt.Tooltip("layer:O", title=titles.y_title),
            alt.Tooltip("head:O", title=titles.x_title),
            alt.Tooltip("score:Q", title=titles.value_title, format=value_format),
            alt.Tooltip("label:N", title=titles.label_title),
        ],
    )
    rects = base.mark_rect().encode(
        color=alt.Color(
            "score:Q", title=titles.value_title, scale=alt.Scale(scheme=SEQUENTIAL_SCHEME)
        )
    )
    lightness = alt.condition(
        alt.datum.score > (df["score"].min() + df["score"].max()) / 2,
        alt.value("white"),
        alt.value("black"),
    )
    letters = base.mark_text(fontSize=LABEL_FONT).encode(text="mark:N", color=lightness)
    count = int(df["head"].nunique())
    chart = (rects + letters).properties(
        width=CELL_PX * count, height=CELL_PX * int(df["layer"].nunique())
    )
    return finish(chart, titles.title, None)


def effect_scatter_chart(
    df: pd.DataFrame, *, title: str, x_title: str, y_title: str, head_title: str
) -> alt.LayerChart:
    """Estimated (x) against true (y) effects, one point per head, with the line y = x.

    Args:
        df: rows ``head`` (text), ``estimate``, ``effect`` (numbers).
        title, x_title, y_title, head_title: translated labels.

    Returns:
        An Altair layer chart.

    Raises:
        ValueError: for missing columns or too many rows.
    """
    check_rows(df, ["head", "estimate", "effect"])
    low = float(min(df["estimate"].min(), df["effect"].min(), 0.0))
    high = float(max(df["estimate"].max(), df["effect"].max(), 0.0))
    diagonal = alt.Chart(pd.DataFrame({"estimate": [low, high], "effect": [low, high]}))
    line = diagonal.mark_line(color="#999999", strokeDash=[4, 4]).encode(
        x="estimate:Q", y="effect:Q"
    )
    points = (
        alt.Chart(df)
        .mark_circle(size=70)
        .encode(
            x=alt.X("estimate:Q", title=x_title),
            y=alt.Y("effect:Q", title=y_title),
            tooltip=[
                alt.Tooltip("head:N", title=head_title),
                alt.Tooltip("estimate:Q", title=x_title, format=".3f"),
                alt.Tooltip("effect:Q", title=y_title, format=".3f"),
            ],
        )
    )
    names = points.mark_text(align="left", dx=6, fontSize=LABEL_FONT).encode(text="head:N")
    chart = (line + points + names).properties(width=SCATTER_SIZE, height=SCATTER_SIZE)
    return finish(chart, title, None)
