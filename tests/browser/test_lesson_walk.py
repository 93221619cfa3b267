"""Every step of every shipped lesson, walked with Next as an instructor does in front of a
room: in the presentation view on a projector (853×480 CSS pixels: 1280×720 at 150 %) and on
a laptop (1440×900), in English and Chinese. On each step: no error, the sidebar stays folded
while presenting, nothing scrolls sideways, the lesson bar is at the top of the window, and
the step's picture (the first chart of the section the step names, or the page's first chart)
starts inside the first screen, below the bar. A room's follower in the presentation view
keeps it while the presenter moves to steps on other pages. Screenshots of every step go to
the screenshot folder (``<lesson>-<lang>-<width>x<height>-<step>.png``)."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from bench.browser import CHART_SELECTOR, patient, streamlit_server, wait_idle
from dashboard.i18n import t_in
from dashboard.lessons.model import shipped_lessons
from dashboard.views import section_anchor
from tests.browser.helpers import assert_no_errors

pytestmark = pytest.mark.browser

PROJECTOR = {"width": 853, "height": 480}
LAPTOP = {"width": 1440, "height": 900}
STEP_TIMEOUT_MS = patient(240_000)  # a real model's first step loads it
PICTURE_MS = patient(30_000)  # a chart's drawing after the run, on a loaded machine
SETTLE_MS = 1_500  # the arrival's scroll waits for the charts above the section to settle
KEY_ENV = "ATTENTION_LAB_PRESENTER_KEY"
KEY = "walk-test-key-51c0"

STEP_JS = """([charts, anchor]) => {
  const bar = document.querySelector('[data-testid="stSidebar"]');
  const box = bar ? bar.getBoundingClientRect() : null;
  const open = !!bar && bar.getAttribute('aria-expanded') !== 'false' && box.right > 1
    && box.width > 1;
  const main = document.querySelector('[data-testid="stMain"]');
  const lesson = document.querySelector('.st-key-lesson_bar');
  const head = anchor
    ? document.getElementById(anchor) || document.querySelector('.st-key-' + anchor) : null;
  const from = head ? head.getBoundingClientRect().top : -1e9;
  const shown = Array.from(document.querySelectorAll(charts)).filter(
    (el) => el.getBoundingClientRect().height > 0 && el.getBoundingClientRect().top >= from - 1);
  return {
    sidebarOpen: open,
    sideways: Math.max(document.documentElement.scrollWidth - innerWidth,
                       main ? main.scrollWidth - main.clientWidth : 0),
    barTop: lesson ? lesson.getBoundingClientRect().top : null,
    barBottom: lesson ? lesson.getBoundingClientRect().bottom : null,
    sectionFound: !!head,
    chartTop: shown.length ? shown[0].getBoundingClientRect().top : null,
  };
}"""


@pytest.fixture(scope="module")
def walk_server(tmp_path_factory):
    """The dashboard with a presenter key, for the walks and the room."""
    log = tmp_path_factory.mktemp("walk") / "server.log"
    with streamlit_server(log_path=log, env={KEY_ENV: KEY}) as srv:
        yield srv


PICTURE_JS = """([charts, anchor]) => {
  const head = anchor
    ? document.getElementById(anchor) || document.querySelector('.st-key-' + anchor) : null;
  const from = head ? head.getBoundingClientRect().top : -1e9;
  const first = Array.from(document.querySelectorAll(charts)).find(
    (el) => el.getBoundingClientRect().bottom >= from - 1);
  return !!first && first.getBoundingClientRect().height > 0;
}"""


def wait_for_picture(tab, anchor: str) -> None:
    """Wait until the first chart at or below the step's section has been drawn (Vega draws
    after the script run ends: on a loaded machine the next section's chart can be drawn
    first); one never drawn is left for :func:`step_problems` to report."""
    try:
        tab.wait_for_function(PICTURE_JS, arg=[CHART_SELECTOR, anchor], timeout=PICTURE_MS)
    except PlaywrightTimeout:
        pass


def open_tab(browser, viewport: dict):
    context = browser.new_context(viewport=viewport)
    tab = context.new_page()
    tab.errors = []
    tab.on("pageerror", lambda exc: tab.errors.append(str(exc)))
    return context, tab


def step_problems(tab, step, viewport: dict, presenting: bool) -> list[str]:
    """What is wrong with the step on screen, as readable lines (none: all is well)."""
    anchor = section_anchor(step.page, step.section) if step.section else ""
    seen = tab.evaluate(STEP_JS, [CHART_SELECTOR, anchor])
    problems = []
    if presenting and seen["sidebarOpen"]:
        problems.append("the sidebar is open in the presentation view")
    if seen["sideways"] > 1:
        problems.append(f"the page scrolls {seen['sideways']} px sideways")
    if seen["barTop"] is None or not 0 <= seen["barTop"] < 100:
        problems.append(f"the lesson bar is not at the top of the window ({seen['barTop']})")
    if anchor and not seen["sectionFound"]:
        problems.append(f"the section {anchor!r} is not on the page")
    top = seen["chartTop"]
    if top is None:
        problems.append("the step's section shows no chart")
    elif not (seen["barBottom"] or 0) - 2 <= top < viewport["height"]:
        problems.append(f"the step's chart starts at {top:.0f} px (screen: {viewport['height']})")
    return problems


def walk(browser, url: str, lesson, lang: str, viewport: dict, shots, presenting: bool):
    context, tab = open_tab(browser, viewport)
    try:
        tab.goto(url)
        tab.wait_for_selector("h1", timeout=STEP_TIMEOUT_MS)
        found = {}
        size = f"{viewport['width']}x{viewport['height']}"
        for number, step in enumerate(lesson.steps, start=1):
            if number > 1:
                tab.get_by_role("button", name=t_in(lang, "lesson.next")).click()
                tab.wait_for_timeout(300)
            wait_idle(tab, timeout_ms=STEP_TIMEOUT_MS)
            tab.wait_for_function(
                "(k) => new URLSearchParams(location.search).get('lesson.step') === k",
                arg=str(number),
                timeout=STEP_TIMEOUT_MS,
            )
            wait_for_picture(tab, section_anchor(step.page, step.section) if step.section else "")
            tab.wait_for_timeout(SETTLE_MS)
            assert_no_errors(tab)
            problems = step_problems(tab, step, viewport, presenting)
            if problems:
                found[number] = problems
            tab.screenshot(path=str(shots / f"{lesson.name}-{lang}-{size}-{number:02d}.png"))
        return found
    finally:
        context.close()


@pytest.mark.parametrize("lesson_name", sorted(shipped_lessons()))
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize(
    ("viewport", "presenting"),
    [pytest.param(PROJECTOR, True, id="projector"), pytest.param(LAPTOP, False, id="laptop")],
)
def test_every_step_shows_its_picture_on_the_first_screen(
    walk_server, browser, screenshot_dir, lesson_name, lang, viewport, presenting
):
    lesson = shipped_lessons()[lesson_name]
    query = f"lesson={lesson_name}&lang={lang}" + ("&present=true" if presenting else "")
    found = walk(
        browser, f"{walk_server.url}/?{query}", lesson, lang, viewport, screenshot_dir, presenting
    )
    assert not found, "\n".join(f"step {k}: {'; '.join(v)}" for k, v in found.items())


def test_a_follower_keeps_the_presentation_view_while_the_presenter_changes_page(
    walk_server, browser
):
    """The presenter walks steps 2 to 4 of "Self-attention in 20 minutes" (Intuition, then
    Step by step twice); the follower's projector tab stays folded and on screen."""
    code = f"walk-{int(time.time() * 1000) % 10**9}"
    host_context, host = open_tab(browser, {"width": 1440, "height": 900})
    room_context, follower = open_tab(browser, PROJECTOR)
    try:
        host.goto(f"{walk_server.url}/?lesson=self-attention-20&room={code}")
        wait_idle(host, timeout_ms=STEP_TIMEOUT_MS)
        host.locator('[data-testid="stSidebar"] input[type="password"]').fill(KEY)
        host.keyboard.press("Enter")
        wait_idle(host, timeout_ms=STEP_TIMEOUT_MS)
        follower.goto(f"{walk_server.url}/?room={code}&present=true")
        wait_idle(follower, timeout_ms=STEP_TIMEOUT_MS)
        lesson = shipped_lessons()["self-attention-20"]
        for number in (2, 3, 4):
            host.get_by_role("button", name=t_in("en", "lesson.next")).click()
            wait_idle(host, timeout_ms=STEP_TIMEOUT_MS)
            follower.wait_for_function(
                "(k) => new URLSearchParams(location.search).get('lesson.step') === k",
                arg=str(number),
                timeout=STEP_TIMEOUT_MS,
            )
            wait_idle(follower, timeout_ms=STEP_TIMEOUT_MS)
            follower.wait_for_timeout(SETTLE_MS)
            assert_no_errors(follower)
            step = lesson.steps[number - 1]
            seen = follower.evaluate(STEP_JS, [CHART_SELECTOR, ""])
            assert not seen["sidebarOpen"], f"step {number}: the follower's sidebar opened"
            assert seen["sideways"] <= 1, f"step {number}: {seen['sideways']} px sideways"
            assert "present=true" in follower.evaluate("location.href"), step.page
    finally:
        host_context.close()
        room_context.close()
