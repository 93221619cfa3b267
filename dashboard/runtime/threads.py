"""Many learners on one server: how concurrent script runs share the cores and the profiler.

Streamlit runs each session's script in its own thread of one process, so a room of
learners shares two things that are process-wide:

* **torch's intra-op threads** (``torch.set_num_threads`` holds for the whole process; this
  module is the only place in the dashboard that sets it). One run alone uses every core
  the process may use; as soon as two or more runs go at once, each computes on one thread,
  so that N runs on C cores never start N × C busy-waiting OpenMP threads. :func:`script_run`
  counts the runs going and re-applies the setting when a run starts or ends (only once
  torch is imported: a page that imports it late may not have yet); :func:`single_threaded`
  holds one thread for timings a page shows as figures and training runs.
* **the profiler** (``torch.profiler``, and ``attention_core`` serialises measurements
  behind one process-wide lock). Measuring a layer's peak memory is a second pass under that
  lock; with a room on the server it would queue every session behind one another. So a
  page measures only when no other run is going and no other session is measuring
  (:func:`profiler_slot`); otherwise it shows the library's estimate and says why.

And the start-up of torch itself, in one thread of its own, the *torch thread*
(:func:`preload_torch`): it imports torch and the data layer's torch modules while the first
page draws its title, and then lets script runs at torch (:func:`import_torch`). The modules
torch imports lazily on a first profiler use or a first optimizer (:data:`LAZY_TORCH_MODULES`:
``torch._dynamo``, ``torch._inductor``, about 1 s) wait until the first page is drawn
(:func:`warm_up_profiler`), so that its first chart does not wait for them; a run that may
reach them waits for them first (:func:`import_whole_torch`: the data layer's training
module, and every profiler measurement). Python's import lock hands a second thread a
half-imported module when two threads import that circular package at once (``cannot import
name 'IndentedBuffer' from partially initialized module 'torch._inductor.utils'``), and a
module broken that way stays broken for the life of the server. Then the torch thread starts
torch's profiler. The profiler must start in the thread that imported torch: its C++ side
(kineto) prints ``ERROR: External init callback must run in same thread as registerClient`` to
the server's terminal otherwise. :func:`quiet_profiler` also stops the ``USDT … profiler_start``
lines it prints for every measurement. Nothing here imports torch at import time.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import threading
from collections.abc import Iterator

_COUNT_LOCK = threading.Lock()
_PROFILER_SLOT = threading.Lock()
_PRELOAD_LOCK = threading.Lock()
_TORCH_IMPORTED = threading.Event()
_LAZY_IMPORTED = threading.Event()
_WARM_UP_ASKED = threading.Event()
_PROFILER_READY = threading.Event()
_preload: threading.Thread | None = None
_active_runs = 0
_single_holds = 0  # blocks inside single_threaded(): torch stays at one thread meanwhile
PRELOADED = ("dashboard.data.runs", "dashboard.data.lab")
"""Modules :func:`preload_torch` imports (torch, the library and pandas come with them)."""
LAZY_TORCH_MODULES = ("torch._dynamo", "torch._inductor.utils", "torch.profiler", "torch.optim")
"""What torch imports on first use from a script run (the profiler's ``hasattr(torch,
"_inductor")``, an optimizer's ``torch._dynamo``): imported by the torch thread after the first
page, or at once for a run that needs them (:func:`import_whole_torch`)."""
KINETO_QUIET_LEVEL = "6"
"""``KINETO_LOG_LEVEL`` above every level kineto logs at (its ``USDT`` lines are level 5)."""


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


def _ready_torch():
    """torch, once it may be touched: imported and, when the torch thread imports it, only
    after that thread's imports are complete (a module still being imported is in
    ``sys.modules`` half made). None otherwise; nothing is imported here."""
    if _preload is not None and not _TORCH_IMPORTED.is_set():
        return None
    return sys.modules.get("torch")


def _apply_torch_threads() -> None:
    """Set torch's intra-op threads for the runs going now; nothing when torch is not
    imported or is still being imported (:func:`_ready_torch`). Called with ``_COUNT_LOCK``
    held."""
    torch = _ready_torch()
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


def quiet_profiler() -> bool:
    """Keep torch's profiler from writing to the server's terminal: its C++ side (kineto)
    prints ``USDT … profiler_start/stop`` lines for every peak-memory measurement. Sets the
    environment variable ``KINETO_LOG_LEVEL``, which kineto reads when the profiler starts,
    unless it is set already (set it to ``0`` to see every line).

    Returns:
        True when this call set it.
    """
    if "KINETO_LOG_LEVEL" in os.environ:
        return False
    os.environ["KINETO_LOG_LEVEL"] = KINETO_QUIET_LEVEL
    return True


def _start_profiler() -> None:
    """Pay torch.profiler's one-time start-up (about 2 s of imports here) with an empty
    measurement, behind the library's measurement lock."""
    import torch

    from attention_core import experiments

    experiments.measure_peak_bytes(lambda: None, torch.device("cpu"))


def _torch_thread() -> None:
    try:
        for name in PRELOADED:
            importlib.import_module(name)
        _TORCH_IMPORTED.set()
        share_cores()  # the runs that began while torch was importing get their count now
        _WARM_UP_ASKED.wait()
        for name in LAZY_TORCH_MODULES:
            importlib.import_module(name)
        _LAZY_IMPORTED.set()
        _start_profiler()
    finally:  # also when an import failed: nobody waits for ever
        _TORCH_IMPORTED.set()
        _LAZY_IMPORTED.set()
        _PROFILER_READY.set()


def preload_torch() -> threading.Thread:
    """Once per process: start the torch thread, which imports torch and the data layer's
    torch modules, so that the first page draws its title and explainer (and imports pandas
    and Altair for its charts) while torch loads; the page's first tensor call waits for the
    import. The thread then waits to start the profiler (:func:`warm_up_profiler`).

    Returns:
        The (daemon) thread, started by the first call.
    """
    global _preload
    with _PRELOAD_LOCK:
        if _preload is None:
            _preload = threading.Thread(target=_torch_thread, name="torch-preload", daemon=True)
            _preload.start()
        return _preload


def import_torch() -> None:
    """Import torch in the torch thread (:func:`preload_torch`) and wait until torch and the
    data layer's torch modules are in: the one way a script run reaches torch.
    :mod:`dashboard.data` calls it before it imports a module that needs torch, and a page
    that imports torch late (``TORCH_LATE_PAGES``) once its torch-free part is drawn. Returns
    at once after the first time. Torch's lazy modules may still be importing in the torch
    thread: a run that may reach them calls :func:`import_whole_torch`."""
    preload_torch()
    _TORCH_IMPORTED.wait()


def import_whole_torch() -> None:
    """:func:`import_torch`, then have the torch thread import :data:`LAZY_TORCH_MODULES` now
    (if the first page has not asked yet) and wait until they are in: for a run that builds an
    optimizer or profiles (``torch._dynamo`` and ``torch._inductor`` must never be imported
    by two threads at once)."""
    import_torch()
    _WARM_UP_ASKED.set()
    _LAZY_IMPORTED.wait()


def warm_up_profiler() -> bool:
    """Ask the torch thread to import torch's lazy modules and start torch's profiler once it
    has imported torch (called by ``dashboard/app.py`` after every page, so that neither is
    on the first visitor's path to the first chart, nor in a later page's first
    measurement).

    Returns:
        False when no torch thread was started (torch was imported elsewhere): then the
        first measurement starts the profiler itself.
    """
    if _preload is None:
        return False
    _WARM_UP_ASKED.set()
    return True


def start_profiler() -> None:
    """Before a measurement with torch's profiler: have the torch thread start the profiler,
    if there is one (it must start in the thread that imported torch), and wait until it has;
    :func:`profiler_slot` calls it for the measurements it grants."""
    if warm_up_profiler():
        _PROFILER_READY.wait()


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
        start_profiler()
        yield True
    finally:
        _PROFILER_SLOT.release()
