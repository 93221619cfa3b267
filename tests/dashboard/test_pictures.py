"""Pictures as pixels: on every page that prints values or labels in heatmap cells, the colour
Vega paints under each printed cell is the colour the chart's own scale gives that cell's
value, and the cell a page says it takes apart is the one outlined (tests/pictures.py reads
the charts as Streamlit sends them, drawn by Vega through vl-convert)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dashboard import charts
from tests.dashboard.conftest import open_app
from tests.pictures import (
    COLOUR_TOLERANCE,
    cell_layers,
    element_spec,
    hex_rgb,
    outlines,
    painted_cells,
    printed_digits,
    printed_number,
    rank_agreement,
)

ROUNDING_SLACK = 0.5 + 1e-9  # a printed value is within half a unit of its last digit
# (page, query): the views whose printed heatmaps are checked; the real-model pages' grids
# run in the model tier (tests/conftest.py marks a `page` in MODEL_PAGES)
VIEWS = [
    ("step_by_step", {}),
    (
        "step_by_step",
        {
            "step_by_step.tokens": "8",
            "step_by_step.d_k": "8",
            "step_by_step.causal": "true",
            "step_by_step.sentence": "preset_en",
            "step_by_step.query": "5",
            "step_by_step.key": "2",
        },
    ),
    ("step_by_step", {"step_by_step.tokens": "4", "step_by_step.d_k": "1"}),
    ("heads", {}),
]


def printed_charts(at) -> list[tuple[str, dict]]:
    """(title, spec) of every chart on the page that prints text over coloured cells."""
    found = []
    for element in at.get("vega_lite_chart"):
        spec = element_spec(element)
        if cell_layers(spec) is not None:
            title = spec.get("title", {})
            found.append((title.get("text") if isinstance(title, dict) else str(title), spec))
    return found


def check_cells(title, cells) -> list[str]:
    """Readable lines for every cell painted off its colour or printing another row's value."""
    problems = []
    for cell in cells:
        if cell.distance > COLOUR_TOLERANCE:
            problems.append(
                f"{title}: {cell.text!r} (value {cell.value:.4f}) painted on {cell.painted}, "
                f"its colour is {cell.expected}"
            )
        number = printed_number(cell.text)
        unit = 10.0 ** -printed_digits(cell.text)
        if number is not None and abs(number - cell.value) > ROUNDING_SLACK * unit:
            problems.append(f"{title}: {cell.text!r} printed over the row of {cell.value:.4f}")
    return problems


@pytest.mark.parametrize(("page", "query"), VIEWS, ids=lambda v: str(v) if v else "default")
def test_every_printed_cell_sits_on_its_own_colour(page, query):
    at = open_app(page, **query)
    printed = printed_charts(at)
    assert printed, f"{page} drew no chart with printed cells"
    problems, worst, outlined = [], 1.0, 0
    stroke = np.array(hex_rgb(charts.CHOSEN_STROKE))
    for title, spec in printed:
        cells = painted_cells(spec)
        problems += check_cells(title, cells)
        worst = min(worst, rank_agreement(cells))
        for outline in outlines(spec):  # a chosen cell's outline is painted where it says
            outlined += 1
            if np.abs(np.array(outline.edge) - stroke).max() > COLOUR_TOLERANCE:
                problems.append(f"{title}: the outline of {outline.row} is not painted")
    print(
        f"{page} {query}: {len(printed)} printed heatmaps ({outlined} outlined cells), "
        f"worst rank agreement {worst:.3f}"
    )
    assert not problems, "\n".join(problems[:20])
    assert worst >= 0.99


def test_step_by_step_outlines_the_cell_it_takes_apart():
    i, j = 3, 1
    causal = {"step_by_step.causal": "true"}  # the mask is drawn (without it: all 1s, in words)
    at = open_app(
        "step_by_step", **{"step_by_step.query": str(i), "step_by_step.key": str(j), **causal}
    )
    outlined = {}
    for title, spec in printed_charts(at):
        for outline in outlines(spec):
            outlined[title] = outline
    # the five n × n matrices: scores, scaled scores, the causal mask, the masked scores and
    # the weights
    assert len(outlined) == 5, sorted(outlined)
    stroke = np.array(hex_rgb(charts.CHOSEN_STROKE))
    for title, outline in outlined.items():
        assert outline.row["row"].startswith(f"{i} ") and outline.row["col"].startswith(f"{j} ")
        assert np.abs(np.array(outline.edge) - stroke).max() <= COLOUR_TOLERANCE, title
        others = np.abs(np.array(outline.other_edges) - stroke).max(axis=1)
        # the cell's neighbours below and right share part of its edge: none other is painted
        assert (others > COLOUR_TOLERANCE).sum() >= len(others) - 1, title


def test_a_heatmap_drawn_smaller_than_its_cells_keeps_each_colour_under_its_number():
    """Whatever box the browser fits a chart into, each rect fills its own band: the class of
    bug where constant-size rects overlapped their neighbours and the colours slid a row."""
    rows, cols = [f"r{i}" for i in range(6)], [f"c{j}" for j in range(4)]
    values = np.random.default_rng(3).normal(size=(6, 4))
    frame = pd.DataFrame(
        {
            "row": np.repeat(rows, 4),
            "col": np.tile(cols, 6),
            "value": values.ravel(),
        }
    )
    look = charts.HeatmapSpec(
        title="T",
        x_title="",
        y_title="",
        value_title="v",
        row_order=tuple(rows),
        col_order=tuple(cols),
        diverging=True,
        annotate=True,
        value_format=".2f",
        width=176,
    )
    spec = charts.heatmap_chart(frame, look).to_dict()
    # Streamlit's default autosize: title, labels and legend fitted inside the cells' own
    # width and height, so each band is far smaller than the cell size the builder chose
    spec["autosize"] = {"type": "fit", "contains": "padding"}
    cells = painted_cells(spec)
    assert len(cells) == 24
    assert not check_cells("squeezed", cells)


def test_the_head_grid_outlines_the_chosen_head_and_colours_every_cell():
    """The Heads at work grid (layers × heads, each cell lettered with its label): the letter
    sits on its own score's colour, and the outline is painted around the chosen head."""
    from dashboard.charts.head_grid import HeadGridTitles, head_score_chart

    rng = np.random.default_rng(5)
    layers, heads = 6, 9
    frame = pd.DataFrame(
        {
            "layer": np.repeat(np.arange(layers), heads),
            "head": np.tile(np.arange(heads), layers),
            "score": rng.random(layers * heads),
            "label": rng.choice(["previous", "first", "mixed"], layers * heads),
        }
    )
    titles = HeadGridTitles("T", "Head", "Layer", "Score", "Label")
    marks = {"previous": "P", "first": "F", "mixed": ""}
    chosen = (4, 7)
    spec = head_score_chart(frame, titles, marks=marks, value_format=".2f", chosen=chosen).to_dict()
    spec["autosize"] = {"type": "fit", "contains": "padding"}  # as Streamlit sends it
    cells = painted_cells(spec)
    assert len(cells) == layers * heads
    bad = [c for c in cells if c.distance > COLOUR_TOLERANCE]
    assert not bad, bad[:3]
    assert [c.text for c in cells] == [marks[label] for label in frame["label"]]
    (outline,) = outlines(spec)
    assert (outline.row["layer"], outline.row["head"]) == chosen
    stroke = np.array(hex_rgb(charts.CHOSEN_STROKE))
    assert np.abs(np.array(outline.edge) - stroke).max() <= COLOUR_TOLERANCE


def test_the_model_view_sends_each_weight_for_a_square_root_scale():
    """The model view's canvas data holds every layer's and head's weights as they are (rows
    of layers, columns of heads), on a square-root scale from 0 to 1 whose legend says so; on
    it a small weight (a trained head's share off [CLS] or [SEP]) is visibly darker than none,
    as it was not on a linear scale. (The browser test paints it: test_canvas_heatmap.)"""
    import base64

    from dashboard.charts.base import SEQUENTIAL_SCHEME
    from dashboard.charts.model_views import model_view_spec
    from tests.pictures import scale_colours

    rng = np.random.default_rng(2)
    length = 5
    weights = rng.dirichlet(np.full(length, 0.3), size=(2, 3, length))  # (N, H, L, L)
    spec = model_view_spec(
        weights,
        list("abcde"),
        title="T",
        subtitle=None,
        layer_title="Layer",
        head_title="Head",
        query_title="q",
        key_title="k",
        weight_title="w",
        sqrt_note="√",
    )
    sent = np.frombuffer(base64.b64decode(spec["values"]), dtype="<f4")
    np.testing.assert_array_equal(sent, weights.astype(np.float32).ravel())
    assert spec["grid"]["row_names"] == ["1", "2"] and spec["grid"]["col_names"] == ["1", "2", "3"]
    assert spec["scale"]["type"] == "sqrt" and spec["scale"]["domain"] == [0.0, 1.0]
    assert spec["legend_title"] == "w (√)"
    sqrt = {"type": "sqrt", "domain": [0.0, 1.0], "scheme": SEQUENTIAL_SCHEME}
    linear = {"type": "linear", "domain": [0.0, 1.0], "scheme": SEQUENTIAL_SCHEME}
    sqrt_small, sqrt_none = scale_colours([0.04, 0.0, 1.0], sqrt)[:2]
    lin_small, lin_none = scale_colours([0.04, 0.0, 1.0], linear)[:2]
    assert np.abs(sqrt_small - sqrt_none).max() >= 3 * np.abs(lin_small - lin_none).max()
    assert np.abs(sqrt_small - sqrt_none).max() >= 40
    with pytest.raises(ValueError, match="model view weights"):
        model_view_spec(
            weights,
            list("abcd"),
            **{k: "x" for k in ("title", "subtitle")},
            layer_title="L",
            head_title="H",
            query_title="q",
            key_title="k",
            weight_title="w",
            sqrt_note="√",
        )
