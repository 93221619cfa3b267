"""The banded C kernel behind ``local``'s fast path on the CPU: optional, checked, with
its own switches.

``attention_core._band`` (``attention_core/_native/band.c``, built by ``pip install -e .``
where a C compiler exists) computes attention of contiguous float32 q, k, v over a band of
keys [i − left, i + right] in O(L·(left + right + 1)·E) time: each query row meets only the
keys of its band, in register tiles (AVX-512, AVX2+FMA or portable vectors, picked for the
running CPU), on PyTorch's own OpenMP threads, with the GIL released; optionally it writes
the dense weights and scores too. Where the extension is missing (no compiler on the
machine, another platform) or cannot take the call (another dtype or device, a user mask,
autograd, cross-attention), ``local`` runs its PyTorch paths, which give the same values.
``local_fast.band_result`` calls it, flattening leading dims.

Switches: ``with band_kernel.disabled():`` within a block; the environment variable
``ATTENTION_CORE_NO_KERNEL=1`` (read at import) for the whole process, as if the extension
were not built (the test suite runs once this way).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from attention_core.native import NO_KERNEL_ENV, switched_off_by_env, torch_openmp_parallel
from attention_core.types import AttentionResult
from attention_core.variants.common import records_grad

_SWITCHED_OFF = switched_off_by_env()
_band = None
if not _SWITCHED_OFF:
    try:
        from attention_core import _band
    except ImportError:  # not built here: local runs its PyTorch paths
        _band = None

KERNEL_VERSION = 3  # must equal the built extension's VERSION (a stale build is not used)
# Below this many multiply-adds one thread is quicker than starting more.
MIN_THREADED_WORK = 1 << 22

_enabled = True


def _built() -> bool:
    """The extension is importable and of the version this module calls."""
    return _band is not None and getattr(_band, "VERSION", None) == KERNEL_VERSION


if _built():
    _band.use_openmp(torch_openmp_parallel())


@dataclass(frozen=True)
class KernelStatus:
    """Whether the kernel runs here and why not. ``isas``: instruction sets this CPU runs,
    best first (the first is used), e.g. ("avx512", "avx2", "portable")."""

    available: bool
    isas: tuple[str, ...]
    reason: str


def status() -> KernelStatus:
    """Whether ``local`` can use the C kernel in this process, and the reason if not."""
    if _SWITCHED_OFF and _band is None:
        return KernelStatus(False, (), f"switched off by {NO_KERNEL_ENV}")
    if _band is None:
        return KernelStatus(False, (), "attention_core._band is not built (no C compiler?)")
    if getattr(_band, "VERSION", None) != KERNEL_VERSION:
        return KernelStatus(
            False,
            (),
            f"attention_core._band is version {getattr(_band, 'VERSION', None)}, "
            f"expected {KERNEL_VERSION}: rebuild with pip install -e .",
        )
    isas = tuple(_band.isas())
    if not _enabled:
        return KernelStatus(False, isas, "switched off (band_kernel.disabled())")
    return KernelStatus(True, isas, "")


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Within the block ``local`` runs its PyTorch paths (for tests and the bench)."""
    global _enabled
    before, _enabled = _enabled, False
    try:
        yield
    finally:
        _enabled = before


def can_run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """True when the kernel can compute this call: it is built and on, all three tensors
    are non-empty float32 on the CPU with as many keys as queries, and no gradient is
    wanted (it has no backward)."""
    if not (_enabled and _built()) or k.shape[-2] != q.shape[-2]:
        return False
    if any(t.device.type != "cpu" or t.dtype != torch.float32 for t in (q, k, v)):
        return False
    if q.numel() == 0 or v.numel() == 0:  # nothing to compute: the PyTorch path handles it
        return False
    return not records_grad(q, k, v)


def band_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    left: int,
    right: int,
    scale: float,
    *,
    need_weights: bool = False,
    threads: int | None = None,
    isa: str | None = None,
) -> AttentionResult:
    """softmax over the keys [i − left, i + right] of (q kᵀ · scale), times v, for every
    query row i: a local window (left = right = halo), a causal one (right = 0) or all keys
    (left = right = L − 1).

    Args:
        q: (N, L, E), k: (N, L, E), v: (N, L, Ev), float32 on the CPU (copied to contiguous
            when they are not). left, right: 0 <= left, right <= L − 1. scale: score scale.
        need_weights: also return the dense weights and scores (N, L, L); keys outside the
            band hold weight 0 and score ``blocked_score(float32)``, as in every variant.
        threads: worker threads (default ``torch.get_num_threads()``, one for small calls).
        isa: force one of ``status().isas`` (tests compare them); default the best.

    Returns:
        AttentionResult(output (N, L, Ev), weights and scores (N, L, L) or None), float32.
        Each row is computed by one thread, so the result does not depend on ``threads``.

    Raises:
        RuntimeError: when the kernel is not available (see :func:`status`).
        ValueError: on shapes that do not match, a dtype or device it does not take, a
            ``left`` or ``right`` outside [0, L − 1], or an ``isa`` this CPU does not run.
    """
    if not _built():
        raise RuntimeError(f"the band kernel is not available: {status().reason}")
    if q.dim() != 3 or k.shape != q.shape or v.dim() != 3 or v.shape[:2] != q.shape[:2]:
        raise ValueError(
            f"band kernel needs q, k (N, L, E) and v (N, L, Ev), got {tuple(q.shape)}, "
            f"{tuple(k.shape)}, {tuple(v.shape)}"
        )
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dtype != torch.float32 or t.device.type != "cpu":
            raise ValueError(
                f"band kernel takes float32 CPU tensors, {name} is {t.dtype} on {t.device}"
            )
    N, L, E = q.shape
    Ev = v.shape[-1]
    for name, reach in (("left", left), ("right", right)):
        if not 0 <= reach <= L - 1:
            raise ValueError(f"{name} must be in [0, L - 1 = {L - 1}], got {reach}")
    q, k, v = q.detach().contiguous(), k.detach().contiguous(), v.detach().contiguous()
    out = torch.empty((N, L, Ev), dtype=torch.float32)  # (N, L, Ev)
    weights = scores = None
    if need_weights:
        weights = torch.empty((N, L, L), dtype=torch.float32)  # (N, L, L)
        scores = torch.empty((N, L, L), dtype=torch.float32)  # (N, L, L)
    if threads is None:
        work = N * L * (left + right + 1) * (E + Ev)  # multiply-adds
        threads = torch.get_num_threads() if work >= MIN_THREADED_WORK else 1
    _band.attend(
        q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
        N, L, E, Ev, left, right, float(scale), threads, isa,
        scores=0 if scores is None else scores.data_ptr(),
        weights=0 if weights is None else weights.data_ptr(),
    )  # fmt: skip
    return AttentionResult(out, weights, scores)
