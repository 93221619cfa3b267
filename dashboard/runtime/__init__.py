"""The server process itself: the one owner of process-wide state in the dashboard.

Streamlit runs every session's script in a thread of one process, so some settings hold for
the whole room at once. Each has one owner here:

* :mod:`~dashboard.runtime.threads` — torch's intra-op threads shared between the script runs
  going at once (the only ``torch.set_num_threads`` of the dashboard), single-threaded
  sections for timings and training, the one profiler slot, and torch's import in a
  background thread.
* :mod:`~dashboard.runtime.prefetch` — the background fillers that compute likely next
  values ahead of the learner: their threads, their lowest priority, and the exit hook that
  lets a call in progress finish.
* :mod:`~dashboard.runtime.memory` — the one C library lookup: the allocator's mmap threshold,
  trims of the C heaps (now, or after a run in the background), the resident size, and
  Python's start-up objects frozen out of the collections.
* :mod:`~dashboard.runtime.startup` — what ``dashboard/app.py`` does around each page: which
  pages import torch early and which late, and the once-per-process work after the first page.

Importing this package imports none of them, and none imports torch at import time:
``from dashboard.runtime import memory, threads``.
"""
