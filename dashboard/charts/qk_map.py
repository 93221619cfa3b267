"""The query–key map of Heads at work: a head's queries and keys of every sentence as one 2-D
scatter (PCA or t-SNE), coloured by query/key, position or language, the token on hover; a
click picks a point (no Streamlit, no torch; titles come translated).
"""

from __future__ import annotations

from dataclasses import dataclass

import altair as alt
import pandas as pd

from dashboard.charts.base import SEQUENTIAL_SCHEME, check_rows, finish

POINT = "point"
"""The name of the map's click selection (its field: ``index``, the point's row)."""
COLOUR_FIELDS = ("kind", "position", "language")
"""What the points may be coloured by."""
MAP_SIZE = 460
POINT_SIZE = 60
KIND_COLOURS = ("#4c78a8", "#e4572e")  # query, key
KIND_SHAPES = ("circle", "square")  # query, key: the same in every language
MAP_COLUMNS = ("index", "x", "y", "kind", "position", "language", "token", "sentence")


@dataclass(frozen=True)
class QKMapTitles:
    """The translated titles of :func:`qk_map_chart`: the chart's, its axes', and the legend
    and tooltip names of the columns."""

    title: str
    subtitle: str
    x_title: str
    y_title: str
    kind_title: str
    position_title: str
    language_title: str
    token_title: str
    sentence_title: str


def qk_map_chart(df: pd.DataFrame, titles: QKMapTitles, *, colour: str = "kind") -> alt.Chart:
    """The joint map: one circle per query (filled) and per key (hollow).

    Clicking a point selects it: the point selection :data:`POINT` on the field ``index``
    (``st.altair_chart(..., on_select=...)`` returns it).

    Args:
        df: one row per point: ``index`` (int, the point's row), ``x``, ``y`` (finite),
            ``kind`` (translated "query"/"key" text), ``position`` (int), ``language``,
            ``token`` (the token's text), ``sentence`` (its sentence's text).
        titles: the translated titles.
        colour: one of :data:`COLOUR_FIELDS`.

    Returns:
        An Altair scatter.

    Raises:
        ValueError: for missing columns, too many rows or an unknown ``colour``.
    """
    check_rows(df, MAP_COLUMNS)
    if colour not in COLOUR_FIELDS:
        raise ValueError(f"colour must be one of {list(COLOUR_FIELDS)}, got {colour!r}")
    names = {
        "kind": titles.kind_title,
        "position": titles.position_title,
        "language": titles.language_title,
    }
    kinds = list(dict.fromkeys(df["kind"]))  # queries first: the table's order
    if colour == "position":
        colour_encoding = alt.Color(
            "position:Q", title=names["position"], scale=alt.Scale(scheme=SEQUENTIAL_SCHEME)
        )
    elif colour == "kind":
        colour_encoding = alt.Color(
            "kind:N",
            title=names["kind"],
            scale=alt.Scale(domain=kinds, range=list(KIND_COLOURS[: len(kinds)])),
        )
    else:
        colour_encoding = alt.Color("language:N", title=names["language"])
    pick = alt.selection_point(name=POINT, fields=["index"], on="click")
    chart = (
        alt.Chart(df)
        .mark_point(size=POINT_SIZE, filled=False, strokeWidth=1.5)
        .encode(
            x=alt.X("x:Q", title=titles.x_title, axis=alt.Axis(labels=False, ticks=False)),
            y=alt.Y("y:Q", title=titles.y_title, axis=alt.Axis(labels=False, ticks=False)),
            color=colour_encoding,
            shape=alt.Shape(
                "kind:N",
                title=names["kind"],
                scale=alt.Scale(domain=kinds, range=list(KIND_SHAPES[: len(kinds)])),
            ),
            opacity=alt.condition(pick, alt.value(0.95), alt.value(0.35)),
            tooltip=[
                alt.Tooltip("token:N", title=titles.token_title),
                alt.Tooltip("kind:N", title=names["kind"]),
                alt.Tooltip("position:Q", title=names["position"]),
                alt.Tooltip("sentence:N", title=titles.sentence_title),
            ],
        )
        .add_params(pick)
        .properties(width=MAP_SIZE, height=MAP_SIZE)
    )
    return finish(chart, titles.title, titles.subtitle)


def picked_point(points, count: int) -> int | None:
    """The point a click on the map chose, from the selection :data:`POINT` as Streamlit
    returns it (a list of ``{"index": …}`` points; the last one counts).

    Args:
        points: the selection's points, or None. count: P, the map's points.

    Returns:
        The point's row, or None for no point or a value that is not one.
    """
    if not points:
        return None
    index = points[-1].get("index")
    if not isinstance(index, int) or isinstance(index, bool):
        return None
    return index if 0 <= index < count else None


def attention_row_chart(df: pd.DataFrame, title: str, weight_title: str) -> alt.Chart:
    """One attention row (or column) as bars over its sentence's tokens, in order.

    Args:
        df: one row per token: ``position`` (int), ``token`` (text), ``weight`` (in [0, 1]).
        title: the translated title. weight_title: the translated axis title.

    Returns:
        An Altair bar chart.

    Raises:
        ValueError: for missing columns or too many rows.
    """
    check_rows(df, ("position", "token", "weight"))
    frame = df.assign(
        label=[f"{p}: {tok}" for p, tok in zip(df["position"], df["token"], strict=True)]
    )
    chart = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("label:N", sort=list(frame["label"]), title=None),
            y=alt.Y("weight:Q", title=weight_title, scale=alt.Scale(domain=[0, 1])),
            tooltip=[
                alt.Tooltip("token:N"),
                alt.Tooltip("weight:Q", title=weight_title, format=".3f"),
            ],
        )
        .properties(width=MAP_SIZE, height=160)
    )
    return finish(chart, title, None)
