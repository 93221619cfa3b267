"""AppTest helpers for the dashboard tests (torch import is slow: generous timeouts)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

REPO_ROOT = Path(__file__).resolve().parents[2]
APP_PATH = REPO_ROOT / "dashboard" / "app.py"
TIMEOUT_S = 30


def open_app(page: str | None = None, **params: str | list[str]) -> AppTest:
    """Run the app once with the given query parameters, on ``views/<page>.py`` if given.

    Dots are not valid in keyword names, so pass ``**{"playground.seq_len": "8"}``.
    """
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT_S)
    for key, value in params.items():
        at.query_params[key] = value
    if page is not None:
        at.switch_page(f"views/{page}.py")
    return at.run()


def metrics(at: AppTest) -> dict[str, str]:
    """``{label: value}`` of every st.metric on the page."""
    return {m.label: m.value for m in at.metric}


def assert_clean(at: AppTest) -> None:
    """No uncaught exception and no st.error on the page."""
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]


@pytest.fixture
def app():
    """The :func:`open_app` factory."""
    return open_app
