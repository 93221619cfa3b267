"""Every step of every shipped lesson, opened on a live server with its background pre-warm
on, leaves the server's log free of Streamlit's warnings: no stack trace of a widget "set
via the Session State API", no "missing ScriptRunContext" (Streamlit called from a thread
outside a script run). Each step is opened as a learner's link opens it, in both languages,
over the server's own websocket protocol (:mod:`dashboard.serving.stream_client`)."""

from __future__ import annotations

import asyncio
import concurrent.futures

import pytest

from dashboard.lessons.model import shipped_lessons
from dashboard.serving.prewarm import PREWARM_ENV
from dashboard.serving.warm import lesson_links, warm_server

WARNINGS = ("Session State API", "missing ScriptRunContext")
MODEL_LESSONS = frozenset({"inside-a-real-model"})  # its steps load the real models


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=[pytest.mark.model] if name in MODEL_LESSONS else [])
        for name in shipped_lessons()
    ],
)
def test_every_step_of_a_lesson_leaves_no_streamlit_warning_in_the_server_log(name, tmp_path):
    from bench.browser import streamlit_server

    lesson = shipped_lessons()[name]
    links = lesson_links(lesson, "en") + lesson_links(lesson, "zh")
    log = tmp_path / "server.log"
    with streamlit_server(log_path=log, env={PREWARM_ENV: "on"}) as server:
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            runs = pool.submit(asyncio.run, warm_server(server.url, links)).result()
    text = log.read_text()
    assert [warning for warning in WARNINGS if warning in text] == []
    assert [(str(run.link), run.problem) for run in runs if not run.ok] == []
