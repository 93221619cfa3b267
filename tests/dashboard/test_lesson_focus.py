"""A long page in a lesson: Heads at work draws the sections its lesson's steps name (and
those above them) and folds the rest, each drawn once opened; outside a lesson it draws
every section (:mod:`dashboard.lesson_focus`)."""

from __future__ import annotations

import pytest

from dashboard.i18n import t_in
from dashboard.lesson_focus import FOLD_KEY, folded_after
from dashboard.lessons.model import shipped_lessons
from tests.dashboard.conftest import assert_clean, open_app

LESSON = "inside-a-real-model"
ORDER = ("census", "copy", "why", "attribution", "mask")
BELOW_WHY = ("attribution", "explanation", "mask", "e5", "qk_map")
TITLE_KEYS = {
    "census": "heads.census_title",
    "copy": "heads.copy_title",
    "why": "heads.why_title",
    "attribution": "heads.attr_title",
    "explanation": "heads.explain_title",
    "mask": "heads.mask_title",
    "e5": "heads.e5_title",
    "qk_map": "qk_map.title",
}


def title(section: str, lang: str = "en") -> str:
    return t_in(lang, TITLE_KEYS[section])


@pytest.mark.parametrize(
    ("named", "folded"),
    [
        (frozenset(), frozenset()),  # not in a lesson, or no section of this page named
        (frozenset({"census"}), frozenset({"copy", "why", "attribution", "mask"})),
        (frozenset({"census", "why"}), frozenset({"attribution", "mask"})),  # the lowest counts
        (frozenset({"mask"}), frozenset()),
        (frozenset({"generation"}), frozenset()),  # another page's section
    ],
)
def test_the_sections_below_the_lowest_named_one_are_folded(named, folded):
    assert folded_after(ORDER, named) == folded


def test_the_lesson_names_the_census_and_why_of_heads_at_work():
    """The AppTests below rest on this: the lesson's Heads steps name these two sections."""
    steps = shipped_lessons()[LESSON].steps
    assert {s.section for s in steps if s.page == "heads"} == {"census", "why"}


def heads_step(lang: str, **extra: str):
    """Heads at work as the lesson's census step (step 3) opens it."""
    return open_app("heads", lang=lang, lesson=LESSON, **{"lesson.step": "3"}, **extra)


def headers(at) -> list[str]:
    return [h.value for h in at.main.header]


@pytest.mark.parametrize("page", ["heads"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_lesson_step_folds_the_sections_below_its_lessons_sections(page, lang):
    at = heads_step(lang)
    assert_clean(at)
    folds = [e for e in at.main.expander if e.label in {title(s, lang) for s in BELOW_WHY}]
    assert [e.label for e in folds] == [title(s, lang) for s in BELOW_WHY]
    assert not any(e.proto.expanded for e in folds)
    drawn = headers(at)
    for section in ("census", "copy", "why"):  # the lesson's and those above them
        assert title(section, lang) in drawn
    for section in BELOW_WHY:  # folded and closed: nothing of them is drawn
        assert title(section, lang) not in drawn
    assert not any(fold.children for fold in folds)


@pytest.mark.parametrize("page", ["heads"])
def test_an_opened_fold_draws_its_section(page):
    at = heads_step("en")
    at.session_state[FOLD_KEY.format(page=page, name="qk_map")] = True
    at.run()
    assert_clean(at)
    (fold,) = [e for e in at.main.expander if e.label == title("qk_map")]
    assert title("qk_map") in [h.value for h in fold.header]
    assert title("mask") not in headers(at)  # the others stay folded


@pytest.mark.parametrize("page", ["heads"])
def test_outside_a_lesson_every_section_is_drawn(page):
    at = open_app(page, lang="en")
    assert_clean(at)
    assert not [e for e in at.main.expander if e.label in {title(s) for s in BELOW_WHY}]
    drawn = headers(at)
    for section in TITLE_KEYS:
        assert title(section) in drawn, section
