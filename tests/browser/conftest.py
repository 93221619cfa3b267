"""Fixtures for the browser tests: one Streamlit server and one headless Chromium per session.

Chromium is Debian's (/usr/bin/chromium, installed by scripts/test.sh). Outside CI a machine
without it skips these tests with the reason; in CI (CI=true) a missing browser fails them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.browser import CHROMIUM, REPO_ROOT, launch_chromium, streamlit_server

SCREENSHOT_DIR = Path(
    os.environ.get("ATTENTION_LAB_SCREENSHOTS", REPO_ROOT / "artifacts" / "screenshots")
)
VIEWPORT = {"width": 1440, "height": 1000}


def _require_chromium() -> None:
    if Path(CHROMIUM).exists():
        return
    message = f"{CHROMIUM} is missing; scripts/test.sh installs Debian's chromium"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """A running dashboard on a free loopback port."""
    log = tmp_path_factory.mktemp("streamlit") / "server.log"
    with streamlit_server(log_path=log) as srv:
        yield srv


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium driven by Playwright."""
    _require_chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    """A fresh browser context and page; page errors are collected in ``page.errors``."""
    context = browser.new_context(viewport=VIEWPORT)
    pg = context.new_page()
    pg.errors = []
    pg.on("pageerror", lambda exc: pg.errors.append(str(exc)))
    yield pg
    context.close()


@pytest.fixture(scope="session")
def screenshot_dir() -> Path:
    """Where the tests write screenshots of every page in both languages."""
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    return SCREENSHOT_DIR
