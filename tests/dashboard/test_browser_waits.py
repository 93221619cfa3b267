"""The browser tier's waits on a slow machine: ``ATTENTION_LAB_SLOWDOWN`` stretches every
hang guard (a number ≥ 1, else a ValueError naming it), and a page whose script run never
finishes fails naming what was awaited and the page, not only Playwright's timeout."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench import browser


@pytest.mark.parametrize(("raw", "factor"), [("", 1.0), ("1", 1.0), ("2.5", 2.5), (" 3 ", 3.0)])
def test_the_slowdown_stretches_each_wait(monkeypatch, raw, factor):
    monkeypatch.setenv(browser.SLOWDOWN_ENV, raw)
    assert browser.slowdown() == factor
    assert browser.patient(60.0) == 60.0 * factor
    stretched = browser.patient(30_000)
    assert isinstance(stretched, int) and stretched == round(30_000 * factor)


@pytest.mark.parametrize("raw", ["0.5", "0", "-2", "fast", "nan", "inf"])
def test_a_bad_slowdown_is_refused_naming_it(monkeypatch, raw):
    monkeypatch.setenv(browser.SLOWDOWN_ENV, raw)
    with pytest.raises(ValueError, match=browser.SLOWDOWN_ENV) as caught:
        browser.slowdown()
    assert repr(raw) in str(caught.value)


def test_the_constants_are_read_with_the_slowdown_at_import():
    code = "from bench import browser; print(browser.IDLE_TIMEOUT_MS, browser.HEALTH_TIMEOUT_S)"
    env = {"ATTENTION_LAB_SLOWDOWN": "3", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
        cwd=browser.REPO_ROOT,
    )  # fmt: skip
    assert done.stdout.split() == ["180000", "270.0"]


class _NeverIdle:
    """A page whose script run never ends: Playwright's wait runs out at once."""

    url = "http://127.0.0.1:1/never"

    def wait_for_selector(self, *_args, **_kwargs):
        return None

    def wait_for_function(self, *_args, timeout, **_kwargs):
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        raise PlaywrightTimeout(f"Timeout {timeout}ms exceeded.")


def test_a_run_that_never_ends_fails_naming_the_wait_and_the_page():
    pytest.importorskip("playwright")
    with pytest.raises(AssertionError) as caught:
        browser.wait_idle(_NeverIdle(), timeout_ms=1500)
    words = str(caught.value)
    assert "script run did not finish within 1.5 s" in words
    assert _NeverIdle.url in words and browser.SLOWDOWN_ENV in words
