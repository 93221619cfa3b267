"""What ``dashboard/app.py`` does for the process around each page it runs.

Start-up cost decides the order. ``dashboard/app.py``, the modules it imports at the top and
:mod:`dashboard.data` import neither torch, the library, pandas nor Altair (the data package
imports each name on first use). Every page computes with torch; when it imports torch
depends on the page (:func:`preloads_torch`):

* a page in :data:`TORCH_LATE_PAGES` (the Intuition landing page) draws its text and its
  torch-free charts first and then imports torch itself
  (:func:`dashboard.runtime.threads.import_torch`): no background import competes for the GIL
  with its pandas and Altair imports;
* every other page starts the torch thread (:func:`dashboard.runtime.threads.preload_torch`)
  before it draws its title and explainer.

Before the page (:func:`before_page`): the allocator's threshold is pinned once the process
is large, and torch's profiler is kept quiet. After the page (:func:`after_page`): the
start-up objects are frozen out of Python's collections, the profiler is started in the
torch thread, and the C heaps' free pages go back to the system.
"""

from __future__ import annotations

from dashboard.runtime import memory, threads

# Pages (file stems in :data:`dashboard.views.PAGES`) that draw their torch-free charts first
# and import torch themselves afterwards.
TORCH_LATE_PAGES: frozenset[str] = frozenset({"intuition"})


def preloads_torch(page: str) -> bool:
    """Whether a run of ``page`` starts the torch thread before the page draws.

    Args:
        page: the page's name (a file stem of :data:`dashboard.views.PAGES`).

    Returns:
        False for a page of :data:`TORCH_LATE_PAGES` (it imports torch itself, late), True
        for every other page.
    """
    return page not in TORCH_LATE_PAGES


def before_page(page: str) -> None:
    """At the start of every run: pin the allocator's threshold once the process is large
    (:func:`dashboard.runtime.memory.pin_when_large`), keep torch's profiler quiet, and
    start the torch thread unless ``page`` imports torch late (:func:`preloads_torch`).

    Args:
        page: the page's name (a file stem of :data:`dashboard.views.PAGES`).
    """
    memory.pin_when_large()
    threads.quiet_profiler()
    if preloads_torch(page):
        threads.preload_torch()


def after_page() -> None:
    """At the end of every run, once the page is on its way to the browser: freeze the
    start-up objects and ask the torch thread to start the profiler (both once per process),
    then give what the run freed back to the system."""
    memory.freeze_startup_objects()
    threads.warm_up_profiler()
    memory.release_memory()
