"""The real model's charts: every layer and head at once and the head view (no Streamlit, no
torch); one token's weights are :func:`dashboard.light_charts.token_bars_spec`."""

from __future__ import annotations

import altair as alt
import pandas as pd

from dashboard.charts.base import (
    FONT_SIZE,
    check_rows,
    finish,
    header,
    header_config,
)
from dashboard.charts.light import TOKEN_BAR_COLOR as HEAD_VIEW_COLOR
from dashboard.charts.light import TOKEN_ROW_PX as HEAD_VIEW_ROW_PX

MODEL_VIEW_MAX_CELLS = 72 * 32 * 32
WEIGHT_MILLI = 1000
MODEL_VIEW_RANGE = ("#FFFFFF", "#08306B")  # white = no attention, dark blue = all of it
MODEL_PANEL_PX = 62
MODEL_PANEL_SPACING_PX = 4
MIN_MODEL_PANEL_PX = 24


def model_panel_px(heads: int, width_px: int | None) -> int:
    """The side of one map of the model view so that ``heads`` maps and their spacing fit
    ``width_px`` (None: no limit), at most :data:`MODEL_PANEL_PX`.

    Raises:
        ValueError: for fewer than one head.
    """
    if heads < 1:
        raise ValueError(f"heads must be at least 1, got {heads}")
    if width_px is None:
        return MODEL_PANEL_PX
    fitting = (width_px - MODEL_PANEL_SPACING_PX * (heads - 1)) // heads
    return max(MIN_MODEL_PANEL_PX, min(MODEL_PANEL_PX, fitting))


HEAD_VIEW_WIDTH = 420
HEAD_VIEW_MAX_STROKE = 6.0
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
            row=alt.Row("layer:O", title=layer_title, header=header()),
            column=alt.Column("head:O", title=head_title, header=header()),
            spacing=MODEL_PANEL_SPACING_PX,
        )
    )
    return header_config(finish(chart, title, subtitle))


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
    check_rows(lines, ["i", "j", "query", "key", "weight"])
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
    return finish(chart, title, subtitle)
