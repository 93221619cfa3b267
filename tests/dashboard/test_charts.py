"""Pooling, tidy heatmap tables, chart builders and exports."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from dashboard import charts, data, exports
from dashboard.config import StepConfig


def _stochastic(rng, heads, n):
    w = rng.random((heads, n, n))
    return w / w.sum(axis=-1, keepdims=True)


def grid_chart(heat, **fields):
    """The Altair heatmap of ``heat`` (a ``data.heatmap_grid``) in its own row and column
    order; ``fields``: the rest of the :class:`charts.HeatmapSpec` (titles, domain, …)."""
    spec = charts.HeatmapSpec(row_order=heat.row_order, col_order=heat.col_order, **fields)
    return charts.heatmap_chart(heat.frame, spec)


def test_pool_matrix_averages_equal_blocks():
    m = np.arange(16.0).reshape(4, 4)
    pooled = data.pool_matrix(m, max_side=2)
    assert pooled.tolist() == [[2.5, 4.5], [10.5, 12.5]]
    big = np.random.default_rng(0).random((1024, 1000))
    pooled = data.pool_matrix(big, 64)
    assert pooled.shape == (64, 64)
    assert pooled.mean() == pytest.approx(big.mean(), rel=1e-3)
    assert data.pool_matrix(m, 64) is m
    # equal blocks (the strided fast path) against explicit block means, float32 in
    even = np.random.default_rng(1).random((1024, 512)).astype(np.float32)
    pooled = data.pool_matrix(even, 64)
    assert pooled.dtype == np.float64 and pooled.shape == (64, 64)
    assert pooled[3, 5] == pytest.approx(even[48:64, 40:48].astype(np.float64).mean(), rel=1e-12)
    assert pooled[63, 63] == pytest.approx(even[1008:, 504:].astype(np.float64).mean(), rel=1e-12)
    with pytest.raises(ValueError, match="max_side"):
        data.pool_matrix(m, 0)


@pytest.mark.parametrize(("n", "heads"), [(16, 4), (128, 1), (128, 8), (1024, 16), (200, 3)])
def test_heatmap_grid_never_exceeds_the_row_limit(n, heads):
    rng = np.random.default_rng(1)
    w = _stochastic(rng, heads, n)
    labels = [str(i) for i in range(n)]
    heat = data.heatmap_grid(w, labels, labels, scores=w, panels=[f"h{h}" for h in range(heads)])
    assert len(heat.frame) <= charts.MAX_CHART_ROWS
    full = n <= data.FULL_HEATMAP_MAX and heads * n * n <= charts.MAX_CHART_ROWS
    assert heat.pooled == (not full)
    assert heat.shape[0] == (n if full else min(64, heat.shape[0]))
    assert len(set(heat.frame["row"])) == heat.shape[0]
    # block means keep the overall mean (exactly for equal blocks, closely for unequal ones)
    first = heat.frame[heat.frame["panel"] == "h0"].pivot(
        index="row_index", columns="col_index", values="value"
    )
    assert first.to_numpy().mean() == pytest.approx(1.0 / n, rel=1e-6 if full else 2e-2)


def test_heatmap_chart_shares_domain_and_has_tooltips():
    rng = np.random.default_rng(2)
    w = _stochastic(rng, 4, 8)
    labels = data.axis_labels(data.tokens_for("the cat sat on the mat , ok"))
    heat = data.heatmap_grid(w, labels, labels, scores=np.log(w), panels=["a", "b", "c", "d"])
    chart = grid_chart(
        heat,
        title="T",
        subtitle="pooled",
        x_title="Key",
        y_title="Query",
        value_title="Weight",
        score_title="Score",
        panel_title="Head",
        domain=(0.0, 0.5),
    )
    spec = chart.to_dict()
    first = spec["concat"][0]
    enc = first["encoding"]
    assert enc["color"]["scale"]["domain"] == [0.0, 0.5]
    assert spec["resolve"]["scale"]["color"] == "shared"
    assert [part["title"]["text"] for part in spec["concat"]] == ["a", "b", "c", "d"]
    # the tooltip is each cell's row, whose columns are the translated titles
    assert first["mark"]["tooltip"] == {"content": "data"}
    rows = spec["datasets"][first["data"]["name"]]
    assert list(rows[0]) == ["Head", "Query", "Key", "Weight", "Score"]
    assert len(rows) == 64 and {r["Head"] for r in rows} == {"a"}
    assert rows[9]["Query"] == heat.frame["row"][9] and rows[9]["Key"] == heat.frame["col"][9]
    assert rows[9]["Weight"] == pytest.approx(heat.frame["value"][9], abs=5e-5)
    assert rows[9]["Weight"] == round(rows[9]["Weight"], 4)  # shown as .3f, kept to 4 places
    assert enc["x"]["field"] == "Key" and enc["color"]["field"] == "Weight"
    assert spec["title"]["subtitle"] == "pooled"
    assert "0 the" in labels and "4 the" in labels  # repeated words stay distinct


def test_a_small_heatmap_wraps_a_long_subtitle_to_its_width():
    """Vega clips a title wider than its chart: a 4-column map wraps its subtitle into lines
    that fit its cells (drawn at the size the builder chose) and the row labels, and keeps a
    short one as it is."""
    from dashboard.charts.base import SUBTITLE_PX_PER_UNIT
    from dashboard.charts.heatmap_altair import TITLE_LABEL_ALLOWANCE_PX
    from dashboard.charts.title_wrap import display_units

    rows, cols = [f"d{i}" for i in range(8)], [f"k{j}" for j in range(4)]
    frame = pd.DataFrame(
        {"row": [r for r in rows for _ in cols], "col": cols * len(rows), "value": 0.5}
    )
    subtitle = "random here, learned in a model, and shown for every pair of dimensions"

    def title(sub):
        spec = charts.HeatmapSpec(
            title="W_Q (8×4)",
            subtitle=sub,
            x_title="",
            y_title="",
            value_title="v",
            row_order=rows,
            col_order=cols,
            annotate=True,
            width=240,
        )
        return charts.heatmap_chart(frame, spec).to_dict()

    chart = title(subtitle)
    lines = chart["title"]["subtitle"]
    assert chart["autosize"]["type"] == "pad"  # drawn at its cells' size, not fitted
    units = (chart["width"] + TITLE_LABEL_ALLOWANCE_PX) // SUBTITLE_PX_PER_UNIT
    assert isinstance(lines, list) and len(lines) >= 2
    assert " ".join(lines) == subtitle
    assert all(display_units(line) <= units for line in lines)
    assert title("q · k")["title"]["subtitle"] == "q · k"


def test_heatmap_chart_refuses_too_many_rows():
    n = 129
    df = pd.DataFrame({"row": np.repeat(range(n), n), "col": np.tile(range(n), n), "value": 0.0})
    with pytest.raises(ValueError, match="pool it first"):
        charts.heatmap_chart(
            df,
            charts.HeatmapSpec(
                title="", x_title="", y_title="", value_title="", row_order=[], col_order=[]
            ),
        )
    with pytest.raises(ValueError, match="lacks columns"):
        charts.bar_chart(pd.DataFrame({"a": [1]}), x="a", y="b", title="", x_title="", y_title="")


def test_tokenizer_words_characters_punctuation():
    assert data.tokens_for("the cat, sat.") == ("the", "cat", ",", "sat", ".")
    zh = data.tokens_for(data.PRESET_SENTENCES["preset_zh"])
    assert zh[:3] == ("那", "只", "猫") and zh[-1] == "。" and len(zh) == 17
    assert data.tokens_for("猫cat2 坐") == ("猫", "cat2", "坐")
    assert not data.has_words(data.tokens_for("?!.,"))


def test_step_by_step_matches_the_formula():
    result = data.step_by_step(StepConfig("preset_en", n_tokens=5, d_k=4, causal=True, seed=3))
    m = result.matrices
    assert np.allclose(m["Q"], m["X"] @ m["W_Q"])
    assert np.allclose(m["scaled"], m["Q"] @ m["K"].T / 2.0)
    assert np.allclose(m["weights"].sum(axis=1), 1.0)
    assert np.all(m["weights"][np.triu_indices(5, 1)] == 0.0)
    assert np.allclose(m["output"], m["weights"] @ m["V"])
    assert result.library_max_diff < 1e-6
    cell = data.cell_breakdown(result, 3, 1)
    assert cell.exp / cell.row_sum == pytest.approx(cell.weight)
    with pytest.raises(ValueError, match="n_tokens"):
        data.step_by_step(StepConfig("preset_en", n_tokens=40, d_k=4))


def test_entropy_and_distance_on_known_patterns():
    n = 10
    uniform = np.full((1, n, n), 1.0 / n)
    eye = np.eye(n)[None]
    assert data.head_entropy(uniform)[0] == pytest.approx(np.log(n))
    assert data.head_entropy(eye)[0] == pytest.approx(0.0)
    assert data.mean_distance(eye)[0] == 0.0
    assert data.mean_distance(uniform)[0] == pytest.approx((n * n - 1) / (3 * n))


def test_exports_npy_csv_png_svg():
    w = np.arange(6.0).reshape(2, 3)
    assert np.array_equal(np.load(io.BytesIO(exports.npy_bytes(w))), w)
    assert exports.array_csv(w).splitlines()[1] == "3,4,5"
    table = data.weights_table(w[None].repeat(2, 0), ["a", "b"], ["x", "y", "z"])
    assert table.splitlines()[0] == "query,x,y,z,head"
    heat = data.heatmap_grid(w, ["猫", "垫"], ["x", "y", "z"])
    chart = grid_chart(heat, title="注意力", x_title="键", y_title="查询", value_title="权重")
    assert exports.chart_png(chart)[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in exports.chart_svg(chart)
    assert exports.safe_filename("../etc/passwd weights") == "etc_passwd_weights"


def test_heatmap_panels_keep_their_order_past_nine():
    names = [f"Head {h}" for h in range(12)]
    w = np.full((12, 3, 3), 1 / 3)
    heat = data.heatmap_grid(w, ["a", "b", "c"], ["a", "b", "c"], panels=names)
    chart = grid_chart(
        heat,
        title="",
        x_title="Key",
        y_title="Query",
        value_title="Weight",
        panel_title="Head",
        columns=4,
    )
    parts = chart.to_dict()["concat"]
    assert [p["title"]["text"] for p in parts] == names
    assert [p["encoding"]["y"]["title"] for p in parts[:5]] == ["Query", None, None, None, "Query"]
    assert [p["encoding"]["x"]["title"] for p in parts[7:9]] == [None, "Key"]


def test_heatmap_field_names_are_escaped_and_unique():
    df = pd.DataFrame({"row": ["a", "b"], "col": ["a", "a"], "value": [1.23456e-7, 0.5]})
    chart = charts.heatmap_chart(
        df,
        charts.HeatmapSpec(
            title="",
            x_title="q.k [i]",
            y_title="q.k [i]",
            value_title="Δ",
            row_order=["a", "b"],
            col_order=["a"],
            value_format=".2e",
            annotate=True,
        ),
    )
    spec = chart.to_dict()
    (rows,) = spec["datasets"].values()
    assert list(rows[0]) == ["q.k [i]", "q.k [i] (2)", "Δ"]
    assert rows[0]["Δ"] == 1.23e-7  # three significant digits, as ".2e" shows them
    rect, text = spec["layer"]
    assert rect["encoding"]["y"]["field"] == "q\\.k \\[i\\]"
    assert rect["encoding"]["x"]["field"] == "q\\.k \\[i\\] (2)"
    assert text["encoding"]["color"]["condition"]["test"] == 'datum["Δ"] > 0.25'


def _line(x_values) -> dict:
    frame = pd.DataFrame({"x": list(x_values), "y": np.arange(len(x_values)) + 1.0, "s": "a"})
    chart = charts.layered_line_chart(
        frame, x="x", y="y", color="s", title="t", x_title="x", y_title="y", color_title="s"
    )
    return chart.to_dict()["encoding"]["x"]["axis"]


def test_whole_number_positions_get_whole_ticks_only():
    """Issue 33 D7: the copy chart at length 4 had ticks 1.2, 1.4, …"""
    assert _line([1, 2, 3, 4]) == {"format": "d", "tickMinStep": 1}
    assert "tickMinStep" not in _line([0.5, 1.0, 1.5])


def test_the_effect_scatter_names_only_the_largest_effects():
    """Issue 33 D7: 30 heads' labels stacked into a blob near 0."""
    from dashboard.charts.head_grid import SCATTER_LABELS, effect_scatter_chart

    rng = np.random.default_rng(0)
    effect = rng.normal(scale=0.01, size=30)
    effect[[3, 17]] = [4.2, -2.5]
    frame = pd.DataFrame(
        {"head": [f"16.{i}" for i in range(30)], "estimate": rng.normal(size=30), "effect": effect}
    )
    spec = effect_scatter_chart(frame, title="t", x_title="x", y_title="y", head_title="h")
    layers = spec.to_dict()
    texts = [layer for layer in layers["layer"] if layer["mark"]["type"] == "text"]
    named = layers["datasets"][texts[0]["data"]["name"]]
    largest = frame.loc[frame["effect"].abs().nlargest(SCATTER_LABELS).index, "head"]
    assert sorted(row["head"] for row in named) == sorted(largest)
    assert {"16.3", "16.17"} <= {row["head"] for row in named} and len(named) == SCATTER_LABELS
