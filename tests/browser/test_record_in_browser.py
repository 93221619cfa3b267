"""The take-home record in Chromium, downloaded by a follower right after answering the
room's question: it holds their answer and the room's tally at that moment (the button was
drawn before the answer: the record is made when it is clicked), and what each step
showed."""

from __future__ import annotations

import pytest

from bench.browser import streamlit_server, wait_idle
from dashboard.i18n import t_in
from tests.browser.test_rooms_in_browser import KEY, KEY_ENV, VIEWPORT, type_key, wait_for

pytestmark = pytest.mark.browser


def page_text(tab) -> str:
    return tab.locator('[data-testid="stApp"]').inner_text()


def test_a_follower_s_record_right_after_an_answer_holds_it(browser, tmp_path):
    with streamlit_server(log_path=tmp_path / "server.log", env={KEY_ENV: KEY}) as server:
        context = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
        try:
            host = context.new_page()
            host.goto(f"{server.url}/scaling?room=rec-1&lesson=why-sqrt-dk&lesson.step=1")
            wait_idle(host)
            type_key(host, KEY)
            learner = context.new_page()
            learner.goto(f"{server.url}/?room=rec-1&lang=zh")
            wait_idle(learner)
            more = learner.get_by_role("button", name=t_in("zh", "lesson.more"))  # the bar's
            wait_for(lambda: more.first.is_visible(), "the lesson bar's More (the record)")

            host.get_by_text("Ask the room").first.click()
            host.get_by_text("Without scaling, at d_k = 256").first.click()
            host.get_by_role("button", name="Ask the room").click()
            wait_idle(host)
            yes, no = (t_in("zh", f"room.q_scaling_peak_a{i}") for i in (0, 1))
            answer = learner.get_by_role("button", name=no, exact=True)
            wait_for(lambda: answer.is_visible(), "the question shown")
            answer.click()
            wait_for(lambda: "你的回答" in page_text(learner), "the answer taken")
            more.first.click()
            with learner.expect_download(timeout=60_000) as download:
                learner.get_by_role("button", name=t_in("zh", "lesson.record")).first.click()
            text = download.value.path().read_text(encoding="utf-8")
        finally:
            context.close()
    assert t_in("zh", "lesson.record_yours", answer=no) in text
    assert t_in("zh", "lesson.record_tally", tally=f"{yes}: 0 · {no}: 1") in text
    assert t_in("zh", "lesson.record_figure", figure="") in text  # what the scaling steps showed
