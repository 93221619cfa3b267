"""Many learners on one server: how concurrent script runs share the cores and the profiler.

Streamlit runs each session's script in its own thread of one process, so a room of
learners shares two things that are process-wide:

* **torch's intra-op threads** (``torch.set_num_threads`` holds for the whole process). One
  run alone uses every core the process may use; as soon as two or more runs go at once,
  each computes on one thread, so that N runs on C cores never start N × C busy-waiting
  OpenMP threads. :func:`script_run` counts the runs going and re-applies the setting when
  a run starts or ends (only once torch is imported: a page that needs no tensor never
  imports it).
* **the profiler** (``torch.profiler``, and ``attention_core`` serialises measurements
  behind one process-wide lock). Measuring a layer's peak memory is a second pass under that
  lock; with a room on the server it would queue every session behind one another. So a
  page measures only when no other run is going and no other session is measuring
  (:func:`profiler_slot`); otherwise it shows the library's estimate and says why.

And one thing every run leaves behind: memory freed by Python, numpy and torch stays in the
C allocator's heaps (one per thread that allocated; Streamlit runs each session in its own
thread), so the process's resident size ratchets up page after page. :func:`release_memory`
hands the free pages back to the system (glibc's ``malloc_trim``) after a run, in a
background thread, at most once every :data:`TRIM_INTERVAL_S`. A trim frees only whole pages,
so once the process is past :data:`PIN_ABOVE_BYTES` (:func:`pin_when_large`),
:func:`pin_mmap_threshold` also keeps the large arrays out of the heaps: each one of at
least :data:`MMAP_THRESHOLD_BYTES` gets its own mapping, returned to the system when freed.
Below that size the heaps keep reusing freed blocks, which a repaint needs no page faults
for (a fresh 1,024-token Playground run repaints about 0.09 s sooner).

Nothing here imports torch at import time.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import importlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator

_COUNT_LOCK = threading.Lock()
_PROFILER_SLOT = threading.Lock()
_TRIM_LOCK = threading.Lock()
_PRELOAD_LOCK = threading.Lock()
_preload: threading.Thread | None = None
_active_runs = 0
_single_holds = 0  # blocks inside single_threaded(): torch stays at one thread meanwhile
_last_trim = -float("inf")
PRELOADED = ("dashboard.data.runs", "dashboard.data.lab")
"""Modules :func:`preload_torch` imports (torch, the library and pandas come with them)."""
TRIM_INTERVAL_S = 5.0
"""Seconds between two trims of the C heaps (a trim walks every heap: 10–100 ms)."""
MMAP_THRESHOLD_BYTES = 256 * 1024
"""Allocations at least this large get their own mapping (glibc's default starts at 128 KiB
but rises to the size of each large block freed, up to 32 MiB: after that, maps and caches
of a few MiB live in the heaps between long-lived objects, and the server's resident size
ratchets up page after page)."""
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (glibc's malloc.h)
PIN_ABOVE_BYTES = 768 * 1024 * 1024
"""Resident size past which :func:`pin_when_large` pins the threshold: about the app with
torch, e5 and one largest Playground run; the real models and the other pages' caches come
on top of it."""
_pinned = False


def usable_cores() -> int:
    """The number of CPU cores this process may run on (its affinity, else the CPU count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def torch_threads_for(active: int, cores: int) -> int:
    """torch intra-op threads for each run when ``active`` script runs share ``cores``.

    Args:
        active: script runs going at once (the asking one included), at least 1.
        cores: cores the process may use, at least 1.

    Returns:
        ``cores`` for a run alone, 1 as soon as two or more runs go at once.

    Raises:
        ValueError: for ``active`` or ``cores`` below 1.
    """
    if active < 1 or cores < 1:
        raise ValueError(f"active ({active}) and cores ({cores}) must be at least 1")
    return cores if active == 1 else 1


def active_runs() -> int:
    """The number of script runs going now (counted by :func:`script_run`)."""
    return _active_runs


def _apply_torch_threads() -> None:
    """Set torch's intra-op threads for the runs going now; nothing when torch is not
    imported (it is not imported here). Called with ``_COUNT_LOCK`` held."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    threads = 1 if _single_holds else torch_threads_for(max(1, _active_runs), usable_cores())
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


@contextlib.contextmanager
def script_run() -> Iterator[int]:
    """Count one script run for as long as the block runs (``dashboard/app.py`` wraps each
    run in it), and share the cores accordingly.

    Yields:
        The number of runs going, this one included.
    """
    global _active_runs
    with _COUNT_LOCK:
        _active_runs += 1
        active = _active_runs
        _apply_torch_threads()
    try:
        yield active
    finally:
        with _COUNT_LOCK:
            _active_runs -= 1
            _apply_torch_threads()


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """Keep torch at one intra-op thread for as long as the block runs (process-wide, like
    :func:`script_run`, which re-applies the usual count when the block ends).

    For timings a page shows as figures: with two threads every parallel op waits for its
    second thread, and when the other core is busy (the browser painting the page beside the
    server, another learner's run) a 0.1 ms call then takes 5–30 ms; on one thread it
    takes what it costs, whatever the room is doing.
    """
    global _single_holds
    with _COUNT_LOCK:
        _single_holds += 1
        _apply_torch_threads()
    try:
        yield
    finally:
        with _COUNT_LOCK:
            _single_holds -= 1
            _apply_torch_threads()


def _import_in_background() -> None:
    for name in PRELOADED:
        importlib.import_module(name)
    share_cores()


def preload_torch() -> threading.Thread:
    """Once per process: import torch and the data layer's torch modules in a daemon thread,
    so that the first page draws its title and explainer (and imports pandas and Altair for
    its charts) while torch loads; the page's first tensor call waits for the import.

    Returns:
        The (daemon) thread, started by the first call.
    """
    global _preload
    with _PRELOAD_LOCK:
        if _preload is None:
            _preload = threading.Thread(
                target=_import_in_background, name="torch-preload", daemon=True
            )
            _preload.start()
        return _preload


def share_cores() -> int:
    """Apply the thread setting now that torch is imported (the first run of a process
    imports it after :func:`script_run` began).

    Returns:
        torch's intra-op threads now.
    """
    import torch

    with _COUNT_LOCK:
        _apply_torch_threads()
    return torch.get_num_threads()


@contextlib.contextmanager
def profiler_slot() -> Iterator[bool]:
    """Take the one profiling slot of the process if the server is quiet.

    Yields:
        True when this run may measure (it holds the slot until the block ends): no other
        script run is going and no other session is measuring. False under load: measure
        nothing, show the estimate.
    """
    if _active_runs > 1 or not _PROFILER_SLOT.acquire(blocking=False):
        yield False
        return
    try:
        yield True
    finally:
        _PROFILER_SLOT.release()


def _libc_function(name: str) -> Callable[..., int] | None:
    """A function of the C library (e.g. glibc's ``malloc_trim``), or ``None`` where the
    library or the function is missing."""
    library = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(library), name) if library else None
    except (OSError, AttributeError):
        return None


_TRIM = _libc_function("malloc_trim")
_MALLOPT = _libc_function("mallopt")


def resident_bytes() -> int:
    """This process's resident size (``/proc/self/statm``), 0 where there is none."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def pin_when_large(limit: int = PIN_ABOVE_BYTES, *, resident: int | None = None) -> bool:
    """At the start of a run: once the process holds more than ``limit`` bytes, pin the
    allocator's threshold (:func:`pin_mmap_threshold`) for the rest of its life.

    Args:
        limit: resident bytes past which to pin.
        resident: the resident size to judge (default: measured now), for tests.

    Returns:
        True when the threshold is pinned (now or before).
    """
    global _pinned
    if not _pinned:
        size = resident_bytes() if resident is None else resident
        if size > limit:
            _pinned = pin_mmap_threshold()
    return _pinned


def pin_mmap_threshold(nbytes: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Give every later allocation of at least ``nbytes`` its own mapping, for good (setting
    the threshold also stops glibc from raising it). Freed, such a block goes straight back
    to the system, whatever lives around it; the price is a page fault per page when it is
    made (about 30 ms for 64 MiB), small beside computing what fills it.

    Args:
        nbytes: the threshold, at least 1.

    Returns:
        True when set; False on a C library without glibc's ``mallopt``.

    Raises:
        ValueError: for a threshold below 1.
    """
    if nbytes < 1:
        raise ValueError(f"nbytes must be at least 1, got {nbytes}")
    return bool(_MALLOPT and _MALLOPT(_M_MMAP_THRESHOLD, int(nbytes)))


def _trim_now() -> None:
    try:
        _TRIM(0)  # ctypes releases the GIL: the sessions' scripts go on meanwhile
    finally:
        _TRIM_LOCK.release()


def release_memory(*, now: float | None = None) -> bool:
    """After a run: give the pages the C heaps hold free back to the system, in a daemon
    thread, unless a trim is going or one began less than :data:`TRIM_INTERVAL_S` ago.

    Args:
        now: the time (``time.monotonic``), for tests.

    Returns:
        True when a trim was started.
    """
    global _last_trim
    now = time.monotonic() if now is None else now
    if _TRIM is None or now - _last_trim < TRIM_INTERVAL_S:
        return False
    if not _TRIM_LOCK.acquire(blocking=False):
        return False
    _last_trim = now
    threading.Thread(target=_trim_now, name="malloc-trim", daemon=True).start()
    return True
