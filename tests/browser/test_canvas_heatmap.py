"""The canvas heatmap in Chromium: each cell has the colour Vega gives its value (rendered
independently by vl-convert from the Altair heatmap's own scale), and hovering a cell shows
its head, tokens, weight and raw score from the literal matrices in canvas_app.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench.browser import streamlit_server, wait_idle
from dashboard import charts
from tests.browser.canvas_app import (
    CHINESE_SPEC,
    COLS,
    GRID_SPEC,
    MODEL_TITLES,
    MODEL_TOKENS,
    MODEL_WEIGHTS,
    PANELS,
    ROWS,
    SCORES,
    SIGNED,
    SIGNED_SPEC,
    TINY_SPEC,
    WEIGHTS,
    tidy,
)
from tests.dashboard.conftest import vega_colours

COLOUR_TOLERANCE = 3  # per RGB channel, out of 255


@pytest.fixture(scope="module")
def canvas_page(browser, tmp_path_factory):
    """The test app's page, both heatmaps drawn."""
    log = tmp_path_factory.mktemp("canvas") / "server.log"
    with streamlit_server(log_path=log, app="tests/browser/canvas_app.py") as server:
        context = browser.new_context(viewport={"width": 1200, "height": 900})
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(server.url)
        wait_idle(page)
        page.wait_for_function(
            "() => document.querySelectorAll('.attn-heatmap[data-paints]').length === 5"
        )
        yield page
        assert not errors, errors
        context.close()


def _colour_encoding(spec: dict) -> dict:
    """The first ``color`` encoding in a Vega-Lite spec (any panel or layer)."""
    if isinstance(spec, dict):
        if "encoding" in spec and "color" in spec["encoding"]:
            return spec["encoding"]["color"]
        children = spec.values()
    elif isinstance(spec, list):
        children = spec
    else:
        return {}
    for child in children:
        found = _colour_encoding(child)
        if found:
            return found
    return {}


def chart_colours(values: np.ndarray, chart) -> np.ndarray:
    """(N, 3) RGB that Vega gives ``values`` on the colour scale of the Altair ``chart``."""
    return vega_colours(values, _colour_encoding(chart.to_dict())["scale"])


def drawn_cells(page, index: int, shape: tuple[int, int] = (len(ROWS), len(COLS))) -> np.ndarray:
    """(P, R, C, 3) RGB at every cell centre of the index-th canvas heatmap of R × C maps."""
    pixels = page.evaluate(
        """(index) => {
            const wrap = document.querySelectorAll('.attn-heatmap')[index];
            const layout = JSON.parse(wrap.dataset.layout);
            const canvas = wrap.querySelector('canvas');
            const k = canvas.width / layout.width;
            const ctx = canvas.getContext('2d');
            const rows = Number(wrap.dataset.rows), cols = Number(wrap.dataset.cols);
            return layout.panels.map(([x, y]) => {
                const panel = [];
                for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) {
                    const px = Math.floor((x + (c + 0.5) * layout.cell[0]) * k);
                    const py = Math.floor((y + (r + 0.5) * layout.cell[1]) * k);
                    panel.push(Array.from(ctx.getImageData(px, py, 1, 1).data.slice(0, 3)));
                }
                return panel;
            });
        }""",
        index,
    )
    return np.array(pixels).reshape(len(pixels), *shape, 3)


def test_cells_have_vega_colours_on_a_shared_sqrt_scale(canvas_page):
    drawn = drawn_cells(canvas_page, 0)
    chart = charts.heatmap_chart(tidy(WEIGHTS, SCORES), GRID_SPEC)
    expected = chart_colours(WEIGHTS.ravel(), chart).reshape(drawn.shape)
    assert np.abs(drawn - expected).max() <= COLOUR_TOLERANCE, (drawn - expected).max()


def test_signed_cells_have_vega_colours_on_a_diverging_scale(canvas_page):
    drawn = drawn_cells(canvas_page, 1)
    chart = charts.heatmap_chart(tidy(SIGNED[None]).drop(columns="panel"), SIGNED_SPEC)
    expected = chart_colours(SIGNED.ravel(), chart).reshape(drawn.shape)
    assert np.abs(drawn - expected).max() <= COLOUR_TOLERANCE, (drawn - expected).max()


def _hover(page, index: int, panel: int, row: int, col: int) -> str:
    wrap = page.locator(".attn-heatmap").nth(index)
    wrap.scroll_into_view_if_needed()
    layout = json.loads(wrap.get_attribute("data-layout"))
    box = wrap.locator("canvas").first.bounding_box()
    k = box["width"] / layout["width"]
    x, y = layout["panels"][panel]
    cell_w, cell_h = layout["cell"]
    page.mouse.move(0, 0)  # off the canvas first: a pointer already there sends no move
    page.mouse.move(
        box["x"] + (x + (col + 0.5) * cell_w) * k, box["y"] + (y + (row + 0.5) * cell_h) * k
    )
    tooltip = wrap.locator(".attn-heatmap-tooltip")
    tooltip.wait_for(state="visible")
    return tooltip.inner_text()


@pytest.mark.parametrize(("panel", "row", "col"), [(0, 0, 0), (1, 2, 3), (1, 1, 0)])
def test_hovering_a_cell_shows_its_tokens_weight_and_score(canvas_page, panel, row, col):
    lines = dict(line.split("\t") for line in _hover(canvas_page, 0, panel, row, col).splitlines())
    assert lines == {
        "Head": PANELS[panel],
        "Query token": ROWS[row],
        "Key token": COLS[col],
        "Weight": f"{WEIGHTS[panel, row, col]:.4f}",
        "Raw score": f"{SCORES[panel, row, col]:.4f}",
    }


def test_tooltip_hides_when_the_pointer_leaves_the_cells(canvas_page):
    _hover(canvas_page, 0, 0, 1, 1)
    canvas_page.mouse.move(2, 2)
    tooltip = canvas_page.locator(".attn-heatmap-tooltip").first
    tooltip.wait_for(state="hidden")


def test_a_one_cell_maps_legend_fits_under_its_title_with_room_for_its_ticks(canvas_page):
    """Regression: the 1 × 1 map's legend title sat over the chart's title and its six tick
    labels crowded a 60-pixel bar."""
    layout = json.loads(
        canvas_page.evaluate("() => document.querySelectorAll('.attn-heatmap')[2].dataset.layout")
    )
    title_top, bar_top, bar_h = layout["legend"]
    assert title_top >= layout["titles_bottom"]  # below the chart's title and subtitle
    assert bar_top > title_top and bar_h >= 120
    assert bar_top + bar_h <= layout["height"]


def _scales() -> list[dict]:
    """The colour scale of each heatmap on the test page, in page order (canvas_app.py)."""
    specs = [
        charts.heatmap_canvas_spec(WEIGHTS, GRID_SPEC, scores=SCORES, panels=PANELS),
        charts.heatmap_canvas_spec(SIGNED, SIGNED_SPEC),
        charts.heatmap_canvas_spec(np.ones((1, 1)), TINY_SPEC),
        charts.heatmap_canvas_spec(WEIGHTS[0], CHINESE_SPEC),
        charts.model_view_spec(MODEL_WEIGHTS, MODEL_TOKENS, **MODEL_TITLES),
    ]
    return [spec["scale"] for spec in specs]


def test_legend_ticks_sit_on_the_scale_with_room_for_their_labels(canvas_page):
    """Every legend's ticks sit where the scale's own transform puts their values (a square
    root measured from the domain's start, by an explicit float64 formula); the domain's
    start and a value in its top quarter are labelled; labels are at least their own height
    and 6 px apart: on a square-root scale the round values 0.8 and 1.0 sat 13 px apart,
    their labels overlapping (the census's head map on the projector)."""
    layouts = canvas_page.evaluate(
        "() => Array.from(document.querySelectorAll('.attn-heatmap'))"
        ".map((w) => JSON.parse(w.dataset.layout))"
    )
    scales = _scales()
    assert len(layouts) == len(scales)
    for layout, scale in zip(layouts, scales, strict=True):
        lo, hi = scale["domain"]
        warp = np.sqrt if scale["type"] == "sqrt" else (lambda v: v)
        bar_h = layout["legend"][2]
        values = np.array([value for value, _ in layout["legend_ticks"]], dtype=np.float64)
        ys = np.array([y for _, y in layout["legend_ticks"]], dtype=np.float64)
        expected = bar_h * (1 - (warp(values) - warp(lo)) / (warp(hi) - warp(lo)))
        np.testing.assert_allclose(ys, expected, atol=1e-6)
        assert values.min() == pytest.approx(lo) and hi - values.max() < (hi - lo) / 4, values
        assert np.all(np.diff(ys) >= layout["label_px"] + 6), (scale, values, ys)


def test_a_chinese_y_title_stands_upright_above_the_grid(canvas_page):
    """Turned −90° along the axis, CJK lies on its side: the map with 查询词元 draws it level,
    above the grid; the maps with Latin titles turn theirs along the axis."""
    layouts = [
        json.loads(layout)
        for layout in canvas_page.evaluate(
            "() => Array.from(document.querySelectorAll('.attn-heatmap'))"
            ".map((el) => el.dataset.layout)"
        )
    ]
    assert [layout["y_title_upright"] for layout in layouts] == [False, False, False, True, False]


MODEL_INDEX = 4  # the model view: 2 layers × 3 heads of 4 tokens


def test_the_model_view_paints_each_weight_in_vega_s_colour_on_a_square_root_scale(canvas_page):
    """Every cell of every layer's and head's map has the colour Vega's square-root scale
    from 0 to 1 gives its weight, maps in rows of layers and columns of heads."""
    n = len(MODEL_TOKENS)
    drawn = drawn_cells(canvas_page, MODEL_INDEX, (n, n))  # (N·H, l, l, 3), row-major
    scale = {"type": "sqrt", "domain": [0.0, 1.0], "scheme": charts.base.SEQUENTIAL_SCHEME}
    expected = vega_colours(MODEL_WEIGHTS.ravel(), scale).reshape(drawn.shape)
    assert np.abs(drawn - expected).max() <= COLOUR_TOLERANCE, (drawn - expected).max()
    layout = json.loads(
        canvas_page.locator(".attn-heatmap").nth(MODEL_INDEX).get_attribute("data-layout")
    )
    xs = sorted({x for x, _ in layout["panels"]})
    ys = sorted({y for _, y in layout["panels"]})
    assert (len(ys), len(xs)) == MODEL_WEIGHTS.shape[:2]  # a row per layer, a column per head
    assert layout["width"] <= 1200


@pytest.mark.parametrize(("layer", "head", "row", "col"), [(0, 0, 0, 0), (1, 2, 3, 1)])
def test_hovering_the_model_view_names_the_layer_head_tokens_and_weight(
    canvas_page, layer, head, row, col
):
    heads = MODEL_WEIGHTS.shape[1]
    text = _hover(canvas_page, MODEL_INDEX, layer * heads + head, row, col)
    lines = dict(line.split("\t") for line in text.splitlines())
    assert lines == {
        MODEL_TITLES["layer_title"]: str(layer + 1),
        MODEL_TITLES["head_title"]: str(head + 1),
        MODEL_TITLES["query_title"]: MODEL_TOKENS[row],
        MODEL_TITLES["key_title"]: MODEL_TOKENS[col],
        MODEL_TITLES["weight_title"]: f"{MODEL_WEIGHTS[layer, head, row, col]:.4f}",
    }
