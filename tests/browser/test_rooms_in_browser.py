"""A room in Chromium: a presenter, followers in English and Chinese, a wrong key, a question
answered by three followers, followers locked and a learner who explores on their own and
follows again, hostile room codes, and a restarted server (every tab says the room ended);
screenshots of each state in both languages.

One server with the presenter key set through ``ATTENTION_LAB_PRESENTER_KEY`` serves the
room; every learner is a tab of one browser context (each tab is its own Streamlit session),
so the two cores run one Chromium. Waits are generous (a loaded machine is slow); nothing
asserts a time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from bench.browser import REPO_ROOT, free_port, patient, streamlit_server, wait_idle
from bench.repaint import SLIDER
from dashboard.i18n import t_in
from dashboard.room_follow import POLL_ENV
from tests.browser.helpers import CODE_JS, HREFS_JS, foreign_hrefs
from tests.hostile import HOSTILE

pytestmark = pytest.mark.browser

KEY_ENV = "ATTENTION_LAB_PRESENTER_KEY"
KEY = "room-test-key-7f3a9c"
FOLLOW_TIMEOUT_S = patient(60.0)
VIEWPORT = {"width": 1440, "height": 1000}
KEY_BOX = '[data-testid="stSidebar"] input[type="password"]'
NAV = '[data-testid="stSidebarNav"]'
FAST_POLL_S = 0.3
WHOLE_JS = """(page) => {
    const app = document.querySelector('[data-testid="stApp"]');
    return location.pathname.endsWith('/' + page)
        && !!app && app.getAttribute('data-test-script-state') === 'notRunning'
        && !!document.querySelector('[data-testid="stMain"] h1')
        && !!document.querySelector('[data-testid="stSidebar"] [data-testid="stSlider"]');
}"""
"""A page drawn whole: its path, an idle script, the page's title and its sidebar's controls
(a tab cleared by a run on the page it left keeps neither)."""


@pytest.fixture(scope="module")
def room_server(tmp_path_factory):
    """The dashboard with a presenter key set in its environment."""
    log = tmp_path_factory.mktemp("room") / "server.log"
    with streamlit_server(log_path=log, env={KEY_ENV: KEY}) as srv:
        yield srv


@pytest.fixture(scope="module")
def fast_poll_server(tmp_path_factory):
    """The dashboard with a presenter key, its followers polling every 0.3 s: a poll is then
    on its way during nearly every page switch the server makes for a follower."""
    log = tmp_path_factory.mktemp("fast-poll") / "server.log"
    env = {KEY_ENV: KEY, POLL_ENV: str(FAST_POLL_S)}
    with streamlit_server(log_path=log, env=env) as srv:
        yield srv


@pytest.fixture
def tabs(browser):
    """Open tabs of one browser context on demand: ``tabs()`` returns a new one."""
    context = browser.new_context(viewport=VIEWPORT)
    opened = []

    def new_tab():
        tab = context.new_page()
        tab.errors = []
        tab.on("pageerror", lambda exc: tab.errors.append(str(exc)))
        opened.append(tab)
        return tab

    yield new_tab
    context.close()
    assert not [e for tab in opened for e in tab.errors]


def href(tab) -> str:
    """The address bar now (Playwright's ``page.url`` can miss a ``history.replaceState``)."""
    return tab.evaluate("location.href")


def query(tab) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlsplit(href(tab)).query).items()}


def wait_for(check, what: str = "", tab=None, timeout_s: float = FOLLOW_TIMEOUT_S) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` (and ``tab``'s URL and text)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if check():
                return
        time.sleep(0.2)
    seen = f"\n{href(tab)}\n{sidebar_text(tab)}" if tab is not None else ""
    raise AssertionError(f"not within {timeout_s:g} s: {what}{seen}")


def open_tab(tabs, url: str):
    tab = tabs()
    tab.goto(url)
    wait_idle(tab)
    return tab


def type_key(tab, key: str) -> None:
    tab.locator(KEY_BOX).fill(key)
    tab.keyboard.press("Enter")
    wait_idle(tab)


def move_first_slider(tab, key: str = "ArrowRight") -> None:
    tab.locator(SLIDER).first.focus()
    tab.keyboard.press(key)
    wait_idle(tab)


def sidebar_text(tab) -> str:
    return tab.locator('[data-testid="stSidebar"]').inner_text()


def page_text(tab) -> str:
    return tab.locator('[data-testid="stApp"]').inner_text()


def test_a_room_follows_its_presenter_and_answers_a_question(room_server, tabs, screenshot_dir):
    base = room_server.url
    host = open_tab(tabs, f"{base}/scaling?room=week3-A")
    type_key(host, KEY)
    assert "You present room" in page_text(host)
    learner_en = open_tab(tabs, f"{base}/?room=week3-A")
    learner_zh = open_tab(tabs, f"{base}/playground?room=week3-A&lang=zh")
    wrong = open_tab(tabs, f"{base}/?room=week3-A")
    type_key(wrong, "not-the-key")
    assert "not right" in page_text(wrong)
    learners = (learner_en, learner_zh, wrong)
    for tab in learners:
        wait_for(lambda tab=tab: urlsplit(href(tab)).path.endswith("/scaling"), what="joined")
    assert query(learner_zh)["lang"] == "zh" and "🔒 已锁定" in page_text(learner_zh)
    for tab, lang in ((learner_en, "en"), (learner_zh, "zh")):
        tab.get_by_text("🔒").first.scroll_into_view_if_needed()  # the locked controls
        tab.screenshot(path=str(screenshot_dir / f"room-follower-locked-{lang}.png"))

    move_first_slider(host)  # the presenter: L 10 -> 11
    assert query(host)["scaling.seq_len"] == "11"
    for tab in learners:
        wait_for(lambda tab=tab: query(tab).get("scaling.seq_len") == "11", "followed", tab=tab)
    for tab in (host, *learners):
        assert KEY not in href(tab) and KEY not in page_text(tab)
    assert "room=week3-A" in host.locator('[data-testid="stSidebar"] code').last.inner_text()

    host.get_by_text("Ask the room").first.click()
    host.get_by_text("Without scaling, at d_k = 256").first.click()
    host.get_by_role("button", name="Ask the room").click()
    wait_idle(host)
    for tab, answer in ((learner_en, "Yes"), (learner_zh, "是"), (wrong, "No")):
        button = tab.get_by_role("button", name=answer, exact=True)
        wait_for(lambda button=button: button.is_visible(), what="question shown")
        button.click()
        wait_for(lambda tab=tab: "Your answer" in page_text(tab) or "你的回答" in page_text(tab))
    wait_for(lambda: "Answers so far: 3" in page_text(host), what="the tally")
    host.screenshot(path=str(screenshot_dir / "room-presenter-en.png"))
    learner_zh.screenshot(path=str(screenshot_dir / "room-follower-zh.png"))
    host.get_by_role("button", name="Reveal the answer").click()
    wait_for(lambda: "答案：是" in page_text(learner_zh), what="the reveal in Chinese")
    wait_for(lambda: "Answer: Yes" in page_text(learner_en), what="the reveal in English")
    learner_zh.screenshot(path=str(screenshot_dir / "room-follower-zh-revealed.png"))

    learner_en.get_by_role("button", name="Explore on my own").click()  # their own view
    wait_for(lambda: "You explore on your own" in page_text(learner_en), what="exploring")
    move_first_slider(learner_en, "ArrowLeft")  # a learner moves on their own: L 10
    learner_en.locator(SLIDER).first.scroll_into_view_if_needed()
    learner_en.screenshot(path=str(screenshot_dir / "room-exploring-en.png"))
    move_first_slider(host)  # L 12
    wait_for(lambda: query(learner_zh).get("scaling.seq_len") == "12", what="zh follows")
    move_first_slider(host)  # L 13
    wait_for(lambda: query(learner_zh).get("scaling.seq_len") == "13")
    # their own view: L 10, the slider's default, which a bound slider leaves out of the URL
    assert query(learner_en).get("scaling.seq_len", "10") == "10"
    learner_en.get_by_role("button", name="Follow again").click()  # rejoin
    wait_for(lambda: query(learner_en).get("scaling.seq_len") == "13", "rejoined", learner_en)
    learner_zh.get_by_role("button", name="自己探索").click()
    wait_for(lambda: "你正在自己探索" in page_text(learner_zh), what="exploring in Chinese")
    learner_zh.locator(SLIDER).first.scroll_into_view_if_needed()
    learner_zh.screenshot(path=str(screenshot_dir / "room-exploring-zh.png"))


def test_a_follower_gets_every_page_the_presenter_switches_to_whole(fast_poll_server, tabs):
    """The presenter goes from page to page; the follower, whose 0.3 s poll is on its way
    when the server switches its page, shows each page whole (title and controls) and still
    does a second later, when a poll that left before the switch has run (on the page the
    follower left, it cleared the page and drew the poll's line alone)."""
    base = fast_poll_server.url
    host = open_tab(tabs, f"{base}/scaling?room=race-7")
    type_key(host, KEY)
    learner = open_tab(tabs, f"{base}/?room=race-7")
    wait_for(lambda: learner.evaluate(WHOLE_JS, "scaling"), "the follower on Scaling", learner)
    for page in ("playground", "step_by_step", "scaling", "playground", "scaling"):
        host.locator(NAV).get_by_text(t_in("en", f"common.page_{page}"), exact=True).click()
        wait_idle(host)
        wait_for(lambda p=page: learner.evaluate(WHOLE_JS, p), f"{page} whole", learner)
        learner.wait_for_timeout(1_000)
        wait_for(lambda p=page: learner.evaluate(WHOLE_JS, p), f"{page} still whole", learner)


def test_the_presenter_and_a_follower_in_chinese_look_right(room_server, tabs, screenshot_dir):
    base = room_server.url
    host = open_tab(tabs, f"{base}/multihead?room=shot&lang=zh")
    type_key(host, KEY)
    host.get_by_text("向房间提问").first.click()
    host.get_by_role("button", name="向房间提问").click()
    wait_idle(host)
    learner = open_tab(tabs, f"{base}/?room=shot")
    wait_for(lambda: urlsplit(href(learner)).path.endswith("/multihead"), what="joined")
    wait_for(lambda: learner.get_by_role("button", name="The uniform (global) head").is_visible())
    learner.get_by_role("button", name="The uniform (global) head").click()
    wait_for(lambda: "目前的回答数：1" in page_text(host), what="the tally")
    host.screenshot(path=str(screenshot_dir / "room-presenter-zh.png"))
    learner.screenshot(path=str(screenshot_dir / "room-follower-en.png"))


def test_hostile_room_codes_are_refused_and_shown_inert(room_server, tabs):
    tab = tabs()
    for name in ("markdown-link", "http-url", "img-tag", "javascript-url"):
        raw = HOSTILE[name]
        tab.goto(f"{room_server.url}/playground?room={quote(raw)}")
        wait_idle(tab)
        assert not foreign_hrefs(tab.evaluate(HREFS_JS), room_server.url), name
        assert any(raw[:12] in text for text in tab.evaluate(CODE_JS)), name
        assert tab.locator(KEY_BOX).count() == 0 and "room" not in query(tab)


def _start(port: int, log) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "streamlit", "run", "dashboard/app.py"]
    cmd += ["--server.port", str(port), "--server.address", "127.0.0.1"]
    cmd += ["--server.headless", "true", "--browser.gatherUsageStats", "false"]
    cmd += ["--server.fileWatcherType", "none"]
    env = {**os.environ, KEY_ENV: KEY}
    process = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/_stcore/health"

    def healthy() -> bool:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.read().decode().strip() == "ok"

    wait_for(healthy, "server healthy", timeout_s=90.0)
    return process


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def test_after_a_restart_followers_see_the_room_ended_and_keep_their_view(
    tabs, tmp_path, screenshot_dir
):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with open(tmp_path / "server.log", "w") as log:
        first = _start(port, log)
        try:
            host = open_tab(tabs, f"{base}/scaling?room=r1")
            type_key(host, KEY)
            move_first_slider(host)
            learner = open_tab(tabs, f"{base}/?room=r1")
            chinese = open_tab(tabs, f"{base}/?room=r1&lang=zh")
            for tab in (learner, chinese):
                wait_for(lambda tab=tab: query(tab).get("scaling.seq_len") == "11", "followed")
            host.close()  # the presenter leaves; then the server restarts
        finally:
            _stop(first)
        second = _start(port, log)
        try:
            wait_for(lambda: "The room has ended" in page_text(learner), what="ended")
            wait_for(lambda: "房间已结束" in page_text(chinese), what="ended in Chinese")
            for tab, lang in ((learner, "en"), (chinese, "zh")):
                wait_idle(tab)
                assert query(tab)["scaling.seq_len"] == "11"
                assert tab.locator('[data-testid="stException"]').count() == 0
                text = page_text(tab)
                assert "You follow the presenter" not in text and "你正在跟随" not in text
                tab.screenshot(path=str(screenshot_dir / f"room-ended-{lang}.png"))
        finally:
            _stop(second)


def test_a_presenter_loads_a_lesson_file_and_the_room_opens_it(room_server, tabs, screenshot_dir):
    """**Make a lesson** in Chromium: a lesson file with a wrong page is refused in one line
    naming the step and the field; a good one is loaded, and "Open its first step" takes the
    presenter (still presenting) and the follower to its step 1."""
    from dashboard.i18n import t_in
    from dashboard.lessons.model import lesson_toml, shipped_lessons

    code = f"up-{uuid.uuid4().hex[:6]}"
    name = f"mine-{uuid.uuid4().hex[:6]}"
    lesson = shipped_lessons()["why-sqrt-dk"]
    good = lesson_toml(lesson).encode()
    host = open_tab(tabs, f"{room_server.url}/scaling?room={code}")
    type_key(host, KEY)
    learner = open_tab(tabs, f"{room_server.url}/?room={code}")
    host.get_by_text(t_in("en", "lesson.author_title"), exact=True).click()
    upload = host.locator('[data-testid="stFileUploaderDropzoneInput"]')
    bad = good.replace(b'"scaling"', b'"nowhere"', 1)
    upload.set_input_files(files=[{"name": "bad.toml", "mimeType": "text/plain", "buffer": bad}])
    wait_for(lambda: "step 1, field 'page'" in page_text(host), "the bad file's reason", host)
    upload.set_input_files(
        files=[{"name": f"{name}.toml", "mimeType": "text/plain", "buffer": good}]
    )
    loaded = t_in("en", "lesson.author_loaded", title=lesson.title("en")).split(".")[0]
    wait_for(lambda: loaded in page_text(host), "loaded", host)
    host.screenshot(path=str(screenshot_dir / "lesson-author-en.png"), full_page=False)
    host.get_by_role("button", name=t_in("en", "lesson.author_open"), exact=True).click()
    wait_idle(host)
    step_1 = t_in("en", "lesson.step_of", k=1, n=len(lesson.steps))
    wait_for(lambda: query(host).get("lesson") == name and step_1 in page_text(host), "", host)
    presents = t_in("en", "room.presenting", code="CODE").split("CODE")[0].strip()
    assert presents in sidebar_text(host)  # still presenting after the change of page
    wait_for(lambda: query(learner).get("lesson") == name, "the follower on the lesson", learner)
    wait_for(lambda: step_1 in page_text(learner), "the follower's bar", learner)
