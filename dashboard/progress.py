"""A long computation in words before it starts (:func:`confirm_long_run`, :func:`duration`)
and a progress bar while it runs, with the time left estimated from the passes already done
(the library's ``on_pass(done, total)`` hooks call it).

The bar is drawn at the first pass, so a cached result (no pass runs) draws nothing, and it
is removed when the computation ends::

    with PassProgress("heads.progress_mask") as on_pass:
        effect = data.measured_mask_effect(parts, True, on_pass)
"""

from __future__ import annotations

import math
import time
from types import TracebackType

import streamlit as st

from dashboard.i18n import t


def duration(seconds: float) -> str:
    """ "under a second", "about 8 s", "about 2 min 30 s" in the page's language."""
    if seconds < 1:
        return t("watch.duration_under_second")
    if seconds < 90:
        return t("watch.duration_seconds", s=round(seconds))
    minutes, rest = divmod(round(seconds), 60)
    if rest == 0:
        return t("watch.duration_whole_minutes", m=minutes)
    return t("watch.duration_minutes", m=minutes, s=rest)


def confirm_long_run(key: str, calls: int, seconds: float, long: bool) -> bool:
    """Whether a computation may start now: at once when it is not ``long``; otherwise only
    in the run its button is pressed, the estimate said beside the button first.

    Args:
        key: names the button (``_long.<key>``). calls: its forward calls. seconds: its
            estimate. long: over the page's limit (``data.RunEstimate.long``).
    """
    if not long:
        return True
    time_words = duration(seconds)
    st.info(t("common.long_run", calls=calls, time=time_words))
    return st.button(t("common.long_run_button", time=time_words), key=f"_long.{key}")


def seconds_left(elapsed_s: float, done: int, total: int) -> int:
    """Whole seconds the remaining ``total - done`` passes take at the pace of the ``done``
    passes that took ``elapsed_s`` (rounded up; 0 when every pass is done).

    Raises:
        ValueError: when ``done`` is not in [1, total].
    """
    if not 1 <= done <= total:
        raise ValueError(f"passes done must be in [1, {total}], got {done}")
    return math.ceil(elapsed_s / done * (total - done))


class PassProgress:
    """A context manager giving an ``on_pass(done, total)`` hook that draws a progress bar
    whose text is the translation of ``text_key`` with ``done``, ``total`` and ``left`` (whole
    seconds, from :func:`seconds_left`)."""

    def __init__(self, text_key: str) -> None:
        self._text_key = text_key
        self._bar = None
        self._start = time.perf_counter()

    def __enter__(self) -> PassProgress:
        return self

    def __call__(self, done: int, total: int) -> None:
        left = seconds_left(time.perf_counter() - self._start, done, total)
        text = t(self._text_key, done=done, total=total, left=left)
        if self._bar is None:
            self._bar = st.progress(0.0, text=text)
        self._bar.progress(done / total, text=text)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.empty()
