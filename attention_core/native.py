"""What the optional C extensions (``attention_core._band``, ``attention_core._ggml``) share:
the switch that turns them all off, and the OpenMP team they run their work on.

``ATTENTION_CORE_NO_KERNEL=1`` in the environment (read when each kernel's module is
imported) runs the whole process as if no extension were built: the test suite runs its
kernel-relevant tests once this way. The kernels run on PyTorch's own OpenMP threads when
:func:`torch_openmp_parallel` finds its ``GOMP_parallel``, else on POSIX threads of their own.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import torch

__all__ = [
    "NO_KERNEL_ENV",
    "OPENMP_NAMES",
    "ThreadSwitch",
    "loaded_openmp_libraries",
    "switched_off_by_env",
    "torch_openmp_parallel",
]

NO_KERNEL_ENV = "ATTENTION_CORE_NO_KERNEL"


def switched_off_by_env(environ=os.environ) -> bool:
    """True when ``ATTENTION_CORE_NO_KERNEL`` is set to anything but "", "0" or "false"."""
    return environ.get(NO_KERNEL_ENV, "").strip().lower() not in ("", "0", "false")


OPENMP_NAMES = ("libgomp", "libiomp", "libomp")  # GNU, Intel, LLVM: all export GOMP_parallel


def loaded_openmp_libraries(maps_text: str) -> list[str]:
    """Paths of the OpenMP runtimes mapped into this process (from /proc/self/maps text),
    PyTorch's own first."""
    paths = {
        line.split()[-1]
        for line in maps_text.splitlines()
        if "/" in line and any(name in line.rsplit("/", 1)[-1] for name in OPENMP_NAMES)
    }
    torch_dir = str(Path(torch.__file__).parent)
    return sorted(paths, key=lambda path: (not path.startswith(torch_dir), path))


def torch_openmp_parallel() -> int:
    """Address of ``GOMP_parallel`` in the OpenMP runtime PyTorch loaded, or 0 (none found:
    not Linux, or PyTorch built without OpenMP). The kernel then runs its work on PyTorch's
    own thread team: those threads spin for milliseconds after every parallel op, and a
    thread of our own would share a core with one of them (5 ms of an 11 ms call measured
    at L=8192 on 2 cores)."""
    if not torch.backends.openmp.is_available():
        return 0
    try:
        maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 0
    for path in loaded_openmp_libraries(maps):
        try:
            return ctypes.cast(ctypes.CDLL(path).GOMP_parallel, ctypes.c_void_p).value or 0
        except (OSError, AttributeError):
            continue
    return 0


class ThreadSwitch:
    """A fast path's switch for one thread: on, except inside ``with switch.disabled():``
    in the thread that entered it (the tests run both paths side by side)."""

    def __init__(self):
        self._local = threading.local()

    @property
    def off(self) -> bool:
        """Whether this thread is inside a :meth:`disabled` block."""
        return getattr(self._local, "off", False)

    @contextlib.contextmanager
    def disabled(self) -> Iterator[None]:
        """Within the block (this thread), :attr:`off` is True; nested blocks restore it."""
        before = self.off
        self._local.off = True
        try:
            yield
        finally:
            self._local.off = before
