"""The canvas heatmap's data (dashboard.charts.heatmap_canvas_spec): values laid out by the
axis orders, the same colour scale and cell size as the Altair heatmap, Vega's scheme
colours, and clear errors for tables it cannot draw."""

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


def tidy(matrix: np.ndarray, rows: list[str], cols: list[str], **extra) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "row": np.repeat(rows, len(cols)),
            "col": np.tile(cols, len(rows)),
            "value": matrix.ravel(),
            **extra,
        }
    )


def test_values_follow_the_axis_orders_not_the_table_order():
    rows, cols = ["x", "y"], ["p", "q", "r"]
    matrix = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    table = tidy(matrix, rows, cols).sample(frac=1.0, random_state=3)
    spec = charts.heatmap_canvas_spec(table, **TITLES, row_order=["y", "x"], col_order=cols)
    np.testing.assert_array_equal(decoded(spec)[0], [[4.0, 5.0, 6.0], [1.0, 2.0, 3.0]])
    assert spec["rows"] == ["y", "x"] and spec["cols"] == cols and spec["panels"] == [""]


def test_panels_keep_data_order_with_scores():
    rows = cols = ["a", "b"]
    names = ["Head 2", "Head 10", "Head 1"]
    weights = np.arange(12, dtype=float).reshape(3, 2, 2) / 12
    scores = -np.arange(12, dtype=float).reshape(3, 2, 2)
    table = pd.concat(
        [
            tidy(weights[p], rows, cols, score=scores[p].ravel(), panel=n)
            for p, n in enumerate(names)
        ]
    )
    spec = charts.heatmap_canvas_spec(
        table,
        **TITLES,
        row_order=rows,
        col_order=cols,
        score_title="Raw score",
        panel_title="Head",
        columns=2,
    )
    assert spec["panels"] == names and spec["columns"] == 2
    np.testing.assert_allclose(decoded(spec), weights, rtol=1e-6)
    np.testing.assert_allclose(decoded(spec, "scores"), scores, rtol=1e-6)


def test_a_cell_missing_from_the_table_is_nan():
    table = tidy(np.array([[1.0, 2.0], [3.0, 4.0]]), ["a", "b"], ["c", "d"]).iloc[:3]
    spec = charts.heatmap_canvas_spec(table, **TITLES, row_order=["a", "b"], col_order=["c", "d"])
    values = decoded(spec)[0]
    assert np.isnan(values[1, 1]) and values[1, 0] == 3.0


def test_scale_and_cell_size_match_the_altair_heatmap():
    rows, cols = [str(i) for i in range(5)], [str(i) for i in range(7)]
    rng = np.random.default_rng(0)
    for kwargs in ({}, {"diverging": True}, {"sqrt": False}, {"domain": (0.0, 2.0)}):
        matrix = rng.normal(size=(5, 7)) if kwargs.get("diverging") else rng.random((5, 7))
        table = tidy(matrix, rows, cols)
        args = {**TITLES, "row_order": rows, "col_order": cols, "width": 300, **kwargs}
        spec = charts.heatmap_canvas_spec(table, **args)
        chart = charts.heatmap_chart(table, **args).to_dict()
        scale = chart["encoding"]["color"]["scale"]
        assert spec["scale"]["domain"] == pytest.approx(scale["domain"])
        assert spec["scale"]["type"] == scale.get("type", "linear")
        assert spec["scale"]["reverse"] == scale.get("reverse", False)
        assert spec["scale"]["colors"] == charts.SCHEME_STOPS[scale["scheme"]]
        assert spec["cell"] == [chart["mark"]["width"], chart["mark"]["height"]]


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


def test_bad_tables_are_refused_with_the_reason():
    rows, cols = ["a", "b"], ["c", "d"]
    table = tidy(np.ones((2, 2)), rows, cols)
    with pytest.raises(ValueError, match=r"row labels \['b'\] are not in the row order"):
        charts.heatmap_canvas_spec(table, **TITLES, row_order=["a"], col_order=cols)
    with pytest.raises(ValueError, match="more than one value"):
        charts.heatmap_canvas_spec(
            pd.concat([table, table.iloc[:1]]), **TITLES, row_order=rows, col_order=cols
        )
    with pytest.raises(ValueError, match=r"lacks columns \['score'\]"):
        charts.heatmap_canvas_spec(
            table, **TITLES, row_order=rows, col_order=cols, score_title="Raw score"
        )
    side = 129
    labels = [str(i) for i in range(side)]
    big = tidy(np.zeros((side, side)), labels, labels)
    with pytest.raises(ValueError, match="over the limit"):
        charts.heatmap_canvas_spec(big, **TITLES, row_order=labels, col_order=labels)
