"""A crafted link never makes the app show a live link to another site.

Each hostile value (bare http(s) URLs, markdown links and images, an ``<img>`` tag, a
``www.`` name, a ``javascript:`` link, an e-mail address, an ``<https://…>`` autolink) is put
in a link to the Playground's sequence length or the Scaling page's d_k list. In the page the
browser draws, every ``<a>`` must point at the app itself (or be an in-page ``#`` anchor), the
value must be shown in a ``<code>`` element, and the browser must request nothing from the
hostile host (Streamlit itself fetches its icons from Google's font server). A linked
sentence is text, markup and all: its box holds it as written, and the page links, shows
and fetches nothing from it. A lesson file of the operator's folder whose texts hold every
markup (:func:`tests.hostile.hostile_lesson`) is shown as that text in the lesson bar and on
the landing page: no link, image, maths, colour or emoji, and nothing fetched.
"""

from __future__ import annotations

from urllib.parse import quote, urljoin, urlsplit

import pytest
from playwright.sync_api import expect

from bench.browser import REPO_ROOT, patient, streamlit_server, wait_idle
from dashboard.i18n import t_in
from dashboard.lessons.library import DIR_ENV
from dashboard.lessons.model import lesson_toml
from tests.browser.helpers import CODE_JS, HREFS_JS, foreign_hrefs
from tests.hostile import HOSTILE, HOSTILE_HOST, HOSTILE_LESSON_TEXT, hostile_lesson

pytestmark = pytest.mark.browser

PAINT_TIMEOUT_MS = patient(30_000)
SHOWN_PREFIX = 12  # a long value is cut in the notice: its start must be shown


def hostile_links() -> list[tuple[str, str]]:
    """``(path and query, value that must be shown)`` for every hostile value, plus URL and
    ``www.`` names typed into the Scaling page's d_k list."""
    links = [(f"?playground.seq_len={quote(value)}", value) for value in HOSTILE.values()]
    for name in ("www-name", "http-url", "email"):
        d_ks = f"32,{HOSTILE[name]}"
        links.append((f"scaling?scaling.d_ks={quote(d_ks)}", d_ks))
    return links


def test_hostile_links_show_no_foreign_link_and_fetch_nothing_from_it(server, page):
    requested = []
    page.on("request", lambda request: requested.append(request.url))
    for path, value in hostile_links():
        page.goto(f"{server.url}/{path}")
        page.wait_for_selector("h1", timeout=PAINT_TIMEOUT_MS)
        wait_idle(page)
        hrefs = page.evaluate(HREFS_JS)
        assert not foreign_hrefs(hrefs, server.url), (path, hrefs)
        shown = page.evaluate(CODE_JS)
        assert any(value[:SHOWN_PREFIX] in text for text in shown), (path, shown)
    assert not [url for url in requested if HOSTILE_HOST in urlsplit(url).netloc], requested
    assert not page.errors, page.errors


SENTENCE_BOX = 'input[aria-label="Your sentence"]'
IMAGES_JS = "() => Array.from(document.querySelectorAll('img')).map(i => i.getAttribute('src'))"


def test_hostile_sentences_are_kept_as_text_and_fetch_nothing(server, page):
    """Markup in a linked sentence is text: the box holds it as written, the
    page makes no link, image or request from it."""
    requested = []
    page.on("request", lambda request: requested.append(request.url))
    for name in ("img-tag", "markdown-image", "markdown-link", "angle-autolink"):
        value = HOSTILE[name]
        page.goto(
            f"{server.url}/playground?playground.input=typed&playground.sentence={quote(value)}"
        )
        page.wait_for_selector("h1", timeout=PAINT_TIMEOUT_MS)
        wait_idle(page)
        # the box can be drawn a moment before its value arrives: wait for it (30 s at most)
        expect(page.locator(SENTENCE_BOX)).to_have_value(value, timeout=PAINT_TIMEOUT_MS)
        assert not foreign_hrefs(page.evaluate(HREFS_JS), server.url), name
        images = [src for src in page.evaluate(IMAGES_JS) if src and HOSTILE_HOST in src]
        assert not images, (name, images)
    assert not [url for url in requested if HOSTILE_HOST in urlsplit(url).netloc], requested
    assert not page.errors, page.errors


MARKUP_JS = """() => ({
  katex: document.querySelectorAll('.katex').length,
  coloured: Array.from(document.querySelectorAll('[data-testid=stMain] span[style*=color]'))
    .map(s => s.textContent),
  headings: Array.from(document.querySelectorAll('[data-testid=stMain] h1'))
    .map(h => h.textContent).filter(t => t.includes('Head')),
  images: Array.from(document.querySelectorAll('img')).map(i => i.getAttribute('src')),
  scripts: Array.from(document.querySelectorAll('script'))
    .filter(s => s.textContent.includes('alert')).length,
  text: document.body.innerText,  // the bar's "More" popover is drawn outside stMain
})"""


@pytest.fixture(scope="module")
def lessons_server(tmp_path_factory):
    """A dashboard whose operator's lessons folder holds the hostile lesson."""
    folder = tmp_path_factory.mktemp("lessons")
    (folder / "hostile.toml").write_text(lesson_toml(hostile_lesson()), encoding="utf-8")
    env = {DIR_ENV: str(folder), "PYTHONPATH": str(REPO_ROOT)}
    with streamlit_server(log_path=folder.parent / "lessons-server.log", env=env) as srv:
        yield srv


@pytest.mark.parametrize("path", ["scaling?lesson=hostile&lesson.step=1", ""])
def test_a_hostile_lesson_file_is_shown_as_its_text(lessons_server, page, path):
    requested = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(f"{lessons_server.url}/{path}")
    page.wait_for_selector("h1", timeout=PAINT_TIMEOUT_MS)
    wait_idle(page)
    page.wait_for_function(
        "() => document.body.innerText.includes('# Head')", timeout=PAINT_TIMEOUT_MS
    )
    if path:  # the lesson's title is in the bar's "More" (and its step title's tooltip)
        page.get_by_role("button", name=t_in("en", "lesson.more")).first.click()
        page.wait_for_function(
            "() => document.body.innerText.replaceAll('\\u2060', '').includes('lesson: # Head')",
            timeout=PAINT_TIMEOUT_MS,
        )
    base = f"{lessons_server.url}/"  # the landing page's own links are relative
    hrefs = [href if href is None else urljoin(base, href) for href in page.evaluate(HREFS_JS)]
    assert not foreign_hrefs(hrefs, lessons_server.url), hrefs
    found = page.evaluate(MARKUP_JS)
    assert found["katex"] == 0 and found["coloured"] == [] and found["headings"] == []
    assert found["scripts"] == 0
    assert not [src for src in found["images"] if src and HOSTILE_HOST in src]
    shown = found["text"].replace("\u2060", "")
    assert f"lesson: {HOSTILE_LESSON_TEXT}" in shown  # the lesson's title, as written
    if path:  # the bar: the step's title and what to notice, as written
        assert f"t: {HOSTILE_LESSON_TEXT}" in shown and f"n: {HOSTILE_LESSON_TEXT}" in shown
    assert not [url for url in requested if HOSTILE_HOST in urlsplit(url).netloc], requested
    assert not page.errors, page.errors
