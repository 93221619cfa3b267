"""What ``dashboard/app.py`` does for the process around each page it runs.

Start-up cost decides the order. ``dashboard/app.py``, the modules it imports at the top and
:mod:`dashboard.data` import neither torch, the library, pandas nor Altair (the data package
imports each name on first use), and each page is run with one of three plans
(:func:`page_start`):

* a page in :data:`TORCH_FREE_PAGES` (one that computes nothing with tensors) gets no device
  line and never imports torch;
* a page in :data:`TORCH_LATE_PAGES` (the Intuition landing page) draws its text and its
  torch-free charts first and then imports torch itself
  (:func:`dashboard.runtime.threads.import_torch`): no background import competes for the GIL
  with its pandas and Altair imports;
* every other page starts the torch thread (:func:`dashboard.runtime.threads.preload_torch`)
  before it draws its title and explainer.

Before the page (:func:`before_page`): the allocator's threshold is pinned once the process
is large, and torch's profiler is kept quiet. After a page that computed with torch
(:func:`after_page`): the start-up objects are frozen out of Python's collections, the
profiler is started in the torch thread, and the C heaps' free pages go back to the system.
"""

from __future__ import annotations

from dataclasses import dataclass

from dashboard.runtime import delivery, memory, threads

# Pages (file stems in :data:`dashboard.views.PAGES`) that compute nothing with torch: no
# device line, no torch import, no profiler warm-up for them. A page listed here must reach
# :mod:`dashboard.data` only for names whose modules need no torch.
TORCH_FREE_PAGES: frozenset[str] = frozenset()
# Pages that draw their torch-free charts first and import torch themselves afterwards.
TORCH_LATE_PAGES: frozenset[str] = frozenset({"intuition"})


@dataclass(frozen=True)
class PageStart:
    """How one page's run treats torch.

    Attributes:
        needs_torch: the page computes with tensors (a device line, the profiler warm-up and
            the frozen start-up objects follow it).
        preload: torch is imported in the torch thread from the start of the run.
    """

    needs_torch: bool
    preload: bool


def page_start(page: str) -> PageStart:
    """The plan for a run of ``page`` (a file stem of :data:`dashboard.views.PAGES`).

    Args:
        page: the page's name.

    Returns:
        Whether it needs torch, and whether torch is imported in the background from the start.
    """
    needs_torch = page not in TORCH_FREE_PAGES
    return PageStart(needs_torch=needs_torch, preload=needs_torch and page not in TORCH_LATE_PAGES)


def before_page(start: PageStart) -> None:
    """At the start of every run: hand messages to the event loop once per burst when
    ``ATTENTION_LAB_COALESCE=1`` says so (installed once per process,
    :func:`dashboard.runtime.delivery.install`; off by default), pin the allocator's
    threshold once the process is large (:func:`dashboard.runtime.memory.pin_when_large`),
    keep torch's profiler quiet, and start the torch thread when ``start`` says so.

    Args:
        start: the page's plan (:func:`page_start`).
    """
    delivery.install()
    memory.pin_when_large()
    threads.quiet_profiler()
    if start.preload:
        threads.preload_torch()


def after_page(start: PageStart) -> None:
    """At the end of every run, once the page is on its way to the browser: after a page that
    computed with torch, freeze the start-up objects and ask the torch thread to start the
    profiler (both once per process); then give what the run freed back to the system.

    Args:
        start: the page's plan (:func:`page_start`).
    """
    if start.needs_torch:
        memory.freeze_startup_objects()
        threads.warm_up_profiler()
    memory.release_memory()
