"""How a run's messages reach the server's event loop: one wake-up per burst, not per message.

Streamlit hands every message a script run sends (each chart, caption and widget) from the
run's thread to the server's event loop with ``loop.call_soon_threadsafe``, one call per
message, and the event loop then asks itself to flush the browser queues with a second
``call_soon_threadsafe`` per message. Each call writes a byte to the loop's self-pipe, and
each write lets go of the GIL and waits to take it back. With thirty followers rerunning at
once after a presenter's move, py-spy put 43 % of their wall time in those writes
(``bench.load --mode room``).

:func:`install` replaces the first hand-off (``AppSession._call_soon_on_event_loop``) with
:func:`coalesced_call_soon`: the callback joins the session's own FIFO queue, and only a
queue that was empty schedules its drain, so callbacks run in the order they were given,
each exactly once, on the event loop, and the run's thread writes to the self-pipe once per
burst. The second hand-off is left as it is: setting the flush event directly on the loop
made thirty learners opening the landing page at once 0.3-0.8 s slower, measured side by
side with ``bench.load --mode landing`` (why was not pinned down).

This replaces a private method of Streamlit 1.67's runtime for every message of every
session, so it is **off unless switched on**: ``ATTENTION_LAB_COALESCE=1`` installs it (a
room of thirty followers in one process reached the 1 s follow goal with it, 1.69 s at p95
without); by default Streamlit's own hand-off runs. When the method is not there, nothing
is replaced and the server's log says so once; :func:`uninstall` puts it back. CONTRIBUTING's
table of private calls names the test that fails when the method changes
(``tests/dashboard/test_streamlit_internals.py``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections import deque
from collections.abc import Callable

ON_ENV = "ATTENTION_LAB_COALESCE"
_LOG = logging.getLogger(__name__)
_install_lock = threading.Lock()
_originals: dict[str, Callable] = {}


class SessionOutbox:
    """One session's callbacks on their way to the event loop, in order.

    Args:
        loop: the event loop that runs them.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self._queue: deque[Callable[[], None]] = deque()
        self._lock = threading.Lock()

    def put(self, callback: Callable[[], None]) -> None:
        """Queue ``callback``; the first one of a burst schedules :meth:`drain` on the loop.

        Raises:
            RuntimeError: from ``call_soon_threadsafe`` when the loop is closed (the queue is
                emptied first, so nothing runs later).
        """
        with self._lock:
            self._queue.append(callback)
            if len(self._queue) > 1:
                return  # a drain is scheduled and has not taken this burst yet
        try:
            self.loop.call_soon_threadsafe(self.drain)
        except RuntimeError:
            with self._lock:
                self._queue.clear()
            raise

    def drain(self) -> None:
        """On the event loop: run the callbacks queued when it starts, oldest first; those
        queued meanwhile get a drain of their own after the loop's other ready work (the
        flushes to the browsers among it), so a busy run cannot hold the loop."""
        with self._lock:
            count = len(self._queue)
        for _ in range(count):
            with self._lock:
                callback = self._queue[0]
            try:
                callback()
            except Exception as err:  # one failing callback must not hold back the rest
                self.loop.call_exception_handler(
                    {"message": "event-loop callback failed", "exception": err}
                )
            finally:
                with self._lock:
                    self._queue.popleft()
        with self._lock:
            more = bool(self._queue)
        if more:
            self.loop.call_soon(self.drain)


def _outbox(session) -> SessionOutbox:
    outbox = session.__dict__.get("_lab_outbox")
    if outbox is None:
        with _install_lock:
            outbox = session.__dict__.setdefault("_lab_outbox", SessionOutbox(session._event_loop))
    return outbox


def coalesced_call_soon(session, callback: Callable[[], None]) -> None:
    """``AppSession._call_soon_on_event_loop`` that wakes the loop once per burst (see
    :class:`SessionOutbox`); a closed loop drops the callback, as Streamlit's own does."""
    try:
        _outbox(session).put(callback)
    except RuntimeError:
        if not session._event_loop.is_closed():
            raise
        _LOG.debug("Dropped event-loop callback", exc_info=True)


def enabled() -> bool:
    """Whether :func:`install` replaces Streamlit's hand-off: only with
    ``ATTENTION_LAB_COALESCE=1``."""
    return os.environ.get(ON_ENV, "0") == "1"


def install() -> bool:
    """Replace Streamlit's hand-off, once per process (see the module's docstring).

    Returns:
        Whether the coalescing hand-off is in place.
    """
    if _originals:
        return True
    if not enabled():
        return False
    with _install_lock:
        if _originals:
            return True
        try:
            from streamlit.runtime.app_session import AppSession

            _originals["call_soon"] = AppSession._call_soon_on_event_loop
        except (ImportError, AttributeError) as err:
            _LOG.warning("delivery: Streamlit's hand-off not found (%s); left as it is", err)
            return False
        AppSession._call_soon_on_event_loop = coalesced_call_soon
        return True


def uninstall() -> None:
    """Put Streamlit's own hand-off back (tests)."""
    from streamlit.runtime.app_session import AppSession

    with _install_lock:
        if _originals:
            AppSession._call_soon_on_event_loop = _originals.pop("call_soon")
