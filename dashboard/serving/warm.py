"""Opening a running server's pages and lesson steps once, over its own websocket, so that
what they compute once per process (torch's kernels, the models, the cached results of each
view) is ready before a learner asks.

A *link* here is a page's URL path and a query string: every page of
:data:`dashboard.views.PAGES` (the first at the root address, where a learner's link lands)
and every step of every shipped lesson (:func:`lesson_links`, the step's own link in one
language). ``scripts/warm.py`` opens them all on each replica before the balancer starts;
:mod:`dashboard.serving.prewarm` opens a lesson's steps inside a running server.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from urllib.parse import urlencode

from dashboard.lessons.model import Lesson, shipped_lessons, step_query
from dashboard.views import PAGES

PAGE_TIMEOUT_S = 300.0
"""The longest one link's first run may take (a real model loaded on a shared machine)."""


@dataclass(frozen=True)
class Link:
    """A page's URL path (``""``: the root address) and the query of the link opened."""

    path: str
    query: str = ""

    def __str__(self) -> str:
        return f"/{self.path}" + (f"?{self.query}" if self.query else "")


@dataclass(frozen=True)
class PageRun:
    """One link's first run on one server: the link, whether it finished cleanly, the
    seconds it took and what went wrong (a refusal, an exception, an error box)."""

    link: Link
    ok: bool
    seconds: float
    problem: str = ""


def page_links() -> list[Link]:
    """Every page of the app once, in its order, the first at the root address."""
    return [Link(""), *(Link(name) for name, _icon in PAGES[1:])]


def lesson_links(lesson: Lesson, lang: str = "en") -> list[Link]:
    """Each step of ``lesson`` as the link a learner in ``lang`` opens (its page, values,
    lesson keys and language), in the lesson's order.

    Args:
        lesson: the lesson.
        lang: the learner's language (``"en"`` or ``"zh"``; charts are kept per language).
    """
    return [
        Link(step.page, urlencode(step_query(lesson, number, lang)))
        for number, step in enumerate(lesson.steps, start=1)
    ]


def shipped_lesson_links(lang: str = "en") -> list[Link]:
    """Every step of every shipped lesson (:func:`lesson_links`), lesson after lesson."""
    return [link for lesson in shipped_lessons().values() for link in lesson_links(lesson, lang)]


async def open_once(url: str, link: Link) -> PageRun:
    """Open ``link`` on the server at ``url`` in a new session, wait for its first run
    (at most :data:`PAGE_TIMEOUT_S`), and close the session. Never raises: what went wrong
    is in the result."""
    from dashboard.serving.stream_client import StreamSession  # websockets: only when warming

    session = StreamSession(url, link.path, link.query)
    started = time.perf_counter()
    try:
        result = await asyncio.wait_for(session.open(), PAGE_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - reported, the other links still warm
        return PageRun(link, False, time.perf_counter() - started, f"{type(exc).__name__}: {exc}")
    finally:
        await session.close()
    problem = "; ".join(result.errors) or ("" if result.ok else f"status {result.status}")
    return PageRun(link, result.ok, result.seconds, problem)


def open_link(url: str, link: Link) -> PageRun:
    """:func:`open_once` from plain (non-async) code: its own event loop, closed after."""
    return asyncio.run(open_once(url, link))


async def warm_server(url: str, links: list[Link]) -> list[PageRun]:
    """Every link of ``links`` opened once on ``url``, in turn."""
    return [await open_once(url, link) for link in links]


async def warm_all(urls: list[str], links: list[Link]) -> list[list[PageRun]]:
    """:func:`warm_server` on every URL at once (each replica has its own cores)."""
    return list(await asyncio.gather(*(warm_server(url, links) for url in urls)))


def report(url: str, runs: list[PageRun]) -> list[str]:
    """The lines for one server: its summary (pages and lesson steps counted apart, a
    step's link names its lesson), then each link that did not finish cleanly."""
    steps = sum(1 for run in runs if "lesson=" in run.link.query)
    total = sum(run.seconds for run in runs)
    lines = [f"warmed {url}: {len(runs) - steps} pages and {steps} lesson steps in {total:.1f} s"]
    lines += [f"  {run.link}: {run.problem}" for run in runs if not run.ok]
    return lines
