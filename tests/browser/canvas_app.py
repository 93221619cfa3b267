"""A Streamlit app showing canvas heatmaps of literal matrices, for
tests/browser/test_canvas_heatmap.py: the cells' colours and the tooltip are checked there
against Vega's own rendering and the matrices below, a 1 × 1 map's legend layout, and a
model view's table of layers and heads."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dashboard import charts
from dashboard.charts import canvas

ROWS = ["the", "cat", "sat"]
COLS = ["a", "b", "c", "d"]
PANELS = ["Head 0", "Head 1"]
# (P, R, C) weights and raw scores; every value distinct
WEIGHTS = np.array(
    [
        [[0.70, 0.10, 0.15, 0.05], [0.02, 0.48, 0.30, 0.20], [0.25, 0.25, 0.01, 0.49]],
        [[0.00, 0.90, 0.06, 0.04], [0.33, 0.33, 0.33, 0.01], [0.12, 0.18, 0.60, 0.10]],
    ]
)
SCORES = np.arange(WEIGHTS.size, dtype=float).reshape(WEIGHTS.shape) / 10 - 1.0
SIGNED = np.array([[-1.0, -0.5, 0.0, 0.25], [0.5, 0.75, 1.0, -0.2], [0.1, -0.9, 0.3, 0.6]])


def tidy(values: np.ndarray, scores: np.ndarray | None = None) -> pd.DataFrame:
    """(P, R, C) arrays as the long table the Altair heatmap (the reference) takes, rows in
    reverse order (Altair places them by label)."""
    frames = []
    for p, name in enumerate(PANELS[: len(values)]):
        part = {
            "row": np.repeat(ROWS, len(COLS)),
            "col": np.tile(COLS, len(ROWS)),
            "value": values[p].ravel(),
            "panel": name,
        }
        if scores is not None:
            part["score"] = scores[p].ravel()
        frames.append(pd.DataFrame(part)[::-1])
    return pd.concat(frames, ignore_index=True)


def rows_by_cols_spec(**fields) -> charts.HeatmapSpec:
    """A heatmap spec over ROWS × COLS; ``fields``: the rest of it (titles, domain, …)."""
    return charts.HeatmapSpec(row_order=tuple(ROWS), col_order=tuple(COLS), **fields)


GRID_SPEC = rows_by_cols_spec(
    title="Weights",
    x_title="Key token",
    y_title="Query token",
    value_title="Weight",
    score_title="Raw score",
    panel_title="Head",
    domain=(0.0, 0.9),
)
SIGNED_SPEC = rows_by_cols_spec(
    title="Output",
    x_title="Dimension",
    y_title="Query token",
    value_title="Value",
    diverging=True,
)
TINY_SPEC = charts.HeatmapSpec(
    title="Head 18.6 (broad) on the prompt",
    x_title="Key token",
    y_title="Query token",
    value_title="Weight",
    row_order=("a",),
    col_order=("a",),
    domain=(0.0, 1.0),
)
"""A one-token prompt's map (its legend once sat over its scale and its title)."""
CHINESE_SPEC = rows_by_cols_spec(
    title="权重", x_title="键词元", y_title="查询词元", value_title="权重", domain=(0.0, 1.0)
)
"""A map with Chinese axis titles: its y title stands upright."""
MODEL_TOKENS = ["[CLS]", "the", "cat", "[SEP]"]
MODEL_WEIGHTS = np.random.default_rng(2).dirichlet(np.full(4, 0.3), size=(2, 3, 4))
"""A model view's (N=2 layers, H=3 heads, 4, 4) weights, rows adding up to 1."""
MODEL_TITLES = {
    "title": "Every layer",
    "subtitle": None,
    "layer_title": "Layer",
    "head_title": "Head",
    "query_title": "Query token",
    "key_title": "Key token",
    "weight_title": "Weight",
    "sqrt_note": "square root",
}

if __name__ == "__main__":
    grid = charts.heatmap_canvas_spec(WEIGHTS, GRID_SPEC, scores=SCORES, panels=PANELS)
    canvas.heatmap(grid, key="test.grid")
    canvas.heatmap(charts.heatmap_canvas_spec(SIGNED, SIGNED_SPEC), key="test.signed")
    canvas.heatmap(charts.heatmap_canvas_spec(np.ones((1, 1)), TINY_SPEC), key="test.tiny")
    canvas.heatmap(charts.heatmap_canvas_spec(WEIGHTS[0], CHINESE_SPEC), key="test.chinese")
    canvas.heatmap(
        charts.model_view_spec(MODEL_WEIGHTS, MODEL_TOKENS, **MODEL_TITLES), key="test.model"
    )
