"""The server process's memory: the C allocator's heaps, their trims, and Python's start-up
objects.

Memory freed by Python, numpy and torch stays in the C allocator's heaps (one per thread that
allocated; Streamlit runs each session in its own thread), so the process's resident size
ratchets up page after page. :func:`release_memory` hands the free pages back to the system
(glibc's ``malloc_trim``) after a run, in a background thread, at most once every
:data:`TRIM_INTERVAL_S`; :func:`trim_heap` does the same at once, for a loader that frees
temporaries between long-lived weights (the dashboard passes it to the SmolLM2 loader). A trim
frees only whole pages, so once the process is past :data:`PIN_ABOVE_BYTES`
(:func:`pin_when_large`), :func:`pin_mmap_threshold` also keeps the large arrays out of the
heaps: each one of at least :data:`MMAP_THRESHOLD_BYTES` gets its own mapping, returned to the
system when freed. Below that size the heaps keep reusing freed blocks, which a repaint needs
no page faults for (a fresh 1,024-token Playground run repaints about 0.09 s sooner).

:func:`freeze_startup_objects` moves the objects alive after torch's, pandas' and Altair's
imports out of Python's own collections.

The C library is looked up once, here, when the module is imported (``find_library`` takes
about 1 ms); on a C library without glibc's functions every call is a no-op returning False.
Nothing here imports torch.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import os
import threading
import time
from collections.abc import Callable

TRIM_INTERVAL_S = 5.0
"""Seconds between two background trims of the C heaps (a trim walks every heap: 10–100 ms)."""
MMAP_THRESHOLD_BYTES = 256 * 1024
"""Allocations at least this large get their own mapping (glibc's default starts at 128 KiB
but rises to the size of each large block freed, up to 32 MiB: after that, maps and caches
of a few MiB live in the heaps between long-lived objects, and the server's resident size
ratchets up page after page)."""
PIN_ABOVE_BYTES = 768 * 1024 * 1024
"""Resident size past which :func:`pin_when_large` pins the threshold: about the app with
torch, e5 and one largest Playground run; the real models and the other pages' caches come
on top of it."""
PIN_CHECK_INTERVAL_S = 1.0
"""Seconds between two reads of the resident size by :func:`pin_when_large`."""
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (glibc's malloc.h)

_TRIM_LOCK = threading.Lock()
_last_trim = -float("inf")
_pinned = False
_last_pin_check = float("-inf")


def _load_libc() -> ctypes.CDLL | None:
    """The C library, or ``None`` where it cannot be found or loaded."""
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


def _libc_function(libc: ctypes.CDLL | None, name: str) -> Callable[..., int] | None:
    """A function of the C library (e.g. glibc's ``malloc_trim``), or ``None`` where the
    library or the function is missing."""
    return getattr(libc, name, None) if libc is not None else None


_LIBC = _load_libc()
_TRIM = _libc_function(_LIBC, "malloc_trim")
_MALLOPT = _libc_function(_LIBC, "mallopt")


def can_trim() -> bool:
    """Whether this process's C library can hand free heap pages back (glibc's
    ``malloc_trim``)."""
    return _TRIM is not None


def trim_heap() -> bool:
    """Give the C heaps' free pages back to the system now (glibc's ``malloc_trim``), e.g.
    after a loader freed its temporaries between long-lived weights. Blocks for the trim
    (10–100 ms); ctypes releases the GIL meanwhile.

    Returns:
        True when memory was released; False when none was, or on another C library.
    """
    return bool(_TRIM(0)) if _TRIM is not None else False


def _trim_in_background() -> None:
    try:
        trim_heap()
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
    threading.Thread(target=_trim_in_background, name="malloc-trim", daemon=True).start()
    return True


def resident_bytes() -> int:
    """This process's resident size (``/proc/self/statm``), 0 where there is none."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


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


def pin_when_large(
    limit: int = PIN_ABOVE_BYTES, *, resident: int | None = None, now: float | None = None
) -> bool:
    """At the start of a run: once the process holds more than ``limit`` bytes, pin the
    allocator's threshold (:func:`pin_mmap_threshold`) for the rest of its life. The size is
    read at most once per :data:`PIN_CHECK_INTERVAL_S`: reading ``/proc`` lets go of the
    GIL, and with thirty followers' runs going at once each read waited to take it back
    (4 % of a room's server time, py-spy in ``bench.load --mode room``).

    Args:
        limit: resident bytes past which to pin.
        resident: the resident size to judge (default: measured now), for tests.
        now: the time (``time.monotonic``), for tests.

    Returns:
        True when the threshold is pinned (now or before).
    """
    global _pinned, _last_pin_check
    if _pinned:
        return True
    now = time.monotonic() if now is None else now
    if resident is None and now - _last_pin_check < PIN_CHECK_INTERVAL_S:
        return False
    _last_pin_check = now
    size = resident_bytes() if resident is None else resident
    if size > limit:
        _pinned = pin_mmap_threshold()
    return _pinned


@functools.cache
def freeze_startup_objects() -> int:
    """Once per process, after the first page that computes with torch (so torch, pandas
    and Altair are imported): move the objects alive after the imports (their schemas and
    modules, about 270k) into the permanent generation, so that Python's own full
    collections skip them (0.15 s each otherwise, holding the GIL in the middle of a rerun).
    Streamlit's extra ``gc.collect(2)`` after every run is off in ``.streamlit/config.toml``.
    No collection first: it would cost a run those 0.15 s, and the imports leave little
    cyclic garbage to keep.

    Returns:
        The number of frozen objects after the first call (later calls return it again).
    """
    gc.freeze()
    return gc.get_freeze_count()
