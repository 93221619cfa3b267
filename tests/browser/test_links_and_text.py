"""The landing page's own path and the sentence box, in headless Chromium.

* ``/intuition`` (the landing page's name) opens the Intuition page with no "Page not
  found" box, in English and Chinese; ``/`` sends on to it; the copy-link box then hands
  out ``/intuition?…``, which opens the same page just as cleanly.
* A 300-character paragraph put into "Your sentence" is cut to its first 200 characters
  with a note saying so; the browser no longer refuses it whole.
* A sentence with ``<`` and ``{`` is kept as typed and used, with no notice.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest

from bench.browser import REPO_ROOT, patient, wait_idle
from dashboard.controls import SENTENCE_MAX_CHARS

pytestmark = pytest.mark.browser

PAINT_TIMEOUT_MS = patient(30_000)
NOT_FOUND = "Page not found"
LINK_BOX = '[data-testid="stSidebar"] [data-testid="stCode"]'
SENTENCE_BOX = 'input[aria-label="Your sentence"]'
PARAGRAPH = (
    "The cat sat on the mat because it was warm, and the dog watched it from the door. " * 4
)[:300]
MARKUP = "If x < 3 then the cat {sleeps}"


def title(lang: str) -> str:
    """The Intuition page's title in ``lang``, from its locale file."""
    path = REPO_ROOT / "dashboard" / "locales" / lang / "intuition.json"
    return json.loads(path.read_text(encoding="utf-8"))["title"]


def open_page(page, url: str) -> None:
    """Go to ``url`` and wait until its first run has drawn the title and finished."""
    page.goto(url)
    page.wait_for_selector("h1", timeout=PAINT_TIMEOUT_MS)
    wait_idle(page)


def assert_found(page, lang: str) -> None:
    """The Intuition page in ``lang`` under the lab's name, with no "Page not found" box and
    no error."""
    body = page.locator("body").inner_text()
    assert NOT_FOUND not in body, body[:400]
    headings = [h.strip() for h in page.locator("h1").all_inner_texts()]
    assert "Attention Lab" in headings[0] and title(lang) in headings, headings
    assert page.locator('[data-testid="stException"]').count() == 0
    assert not page.errors, page.errors


@pytest.mark.parametrize(("path", "lang"), [("intuition", "en"), ("intuition", "zh"), ("", "zh")])
def test_landing_page_path_opens_cleanly_and_its_link_too(
    server, browser, page, screenshot_dir, path, lang
):
    open_page(page, f"{server.url}/{path}?lang={lang}")
    assert_found(page, lang)
    assert urlsplit(page.url).path == "/intuition", page.url  # "/" sends on to it
    link = page.locator(LINK_BOX).first.inner_text().strip()
    assert link.startswith(f"{server.url}/intuition?") and f"lang={lang}" in link, link
    page.screenshot(path=screenshot_dir / f"intuition_path_{path or 'root'}_{lang}.png")
    fresh = browser.new_context().new_page()
    fresh.errors = []
    fresh.on("pageerror", lambda exc: fresh.errors.append(str(exc)))
    try:
        open_page(fresh, link)
        assert_found(fresh, lang)
    finally:
        fresh.context.close()


def _sentence_page(server, page):
    open_page(page, f"{server.url}/playground?playground.input=typed")
    return page.locator(SENTENCE_BOX)


def test_long_paragraph_is_cut_with_a_note(server, page, screenshot_dir):
    box = _sentence_page(server, page)
    box.fill(PARAGRAPH)
    box.press("Enter")
    wait_idle(page)
    assert box.input_value() == PARAGRAPH[:SENTENCE_MAX_CHARS]
    note = f"Your text was cut to its first {SENTENCE_MAX_CHARS} characters (it had 300)"
    assert note in page.locator("body").inner_text()
    assert "The sentence has no tokens" not in page.locator("body").inner_text()
    page.screenshot(path=screenshot_dir / "playground_long_paste_en.png", full_page=False)
    assert not page.errors, page.errors


def test_sentence_with_markup_is_kept_and_used(server, page):
    box = _sentence_page(server, page)
    box.fill(MARKUP)
    box.press("Enter")
    wait_idle(page)
    assert box.input_value() == MARKUP
    assert page.locator('[data-testid="stAlertContentWarning"]').count() == 0
    tokens = page.locator('[data-testid="stMetric"]', has_text="Tokens L")
    assert tokens.locator('[data-testid="stMetricValue"]').inner_text().strip() == "10"
    assert not page.errors, page.errors


def query_of(page) -> dict[str, list[str]]:
    """The address bar's query, every value of a key kept."""
    from urllib.parse import parse_qs

    return parse_qs(urlsplit(page.url).query, keep_blank_values=True)


def test_the_address_bar_holds_the_links_values_as_the_bound_widgets_read_them(server, page):
    """Widgets bound to the URL by Streamlit: a checkbox written ``1`` by an old link opens
    checked and the address bar reads ``true``; a number between a slider's steps becomes
    the nearest step there, with the notice; a refused value leaves the bar."""
    url = f"{server.url}/watch?watch.compare=1&watch.steps=333&watch.seed=abc"
    open_page(page, url)
    query = query_of(page)
    assert query.get("watch.compare") == ["true"], page.url
    assert query.get("watch.steps") == ["350"], page.url
    assert "watch.seed" not in query, page.url
    body = page.locator("body").inner_text()
    assert "steps of 50, so the nearest step, 350" in body
    assert page.locator('[data-testid="stException"]').count() == 0
