"""Heads at work, click a head: the census grid's click selection (fields layer and head, on
the rects), the outline on the head shown, and the reading of a click into a head."""

from __future__ import annotations

import pandas as pd

from dashboard.charts.head_grid import PICK, HeadGridTitles, head_score_chart, picked_head

TITLES = HeadGridTitles("t", "Head", "Layer", "score", "label")


def _grid(chosen=None):
    frame = pd.DataFrame(
        {
            "layer": [0, 0, 1, 1],
            "head": [0, 1, 0, 1],
            "score": [0.1, 0.2, 0.3, 0.4],
            "label": ["a", "b", "a", "b"],
        }
    )
    chart = head_score_chart(frame, TITLES, marks={"a": "A"}, value_format=".2f", chosen=chosen)
    return chart.to_dict()


def test_the_grid_has_a_click_selection_on_layer_and_head():
    spec = _grid()
    params = spec["params"]  # Altair lifts a layer's selection to the top, naming its view
    assert [p["name"] for p in params] == [PICK]
    assert params[0]["views"] == [spec["layer"][0]["name"]]  # on the rects
    assert spec["layer"][0]["mark"]["type"] == "rect"
    select = params[0]["select"]
    assert select["type"] == "point" and select["on"] == "click"
    assert select["fields"] == ["layer", "head"]
    assert len(spec["layer"]) == 2  # rects and letters, no outline without a chosen head


def test_the_chosen_head_is_outlined():
    spec = _grid(chosen=(1, 0))
    outline = spec["layer"][2]
    assert outline["mark"]["fill"] is None and outline["mark"]["stroke"]
    rows = spec["datasets"][outline["data"]["name"]]
    assert [(r["layer"], r["head"]) for r in rows] == [(1, 0)]


def test_a_click_reads_as_a_head_or_nothing():
    assert picked_head([{"layer": 17, "head": 5}], 30, 9) == (17, 5)
    assert picked_head([{"layer": 1, "head": 1}, {"layer": 2, "head": 3}], 30, 9) == (2, 3)
    for bad in (None, [], [{"layer": 30, "head": 0}], [{"layer": 0, "head": 9}]):
        assert picked_head(bad, 30, 9) is None
    assert picked_head([{"layer": "1", "head": 0}], 30, 9) is None
    assert picked_head([{"layer": True, "head": 0}], 30, 9) is None
    assert picked_head([{"head": 0}], 30, 9) is None
