"""Attention variants against PyTorch's own ``scaled_dot_product_attention``: time and memory.

Run ``python -m bench`` (full sizes, a few minutes on a small CPU) or ``python -m bench --quick``
(small sizes, a smoke run of well under 30 s). Inputs are float32, B=1, H=8, E=64.

How it measures:

* **Time**: each measurement runs in its own fresh Python process. The process builds its
  inputs, makes one call at full size (the warm-up, which also gives the memory figure
  below), then times ``repeats`` further calls with ``time.perf_counter`` and reports the
  median. On CUDA every call is followed by ``torch.cuda.synchronize()``.
* **Peak memory on CPU**: the operating system's peak resident set size of that process,
  ``resource.getrusage(RUSAGE_SELF).ru_maxrss``. After torch is imported, the inputs (q, k,
  v and, for the masked SDPA row, the mask) are built and one tiny call (L=64) has loaded the
  code paths, free heap pages go back to the OS (glibc ``malloc_trim(0)``) and the peak is
  reset to the current RSS (Linux: ``5`` written to ``/proc/self/clear_refs``). The figure is
  the growth of the peak over that baseline during the first full-size call: every page the
  call touched (PyTorch allocations, allocator slack, the output), not an estimate. Without
  the reset the inputs' temporary buffers would inflate the baseline and hide the call's
  peak; where the reset is unavailable the row is marked ``~``. A fresh process per
  measurement keeps one measurement's peak from hiding another's.
* **Peak memory on CUDA**: ``torch.cuda.max_memory_allocated()`` after
  ``reset_peak_memory_stats()``, minus the memory allocated before the call.

The reference rows: ``sdpa`` is ``F.scaled_dot_product_attention(q, k, v)``; ``sdpa+band`` is
SDPA given the local window as a bool ``attn_mask`` (what you would write without a banded
kernel); ``naive`` is the explicit ``softmax(q kᵀ / sqrt(E)) v`` that forms the L×L matrix.
Goals are printed with PASS or MISS; a MISS is reported, never hidden.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
BATCH, HEADS, HEAD_DIM = 1, 8, 64
WINDOW = 128
WARMUP_LEN = 64
FULL_SIZES = (4096, 8192)
QUICK_SIZES = (512, 1024)
FULL_REPEATS = 3
QUICK_REPEATS = 2
WORKER_TIMEOUT_S = 600
MIB = 2**20
KIB = 1024


@dataclass(frozen=True)
class Job:
    """One measurement: what to run, at which length, where."""

    kind: str  # "sdpa", "sdpa+band", "naive", or a variant name for attend()
    L: int
    device: str
    repeats: int

    @property
    def key(self) -> tuple[str, int]:
        return (self.kind, self.L)


@dataclass(frozen=True)
class Measurement:
    """Median time (seconds) and peak memory growth (bytes) of one job, or an error."""

    job: Job
    seconds: float = math.nan
    peak_bytes: float = math.nan
    peak_exact: bool = True
    error: str = ""


@dataclass(frozen=True)
class Goal:
    """A printed goal: value compared with a target."""

    name: str
    value: float
    target: float
    higher_is_better: bool
    unit: str = "x"

    @property
    def passed(self) -> bool:
        if math.isnan(self.value):
            return False
        return self.value >= self.target if self.higher_is_better else self.value <= self.target


# --- the worker: runs in its own process ---------------------------------------------------


def _build_call(kind: str, L: int, device: str):
    """Return a zero-argument callable running ``kind`` at length L, with inputs built."""
    import torch
    import torch.nn.functional as F

    from attention_core import attend, masks

    g = torch.Generator(device=device).manual_seed(0)
    shape = (BATCH, HEADS, L, HEAD_DIM)
    q = torch.randn(shape, generator=g, device=device)  # (B, H, L, E)
    k = torch.randn(shape, generator=g, device=device)
    v = torch.randn(shape, generator=g, device=device)
    if kind == "sdpa":
        return lambda: F.scaled_dot_product_attention(q, k, v)
    if kind == "sdpa+band":
        band = masks.local(L, WINDOW, device=device)  # (L, L) bool, an input like q
        return lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=band)
    if kind == "naive":
        scale = 1.0 / math.sqrt(HEAD_DIM)

        def naive():
            scores = (q @ k.transpose(-2, -1)) * scale  # (B, H, L, E) @ (B, H, E, L) -> (…, L, L)
            return torch.softmax(scores, dim=-1) @ v  # (…, L, L) @ (…, L, E) -> (…, L, E)

        return naive
    params = {"window_size": WINDOW} if kind == "local" else {}
    return lambda: attend(q, k, v, kind, need_weights=False, **params).output


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


def run_job(job: Job) -> dict:
    """Measure one job in this process; returns {"seconds", "peak_bytes", "times"}."""
    import torch

    torch.manual_seed(0)
    with torch.inference_mode():
        _build_call(job.kind, WARMUP_LEN, job.device)()  # load code paths at a tiny size
        call = _build_call(job.kind, job.L, job.device)
        _sync(job.device)
        if job.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            call()
            _sync(job.device)
            peak = torch.cuda.max_memory_allocated() - base
        else:
            base, exact = _reset_peak_rss()
            call()
            peak = _peak_rss_bytes() - base
        times = []
        for _ in range(job.repeats):
            start = time.perf_counter()
            call()
            _sync(job.device)
            times.append(time.perf_counter() - start)
    return {
        "seconds": statistics.median(times),
        "peak_bytes": peak,
        "times": times,
        "peak_exact": job.device == "cuda" or exact,
    }


def measure(job: Job) -> Measurement:
    """Run ``job`` in a fresh Python process and parse its JSON answer."""
    spec = json.dumps({"kind": job.kind, "L": job.L, "device": job.device, "repeats": job.repeats})
    cmd = [sys.executable, "-m", "bench.attention_bench", "--worker", spec]
    try:
        done = subprocess.run(
            cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return Measurement(job, error=f"timed out after {WORKER_TIMEOUT_S} s")
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return Measurement(job, error=f"exit {done.returncode}: {last}")
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    return Measurement(job, answer["seconds"], answer["peak_bytes"], answer["peak_exact"])


# --- the driver ----------------------------------------------------------------------------


def plan(device: str, quick: bool, repeats: int) -> list[Job]:
    """Every measurement the goals need, for one device."""
    small, large = QUICK_SIZES if quick else FULL_SIZES
    rows = [
        ("sdpa", small),
        ("scaled", small),
        ("chunked", small),
        ("naive", small),
        ("local", small),
        ("local", large),
        ("sdpa+band", large),
        ("linear", small),
        ("linear", large),
        ("sdpa", large),
    ]
    return [Job(kind, L, device, repeats) for kind, L in rows]


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.nan


def goals(results: dict[tuple[str, int], Measurement], small: int, large: int) -> list[Goal]:
    """The product's goals, computed from the measurements."""

    def t(kind, L):
        return results[(kind, L)].seconds

    def m(kind, L):
        return results[(kind, L)].peak_bytes

    return [
        Goal(
            f"scaled / SDPA time, L={small}",
            _ratio(t("scaled", small), t("sdpa", small)),
            1.05,
            False,
        ),
        Goal(
            f"chunked / SDPA time, L={small}",
            _ratio(t("chunked", small), t("sdpa", small)),
            2.0,
            False,
        ),
        Goal(
            f"chunked / naive peak memory, L={small}",
            _ratio(m("chunked", small), m("naive", small)),
            0.1,
            False,
            "",
        ),
        Goal(
            f"SDPA+band / local time, w={WINDOW}, L={large}",
            _ratio(t("sdpa+band", large), t("local", large)),
            8.0,
            True,
        ),
        Goal(
            f"local peak memory L={large} / L={small}",
            _ratio(m("local", large), m("local", small)),
            2.2,
            False,
            "",
        ),
        Goal(
            f"SDPA / linear time, L={large}",
            _ratio(t("sdpa", large), t("linear", large)),
            30.0,
            True,
        ),
        Goal(
            f"linear time L={large} / L={small}",
            _ratio(t("linear", large), t("linear", small)),
            2.5,
            False,
            "",
        ),
    ]


def _fmt_ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1e3:10.1f}"


def _fmt_mib(nbytes: float) -> str:
    return "-" if math.isnan(nbytes) else f"{nbytes / MIB:10.1f}"


def report(device: str, measurements: list[Measurement], quick: bool) -> list[Goal]:
    """Print the measurement table and the goal table for one device; return the goals."""
    small, large = QUICK_SIZES if quick else FULL_SIZES
    repeats = measurements[0].job.repeats
    memory_how = "max_memory_allocated" if device == "cuda" else "peak RSS growth"
    print(
        f"\n== {device}: float32, B={BATCH}, H={HEADS}, E={HEAD_DIM}; median of {repeats} "
        f"after a warm-up; memory = {memory_how}{' (QUICK sizes)' if quick else ''}"
    )
    print(f"{'measure':<12}{'L':>7}{'time ms':>11}{'peak MiB':>11}")
    for r in measurements:
        mib = _fmt_mib(r.peak_bytes) + ("" if r.peak_exact else "~")
        line = f"{r.job.kind:<12}{r.job.L:>7}{_fmt_ms(r.seconds):>11}{mib:>11}"
        print(line + (f"  ERROR {r.error}" if r.error else ""))
    results = {r.job.key: r for r in measurements}
    checked = goals(results, small, large)
    print(f"\n{'goal':<44}{'value':>9}{'target':>10}  result")
    for g in checked:
        sign = ">=" if g.higher_is_better else "<="
        value = "n/a" if math.isnan(g.value) else f"{g.value:.2f}{g.unit}"
        target = f"{sign} {g.target:g}{g.unit}"
        print(f"{g.name:<44}{value:>9}{target:>10}  {'PASS' if g.passed else 'MISS'}")
    return checked


def _devices(choice: str) -> list[str]:
    import torch

    if choice == "auto":
        return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]
    if choice == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: CUDA is not available here")
    return [choice]


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bench``. Returns 0 (MISS is reported, not an error)."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="auto: the CPU, and CUDA too when available",
    )
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per measurement")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        spec = json.loads(args.worker)
        print(json.dumps(run_job(Job(**spec))))
        return 0
    repeats = args.repeats or (QUICK_REPEATS if args.quick else FULL_REPEATS)
    if repeats < 1:
        parser.error(f"--repeats must be >= 1, got {repeats}")
    started = time.perf_counter()
    for device in _devices(args.device):
        measurements = []
        for job in plan(device, args.quick, repeats):
            print(f"  measuring {job.kind} L={job.L} on {device} ...", file=sys.stderr, flush=True)
            measurements.append(measure(job))
        report(device, measurements, args.quick)
    print(f"\n(total {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
