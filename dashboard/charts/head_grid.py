"""Charts of the Heads at work page: every head of a model as one cell of a layers × heads
grid (a score's colour, the head's label as a letter), and estimated against true effects
as a scatter (no Streamlit, no torch; titles come translated).
"""

from __future__ import annotations

from dataclasses import dataclass

import altair as alt
import pandas as pd

from dashboard.charts.base import (
    CHOSEN_STROKE,
    DIVERGING_SCHEME,
    SEQUENTIAL_SCHEME,
    check_rows,
    finish,
)

CELL_PX = 26
PICK = "pick"
"""The name of the grid's click selection (its fields: ``layer`` and ``head``)."""
SCATTER_SIZE = 360
SCATTER_LABELS = 8  # heads named in text on the scatter; the rest on hover
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
    df: pd.DataFrame,
    titles: HeadGridTitles,
    *,
    marks: dict[str, str],
    value_format: str,
    chosen: tuple[int, int] | None = None,
    letter_px: int = LABEL_FONT,
    diverging: bool = False,
) -> alt.LayerChart:
    """A layers × heads heatmap of a score, each cell lettered with its head's label.

    Clicking a cell selects it: the point selection :data:`PICK` on the fields ``layer``
    and ``head`` (``st.altair_chart(..., on_select=...)`` returns it).

    Args:
        df: one row per head: ``layer``, ``head`` (0-based ints), ``score`` (finite),
            ``label`` (translated label text).
        titles: the translated titles.
        marks: label text -> the short mark drawn in its cell.
        value_format: d3 format of the score in tooltips.
        chosen: the (layer, head) outlined as the one shown, or None.
        letter_px: the letters' font size (``ChartLook.letter_px``: larger when presenting).
        diverging: a signed score: red below 0, blue above, white at 0 (the domain symmetric
            about 0), instead of the sequential scheme.

    Returns:
        An Altair layer chart (rects, text and the outline), layers as rows, heads as columns.

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
    pick = alt.selection_point(name=PICK, fields=["layer", "head"], on="click", clear=False)
    if diverging:
        size = float(df["score"].abs().max()) or 1.0
        scale = alt.Scale(scheme=DIVERGING_SCHEME, domain=[-size, size])
        lightness = alt.condition(
            (alt.datum.score > size / 2) | (alt.datum.score < -size / 2),
            alt.value("white"),
            alt.value("black"),
        )
    else:
        scale = alt.Scale(scheme=SEQUENTIAL_SCHEME)
        lightness = alt.condition(
            alt.datum.score > (df["score"].min() + df["score"].max()) / 2,
            alt.value("white"),
            alt.value("black"),
        )
    rects = (
        base.mark_rect(cursor="pointer")
        .encode(color=alt.Color("score:Q", title=titles.value_title, scale=scale))
        .add_params(pick)
    )
    letters = base.mark_text(fontSize=letter_px).encode(text="mark:N", color=lightness)
    layers = [rects, letters]
    if chosen is not None:
        shown_head = shown[(shown["layer"] == chosen[0]) & (shown["head"] == chosen[1])]
        outline = alt.Chart(shown_head).mark_rect(fill=None, stroke=CHOSEN_STROKE, strokeWidth=2.5)
        layers.append(outline.encode(x="head:O", y="layer:O"))
    count = int(df["head"].nunique())
    chart = alt.layer(*layers).properties(
        width=CELL_PX * count, height=CELL_PX * int(df["layer"].nunique())
    )
    return finish(chart, titles.title, None)


def picked_head(points, layers: int, heads: int) -> tuple[int, int] | None:
    """The head a click on the grid chose, from the selection :data:`PICK` as Streamlit
    returns it (a list of ``{"layer": …, "head": …}`` points; the last one counts).

    Args:
        points: the selection's points, or None. layers, heads: the model's N and H.

    Returns:
        (layer, head), 0-based, or None for no point or values that are not a head.
    """
    if not points:
        return None
    point = points[-1]
    pair = (point.get("layer"), point.get("head"))
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in pair):
        return None
    return pair if 0 <= pair[0] < layers and 0 <= pair[1] < heads else None


def labelled_heads(df: pd.DataFrame, count: int) -> pd.DataFrame:
    """The ``count`` rows of an estimate-vs-effect table the scatter names in text: the
    largest true effects in size (the heads that matter); the others are named on hover, so
    labels of heads near 0 never stack into a blob."""
    order = df["effect"].abs().sort_values(ascending=False, kind="stable").index
    return df.loc[order[:count]]


def effect_scatter_chart(
    df: pd.DataFrame, *, title: str, x_title: str, y_title: str, head_title: str
) -> alt.LayerChart:
    """Estimated (x) against true (y) effects, one point per head, with the line y = x; the
    :data:`SCATTER_LABELS` heads of largest effect are named beside their points.

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
    names = (
        alt.Chart(labelled_heads(df, SCATTER_LABELS))
        .mark_text(align="left", dx=6, fontSize=LABEL_FONT)
        .encode(x="estimate:Q", y="effect:Q", text="head:N")
    )
    chart = (line + points + names).properties(width=SCATTER_SIZE, height=SCATTER_SIZE)
    return finish(chart, title, None)
