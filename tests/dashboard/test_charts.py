"""Pooling, tidy heatmap tables, chart builders and exports."""

from __future__ import annotations

import io
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import vl_convert

from dashboard import charts, data, exports
from dashboard.config import StepConfig
from dashboard.numbers import parse_plain_number


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
    """Regression: the copy chart at length 4 had ticks 1.2, 1.4, …"""
    assert _line([1, 2, 3, 4]) == {"format": "d", "tickMinStep": 1}
    assert "tickMinStep" not in _line([0.5, 1.0, 1.5])


def test_the_effect_scatter_names_only_the_largest_effects():
    """Regression: 30 heads' labels stacked into a blob near 0."""
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


# --- how a chart reads: axis labels, lines, bars, letters, drawn by Vega (vl-convert) --------

SVG_TEXT = re.compile(r"<text([^>]*)>([^<]*)</text>")
SVG_LINE = re.compile(
    r'<path aria-label="[^"]*; s: ([^"]+)" role="graphics-symbol" '
    r'aria-roledescription="line mark" d="([^"]+)"([^>]*)/>'
)


def _shown_texts(spec: dict) -> list[tuple[str, str]]:
    """(text, its attributes) of every text Vega draws visibly (labels it hides for overlap
    are drawn at opacity 0)."""
    svg = vl_convert.vegalite_to_svg(spec)
    return [(text, attrs) for attrs, text in SVG_TEXT.findall(svg) if 'opacity="0"' not in attrs]


def _log_charts(frame: pd.DataFrame) -> dict[str, dict]:
    """Every builder's log axes, on values spanning 10⁻⁸..10."""
    common = {"title": "t", "x_title": "X", "y_title": "Y"}
    return {
        "line": charts.line_chart(frame, x="x", y="y", log_x=True, log_y=True, **common),
        "layered": charts.layered_line_chart(
            frame, x="x", y="y", color="s", color_title="s", log_x=True, log_y=True, **common
        ),
        "layered few x": charts.layered_line_chart(
            frame.head(5), x="x", y="y", color="s", color_title="s", log_x=True, **common
        ),
        "grouped bars": charts.grouped_bar_chart(
            frame.assign(x=[f"c{i}" for i in range(len(frame))]),
            x="x",
            y="y",
            color="s",
            color_title="s",
            log_y=True,
            **common,
        ),
    }


@pytest.mark.parametrize("present", [False, True], ids=["plain", "presenting"])
def test_every_log_axis_reads_in_plain_notation(present):
    from dashboard.charts.readable import ChartLook, readable_chart

    decades = 10.0 ** np.arange(-8, 2)  # 10⁻⁸ … 10
    frame = pd.DataFrame({"x": decades, "y": decades[::-1] * 3.0, "s": "a"})
    for name, chart in _log_charts(frame).items():
        texts = [
            text
            for text, _ in _shown_texts(readable_chart(chart, ChartLook(present=present)).to_dict())
        ]
        numbers = [text for text in texts if text and text[0].isdigit()]
        assert numbers, name
        assert not [n for n in numbers if re.search(r"\de[+-−]?\d", n)], (name, numbers)
        values = [parse_plain_number(n) for n in numbers]  # each label reads as a number
        assert all(v >= 0 for v in values), (name, numbers)
        if name != "layered few x":  # decades: labelled at powers of ten only
            assert "10⁻⁸" in numbers or "10⁻⁷" in numbers, (name, numbers)
            small = [v for v in values if v < 1e-3]
            assert all(math.log10(v) == round(math.log10(v)) for v in small), (name, numbers)


def test_log_scales_are_made_only_by_the_builders_that_label_them():
    """A log scale anywhere else would miss :data:`charts.builders.POWER_LABEL_EXPR`."""
    root = Path(charts.__file__).parents[1]
    pattern = re.compile(r'type="log"|"type": "log"|type=\'log\'')
    found = {
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if pattern.search(path.read_text(encoding="utf-8"))
    }
    assert found == {"charts/builders.py"}


def test_an_e_notation_tooltip_is_written_as_a_power_of_ten():
    frame = pd.DataFrame({"x": ["a", "b"], "y": [2.98e-08, 0.0004], "s": ["m", "m"]})
    chart = charts.grouped_bar_chart(
        frame,
        x="x",
        y="y",
        color="s",
        title="t",
        x_title="X",
        y_title="Y",
        color_title="s",
        value_format=".2e",
    ).to_dict()
    (shown,) = [tip for tip in chart["encoding"]["tooltip"] if tip["title"] == "Y"]
    rows = chart["datasets"][chart["data"]["name"]]
    texts = [row[shown["field"]] for row in rows]
    assert texts == ["2.98 × 10⁻⁸", "4.00 × 10⁻⁴"]
    assert [parse_plain_number(text) for text in texts] == pytest.approx(frame["y"].tolist())


def test_a_dashed_series_lies_thin_on_top_of_the_line_it_follows():
    """The √d_k theory and the measured unscaled std nearly coincide: the measured line is
    drawn whole and once, the theory once, after it, thinner and dashed."""
    d_ks = np.array([32, 64, 128, 256])
    frame = pd.concat(
        [
            pd.DataFrame({"d_k": d_ks, "s": "unscaled", "v": np.sqrt(d_ks) * 1.01}),
            pd.DataFrame({"d_k": d_ks, "s": "scaled", "v": 1.0}),
            pd.DataFrame({"d_k": d_ks, "s": "theory", "v": np.sqrt(d_ks)}),
        ]
    )
    chart = charts.layered_line_chart(
        frame,
        x="d_k",
        y="v",
        color="s",
        title="t",
        x_title="d_k",
        y_title="v",
        color_title="s",
        dashed=["theory"],
        log_x=True,
    )
    svg = vl_convert.vegalite_to_svg(chart.to_dict())
    drawn = [(name, attrs) for name, _path, attrs in SVG_LINE.findall(svg)]
    assert [name for name, _ in drawn] == ["unscaled", "scaled", "theory"]  # each once, in order

    def width(attrs):
        return float(re.search(r'stroke-width="([\d.]+)"', attrs).group(1))

    def dash(attrs):
        return re.search(r'stroke-dasharray="([^"]+)"', attrs).group(1)

    under, theory = dict(drawn)["unscaled"], dict(drawn)["theory"]
    assert width(theory) < width(under)  # the one on top is the thinner
    assert dash(theory) != dash(under) and dash(under) == "1,0"


@pytest.mark.parametrize("width", [300, 360, 700])
def test_every_bar_is_named_in_the_presentation_view(width):
    from dashboard.charts.readable import ChartLook, readable_chart

    heads = [f"Head {h}" for h in range(8)]
    frame = pd.DataFrame({"name": heads, "entropy": np.linspace(2.70, 2.77, 8)})
    chart = charts.bar_chart(
        frame, x="name", y="entropy", title="Mean entropy", x_title="Head", y_title="Entropy"
    )
    spec = readable_chart(chart, ChartLook(present=True)).to_dict() | {"width": width}
    shown = [text for text, _ in _shown_texts(spec)]
    assert [text for text in shown if text in heads] == heads


def test_census_letters_are_16_px_when_presenting():
    from dashboard.charts.head_grid import HeadGridTitles, head_score_chart
    from dashboard.charts.readable import PRESENT_LABEL_PX, ChartLook, readable_chart

    rng = np.random.default_rng(1)
    frame = pd.DataFrame(
        {
            "layer": np.repeat(np.arange(3), 4),
            "head": np.tile(np.arange(4), 3),
            "score": rng.random(12),
            "label": rng.choice(["previous", "first"], 12),
        }
    )
    sizes = {}
    for look in (ChartLook(), ChartLook(present=True)):
        chart = head_score_chart(
            frame,
            HeadGridTitles("T", "Head", "Layer", "Score", "Label"),
            marks={"previous": "P", "first": "F"},
            value_format=".2f",
            letter_px=look.letter_px,
        )
        letters = [
            a for text, a in _shown_texts(readable_chart(chart, look).to_dict()) if text in "PF"
        ]
        assert len(letters) == 12
        sizes[look.present] = {
            float(re.search(r'font-size="([\d.]+)px"', a).group(1)) for a in letters
        }
    assert sizes[True] == {PRESENT_LABEL_PX} and min(sizes[True]) >= 16
    assert sizes[False] == {10}


def test_a_tiny_value_in_a_g_format_tooltip_is_written_as_a_power_of_ten():
    """d3's ``.4g`` writes 2.98e-8 as ``2.980e-8``; the line charts' tooltips do not."""
    frame = pd.DataFrame({"x": [1.0, 2.0, 4.0], "y": [2.98e-08, 0.5, 3.0e6], "s": "a"})
    common = {"title": "t", "x_title": "X", "y_title": "Y"}
    built = {
        "line": charts.line_chart(frame, x="x", y="y", log_y=True, **common),
        "layered": charts.layered_line_chart(
            frame, x="x", y="y", color="s", color_title="s", log_y=True, **common
        ),
    }
    for name, chart in built.items():
        spec = chart.to_dict()
        (shown,) = [tip for tip in spec["encoding"]["tooltip"] if tip["title"] == "Y"]
        texts = [row[shown["field"]] for row in spec["datasets"][spec["data"]["name"]]]
        assert texts == ["2.980 × 10⁻⁸", "0.5000", "3.000 × 10⁶"], name
        assert [parse_plain_number(text) for text in texts] == pytest.approx(frame["y"].tolist())
    plain = frame.assign(y=[0.25, 0.5, 3.0])  # plain decimals: d3's own format, as before
    spec = charts.line_chart(plain, x="x", y="y", **common).to_dict()
    assert {"field": "y", "type": "quantitative", "title": "Y", "format": ".4g"} in spec[
        "encoding"
    ]["tooltip"]


def _placed(node: dict, roles: tuple[str, ...], ox: float = 0.0, oy: float = 0.0):
    """(role, item, absolute x, absolute y) of every scenegraph item of the given roles."""
    if node.get("role") in roles:
        for item in node.get("items", []):
            yield node["role"], item, ox + item.get("x", 0), oy + item.get("y", 0)
    for item in node.get("items", []):
        if isinstance(item, dict):
            for child in item.get("items", []):
                if isinstance(child, dict):
                    yield from _placed(child, roles, ox + item.get("x", 0), oy + item.get("y", 0))


@pytest.mark.parametrize("present", [False, True], ids=["plain", "presenting"])
def test_a_legend_on_top_stands_clear_of_an_upright_chinese_y_title(present):
    from dashboard.charts.readable import ChartLook, readable_chart

    frame = pd.DataFrame(
        {
            "key": ["1", "2"] * 2,
            "s": ["不缩放"] * 2 + ["乘以 1/√d_k"] * 2,
            "w": [0.1, 0.9, 0.4, 0.6],
        }
    )
    chart = charts.grouped_bar_chart(
        frame,
        x="key",
        y="w",
        color="s",
        title="T",
        x_title="键",
        y_title="权重",
        color_title="分数",
    )
    spec = readable_chart(chart, ChartLook(upright_y=True, present=present)).to_dict()
    scene = vl_convert.vegalite_to_scenegraph(spec)["scenegraph"]
    placed = list(_placed(scene, ("legend", "axis-title")))
    (legend_bottom,) = [y + item["height"] for role, item, _x, y in placed if role == "legend"]
    (title_top,) = [
        y - item["fontSize"] for role, item, _x, y in placed if item.get("text") == "权重"
    ]
    assert legend_bottom <= title_top
