"""Which links the server's own pre-warm queues (:mod:`dashboard.serving.prewarm`), with the
background worker replaced by a list: each shipped lesson's steps once per process after the
first page unless ``ATTENTION_LAB_PREWARM=off``, and an opened lesson's steps in its
learner's language, queued last (the worker takes the newest first) and moved ahead when
queued before; the shipped lessons wait while a room has followers on this server."""

from __future__ import annotations

import pytest

from dashboard.lessons.model import shipped_lessons
from dashboard.serving import prewarm
from dashboard.serving.warm import lesson_links, open_link

URL = "http://127.0.0.1:9"


@pytest.fixture
def queued(monkeypatch):
    jobs: dict = {}

    def start_group(group, *, one_thread=True, promote=False, when=None):
        assert not one_thread  # a step's page run shares the cores as any run does
        new = {name: (calls, promote, when) for name, calls in group if name not in jobs}
        jobs.update(new)
        return bool(new)

    monkeypatch.setattr(prewarm.prefetch, "start_group", start_group)
    monkeypatch.setattr(prewarm, "own_address", lambda: URL)
    monkeypatch.setattr(prewarm, "_SHIPPED", prewarm.threading.Event())
    return jobs


def test_the_shipped_lessons_once_per_process_then_the_opened_one(queued, monkeypatch):
    monkeypatch.delenv(prewarm.PREWARM_ENV, raising=False)
    lesson = shipped_lessons()["why-sqrt-dk"]
    prewarm.after_page((lesson, 2), "zh")
    prewarm.after_page(None, "en")
    names = list(queued)
    assert names[:-1] == [("lesson", name, "en") for name in shipped_lessons()]
    assert names[-1] == ("lesson", "why-sqrt-dk", "zh")
    calls, promote, when = queued[("lesson", "why-sqrt-dk", "zh")]
    assert promote and when is None  # the opened lesson goes first, room or not
    assert all(queued[name][2] is prewarm.no_room_live for name in names[:-1])
    assert calls == tuple((open_link, (URL, link)) for link in lesson_links(lesson, "zh"))
    assert all("lang=zh" in link.query and "lesson.step=" in link.query for _f, (_u, link) in calls)


def test_off_leaves_the_shipped_lessons_cold_but_warms_an_opened_one(queued, monkeypatch):
    monkeypatch.setenv(prewarm.PREWARM_ENV, "off")
    prewarm.after_page((shipped_lessons()["self-attention-20"], 1), "en")
    assert list(queued) == [("lesson", "self-attention-20", "en")]


def test_the_shipped_lessons_wait_while_a_room_has_followers_here(monkeypatch):
    registry = prewarm.push.FollowerRegistry()
    monkeypatch.setattr(prewarm.push, "registry", lambda: registry)
    assert prewarm.no_room_live()
    registry.register("ROOM1", "session-a")
    assert not prewarm.no_room_live()
    registry.forget("ROOM1", "session-a")
    assert prewarm.no_room_live()


def _no_address_app() -> None:
    import streamlit as st

    from dashboard.lessons.model import shipped_lessons
    from dashboard.serving import prewarm

    st.write(
        repr((prewarm.own_address(), prewarm.warm_lesson(shipped_lessons()["why-sqrt-dk"], "en")))
    )


def test_nothing_is_warmed_where_no_server_runs():
    """An AppTest run has no address of its own: nothing is queued."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_no_address_app, default_timeout=30).run()
    assert not at.exception and at.markdown[0].value == "(None, False)"
