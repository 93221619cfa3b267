"""The real model's charts: every layer and head at once (data for the canvas heatmap) and the
head view (no Streamlit, no torch); one token's weights are
:func:`dashboard.charts.light.token_bars_spec`."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from dashboard.charts.base import FONT_SIZE, check_rows, finish
from dashboard.charts.heatmaps import HeatmapSpec, PanelGrid, heatmap_canvas_spec
from dashboard.charts.light import TOKEN_BAR_COLOR as HEAD_VIEW_COLOR
from dashboard.charts.light import TOKEN_ROW_PX as HEAD_VIEW_ROW_PX

MODEL_PANEL_PX = 62  # one map's side at most; the canvas shrinks maps to fit the column
MODEL_PANEL_SPACING_PX = 4

HEAD_VIEW_WIDTH = 420
HEAD_VIEW_MAX_STROKE = 6.0
HEAD_VIEW_MUTED = "#8A94A6"
HEAD_VIEW_LEFT, HEAD_VIEW_RIGHT = 0.0, 1.0
HEAD_VIEW_GAP = 0.06


def model_view_spec(
    weights: np.ndarray,
    tokens: Sequence[str],
    *,
    title: str,
    subtitle: str | None,
    layer_title: str,
    head_title: str,
    query_title: str,
    key_title: str,
    weight_title: str,
    sqrt_note: str,
    panel_px: int = MODEL_PANEL_PX,
) -> dict:
    """Small multiples of every layer's and head's attention map (BertViz's "model view"),
    as data for the canvas heatmap: one row of maps per layer, one column per head.

    The colours are the house's weight scale on a square root from 0 to 1, on which a trained
    head's small weights show (most of a row's weight sits on [CLS], [SEP] or the token itself:
    on a linear scale every other cell is pale); the legend says so, the tooltips give the
    weight itself. Vega laid out one faceted chart of N × H maps in seconds; the canvas draws
    each map as one image.

    Args:
        weights: (N, H, l, l) weights of N layers and H heads on the first l tokens.
        tokens: the l token labels.
        title, subtitle: translated chart title and note (e.g. the token cap).
        layer_title, head_title, query_title, key_title, weight_title: translated labels.
        sqrt_note: what the legend's title adds for the square-root scale.
        panel_px: side of one map in pixels at most.

    Returns:
        The spec for :func:`dashboard.charts.canvas.heatmap`.

    Raises:
        ValueError: for weights that are not (N, H, l, l) with l labels, or more than
            :data:`dashboard.charts.heatmaps.MAX_GRID_CELLS` cells.
    """
    maps = np.asarray(weights)
    if maps.ndim != 4 or maps.shape[2:] != (len(tokens), len(tokens)):
        raise ValueError(
            f"model view weights must be (N, H, {len(tokens)}, {len(tokens)}), got {maps.shape}"
        )
    n_layers, n_heads = maps.shape[:2]
    labels = tuple(str(token) for token in tokens)
    look = HeatmapSpec(
        title=title,
        subtitle=subtitle,
        x_title=key_title,
        y_title=query_title,
        value_title=weight_title,
        row_order=labels,
        col_order=labels,
        domain=(0.0, 1.0),
        sqrt=True,
        sqrt_note=sqrt_note,
    )
    grid = PanelGrid(
        row_title=layer_title,
        col_title=head_title,
        row_names=tuple(str(n) for n in range(1, n_layers + 1)),
        col_names=tuple(str(h) for h in range(1, n_heads + 1)),
        panel_px=panel_px,
        gap_px=MODEL_PANEL_SPACING_PX,
    )
    return heatmap_canvas_spec(maps.reshape(-1, *maps.shape[2:]), look, grid=grid)


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
