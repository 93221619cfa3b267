"""Inside one worker process of ``python -m bench``: peak memory and median time of each
measured call at one length, and the thread-wait probe (see :mod:`bench.attention_bench`).
"""

from __future__ import annotations

import ctypes
import math
import resource
import statistics
import time

from bench import process
from bench.attention_cases import build_call, inputs

PROBE_NUMEL = 2**22  # the thread-wait probe: a sum of 4M floats (16 MiB), ~0.2 ms on 1 thread
PROBE_ROUNDS = 15
PROBE_KIND = "probe"
KIB = 1024


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * KIB  # Linux reports KiB


def _current_rss_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * KIB
    raise OSError("no VmRSS in /proc/self/status")


def _reset_peak_rss() -> tuple[int, bool]:
    """Trim free heap pages and reset the peak RSS to the current RSS.

    Returns (baseline bytes, whether the reset worked). Without it the baseline is the old
    peak, which can only under-state the call's growth.
    """
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear_refs:
            clear_refs.write("5")  # reset VmHWM, which ru_maxrss reports
        return _current_rss_bytes(), True
    except OSError:
        return _peak_rss_bytes(), False


def _thread_wait_probe() -> tuple[float, float]:
    """(median seconds with torch's threads, with one thread) of a sum of
    :data:`PROBE_NUMEL` floats, round-robin in this process. On a shared machine whose
    second core is often taken, every multi-threaded op can wait milliseconds for its other
    thread; this ratio (about 0.5 when quiet, tens when stalled) tells which kind of run
    the figures come from. Not a goal."""
    import torch

    threads = torch.get_num_threads()
    x = torch.randn(PROBE_NUMEL)
    times: dict[int, list[float]] = {threads: [], 1: []}
    for _ in range(PROBE_ROUNDS):
        for n in times:
            with process.torch_threads(n):
                start = time.perf_counter()
                x.sum()
                times[n].append(time.perf_counter() - start)
    return statistics.median(times[threads]), statistics.median(times[1])


def _probe_answer(before: tuple[float, float], after: tuple[float, float], threads: int) -> dict:
    """The probe row: time with torch's threads after the timed rounds, and both ratios."""
    ratios = (
        f"{before[0] / before[1]:.1f}x before the timed rounds, {after[0] / after[1]:.1f}x after"
    )
    note = f"sum of 4M floats, {threads} threads / 1 thread: {ratios}"
    return {"seconds": after[0], "note": note}


def worker(kinds: list[str], L: int, *, device: str, repeats: int, threads: int = 0) -> dict:
    """Peak memory growth and median time of each of ``kinds`` at length L, in this process.

    Returns {kind: {"seconds", "peak_bytes", "peak_exact", "alloc_bytes", "note"}}, or
    {kind: {"error"}} for a kind that could not be built (FlexAttention without a compiler).
    """
    import torch

    from attention_core.experiments import measure_peak_bytes

    process.set_torch_threads(threads)
    answer: dict[str, dict] = {}
    with torch.inference_mode():
        q, k, v = inputs(L, device)
        calls = {}
        for kind in kinds:
            try:
                calls[kind], note = build_call(kind, q, k, v)
            except Exception as err:  # noqa: BLE001 - e.g. torch.compile unavailable: say so
                answer[kind] = {"error": f"{type(err).__name__}: {str(err)[:120]}"}
                continue
            answer[kind] = {"note": note}
        for kind, call in calls.items():
            call()  # warm-up
            _sync(device)
            if device == "cuda":
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                call()
                _sync(device)
                peak, exact = torch.cuda.max_memory_allocated() - base, True
                alloc = peak
            else:
                base, exact = _reset_peak_rss()
                call()
                peak = _peak_rss_bytes() - base
                alloc = math.nan  # measured after the timing, which the profiler would disturb
            answer[kind].update({"peak_bytes": peak, "peak_exact": exact, "alloc_bytes": alloc})
        probe_before = _thread_wait_probe() if device != "cuda" else None
        times: dict[str, list[float]] = {kind: [] for kind in calls}
        for _ in range(repeats):
            for kind, call in calls.items():
                start = time.perf_counter()
                call()
                _sync(device)
                times[kind].append(time.perf_counter() - start)
        if device != "cuda":
            threads_used = torch.get_num_threads()
            answer[PROBE_KIND] = _probe_answer(probe_before, _thread_wait_probe(), threads_used)
            for kind, call in calls.items():
                answer[kind]["alloc_bytes"] = measure_peak_bytes(call, torch.device("cpu"))[0]
    for kind, ts in times.items():
        answer[kind]["seconds"] = statistics.median(ts)
    return answer
