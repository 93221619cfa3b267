"""A lesson's steps made ready inside the running server, so that Next paints at once.

When a session opens a lesson (:func:`warm_lesson`), and once per process after the first
page for every shipped lesson (:func:`warm_shipped_lessons`), each step's link is opened
once on this server through its own websocket (:func:`dashboard.serving.warm.open_link`):
the step's page runs exactly as a learner's would, so every cached computation it makes (the
layer, the model, the chart's data) is there when the room arrives. The links are run by the
background worker of :mod:`dashboard.runtime.prefetch`: one at a time, only while no
learner's run is going, at the lowest priority. The lesson a session opens goes first (its
steps still waiting move ahead of the rest); the shipped lessons' speculative warm-up waits
while a room has followers on this server (:func:`no_room_live`), since a step's first run
(a real model loaded, a census of its heads) would share the cores with the room's runs.

``ATTENTION_LAB_PREWARM=off`` leaves the shipped lessons cold at start (a lesson still warms
when it is opened); the benchmarks' and tests' servers set it (:func:`bench.browser.
streamlit_server`) unless a test measures it. Nothing is warmed where no server runs (an
``AppTest``), since there is no address to open.
"""

from __future__ import annotations

import os
import threading

import streamlit as st

from dashboard.lessons.model import Lesson, shipped_lessons
from dashboard.rooms import push
from dashboard.runtime import prefetch
from dashboard.serving.warm import lesson_links, open_link

PREWARM_ENV = "ATTENTION_LAB_PREWARM"
_SHIPPED = threading.Event()  # the shipped lessons were queued in this process
_ANY_ADDRESS = {"", "0.0.0.0", "::"}  # listening everywhere: this process reaches itself here


def own_address() -> str | None:
    """This server's own address (its port and base path on the loopback, or the address it
    listens on); ``None`` where no server runs (an ``AppTest`` run has no address)."""
    if not st.context.url:
        return None
    address = st.get_option("server.address") or ""
    host = "127.0.0.1" if address in _ANY_ADDRESS else address
    base = (st.get_option("server.baseUrlPath") or "").strip("/")
    return f"http://{host}:{st.get_option('server.port')}" + (f"/{base}" if base else "")


def warm_lesson(lesson: Lesson, lang: str) -> bool:
    """Queue every step of ``lesson`` in ``lang`` for the background worker, once per
    lesson and language in this process, ahead of everything queued before (its steps still
    waiting move up, and no longer wait for :func:`no_room_live`).

    Returns:
        True when steps were queued or moved up now (False: nothing waiting, or no server).
    """
    url = own_address()
    if url is None:
        return False
    return prefetch.start_group((lesson_job(url, lesson, lang),), one_thread=False, promote=True)


def lesson_job(url: str, lesson: Lesson, lang: str) -> tuple[tuple, prefetch.Calls]:
    """The filler's job for ``lesson`` in ``lang``: its name and each step's link opened on
    the server at ``url``."""
    calls = tuple((open_link, (url, link)) for link in lesson_links(lesson, lang))
    return ("lesson", lesson.name, lang), calls


def no_room_live() -> bool:
    """Whether no room has followers on this server (the shipped lessons' warm-up may run)."""
    return not push.registry().codes()


def warm_shipped_lessons() -> bool:
    """After the process's first page: every shipped lesson's steps, in English (unless
    :data:`PREWARM_ENV` is ``off``).

    Returns:
        True when at least one lesson was queued now.
    """
    if _SHIPPED.is_set() or os.environ.get(PREWARM_ENV, "on").strip().lower() == "off":
        return False
    _SHIPPED.set()
    url = own_address()
    if url is None:
        return False
    jobs = tuple(lesson_job(url, lesson, "en") for lesson in shipped_lessons().values())
    return prefetch.start_group(jobs, one_thread=False, when=no_room_live)


def after_page(found: tuple[Lesson, int] | None, lang: str) -> None:
    """At the end of every run: the shipped lessons once per process
    (:func:`warm_shipped_lessons`), then the lesson this run shows, if any, in this
    learner's language (queued last, so warmed first).

    Args:
        found: the lesson and step this run shows (:mod:`dashboard.lesson_bar`), or ``None``.
        lang: this learner's language.
    """
    warm_shipped_lessons()
    if found is not None:
        warm_lesson(found[0], lang)
