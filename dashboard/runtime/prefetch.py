"""Background fillers: cached calls run ahead of the learner, in the gaps between script runs.

The data layer decides *what* is worth computing before anyone asks (the Heads page's next
slider values, :func:`dashboard.data.heads_prefetch.prefetch`); this module owns *how*, the process
state a background thread touches:

* the thread: a daemon thread per job (:func:`start_filling`, once per job name), one filler
  computing at a time (later ones queue), each call on one torch thread
  (:func:`dashboard.runtime.threads.single_threaded`), a failing call logged and skipped;
* its priority: the lowest (:data:`FILLER_NICE`, per thread on Linux), and it computes only
  while no script run is going (:func:`dashboard.runtime.threads.active_runs`), so a
  learner's run goes first;
* the exit hook: at exit no new call starts and the one in progress finishes
  (:func:`stop_filling`), since a daemon thread killed inside torch aborts the process.

:func:`wait_for_fillers` waits for the jobs started (the bench times moves after the page's
head start; the tests wait for them). Importing this module starts no thread.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Callable, Hashable

from dashboard.runtime import threads

Calls = tuple[tuple[Callable, tuple], ...]
"""A filler's work: (cached function, arguments) pairs, most likely first."""
FILLER_NICE = 19
"""The filler threads' niceness (Linux: per thread): a learner's run goes first."""
IDLE_POLL_S = 0.05
"""How often a waiting filler looks whether the learners' runs are done."""
STOP_WAIT_S = 30.0
"""At exit, how long to wait for a filler's call in progress (a daemon thread killed inside
torch aborts the process: ``terminate called without an active exception``)."""
_LOG = logging.getLogger(__name__)
_START_LOCK = threading.Lock()
_FILL_LOCK = threading.Lock()  # one filler computes at a time; later ones queue
_STARTED: set[Hashable] = set()
_FILLERS: list[threading.Thread] = []
_STOP = threading.Event()


def start_filling(name: Hashable, calls: Calls, *, thread_name: str = "prefetch") -> bool:
    """Run ``calls`` in a background thread at the lowest priority, once per ``name``.

    The caller never waits for it: a value the thread has not reached is computed by the run
    that asks for it (one still being computed is waited for, as any cache entry). Each call
    runs only while no script run is going and on one torch thread; a call that raises is
    logged and skipped; none starts once the process is stopping.

    Args:
        name: what is being filled (hashable); a second call with it does nothing.
        calls: (cached function, arguments) pairs, most likely first.
        thread_name: the thread's name (seen in a profiler or a stack dump).

    Returns:
        True when a thread was started.
    """
    with _START_LOCK:
        if name in _STARTED:
            return False
        _STARTED.add(name)
        filler = threading.Thread(target=_fill, args=(calls,), name=thread_name, daemon=True)
        _FILLERS.append(filler)
    filler.start()
    return True


def wait_for_fillers(timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for each filler thread started so far.

    Args:
        timeout: seconds to wait for each thread.

    Returns:
        True when none is running any more.
    """
    with _START_LOCK:
        fillers = list(_FILLERS)
    for filler in fillers:
        filler.join(timeout)
    return not any(filler.is_alive() for filler in fillers)


@atexit.register
def stop_filling() -> None:
    """At exit (registered with :mod:`atexit`): no new call starts, and the one in progress
    finishes (waited for up to :data:`STOP_WAIT_S`)."""
    _STOP.set()
    wait_for_fillers(STOP_WAIT_S)


def _fill(calls: Calls) -> None:
    """The filler thread: lower its priority, then run each call in turn while the server
    is idle, one filler at a time."""
    _lowest_priority()
    with _FILL_LOCK:
        for function, args in calls:
            if not _server_idle():
                return
            try:
                with threads.single_threaded():  # runtime/threads owns torch's thread count
                    function(*args)
            except Exception as err:  # noqa: BLE001 — a failed guess only means no head start
                _LOG.warning("prefetch %s%r failed: %s", function.__name__, args, err)


def _lowest_priority() -> None:
    """Give the calling thread the niceness :data:`FILLER_NICE` (Linux sets it per thread);
    where that is not possible it runs at normal priority."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), FILLER_NICE)
    except (AttributeError, OSError):  # not Linux, or not allowed
        pass


def _server_idle() -> bool:
    """Wait until no learner's script run is going; False when the process is stopping.

    The filler shares the GIL with every session's run: on a busy server (a room of thirty)
    it would slow every page, so it only works in the gaps (measured with ``bench.load``:
    every page's moves p50 2.0 s, p95 6.4 s while a filler ran without this; 0.66 s and
    2.0 s without a filler)."""
    while threads.active_runs() > 0:
        if _STOP.wait(IDLE_POLL_S):
            return False
    return not _STOP.is_set()
