"""The canvas heatmap's data (dashboard.charts.heatmap_canvas_spec): the matrices as given,
the same colour scale and cell size as the Altair heatmap, Vega's scheme colours, and clear
errors for matrices it cannot draw."""

from __future__ import annotations

import base64

import numpy as np
import pandas as pd
import pytest

from dashboard import charts
from tests.dashboard.conftest import vega_colours

TITLES = {"title": "T", "x_title": "Key", "y_title": "Query", "value_title": "Weight"}


def decoded(spec: dict, field: str = "values") -> np.ndarray:
    shape = (len(spec["panels"]), len(spec["rows"]), len(spec["cols"]))
    return np.frombuffer(base64.b64decode(spec[field]), dtype="<f4").reshape(shape)


def tidy(matrix: np.ndarray, rows: list[str], cols: list[str]) -> pd.DataFrame:
    """The long table of one matrix, as the Altair export takes it."""
    return pd.DataFrame(
        {
            "row": np.repeat(rows, len(cols)),
            "col": np.tile(cols, len(rows)),
            "value": matrix.ravel(),
        }
    )


def test_values_are_the_matrices_in_axis_order():
    rows, cols = ["y", "x"], ["p", "q", "r"]
    matrix = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    spec = charts.heatmap_canvas_spec(
        matrix, charts.HeatmapSpec(**TITLES, row_order=rows, col_order=cols)
    )
    np.testing.assert_array_equal(decoded(spec)[0], matrix)
    assert spec["rows"] == rows and spec["cols"] == cols and spec["panels"] == [""]


def test_panels_keep_their_order_with_scores():
    rows = cols = ("a", "b")
    names = ["Head 2", "Head 10", "Head 1"]
    weights = np.arange(12, dtype=float).reshape(3, 2, 2) / 12
    scores = -np.arange(12, dtype=float).reshape(3, 2, 2)
    scores[0, 0, 1] = -np.inf  # a masked score travels as -inf ("−∞" in the tooltip)
    look = charts.HeatmapSpec(
        **TITLES,
        row_order=rows,
        col_order=cols,
        score_title="Raw score",
        panel_title="Head",
        columns=2,
    )
    spec = charts.heatmap_canvas_spec(weights, look, scores=scores, panels=names)
    assert spec["panels"] == names and spec["columns"] == 2
    np.testing.assert_allclose(decoded(spec), weights, rtol=1e-6)
    np.testing.assert_allclose(decoded(spec, "scores"), scores, rtol=1e-6)


def test_a_missing_cell_is_nan_and_does_not_set_the_scale():
    matrix = np.array([[1.0, 2.0], [3.0, np.nan]])
    spec = charts.heatmap_canvas_spec(
        matrix, charts.HeatmapSpec(**TITLES, row_order=("a", "b"), col_order=("c", "d"))
    )
    values = decoded(spec)[0]
    assert np.isnan(values[1, 1]) and values[1, 0] == 3.0
    assert spec["scale"]["domain"] == [0.0, 3.0]


def test_scale_and_cell_size_match_the_altair_heatmap():
    rows, cols = [str(i) for i in range(5)], [str(i) for i in range(7)]
    rng = np.random.default_rng(0)
    for kwargs in ({}, {"diverging": True}, {"sqrt": False}, {"domain": (0.0, 2.0)}):
        matrix = rng.normal(size=(5, 7)) if kwargs.get("diverging") else rng.random((5, 7))
        look = charts.HeatmapSpec(**TITLES, row_order=rows, col_order=cols, width=300, **kwargs)
        spec = charts.heatmap_canvas_spec(matrix, look)
        chart = charts.heatmap_chart(tidy(matrix, rows, cols), look).to_dict()
        scale = chart["encoding"]["color"]["scale"]
        assert spec["scale"]["domain"] == pytest.approx(scale["domain"])
        assert spec["scale"]["type"] == scale.get("type", "linear")
        assert spec["scale"]["reverse"] == scale.get("reverse", False)
        assert spec["scale"]["colors"] == charts.SCHEME_STOPS[scale["scheme"]]
        assert spec["cell"] == [chart["width"] / len(cols), chart["height"] / len(rows)]


def _stops_ramp(stops: str, n: int) -> np.ndarray:
    """(n, 3) piecewise-linear interpolation of hex colour stops (what the canvas draws)."""
    rgb = np.array(
        [[int(stops[i + j : i + j + 2], 16) for j in (0, 2, 4)] for i in range(0, len(stops), 6)]
    )
    t = np.linspace(0.0, 1.0, n) * (len(rgb) - 1)
    i = np.minimum(t.astype(int), len(rgb) - 2)
    f = (t - i)[:, None]
    return rgb[i] * (1 - f) + rgb[i + 1] * f


@pytest.mark.parametrize("scheme", sorted(charts.SCHEME_STOPS))
def test_scheme_stops_reproduce_vega_scheme(scheme):
    """Vega (through vl-convert) draws 256 values on the scheme; the stops must give the
    same colours."""
    n = 256
    vega = vega_colours(range(n), {"scheme": scheme, "domain": [0, n - 1]})
    assert np.abs(_stops_ramp(charts.SCHEME_STOPS[scheme], n) - vega).max() <= 1.0


def test_bad_matrices_are_refused_with_the_reason():
    look = charts.HeatmapSpec(**TITLES, row_order=("a", "b"), col_order=("c", "d"))
    with pytest.raises(ValueError, match=r"do not match the axis orders \(2, 2\)"):
        charts.heatmap_canvas_spec(np.ones((3, 2)), look)
    with pytest.raises(ValueError, match="repeats labels"):
        charts.heatmap_canvas_spec(
            np.ones((2, 2)),
            charts.HeatmapSpec(**TITLES, row_order=("a", "a"), col_order=("c", "d")),
        )
    with pytest.raises(ValueError, match="score_title must be given together"):
        charts.heatmap_canvas_spec(np.ones((2, 2)), look, scores=np.ones((2, 2)))
    with pytest.raises(ValueError, match="3 panel names for 1 panels"):
        charts.heatmap_canvas_spec(np.ones((2, 2)), look, panels=["x", "y", "z"])
    side = 129
    labels = tuple(str(i) for i in range(side))
    with pytest.raises(ValueError, match="over the limit"):
        charts.heatmap_canvas_spec(
            np.zeros((side, side)), charts.HeatmapSpec(**TITLES, row_order=labels, col_order=labels)
        )


def test_a_panel_grid_must_hold_every_panel_and_stays_within_its_own_limit():
    """A table of layers × heads takes as many maps as it has cells, and up to
    MAX_GRID_CELLS cells (the model view's 72 maps of 32 tokens), more than a single map."""
    from dashboard.charts.heatmaps import MAX_GRID_CELLS, PanelGrid

    def grid(rows: int, cols: int) -> PanelGrid:
        return PanelGrid("Layer", "Head", ("1",) * rows, tuple(map(str, range(cols))), 62)

    look = charts.HeatmapSpec(**TITLES, row_order=("a", "b"), col_order=("c", "d"))
    with pytest.raises(ValueError, match=r"a grid of 2 × 3 for 5 panels"):
        charts.heatmap_canvas_spec(np.ones((5, 2, 2)), look, grid=grid(2, 3))
    side = 32
    labels = tuple(str(i) for i in range(side))
    square = charts.HeatmapSpec(**TITLES, row_order=labels, col_order=labels)
    maps = MAX_GRID_CELLS // side**2  # 72
    spec = charts.heatmap_canvas_spec(np.zeros((maps, side, side)), square, grid=grid(6, 12))
    assert len(spec["panels"]) == maps and spec["columns"] == 12
    assert spec["cell"] == [62 / side, 62 / side] and spec["panel_title"] is None
    with pytest.raises(ValueError, match="over the limit"):
        charts.heatmap_canvas_spec(np.zeros((maps + 12, side, side)), square, grid=grid(7, 12))
