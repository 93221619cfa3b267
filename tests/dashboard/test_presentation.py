"""The presentation view (``present=true``) and upright Chinese: what Vega draws for each chart
of a page (its scenegraph, through vl-convert), and where the page's controls go."""

from __future__ import annotations

import pytest

from dashboard.charts.readable import PRESENT_LABEL_PX, PRESENT_TITLE_PX, has_cjk
from tests.dashboard.conftest import assert_clean, open_app
from tests.pictures import element_spec

PRESENT = {"present": "true"}
PAGES = ("step_by_step", "scaling", "multihead")


def _texts(node: dict, role: str | None = None):
    """Every text item of a scenegraph with the role of its mark."""
    for item in node.get("items", []):
        if not isinstance(item, dict):
            continue
        if node.get("marktype") == "text":
            yield node.get("role"), item
        for child in item.get("items", []):
            if isinstance(child, dict) and "marktype" in child:
                yield from _texts(child)
        if "marktype" in item:
            yield from _texts(item)


def drawn_texts(at) -> list[tuple[str, dict]]:
    """(role, text item) of every text Vega draws in every chart on the page."""
    import vl_convert as vlc

    found = []
    for element in at.get("vega_lite_chart"):
        scene = vlc.vegalite_to_scenegraph(element_spec(element))
        found += list(_texts(scene["scenegraph"]))
    return found


@pytest.mark.parametrize("page", PAGES)
def test_presenting_draws_axis_text_and_titles_large_enough_for_the_back_of_a_room(page):
    at = open_app(page, **PRESENT)
    assert_clean(at)
    texts = drawn_texts(at)
    labels = [item for role, item in texts if role in ("axis-label", "axis-title", "legend-label")]
    titles = [item for role, item in texts if role == "title-text"]
    assert labels and titles
    small = sorted({(i.get("text"), i.get("fontSize")) for i in labels if i["fontSize"] < 16})
    assert not small, small[:10]
    assert min(item["fontSize"] for item in titles) >= PRESENT_TITLE_PX >= 20
    assert PRESENT_LABEL_PX >= 16
    # and without the view, the page keeps its own smaller text
    plain = drawn_texts(open_app(page))
    assert min(i["fontSize"] for role, i in plain if role == "axis-label") < PRESENT_LABEL_PX


def test_presenting_moves_the_controls_above_the_page_and_a_link_reads_1():
    at = open_app("step_by_step", present="1")
    assert_clean(at)
    assert not at.sidebar.slider, "the page's sliders are still in the sidebar"
    assert len(at.main.slider) >= 3
    assert [e.label for e in at.main.expander][:1] == ["Controls"]
    plain = open_app("step_by_step")
    assert len(plain.sidebar.slider) >= 3 and not plain.main.slider


@pytest.mark.parametrize("page", PAGES)
def test_chinese_y_titles_stand_upright_and_english_ones_turn(page):
    for lang in ("zh", "en"):
        at = open_app(page, lang=lang)
        titles = [item for role, item in drawn_texts(at) if role == "axis-title"]
        upright = [item for item in titles if item.get("angle", 0) % 360 == 0]
        turned = [item for item in titles if item.get("angle", 0) % 360 != 0]
        if lang == "zh":
            cjk_turned = [item["text"] for item in turned if has_cjk(str(item["text"]))]
            assert not cjk_turned, cjk_turned
        else:
            assert not any(has_cjk(str(item["text"])) for item in upright + turned)


def test_presenting_folds_each_section_s_explanation_behind_read_more():
    """Properties has five sections, each with a paragraph: on the projector each folds
    behind "Read more"; the title, the chart and its key numbers stay."""
    from dashboard.i18n import t_in

    at = open_app("properties", **PRESENT)
    assert_clean(at)
    folded = [e for e in at.expander if e.label == t_in("en", "common.present_more")]
    assert len(folded) == 5 and not any(e.proto.expanded for e in folded)
    inside = [m.value for e in folded for m in e.markdown]
    assert t_in("en", "properties.eq_intro") in inside
    plain = open_app("properties")
    assert not [e for e in plain.expander if e.label == t_in("en", "common.present_more")]
    assert t_in("en", "properties.eq_intro") in [m.value for m in plain.markdown]


def test_presenting_names_every_bar_of_multihead_s_charts():
    """Each head's bar is named under it: Vega hides no label for overlap (it did 6 of 8)."""
    from dashboard.i18n import t_in

    at = open_app("multihead", **PRESENT)
    assert_clean(at)
    heads = {t_in("en", "multihead.head_name", h=h) for h in range(8)}
    shown = [
        item["text"]
        for role, item in drawn_texts(at)
        if role == "axis-label" and item.get("text") in heads and item.get("opacity", 1) != 0
    ]
    assert sorted(shown) == sorted([*heads, *heads])  # the entropy and the distance charts


@pytest.mark.parametrize("page", ["multihead", "scaling"])
def test_presenting_stacks_the_charts_drawn_side_by_side(page):
    """Half of an 853 px page leaves a map narrower than its legend and bars too narrow to
    name: when presenting, no chart shares a row."""

    def in_columns(at) -> int:
        return sum(len(column.get("vega_lite_chart")) for column in at.columns)

    at = open_app(page, **PRESENT)
    assert_clean(at)
    assert in_columns(at) == 0
    assert in_columns(open_app(page)) >= 2  # side by side on a wide screen
