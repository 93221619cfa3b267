"""The sidebar's sections: every page in exactly one, in the pages' order, each label in both
languages (the browser test ``test_every_page_is_listed_in_the_open_sidebar`` checks that
none hides behind "View N more")."""

from __future__ import annotations

import json

from dashboard.views import PAGES, SECTIONS
from tests.dashboard.conftest import APP_PATH


def test_the_sections_list_every_page_once_in_order():
    listed = [page for _name, pages in SECTIONS for page in pages]
    assert listed == [name for name, _icon in PAGES]


def test_each_section_is_labelled_in_both_languages():
    for lang in ("en", "zh"):
        common = json.loads((APP_PATH.parent / "locales" / lang / "common.json").read_text("utf-8"))
        assert all(common.get(f"nav_{name}") for name, _pages in SECTIONS), lang
