"""A long page in a lesson: Heads at work draws the sections its lesson's steps name (and
those above them) and folds the rest, each drawn once opened; outside a lesson it draws
every section (:mod:`dashboard.lesson_focus`)."""

from __future__ import annotations

import uuid

import pytest

from dashboard.i18n import t_in
from dashboard.lesson_focus import FOLD_KEY, folded_after
from dashboard.lessons.model import shipped_lessons
from tests.dashboard.conftest import assert_clean, open_app, presenting_app

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


def queued_jobs(monkeypatch) -> list[tuple]:
    """Every job name the page hands to the background filler, as it runs."""
    from dashboard import data

    names: list[tuple] = []

    def record(jobs):
        names.extend(name for name, _calls in jobs)
        return True

    monkeypatch.setattr(data, "prefetch_all", record)
    return names


@pytest.mark.parametrize("page", ["heads"])
def test_the_filler_fills_only_the_moves_a_learner_can_make(page, monkeypatch):
    """Outside a lesson the page queues the copy test's and the masks' next moves; in a
    lesson step, whose mask section is folded, not the masks'; for a locked follower of a
    room on the step, nothing (the presenter's session fills the same caches)."""
    names = queued_jobs(monkeypatch)
    assert_clean(open_app(page, lang="en"))
    assert {name[0] for name in names} >= {"length", "mask"}
    names.clear()
    assert_clean(heads_step("en"))
    kinds = {name[0] for name in names}
    assert "length" in kinds and "mask" not in kinds
    code = f"t-{uuid.uuid4().hex[:10]}"
    presenting_app(page, code, lang="en", lesson=LESSON, **{"lesson.step": "3"})
    names.clear()
    follower = open_app(page, lang="en", room=code)
    assert_clean(follower)
    assert follower.slider(key="heads.top_k").disabled  # following: locked
    assert names == []
