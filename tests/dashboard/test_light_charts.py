"""The dict-spec bars (dashboard.charts.light): rendered by Vega itself (vl-convert), each bar
is as long as its weight on the [0, 1] axis, in the given order; bad input is refused. And
their titles' line breaks (dashboard.charts.title_wrap), in English and Chinese."""

from __future__ import annotations

import math
import re

import altair as alt
import pytest
import vl_convert

from dashboard.charts.light import MAX_TOKEN_BARS, TOKEN_ROW_PX, token_bars_spec
from dashboard.charts.title_wrap import TITLE_WRAP_UNITS, display_units, wrap_title

BAR = re.compile(
    r'<path aria-label="w: ([^;]+); who: ([^"]+)"[^>]*aria-roledescription="bar" '
    r'd="M0,([\d.]+)h([\d.]+)v'
)
WIDTH = 200


def _spec(keys, weights, width=WIDTH):
    return token_bars_spec(
        keys, weights, title="T", token_title="who", weight_title="w", width=width
    )


def _bars(spec: dict) -> list[tuple[str, float, float, float]]:
    """(key, weight, top y, length in px) of every bar Vega draws, top to bottom."""
    svg = vl_convert.vegalite_to_svg(spec)
    found = [(k, float(w), float(y), float(px)) for w, k, y, px in BAR.findall(svg)]
    return sorted(found, key=lambda bar: bar[2])


def test_bars_are_as_long_as_their_weights_in_the_given_order():
    keys, weights = ["猫", "cat", "它"], [0.125, 0.5, 0.375]
    bars = _bars(_spec(keys, weights))
    assert [bar[0] for bar in bars] == keys  # top to bottom as given, not sorted
    for (_, shown, _, px), weight in zip(bars, weights, strict=True):
        assert shown == weight
        assert px == pytest.approx(weight * WIDTH, abs=0.01)  # the axis is [0, 1]
    tops = [bar[2] for bar in bars]
    assert tops[1] - tops[0] == pytest.approx(TOKEN_ROW_PX)  # one row step per bar


def test_spec_is_valid_vega_lite_with_its_data_inside_the_layer():
    spec = _spec(["a", "b"], [0.25, 0.75], width=None)
    alt.LayerChart.from_dict(spec)  # Altair validates against the Vega-Lite schema
    assert "data" not in spec and "datasets" not in spec  # no Arrow conversion by Streamlit
    assert spec["layer"][0]["data"]["values"] == [
        {"key": "a", "weight": 0.25},
        {"key": "b", "weight": 0.75},
    ]
    assert spec["autosize"]["type"] == "fit-x" and "width" not in spec
    assert spec["title"]["text"] == "T"


@pytest.mark.parametrize(
    ("keys", "weights", "message"),
    [
        ([], [], r"1 to .* bars, got 0"),
        (["a", "b"], [0.5], r"2 keys but 1 weights"),
        (["a", "a"], [0.5, 0.5], r"unique"),
        (["a", "b"], [0.5, math.nan], r"finite, got nan"),
        (["a", "b"], [0.5, math.inf], r"finite, got inf"),
        ([str(i) for i in range(MAX_TOKEN_BARS + 1)], [0.0] * (MAX_TOKEN_BARS + 1), r"got 513"),
    ],
)
def test_bad_bars_are_refused(keys, weights, message):
    with pytest.raises(ValueError, match=message):
        _spec(keys, weights)


@pytest.mark.parametrize(
    ("text", "units", "lines"),
    [
        (
            "Shares of your attention (softmax of the scores)",
            28,
            ["Shares of your attention", "(softmax of the scores)"],
        ),
        ("你的注意力份额（分数的 softmax）", 20, ["你的注意力份额（分", "数的 softmax）"]),
        ("abcdefghij klm", 4, ["abcd", "efgh", "ij", "klm"]),
        # no line starts with a closing bracket or ends with an opening one
        ("你带回家的内容（各书架的权重）", 16, ["你带回家的内容", "（各书架的权重）"]),
        ("你带回家的内容（各书架的权重）", 10, ["你带回家的", "内容（各书", "架的权重）"]),
        # even lines rather than a one-word last line
        ("what each token looks for", 22, ["what each token", "looks for"]),
        ("short", 28, ["short"]),
    ],
)
def test_titles_wrap_at_spaces_and_around_wide_characters(text, units, lines):
    assert wrap_title(text, units) == lines
    assert all(display_units(line) <= units for line in lines)


def test_display_units_count_a_cjk_character_twice():
    assert display_units("猫") == 2 and display_units("cat") == 3 and display_units("它 it") == 5


def test_a_long_bar_title_is_drawn_on_several_lines():
    title = "Attention of “12 它” over the tokens in this sentence"
    spec = token_bars_spec(["a"], [1.0], title=title, token_title="k", weight_title="w")
    assert spec["title"]["text"] == wrap_title(title, TITLE_WRAP_UNITS)
    assert len(spec["title"]["text"]) == 2
    svg = vl_convert.vegalite_to_svg({**spec, "width": 200, "autosize": {"type": "pad"}})
    assert all(line in svg for line in spec["title"]["text"])  # one text line each


def test_wrap_refuses_a_width_below_one():
    with pytest.raises(ValueError, match="units must be at least 1, got 0"):
        wrap_title("x", 0)
