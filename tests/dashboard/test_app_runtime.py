"""Process-level settings that keep reruns fast: no full garbage collection after every run,
and the objects alive after the imports frozen out of Python's own collections."""

from __future__ import annotations

import gc
import tomllib

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
