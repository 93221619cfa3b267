"""Charts of What a head writes: the logit lens as a layers × positions grid of top tokens,
and signed bars (every part's share of the answer, the tokens a head's write pushes up and
down). No Streamlit, no torch; titles come translated. The layers × heads grids are
:func:`dashboard.charts.head_grid.head_score_chart`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import altair as alt
import pandas as pd

from dashboard.charts.base import (
    SEQUENTIAL_SCHEME,
    check_rows,
    finish,
    ordered_scale,
)
from dashboard.charts.head_grid import LABEL_FONT

LENS_CELL_W, LENS_CELL_H = 58, 17
TOKEN_CHARS = 7
"""Characters of a top token written in its cell (the hover has it whole)."""
DARK_FROM = 0.5
"""A lens cell's probability from which its text is white (the scheme's dark half)."""
BAR_STEP = 18
NEGATIVE, POSITIVE = "#b2182b", "#2166ac"  # the ends of DIVERGING_SCHEME


@dataclass(frozen=True)
class LensTitles:
    """The translated titles of :func:`lens_chart`."""

    title: str
    x_title: str
    y_title: str
    token_title: str
    prob_title: str
    top_title: str


def cell_text(token: str) -> str:
    """A token as its cell writes it: at most :data:`TOKEN_CHARS` characters, "…" after."""
    return token if len(token) <= TOKEN_CHARS else token[: TOKEN_CHARS - 1] + "…"


def lens_chart(
    df: pd.DataFrame, rows: Sequence[str], titles: LensTitles, *, letter_px: int = LABEL_FONT
) -> alt.LayerChart:
    """The logit lens: one row per layer (``rows`` top to bottom, the model's output first),
    one column per position, each cell coloured by its top token's probability and lettered
    with the token.

    Args:
        df: one row per cell: ``row`` (a name of ``rows``), ``position`` (label, in column
            order), ``token``, ``prob`` (0 to 1), ``top`` (the hover's top tokens).
        rows: the row names, top first.
        titles: the translated titles.
        letter_px: the tokens' font size (larger when presenting).

    Returns:
        An Altair layer chart (rects and text).

    Raises:
        ValueError: for missing columns or too many rows.
    """
    check_rows(df, ["row", "position", "token", "prob", "top"])
    positions = list(dict.fromkeys(df["position"]))
    shown = df.assign(text=df["token"].map(cell_text))
    base = alt.Chart(shown).encode(
        x=alt.X(
            "position:N",
            title=titles.x_title,
            scale=ordered_scale(positions),
            axis=alt.Axis(labelAngle=-40, labelOverlap=False, orient="top"),
        ),
        y=alt.Y("row:N", title=titles.y_title, scale=ordered_scale(rows)),
        tooltip=[
            alt.Tooltip("row:N", title=titles.y_title),
            alt.Tooltip("position:N", title=titles.x_title),
            alt.Tooltip("token:N", title=titles.token_title),
            alt.Tooltip("prob:Q", title=titles.prob_title, format=".2f"),
            alt.Tooltip("top:N", title=titles.top_title),
        ],
    )
    rects = base.mark_rect().encode(
        color=alt.Color(
            "prob:Q",
            title=titles.prob_title,
            scale=alt.Scale(scheme=SEQUENTIAL_SCHEME, domain=[0, 1]),
        )
    )
    ink = alt.condition(alt.datum.prob >= DARK_FROM, alt.value("white"), alt.value("black"))
    letters = base.mark_text(fontSize=letter_px).encode(text="text:N", color=ink)
    chart = alt.layer(rects, letters).properties(
        width=LENS_CELL_W * len(positions), height=LENS_CELL_H * len(rows)
    )
    return finish(chart, titles.title, None)


def signed_bar_chart(
    df: pd.DataFrame, *, title: str, x_title: str, y_title: str, value_format: str = ".3f"
) -> alt.Chart:
    """Horizontal bars of signed values, one per category in ``df``'s order (top first),
    blue for a positive value and red for a negative one (the diverging scheme's ends).

    Args:
        df: ``name`` (unique categories) and ``value`` (numbers).
        title, x_title, y_title: translated labels.
        value_format: d3 format of the value in tooltips and on the axis.

    Raises:
        ValueError: for missing columns or too many rows.
    """
    check_rows(df, ["name", "value"])
    names = list(df["name"])
    shown = df.assign(sign=(df["value"] >= 0).map({True: "+", False: "−"}))
    chart = (
        alt.Chart(shown)
        .mark_bar()
        .encode(
            x=alt.X("value:Q", title=x_title, axis=alt.Axis(format=value_format)),
            y=alt.Y("name:N", title=y_title, scale=ordered_scale(names)),
            color=alt.Color(
                "sign:N",
                scale=alt.Scale(domain=["+", "−"], range=[POSITIVE, NEGATIVE]),
                legend=None,
            ),
            tooltip=[
                alt.Tooltip("name:N", title=y_title),
                alt.Tooltip("value:Q", title=x_title, format=value_format),
            ],
        )
        .properties(height=alt.Step(BAR_STEP))
    )
    return finish(chart, title, None)
