"""A lesson's steps are made ready on a real server before anyone opens them
(:mod:`dashboard.serving.prewarm`): the cached computations of a step's page appear in the
server's own cache metrics (``/_stcore/metrics``) though no learner opened that page.

* With the shipped lessons warmed at start (``ATTENTION_LAB_PREWARM=on``, the default of
  ``streamlit run``), opening the landing page once is enough: the Gradients page's cache
  (step 4 of "Why √d_k") and the Heads page's (steps 3–4 of "Inside a real model") fill.
* With them off (the benches' servers), opening step 1 of "Why √d_k" warms that lesson: its
  step 4's Gradients cache fills.
"""

from __future__ import annotations

import concurrent.futures
import time
import urllib.request

import pytest

from bench.browser import patient, streamlit_server
from dashboard.lessons.model import shipped_lessons
from dashboard.serving.warm import Link, PageRun, lesson_links, open_link

pytestmark = pytest.mark.browser

WAIT_S = patient(600.0)  # every shipped lesson in turn, the census among them, on a loaded machine
GRADIENTS_CACHE = "dashboard.data.lab.gradient_by_dk"  # only the Gradients page asks for it
HEADS_CACHE = "dashboard.data.heads.copy_census"  # only the Heads page asks for it


def opened(url: str, link: Link) -> PageRun:
    """``link`` opened once on ``url`` from a thread of its own (a browser test's Playwright
    may hold this thread's event loop)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(open_link, url, link).result()


def cached_functions(url: str) -> set[str]:
    """The cached functions that hold entries on the server at ``url``."""
    text = urllib.request.urlopen(f"{url}/_stcore/metrics", timeout=10).read().decode()
    return {
        line.split('cache="', 1)[1].split('"', 1)[0]
        for line in text.splitlines()
        if line.startswith("cache_memory_bytes{") and 'cache="' in line
    }


def wait_for_caches(url: str, names: set[str]) -> set[str]:
    """Wait until every cache of ``names`` holds an entry; the cached functions then."""
    deadline = time.monotonic() + WAIT_S
    while True:
        held = cached_functions(url)
        if names <= held or time.monotonic() > deadline:
            return held
        time.sleep(1.0)


def test_the_shipped_lessons_are_warmed_after_the_first_page():
    with streamlit_server(env={"ATTENTION_LAB_PREWARM": "on"}) as server:
        assert opened(server.url, Link("")).ok
        before = cached_functions(server.url)
        assert GRADIENTS_CACHE not in before and HEADS_CACHE not in before
        held = wait_for_caches(server.url, {GRADIENTS_CACHE, HEADS_CACHE})
    assert {GRADIENTS_CACHE, HEADS_CACHE} <= held, sorted(held)


def test_opening_a_lesson_warms_its_steps():
    step_1 = lesson_links(shipped_lessons()["why-sqrt-dk"], "zh")[0]
    assert step_1.path == "scaling"
    with streamlit_server() as server:
        assert opened(server.url, step_1).ok
        held = wait_for_caches(server.url, {GRADIENTS_CACHE})
    assert GRADIENTS_CACHE in held, sorted(held)
