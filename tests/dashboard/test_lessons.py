"""Lessons (``dashboard/lessons/*.toml``, ``dashboard/lesson_bar.py``): every shipped step
opens in both languages with no exception and no notice; a bad lesson file is refused
naming its file, step and field; Next, Back, a reload and a shared link walk a lesson alone;
a room's followers see the presenter's step, without Back and Next, and never the notes."""

from __future__ import annotations

import uuid

import pytest

from dashboard.i18n import t_in
from dashboard.lessons.model import LessonError, parse_lesson, shipped_lessons
from dashboard.rooms import presenter
from tests.dashboard.conftest import open_app, shipped_steps

STEPS, NAMES = shipped_steps()


def test_three_lessons_ship_each_in_both_languages():
    lessons = shipped_lessons()
    assert {"self-attention-20", "why-sqrt-dk", "inside-a-real-model"} <= set(lessons)
    assert 9 <= len(lessons["self-attention-20"].steps) <= 12
    assert 4 <= len(lessons["why-sqrt-dk"].steps) <= 5
    for lesson in lessons.values():
        for step in lesson.steps:
            assert step.title("en") != step.title("zh") and step.notice("zh")


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_shipped_step_opens_with_no_exception_and_no_notice(step, lang):
    name, number = NAMES[id(step)]
    at = open_app(
        step.page, lang=lang, lesson=name, **{"lesson.step": str(number)}, **dict(step.query)
    )
    assert not at.exception, at.exception
    assert not at.warning, [w.value for w in at.warning]
    assert not at.error, [e.value for e in at.error]
    caption = t_in(lang, "lesson.step_of", k=number, n=len(shipped_lessons()[name].steps))
    assert any(caption in m.value for m in at.markdown)  # the bar's row: step, title
    assert any(step.notice(lang) in m.value for m in at.markdown)
    assert not [c for c in at.caption if c.value == t_in(lang, "lesson.moved_away")]


GOOD = """
[lesson]
minutes = 5
level = "beginner"
title = { en = "T", zh = "题" }

[[step]]
page = "scaling"
query = { "scaling.seq_len" = "12" }
title = { en = "A", zh = "甲" }
notice = { en = "N", zh = "注" }
"""


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (('page = "scaling"', 'page = "nowhere"'), "step 1, field 'page'"),
        (('"scaling.seq_len"', '"playground.seq_len"'), "step 1, field 'query'"),
        (('notice = { en = "N", zh = "注" }', 'notice = { en = "N" }'), "step 1, field 'notice'"),
        (("minutes = 5", "minutes = 0"), "field 'minutes'"),
        (('level = "beginner"', 'level = "expert"'), "field 'level'"),
        (("[[step]]", '[[step]]\nquestion = "scaling_nope"'), "step 1, field 'question'"),
        (("[[step]]", '[[step]]\ncolour = "red"'), "step 1, field 'colour'"),
        (("[lesson]", "[lesson"), "not TOML"),
    ],
)
def test_a_bad_lesson_file_is_refused_naming_its_file_step_and_field(change, named):
    assert parse_lesson(GOOD, "mine").steps[0].query == (("scaling.seq_len", "12"),)
    with pytest.raises(LessonError, match="mine.toml") as refused:
        parse_lesson(GOOD.replace(*change), "mine")
    assert named in str(refused.value)


def test_next_back_a_reload_and_a_shared_link_walk_a_lesson_alone():
    """Steps 1 and 2 of "Why √d_k" share the Scaling page: Next and Back put each step's
    values into its controls; a learner who explores is offered the step's view back; the
    link (a reload, or sent to a friend) lands on the same step; a link naming only a step
    of another page takes the learner there (AppTest follows a page switch of a link's first
    run, not of a button's)."""
    at = open_app(None, lesson="why-sqrt-dk")  # the root link: taken to step 1's page
    assert not at.exception and at.query_params["lesson.step"] == "1"
    assert at.text_input(key="scaling.d_ks").value == "32,64,128,256"
    assert at.button(key="_lesson.back").disabled
    at.button(key="_lesson.next").click().run()
    assert at.text_input(key="scaling.d_ks").value == "64,256"  # step 2's value
    assert at.query_params["lesson.step"] == "2"
    at.text_input(key="scaling.d_ks").input("16,32").run()  # the learner explores
    moved = t_in("en", "lesson.moved_away")
    assert moved in [c.value for c in at.caption]
    at.button(key="_lesson.back_to_step").click().run()
    assert at.text_input(key="scaling.d_ks").value == "64,256"
    assert moved not in [c.value for c in at.caption]
    shared = {k: at.query_params[k] for k in at.query_params}  # the link as it stands
    again = open_app("scaling", **shared)  # a reload, or the link sent to a friend
    assert again.query_params["lesson.step"] == "2"
    assert again.text_input(key="scaling.d_ks").value == "64,256"
    at.button(key="_lesson.back").click().run()
    assert at.text_input(key="scaling.d_ks").value == "32,64,128,256"
    at.button(key="_lesson.leave").click().run()
    assert "lesson" not in at.query_params
    assert "_lesson.next" not in [b.key for b in at.button]
    other = open_app(None, lesson="why-sqrt-dk", **{"lesson.step": "3"})  # another page
    assert other.slider(key="step_by_step.d_k").value == 8
    assert other.query_params["lesson.step"] == "3"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_lesson_that_does_not_exist_or_a_step_past_its_end_gets_a_notice(lang):
    at = open_app("scaling", lang=lang, lesson="nope")
    assert not at.exception and len(at.warning) == 1 and "nope" in at.warning[0].value
    assert "why-sqrt-dk" in at.warning[0].value
    at = open_app(None, lang=lang, lesson="why-sqrt-dk", **{"lesson.step": "9"})
    assert not at.exception and at.query_params["lesson.step"] == "4"  # the last step
    assert "lesson.step" in at.warning[0].value


def test_a_room_follows_the_presenter_s_step_without_back_next_or_notes():
    """Steps 1 and 2 of "Self-attention in 20 minutes" share the Intuition page; step 2 has
    notes for the presenter."""
    code = f"t-{uuid.uuid4().hex[:10]}"
    host = open_app("intuition", room=code, lesson="self-attention-20", **{"lesson.step": "1"})
    key, _source = presenter.presenter_key()
    host.text_input(key="_room.presenter_key").input(key).run()
    notes = t_in("en", "lesson.notes")
    assert notes not in [e.label for e in host.expander]  # step 1 has none
    learner = open_app(None, room=code, lang="zh")
    assert not learner.exception and learner.query_params["lesson.step"] == "1"
    assert not [b for b in learner.button if b.key in ("_lesson.next", "_lesson.back")]
    host.button(key="_lesson.next").click().run()
    assert notes in [e.label for e in host.expander]  # the presenter's alone
    assert host.slider(key="intuition.boss").value == 5.5
    learner.run()
    step = shipped_lessons()["self-attention-20"].steps[1]
    assert learner.query_params["lesson.step"] == "2"
    assert learner.slider(key="intuition.boss").value == 5.5
    assert learner.slider(key="intuition.boss").disabled
    assert any(step.notice("zh") in m.value for m in learner.markdown)
    assert t_in("zh", "lesson.notes") not in [e.label for e in learner.expander]
    assert step.notes("zh") not in "\n".join(m.value for m in learner.markdown)


def test_the_presenter_asks_a_step_s_question_with_one_click_and_the_room_answers_it():
    """Step 2 of "Why √d_k" carries the ready question ``scaling_peak``: the presenter's bar
    offers it (a follower's does not); one click puts it to the room, whose followers get its
    answer buttons, and the presenter's tally counts their answer."""
    code = f"t-{uuid.uuid4().hex[:10]}"
    query = {"lesson": "why-sqrt-dk", "lesson.step": "2", "scaling.d_ks": "64,256"}
    host = open_app("scaling", room=code, **query)
    key, _source = presenter.presenter_key()
    host.text_input(key="_room.presenter_key").input(key).run()
    learner = open_app(None, room=code, lang="zh")
    assert not [b for b in learner.button if b.key.startswith("_lesson.ask")]
    assert not [b for b in learner.button if b.key.startswith("_room.answer")]
    host.button(key="_lesson.ask.2").click().run()
    assert not host.exception and not host.warning
    learner.run()
    answers = [b for b in learner.button if b.key.startswith("_room.answer.")]
    assert [b.label for b in answers] == [
        t_in("zh", f"room.q_scaling_peak_a{i}") for i in range(len(answers))
    ]
    answers[0].click().run()
    host.run()
    assert any(t_in("en", "room.answers_count", n=1) in c.value for c in host.caption)


def _record_app(lang: str) -> None:
    import streamlit as st

    from dashboard.lesson_record import record_markdown
    from dashboard.lessons.model import shipped_lessons
    from dashboard.rooms.store import Poll, Question

    st.session_state["lang"] = lang
    lesson = shipped_lessons()["why-sqrt-dk"]
    poll = Poll(1, Question("scaling_peak", "", ("", ""), 0), (12, 3), True)
    st.code(record_markdown(lesson, lang, lambda k: f"http://lab.example/step{k}", {1: (poll, 1)}))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_take_home_record_holds_each_step_and_the_room_s_question(lang):
    """The record: the lesson's title; each step's title, link and what to notice; a
    question the room was asked, with this learner's answer, the tally and the right answer,
    all in the learner's language."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_record_app, args=(lang,), default_timeout=30).run()
    assert not at.exception
    text = at.code[0].value
    lesson = shipped_lessons()["why-sqrt-dk"]
    assert text.startswith(f"# {lesson.title(lang)}\n")
    for number, step in enumerate(lesson.steps, start=1):
        assert f"## {number}. {step.title(lang)}" in text
        assert f"<http://lab.example/step{number}>" in text and step.notice(lang) in text
    yes, no = (t_in(lang, f"room.q_scaling_peak_a{i}") for i in (0, 1))
    assert t_in(lang, "room.q_scaling_peak") in text
    assert t_in(lang, "lesson.record_yours", answer=no) in text
    assert t_in(lang, "lesson.record_tally", tally=f"{yes}: 12 · {no}: 3") in text
    assert t_in(lang, "lesson.record_right", answer=yes) in text


def test_the_lesson_bar_offers_the_record_in_the_learner_s_language():
    at = open_app("scaling", lang="zh", lesson="why-sqrt-dk", **{"lesson.step": "1"})
    labels = [button.proto.label for button in at.get("download_button")]
    assert t_in("zh", "lesson.record") in labels
