"""Background fillers: cached calls run ahead of the learner, in the gaps between script runs.

The data layer decides *what* is worth computing before anyone asks (the Heads page's next
slider values, :func:`dashboard.data.heads_prefetch.prefetch`); this module owns *how*, the process
state a background thread touches:

* the thread: one daemon worker per process, started with the first job
  (:func:`start_filling`, or several as one unit with :func:`start_group`, once per job
  name), each call on one torch thread
  (:func:`dashboard.runtime.threads.single_threaded`), a failing call logged and skipped;
* the order: the newest unit first. Between two calls the worker takes the next call of the
  unit queued last (a page's jobs of one run, in its order), and an older unit goes on when
  the newer ones are done: the moves next
  to where a learner is *now* come before those next to where they were (measured with
  ``bench.load``: a learner's second copy-length move in a row waited behind the previous
  value's sixteen top-k fills, 3.2 s at p95 on the Heads page); a job asked for again with
  ``promote`` moves its waiting calls up (a lesson opened after the shipped ones were
  queued), and a unit with a ``when`` waits, older units going on, until it holds (the
  shipped lessons' warm-up while a room is live);
* its priority: the lowest (:data:`FILLER_NICE`, per thread on Linux), and it computes only
  while no script run is going (:func:`dashboard.runtime.threads.active_runs`), so a
  learner's run goes first;
* the exit hook: at exit no new call starts and the one in progress finishes
  (:func:`stop_filling`), since a daemon thread killed inside torch aborts the process.

:func:`wait_for_fillers` waits until every job is done (the bench times moves after the
page's head start; the tests wait for them). Importing this module starts no thread.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from dashboard.runtime import threads

Calls = tuple[tuple[Callable, tuple], ...]
"""A filler's work: (function, arguments) pairs, most likely first: cached functions of the
data layer, or a lesson step opened on this server (:mod:`dashboard.serving.prewarm`)."""
FILLER_NICE = 19
"""The worker thread's niceness (Linux: per thread): a learner's run goes first."""
IDLE_POLL_S = 0.05
"""How often a waiting filler looks whether the learners' runs are done."""
WHEN_POLL_S = 1.0
"""How often a filler whose every unit waits for its ``when`` asks again."""
STOP_WAIT_S = 30.0
"""At exit, how long to wait for a filler's call in progress (a daemon thread killed inside
torch aborts the process: ``terminate called without an active exception``)."""
WORKER_NAME = "prefetch"
"""The worker thread's name (seen in a profiler or a stack dump)."""
_LOG = logging.getLogger(__name__)


@dataclass
class _Unit:
    """Calls queued together: ``(job name, function, arguments, one_thread)`` each, and the
    condition under which they may start (``None``: always)."""

    calls: deque
    when: Callable[[], bool] | None = None

    def may_start(self) -> bool:
        return self.when is None or bool(self.when())


_STATE = threading.Condition()  # guards what follows, and wakes the worker and the waiters
_STARTED: set[Hashable] = set()
_JOBS: list[_Unit] = []  # each unit's calls still to run; the newest unit last
_RUNNING = 0  # calls in progress (0 or 1)
_WORKER: list[threading.Thread] = []
_STOP = threading.Event()


def start_filling(
    name: Hashable,
    calls: Calls,
    *,
    one_thread: bool = True,
    promote: bool = False,
    when: Callable[[], bool] | None = None,
) -> bool:
    """Queue ``calls`` for the background worker (lowest priority), once per ``name``: one
    job, as :func:`start_group` queues several (the same keywords).

    Returns:
        True when the job was queued or moved ahead.
    """
    return start_group(((name, calls),), one_thread=one_thread, promote=promote, when=when)


def start_group(
    jobs: tuple[tuple[Hashable, Calls], ...],
    *,
    one_thread: bool = True,
    promote: bool = False,
    when: Callable[[], bool] | None = None,
) -> bool:
    """Queue several jobs as one unit for the background worker (lowest priority): their
    calls in the order given, each job once per name, the unit before the rest of any unit
    queued earlier (what a page asks in one run, most likely first).

    The caller never waits for it: a value the worker has not reached is computed by the run
    that asks for it (one still being computed is waited for, as any cache entry). Each call
    runs only while no script run is going and on one torch thread; a call that raises is
    logged and skipped; none starts once the process is stopping.

    Args:
        jobs: (name, calls) pairs: ``name`` is hashable (a job whose name was queued before
            is left out, unless ``promote``), ``calls`` its (function, arguments) pairs.
        one_thread: run each call with torch on one thread (a computation of the worker's
            own); False for a call that waits on a script run of this server, which shares
            the cores as every run does.
        promote: a job of these names queued before whose calls are still waiting moves
            into this unit, in its place in ``jobs`` (what is wanted now goes first).
        when: the unit's calls start only while this holds (polled every
            :data:`WHEN_POLL_S`; it must not block); older units go on meanwhile.

    Returns:
        True when at least one job was queued or moved ahead.
    """
    with _STATE:
        calls: deque = deque()
        for name, job_calls in jobs:
            if name not in _STARTED:
                _STARTED.add(name)
                calls.extend((name, *call, one_thread) for call in job_calls)
            elif promote:
                calls.extend(_take_waiting(name))
        if calls:
            _JOBS.append(_Unit(calls, when))
        if not _WORKER:
            worker = threading.Thread(target=_work, name=WORKER_NAME, daemon=True)
            _WORKER.append(worker)
            worker.start()
        _STATE.notify_all()
        return bool(calls)


def _take_waiting(name: Hashable) -> list[tuple]:
    """The calls of job ``name`` still queued, taken out of their units (the caller holds
    ``_STATE``); a unit left empty is dropped."""
    taken = []
    for unit in _JOBS:
        taken += [call for call in unit.calls if call[0] == name]
        unit.calls = deque(call for call in unit.calls if call[0] != name)
    _JOBS[:] = [unit for unit in _JOBS if unit.calls]
    return taken


def wait_for_fillers(timeout: float) -> bool:
    """Wait up to ``timeout`` seconds until every job queued so far is done.

    Args:
        timeout: seconds to wait.

    Returns:
        True when no call is queued or running any more.
    """
    with _STATE:
        return _STATE.wait_for(lambda: not _JOBS and not _RUNNING, timeout)


@atexit.register
def stop_filling() -> None:
    """At exit (registered with :mod:`atexit`): no new call starts, and the one in progress
    finishes (waited for up to :data:`STOP_WAIT_S`)."""
    _STOP.set()
    with _STATE:
        _STATE.notify_all()
        workers = list(_WORKER)
    for worker in workers:
        worker.join(STOP_WAIT_S)


def _wait_for_work() -> bool:
    """Wait until a job is queued and no learner's run is going; False when the process is
    stopping."""
    with _STATE:
        _STATE.wait_for(lambda: _JOBS or _STOP.is_set())
    return _server_idle()


def _take_newest() -> tuple[Callable, tuple, bool] | None:
    """The next call of the newest unit that may start, taken off it and counted as running
    (only the worker takes calls); ``None`` when every queued unit waits for its ``when``."""
    global _RUNNING
    with _STATE:
        for index in range(len(_JOBS) - 1, -1, -1):
            unit = _JOBS[index]
            if unit.may_start():
                _name, function, args, one_thread = unit.calls.popleft()
                if not unit.calls:
                    del _JOBS[index]
                _RUNNING += 1
                return function, args, one_thread
        return None


def _done() -> None:
    global _RUNNING
    with _STATE:
        _RUNNING -= 1
        _STATE.notify_all()


def _work() -> None:
    """The worker thread: lower its priority, then, whenever a job is queued and the server
    is idle, run the newest job's next call."""
    _lowest_priority()
    while _wait_for_work():
        call = _take_newest()
        if call is None:  # every unit waits for its moment
            _STOP.wait(WHEN_POLL_S)
            continue
        function, args, one_thread = call
        try:
            with threads.single_threaded() if one_thread else contextlib.nullcontext():
                function(*args)  # (runtime/threads owns torch's thread count)
        except Exception as err:  # noqa: BLE001 — a failed guess only means no head start
            _LOG.warning("prefetch %s%r failed: %s", function.__name__, args, err)
        finally:
            _done()


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
