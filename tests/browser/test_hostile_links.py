"""A crafted link never makes the app show a live link to another site.

Each hostile value (bare http(s) URLs, markdown links and images, an ``<img>`` tag, a
``www.`` name, a ``javascript:`` link, an e-mail address, an ``<https://…>`` autolink) is put
in a link to the Playground's sequence length or the Scaling page's d_k list. In the page the
browser draws, every ``<a>`` must point at the app itself (or be an in-page ``#`` anchor), the
value must be shown in a ``<code>`` element, and the browser must request nothing from the
hostile host (Streamlit itself fetches its icons from Google's font server). A linked
sentence is text, markup and all: its box holds it as written, and the page links, shows
and fetches nothing from it.
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit

import pytest
from playwright.sync_api import expect

from bench.browser import wait_idle
from tests.browser.helpers import CODE_JS, HREFS_JS, foreign_hrefs
from tests.hostile import HOSTILE, HOSTILE_HOST

pytestmark = pytest.mark.browser

PAINT_TIMEOUT_MS = 30_000
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
    """Markup in a linked sentence is text (issue 22, D5): the box holds it as written, the
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
