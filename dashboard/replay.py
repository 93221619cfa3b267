"""Draw once, replay for every session: Streamlit's cached element replay for page sections.

A page section that only draws (charts, tables, metrics, text; no widget) from hashable
arguments is the same for every session that shows the same values in the same language.
:func:`replayed` runs it once per (arguments, language) under
:func:`streamlit.cache_resource`; every later call, from any session, replays the recorded
element messages instead of building the Altair charts, validating their specs and
converting their data to Arrow again. That is what lets a room of thirty followers
repaint the presenter's view for the price of one (measured with
``python -m bench.load --mode room``; its figures are in ``docs/PERFORMANCE.md``).

Rules for a replayed function (Streamlit's own, see "Caching" in its docs):

* no widgets (a house test already keeps widgets in ``*_controls`` functions);
* it draws with ``st.*`` calls on the current container (``with column: f(...)``), never on
  a container passed in as an argument, which cannot be replayed;
* its arguments are small values that Streamlit's caches hash quickly: the
  page's frozen config, tuples, numbers, strings. Not a data frame: hashing one costs as
  much as drawing (Arrow-backed columns). Fetch the data inside from :mod:`dashboard.data`,
  whose cache answers the second call;
* whatever the section says depends only on its arguments, the language and the look of
  the tab's charts (:func:`dashboard.presentation.chart_look`: the presentation view).

The lesson figures a section notes as it draws (:func:`dashboard.lesson_figures.
headline_metric`) are recorded with its drawing and noted again on each replay.

Switch it off with ``ATTENTION_LAB_NO_REPLAY=1`` (the section is then drawn on every run,
as the readable code says).
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import ParamSpec

import streamlit as st

from dashboard import lesson_figures
from dashboard.i18n import current_lang
from dashboard.presentation import chart_look

MAX_ENTRIES = 128
"""Recorded drawings kept per section (oldest first out); each is a few tens of KiB."""
OFF_ENV = "ATTENTION_LAB_NO_REPLAY"

P = ParamSpec("P")
_MADE: dict[tuple[str, str], tuple[Callable[..., None], list[Callable]]] = {}
_MADE_LOCK = threading.Lock()


def replay_enabled() -> bool:
    """Whether sections are replayed (``ATTENTION_LAB_NO_REPLAY`` unset or ``0``)."""
    return os.environ.get(OFF_ENV, "0") in ("", "0")


def replayed(draw: Callable[P, None]) -> Callable[P, None]:
    """Decorator: draw ``draw(*args)`` once per (arguments, language, chart look), replay it
    after.

    Args:
        draw: a function that only draws (no widgets, no return value) with ``st.*`` calls.

    Returns:
        A function with the same arguments that draws the same elements.
    """
    name = (draw.__module__, draw.__qualname__)
    with _MADE_LOCK:
        made = _MADE.get(name)
        if made is None:
            made = _MADE[name] = _cached_recorder(draw)
    cached, current = made
    current[0] = draw  # a page module runs again on every rerun: draw with its newest copy

    @functools.wraps(draw)
    def section(*args: P.args, **kwargs: P.kwargs) -> None:
        if replay_enabled():
            lesson_figures.note_all(cached((current_lang(), chart_look()), *args, **kwargs))
        else:
            draw(*args, **kwargs)

    return section


def _cached_recorder(draw: Callable[P, None]) -> tuple[Callable[..., None], list[Callable]]:
    """``st.cache_resource`` over a recorder that calls the newest ``draw`` of its name.

    Made once per name: a page's module is executed again on every run, and making a cached
    function reads its source from the disk (a few milliseconds a run otherwise).
    """
    current: list[Callable[P, None]] = [draw]

    def record(view: tuple, *args: P.args, **kwargs: P.kwargs) -> dict[str, str]:
        del view  # part of the cache key: the drawing's language and chart look
        with lesson_figures.noting() as noted:  # a replay notes them again, as drawn
            current[0](*args, **kwargs)
        return noted

    # Streamlit's caches key a function by its module, qualified name and source; every
    # ``record`` has the same source, so each takes the name of the function it draws
    record.__module__, record.__qualname__ = draw.__module__, f"{draw.__qualname__}.replay"
    # st.cache_resource, not st.cache_data: a replay then reads the recorded messages as they
    # are kept, where st.cache_data unpickles its stored copy on every read (a follower's run
    # replays several sections, so that was 5 % of a room's server time in py-spy)
    return st.cache_resource(record, show_spinner=False, max_entries=MAX_ENTRIES), current
