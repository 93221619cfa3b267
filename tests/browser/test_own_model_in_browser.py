"""Your own model in the browser: a server whose models folder holds a tiny GGUF
file (``tests/tiny_gguf.py``); the Decoder and Heads at work pages open it from a link by its
listed name, in English and Chinese, paint their charts with no error, say which model runs
and use the model-neutral title; a link naming a path is refused with the link notice.
Screenshots go to ``artifacts/screenshots/own-<page>-<lang>.png``.
"""

from __future__ import annotations

import pytest

from bench.browser import streamlit_server, wait_idle
from dashboard.i18n import t_in
from tests.browser.helpers import SLOW_PAGE_MS, open_page, open_shot, page_url
from tests.tiny_gguf import write_tiny_gguf

pytestmark = pytest.mark.browser

TINY = "tiny.gguf"
MODEL_PAGES = ("decoder", "heads")
NOTICE = '[data-testid="stAlertContentWarning"], [data-testid="stAlertContentInfo"]'


@pytest.fixture(scope="module")
def own_server(tmp_path_factory):
    """A dashboard whose models folder holds one tiny llama file."""
    folder = tmp_path_factory.mktemp("models")
    write_tiny_gguf(folder / TINY, layers=2, heads=4, kv_heads=2)
    log = tmp_path_factory.mktemp("streamlit") / "server.log"
    with streamlit_server(log_path=log, env={"ATTENTION_LAB_MODELS_DIR": str(folder)}) as srv:
        yield srv


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", MODEL_PAGES)
def test_an_own_model_opens_from_a_link_and_paints(own_server, page, screenshot_dir, name, lang):
    url = page_url(own_server.url, name, f"lang={lang}&{name}.model={TINY}")
    painted = open_shot(page, url, screenshot_dir / f"own-{name}-{lang}.png", SLOW_PAGE_MS)
    assert any(fraction for fraction in painted if fraction is not None), painted
    assert page.locator("h1").first.inner_text() == t_in(lang, f"{name}.title_own")
    body = page.locator("body").inner_text()
    assert TINY in body  # the note that names the running model
    assert t_in(lang, f"{name}.look_for") not in body  # SmolLM2's questions
    assert t_in(lang, f"{name}.look_for_answers") not in body  # and its measured figures


@pytest.mark.parametrize("name", MODEL_PAGES)
def test_a_link_naming_a_path_is_refused_and_opens_nothing(own_server, page, name):
    # the link falls back on SmolLM2, whose first run on Heads at work is its census
    open_page(page, page_url(own_server.url, name, f"{name}.model=../../etc/passwd"), SLOW_PAGE_MS)
    page.wait_for_selector(NOTICE, timeout=SLOW_PAGE_MS)
    wait_idle(page, timeout_ms=SLOW_PAGE_MS)
    assert "etc/passwd" in page.locator(NOTICE).first.inner_text()
    assert page.locator("h1").first.inner_text() == t_in("en", f"{name}.title")  # SmolLM2
    assert "etc/passwd" not in own_server.log_path.read_text()  # nothing tried to open it
