"""Process-level settings of the app: no full garbage collection after every run, the objects
alive after the imports frozen out of Python's own collections (dashboard/runtime/memory.py),
and icons that need no network."""

from __future__ import annotations

import gc
import tomllib

from dashboard.views import PAGES
from tests.dashboard.conftest import REPO_ROOT, assert_clean, open_app


def test_post_run_full_collection_is_off():
    with open(REPO_ROOT / ".streamlit" / "config.toml", "rb") as f:
        config = tomllib.load(f)
    assert config["runner"]["postScriptGC"] is False


def test_startup_objects_are_frozen_after_the_first_run():
    at = open_app()
    assert_clean(at)
    # torch, pandas and Altair leave well over 100k objects behind their imports
    assert gc.get_freeze_count() > 100_000


def test_no_icon_is_fetched_from_a_web_font_service(monkeypatch):
    """The tab icon and the navigation icons are emoji: a Material Symbols name
    (``:material/…:``) makes the browser fetch the tab icon from fonts.gstatic.com, which
    fails in a room without internet. Records the icons the app really passes to Streamlit."""
    import streamlit as st

    icons: list[str | None] = []
    set_page_config, page = st.set_page_config, st.Page

    def recording_config(*args, **kwargs):
        icons.append(kwargs.get("page_icon"))
        return set_page_config(*args, **kwargs)

    def recording_page(*args, **kwargs):
        icons.append(kwargs.get("icon"))
        return page(*args, **kwargs)

    monkeypatch.setattr(st, "set_page_config", recording_config)
    monkeypatch.setattr(st, "Page", recording_page)
    assert_clean(open_app("intuition"))  # one run ("/" sends on to /intuition: two runs)
    # the tab icon, one per page, and the root's (app.root_page)
    assert len(icons) == 2 + len(PAGES), icons
    for icon in icons:
        assert icon and not icon.startswith(":"), icon  # no :material/…: and no :shortcode:
