"""Time and peak memory of attention variants against sequence length, measured.

Time is the fastest of at least ``repeats`` calls timed with ``time.perf_counter`` after one
warm-up call; a quick call is repeated until :data:`MIN_TIMED_S` have been timed. Peak memory
is measured, not guessed: on CUDA with ``torch.cuda.max_memory_allocated`` after a reset;
on CPU by replaying the allocation and free events that
``torch.profiler.profile(profile_memory=True)`` records during one call and taking the
highest running total. Both count only what the call allocates on top of its inputs. The
analytic :func:`attention_core.estimate_memory` is reported beside it, labelled estimated.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections.abc import Callable, Iterable

import pandas as pd
import torch
from torch.profiler import ProfilerActivity, profile

from attention_core.device import MemoryBudgetError, format_bytes, resolve_budget
from attention_core.estimates import estimate_memory
from attention_core.registry import attend, get_variant, variant_names
from attention_core.validation import check_choice, check_int

MAX_LENGTH = 1 << 20
MAX_REPEATS = 100
MEASURED_DEVICES = ("cpu", "cuda")
MEMORY_EVENT = "[memory]"
COMPLEXITY_COLUMNS = (
    "variant",
    "L",
    "status",
    "time_ms",
    "peak_bytes_measured",
    "peak_bytes_estimated",
    "memory_method",
    "note",
)
Progress = Callable[[float], None]
# torch.profiler and the CUDA peak counters are process-wide: one measurement at a time, or
# concurrent callers (e.g. several dashboard sessions) corrupt or block each other.
_MEASURE_LOCK = threading.Lock()
METHOD_CUDA = "measured (CUDA allocator)"
METHOD_PROFILER = "measured (torch.profiler CPU allocations)"
METHOD_NONE = "not measurable (no profiler events)"
PEAK_METHODS = {METHOD_PROFILER: "profiler", METHOD_CUDA: "cuda", METHOD_NONE: "none"}
"""Every method label :func:`measure_peak_bytes` returns, mapped to a short code that a UI
can translate (``"profiler"``, ``"cuda"``, ``"none"``)."""


def measure_peak_bytes(fn: Callable[[], object], device: torch.device) -> tuple[float, str]:
    """Peak bytes allocated while ``fn()`` runs, above what was allocated before it.

    Args:
        fn: the call to measure (run once).
        device: where it allocates; ``cuda`` uses the caching allocator's statistics,
            anything else the CPU profiler's allocation events.

    Returns:
        (peak bytes, method label): the label is a key of :data:`PEAK_METHODS`. The peak is
        NaN when this PyTorch build exposes no allocation events; the label then says so.

    Thread safety: measurements are serialised by a process-wide lock, since the profiler
    and the CUDA peak counters are global.
    """
    with _MEASURE_LOCK:
        return _measure_peak_bytes_locked(fn, device)


def _measure_peak_bytes_locked(fn: Callable[[], object], device: torch.device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        return float(torch.cuda.max_memory_allocated(device) - base), METHOD_CUDA
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    results = getattr(prof.profiler, "kineto_results", None)
    if results is None:
        return math.nan, METHOD_NONE
    events = sorted(
        (e for e in results.events() if e.name() == MEMORY_EVENT), key=lambda e: e.start_ns()
    )
    running = peak = 0
    for event in events:
        running += event.nbytes()  # positive for an allocation, negative for a free
        peak = max(peak, running)
    return float(peak), METHOD_PROFILER


MIN_TIMED_S = 0.05  # a quick call is timed again until this much time has been timed
MAX_TIMED_RUNS = 100


def time_call(fn: Callable[[], object], repeats: int, device: torch.device) -> float:
    """Fastest wall time in milliseconds of at least ``repeats`` calls after one warm-up
    call; a quick call is repeated until :data:`MIN_TIMED_S` seconds were timed (at most
    :data:`MAX_TIMED_RUNS` calls).

    The fastest, not the median: on a machine whose other core is busy (the browser
    painting the page beside the server on a 2-core laptop) every multi-threaded op waits
    for its other thread, and three sub-millisecond calls can all land in one such stall
    (measured: 5–30 ms instead of 0.1–0.5 ms at L=64 while the page painted, for up to
    0.15 s in a row). What the call itself costs is its fastest run. (The dashboard also
    times on one thread, which such a stall cannot multiply.)
    """
    fn()
    times: list[float] = []
    spent = 0.0
    while len(times) < repeats or (spent < MIN_TIMED_S and len(times) < MAX_TIMED_RUNS):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        elapsed = time.perf_counter() - start
        times.append(elapsed * 1e3)
        spent += elapsed
    return min(times)


def _attend_no_grad(q, k, v, variant: str, budget: int, params: dict) -> torch.Tensor:
    """Output (B, H, L, E) of ``attend`` without autograd and without weights."""
    with torch.no_grad():
        return attend(q, k, v, variant, memory_budget=budget, **params).output


def measure_complexity(
    variants: Iterable[str] = ("scaled", "local", "linear", "chunked"),
    lengths: Iterable[int] = (128, 256, 512, 1024),
    *,
    batch: int = 1,
    heads: int = 4,
    E: int = 64,
    repeats: int = 3,
    progress: Progress | None = None,
    device: str = "cpu",
    memory_budget: int | None = None,
    params: dict[str, dict] | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """Measure time and peak memory of ``attend`` for each variant and length.

    For each (variant, L): q, k, v ~ N(0, 1) of shape (B, H, L, E) in float32 on
    ``device``; ``attend(q, k, v, variant, need_weights=False)`` under ``torch.no_grad``.
    A combination whose estimated memory exceeds the budget is not run: its row has status
    ``"skipped"`` and a note saying why (likewise when attend raises MemoryBudgetError).

    Args:
        variants: registered variant names.
        lengths: sequence lengths L (= S), whole numbers in [1, 2**20].
        batch: B, in [1, 64]. heads: H, in [1, 64]. E: head size, in [1, 1024].
        repeats: at least this many timed calls per cell, in [1, 100]; the fastest is
            reported (:func:`time_call`).
        progress: optional callback(fraction in [0, 1]) called after each cell, for a UI
            progress bar.
        device: ``"cpu"`` or ``"cuda"``.
        memory_budget: bytes; default as :func:`attention_core.device.resolve_budget`.
        params: optional ``{variant: {param: value}}`` overrides of the defaults.
        seed: non-negative seed of the inputs.

    Returns:
        DataFrame with the columns :data:`COMPLEXITY_COLUMNS`, one row per (variant, L):
        status ``"ok"`` or ``"skipped"``, ``time_ms`` (see :func:`time_call`),
        ``peak_bytes_measured`` (see :func:`measure_peak_bytes`; NaN when skipped),
        ``peak_bytes_estimated`` (the analytic model), ``memory_method`` and a ``note``.

    Raises:
        ValueError: for an empty list, an unknown variant or parameter, a bad size, repeat
            count, device or budget.
    """
    names = variant_names(variants)
    if isinstance(lengths, str | bytes) or not isinstance(lengths, Iterable):
        raise ValueError(f"lengths must be a list of whole numbers, got {lengths!r}")
    Ls = sorted({check_int("L", n, low=1, high=MAX_LENGTH) for n in lengths})
    if not Ls:
        raise ValueError(f"need at least one length, got {Ls!r}")
    B = check_int("batch", batch, low=1, high=64)
    H = check_int("heads", heads, low=1, high=64)
    E = check_int("E", E, low=1, high=1024)
    repeats = check_int("repeats", repeats, low=1, high=MAX_REPEATS)
    seed = check_int("seed", seed, low=0, high=2**63 - 1)
    check_choice("device", device, MEASURED_DEVICES)
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but CUDA is not available")
    torch_device = torch.device(device)
    budget = resolve_budget(memory_budget)
    params = params or {}
    for name in names:
        get_variant(name).resolve_params(params.get(name, {}))
    total = len(names) * len(Ls)
    rows = []
    for L in Ls:
        generator = torch.Generator().manual_seed(seed)
        # (B, H, L, E) each; drawn on the CPU so every device sees the same numbers
        q, k, v = (torch.randn(B, H, L, E, generator=generator).to(torch_device) for _ in "qkv")
        for name in names:
            extra = params.get(name, {})
            estimated = estimate_memory(name, batch=B, heads=H, L=L, E=E, **extra)
            row = {
                "variant": name,
                "L": L,
                "status": "ok",
                "time_ms": math.nan,
                "peak_bytes_measured": math.nan,
                "peak_bytes_estimated": float(estimated),
                "memory_method": "",
                "note": "",
            }
            if estimated > budget:
                row["status"] = "skipped"
                row["note"] = (
                    f"estimated {format_bytes(estimated)} is over the budget of "
                    f"{format_bytes(budget)}"
                )
            else:
                call = functools.partial(_attend_no_grad, q, k, v, name, budget, extra)
                try:
                    row["time_ms"] = time_call(call, repeats, torch_device)
                    peak, method = measure_peak_bytes(call, torch_device)
                    row["peak_bytes_measured"] = peak
                    row["memory_method"] = method
                except MemoryBudgetError as err:
                    row["status"] = "skipped"
                    row["note"] = str(err)
            rows.append(row)
            if progress is not None:
                progress(len(rows) / total)
    return pd.DataFrame(rows, columns=list(COMPLEXITY_COLUMNS))
