"""How a run's messages reach the server's event loop: one wake-up per burst, not per message.

Streamlit hands every message a script run sends (each chart, caption and widget) from the
run's thread to the server's event loop with ``loop.call_soon_threadsafe``, one call per
message, and the event loop then asks itself to flush the browser queues with a second
``call_soon_threadsafe`` per message. Each call writes a byte to the loop's self-pipe, and
each write lets go of the GIL and waits to take it back. With thirty followers rerunning at
once after a presenter's move, py-spy put 43 % of their wall time in those writes
(``bench.load --mode room``).

:func:`install` replaces the two hand-offs with ones that keep their order and their
meaning but wake the loop once per burst:

* :func:`coalesced_call_soon` (``AppSession._call_soon_on_event_loop``): the callback joins
  the session's own FIFO queue, and only a queue that was empty schedules its drain, so
  callbacks run in the order they were given, each exactly once, on the event loop;
* :func:`flush_soon` (the session manager's and each session's
  ``message_enqueued_callback``, Streamlit's ``Runtime._enqueued_some_message``): on the
  event loop's own thread the flush event is set directly (asyncio's ``Event.set`` is safe
  there); from any other thread it is scheduled as before.

This reaches into Streamlit 1.67's runtime (``AppSession._call_soon_on_event_loop``,
``Runtime._session_mgr`` and ``_message_enqueued_callback``). When they are not there,
nothing is replaced and the server's log says so once. ``ATTENTION_LAB_NO_COALESCE=1`` leaves
Streamlit's own hand-offs in place; :func:`uninstall` puts them back.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
from collections import deque
from collections.abc import Callable

OFF_ENV = "ATTENTION_LAB_NO_COALESCE"
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
        """On the event loop: run every queued callback, oldest first, including any queued
        while they run."""
        while True:
            with self._lock:
                if not self._queue:
                    return
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


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def flush_soon(runtime) -> None:
    """``Runtime._enqueued_some_message``: ask the server's loop to flush the browser
    queues, directly when already on that loop."""
    objs = runtime._get_async_objs()
    if _on_loop(objs.eventloop):
        objs.need_send_data.set()
    else:
        objs.eventloop.call_soon_threadsafe(objs.need_send_data.set)


def enabled() -> bool:
    """Whether :func:`install` replaces Streamlit's hand-offs (``ATTENTION_LAB_NO_COALESCE``
    unset or ``0``)."""
    return os.environ.get(OFF_ENV, "0") in ("", "0")


def _set_flush_callback(manager, new: Callable | None, old: Callable | None) -> None:
    """Give the session manager and each of its sessions ``new`` where they hold ``old``
    (Streamlit binds ``Runtime._enqueued_some_message`` into both when it starts)."""
    if manager._message_enqueued_callback == old:
        manager._message_enqueued_callback = new
    for info in manager.list_sessions():
        if info.session._message_enqueued_callback == old:
            info.session._message_enqueued_callback = new


def install() -> bool:
    """Replace Streamlit's two hand-offs, once per process (see the module's docstring).
    Call it inside a running server (a script run).

    Returns:
        Whether the coalescing hand-offs are in place.
    """
    if _originals:
        return True
    if not enabled():
        return False
    with _install_lock:
        if _originals:
            return True
        try:
            from streamlit import runtime
            from streamlit.runtime.app_session import AppSession

            server = runtime.get_instance()
            manager = server._session_mgr
            call_soon = AppSession._call_soon_on_event_loop
            flush = server._enqueued_some_message
            fast = functools.partial(flush_soon, server)
            _set_flush_callback(manager, fast, flush)
        except (RuntimeError, AttributeError) as err:
            _LOG.warning("delivery: Streamlit's hand-offs not found (%s); left as they are", err)
            return False
        _originals.update(call_soon=call_soon, flush=flush, fast=fast, manager=manager)
        AppSession._call_soon_on_event_loop = coalesced_call_soon
        return True


def uninstall() -> None:
    """Put Streamlit's own hand-offs back (tests)."""
    from streamlit.runtime.app_session import AppSession

    with _install_lock:
        if not _originals:
            return
        AppSession._call_soon_on_event_loop = _originals.pop("call_soon")
        manager, flush = _originals.pop("manager"), _originals.pop("flush")
        _set_flush_callback(manager, flush, _originals.pop("fast"))
