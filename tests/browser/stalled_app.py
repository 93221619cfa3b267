"""The dashboard with every run held ``ATTENTION_LAB_TEST_STALL_S`` seconds as its page is
about to run, for tests/browser/test_rerun_race.py. A run stopped by a newer request goes on
until its next message or use of the session state, and on a loaded machine it can wait for
the interpreter after its last one and before ``page.run()`` checks that the page may run;
the hold (a sleep, so nothing stops the run there) makes that wait long every time."""

from __future__ import annotations

import os
import runpy
import time
from pathlib import Path

from streamlit.navigation.page import Page

STALL_ENV = "ATTENTION_LAB_TEST_STALL_S"
APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"


def held_run(page: Page) -> None:
    """``Page.run``, after ``STALL_ENV`` seconds without a message."""
    time.sleep(float(os.environ[STALL_ENV]))
    Page._unheld_run(page)


if not hasattr(Page, "_unheld_run"):  # each run of this script: patched once
    Page._unheld_run = Page.run
    Page.run = held_run
runpy.run_path(str(APP), run_name="__main__")
