"""Attention variants against PyTorch's own ``scaled_dot_product_attention``: time and memory.

Run ``python -m bench`` (full sizes: a few minutes on a small CPU, FlexAttention's compile
included) or ``python -m bench --quick`` (small sizes, a smoke run of under a minute). Inputs
are float32, B=1, H=8, E=64, drawn from a seeded generator.

How it measures:

* **Time**: one fresh Python process per sequence length builds q, k, v once, calls every
  measured function once (the warm-up), then times ``repeats`` rounds in which each function
  runs once, round-robin, with ``time.perf_counter``; the figure is each function's median.
  Round-robin matters on a shared machine: a burst of load from another process slows
  every function in that round alike instead of one function's whole series, so the ratios
  stay meaningful. On CUDA every call is followed by ``torch.cuda.synchronize()``.
* **Peak memory on CPU**: read from the operating system,
  ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` of the same process. Before each measured
  call (after its warm-up call, with the inputs and, for the masked SDPA row, the mask
  already built), free heap pages go back to the OS (glibc ``malloc_trim(0)``) and the peak
  is reset to the current RSS (Linux: ``5`` written to ``/proc/self/clear_refs``). The
  figure is the growth of the peak over that baseline during one full-size call: every page
  the call touched (PyTorch allocations, allocator slack, the output), not an estimate.
  Because the peak is reset before every call, one function's peak cannot hide another's.
  Where the reset is unavailable the figure is marked ``~`` (it is then a lower bound).
* **Peak memory on CUDA**: ``torch.cuda.max_memory_allocated()`` after
  ``reset_peak_memory_stats()``, minus the memory allocated before the call.
* **Thread-wait probe** (the ``probe`` row of each length, not a goal): just before and
  just after the timed rounds, each CPU worker times a sum of 4M floats with torch's
  threads and with one thread, round-robin. About 0.5× means its cores were free; tens
  mean the second core was mostly taken (on a shared virtual machine each multi-threaded
  op then waits milliseconds for its other thread, whatever its size), so ratios between a
  fused kernel and a variant made of several ops are then measured in thread waits, not
  in work.
* **Peak allocated memory on CPU**: a further call under ``torch.profiler`` with memory
  profiling (``attention_core.experiments.measure_peak_bytes``): the largest total of live
  tensor allocations during the call, the same quantity as CUDA's figure. The memory goals
  use this column: the RSS column also holds allocator effects that vary from run to run
  (``local`` at L=4096 read 99–114 MiB of RSS growth over runs against 98.0 MiB allocated).

The reference rows: ``sdpa`` is ``F.scaled_dot_product_attention(q, k, v)``; ``sdpa+band``,
``sdpa+block`` and ``sdpa+strided`` are SDPA given the pattern as a bool ``attn_mask`` (what
you would write without a sparse kernel; the mask is an input built before measuring);
``flex`` is ``torch.nn.attention.flex_attention`` compiled with ``torch.compile`` on this
device with the sliding window |i − j| <= 64 as a block mask (the compile time is excluded
from its time and printed beside it, with its largest difference from ``local``; where
``torch.compile`` fails, the row says why and its goal prints MISS); ``naive`` is the
explicit ``softmax(q kᵀ / sqrt(E)) v`` that forms the L×L matrix; ``linear-mm`` is linear
attention's two matmuls alone, φ(Q)(φ(K)ᵀV) on features built before measuring (its
floor); ``local`` notes whether it ran the banded C kernel (``attention_core._band``, built
by ``pip install -e .`` where a C compiler exists; float32 on the CPU) and on which
instruction set; ``local-sdpa`` is ``local`` with that kernel switched off, its pure-PyTorch
path of fused SDPA calls over query blocks (what runs where the kernel is not built; it is
printed against FlexAttention under the goals); ``linear/2`` is ``linear`` on the first
half of the same inputs, timed in the same rounds, for the time(L)/time(L/2) goal. Our rows call
``attention_core.attend(q, k, v, variant, need_weights=False)`` with default parameters
except ``local`` window_size=128, ``block`` block_size=64 and ``strided`` stride=8;
``scaled+w`` is ``scaled`` with ``need_weights=True`` (the dashboard's path, at
L=256). Goals are printed with PASS or MISS; a MISS is reported, never hidden.

On a machine shared with other work the absolute times swing by 2× or more between runs
(oversubscribed cores make every multi-threaded op wait on its threads, which weighs on
variants made of several ops more than on one fused kernel); read the ratios, which are
measured side by side in one process, round-robin, run the bench twice, and compare with
``--threads 1``, which removes the thread waits.
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
BLOCK = 64
STRIDE = 8
WARMUP_LEN = 64
DASH_LEN = 256  # the dashboard's scale: weights are drawn up to a few hundred tokens
FULL_SIZES = (4096, 8192)
QUICK_SIZES = (512, 1024)
FULL_REPEATS = 5
QUICK_REPEATS = 2
DASH_REPEATS = 30  # calls of a few ms: more rounds for a stable median
PROBE_NUMEL = 2**22  # the thread-wait probe: a sum of 4M floats (16 MiB), ~0.2 ms on 1 thread
PROBE_ROUNDS = 15
PROBE_KIND = "probe"
WORKER_TIMEOUT_S = 900
MIB = 2**20
KIB = 1024
DASH_KINDS = ("sdpa", "scaled+w")
SMALL_KINDS = ("sdpa", "scaled", "chunked", "naive", "local", "linear")
LARGE_KINDS = (
    "sdpa",
    "sdpa+band",
    "flex",
    "local",
    "local-sdpa",
    "linear",
    "linear/2",
    "linear-mm",
    "chunked",
    "sdpa+block",
    "block",
    "sdpa+strided",
    "strided",
)


@dataclass(frozen=True)
class Measurement:
    """Median time (seconds) and peak memory growth (bytes) of one function at one length."""

    kind: str
    L: int
    seconds: float = math.nan
    peak_bytes: float = math.nan
    peak_exact: bool = True
    error: str = ""
    alloc_bytes: float = math.nan  # peak of live tensor allocations (profiler / CUDA allocator)
    note: str = ""  # e.g. FlexAttention's compile time and its difference from ``local``


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


# --- inside a worker process ------------------------------------------------------------


def _inputs(L: int, device: str):
    """Seeded q, k, v of shape (B, H, L, E)."""
    import torch

    g = torch.Generator(device=device).manual_seed(0)
    shape = (BATCH, HEADS, L, HEAD_DIM)
    return tuple(torch.randn(shape, generator=g, device=device) for _ in range(3))


def _flex_call(q, k, v):
    """FlexAttention compiled on the CPU with the sliding window |i − j| <= WINDOW // 2 as
    a block mask (``local``'s pattern). Returns (callable, note with the compile time)."""
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    def sliding(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx).abs() <= WINDOW // 2

    L = q.shape[-2]
    started = time.perf_counter()
    block_mask = create_block_mask(sliding, B=None, H=None, Q_LEN=L, KV_LEN=L, device=q.device)
    compiled = torch.compile(flex_attention)
    first = compiled(q, k, v, block_mask=block_mask)  # compiles
    compile_s = time.perf_counter() - started
    from attention_core import attend

    ours = attend(q, k, v, "local", window_size=WINDOW).output
    diff = float((first - ours).abs().max())
    note = f"compile {compile_s:.0f} s (excluded); max |flex - local| = {diff:.1e}"
    return (lambda: compiled(q, k, v, block_mask=block_mask)), note


def _build_call(kind: str, q, k, v):
    """Return (zero-argument callable running ``kind`` on q, k, v (B, H, L, E), note)."""
    import torch
    import torch.nn.functional as F

    from attention_core import attend, masks

    L = q.shape[-2]
    if kind == "sdpa":
        return (lambda: F.scaled_dot_product_attention(q, k, v)), ""
    patterns = {
        "sdpa+band": lambda: masks.local(L, WINDOW, device=q.device),
        "sdpa+block": lambda: masks.block(L, BLOCK, device=q.device),
        "sdpa+strided": lambda: masks.strided(L, STRIDE, device=q.device),
    }
    if kind in patterns:
        pattern = patterns[kind]()  # (L, L) bool, an input built before measuring
        return (lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=pattern)), ""
    if kind == "flex":
        return _flex_call(q, k, v)
    if kind == "naive":
        scale = 1.0 / math.sqrt(q.shape[-1])

        def naive():
            scores = (q @ k.transpose(-2, -1)) * scale  # (B, H, L, E) @ (B, H, E, L) -> (…, L, L)
            return torch.softmax(scores, dim=-1) @ v  # (…, L, L) @ (…, L, E) -> (…, L, E)

        return naive, ""
    if kind == "linear-mm":
        fq, fk = F.elu(q) + 1.0, F.elu(k) + 1.0  # features built before measuring
        # (B, H, L, E) @ ((B, H, E, L) @ (B, H, L, E)) -> (B, H, L, E): the two matmuls alone
        return (lambda: fq @ (fk.transpose(-2, -1) @ v)), ""
    if kind in ("local", "local-sdpa"):
        from attention_core.variants import band_kernel

        def local():
            return attend(q, k, v, "local", window_size=WINDOW).output

        if kind == "local-sdpa":

            def local_sdpa():
                with band_kernel.disabled():
                    return local()

            return local_sdpa, "band kernel off: fused SDPA calls over query blocks"
        if band_kernel.can_run(q, k, v):
            return local, f"band kernel, {band_kernel.status().isas[0]}"
        return local, f"fused SDPA calls (band kernel not used: {band_kernel.status().reason})"
    if kind == "linear/2":
        half = [t[..., : L // 2, :].contiguous() for t in (q, k, v)]  # inputs at L/2
        return (lambda: attend(*half, "linear").output), ""
    if kind == "scaled+w":
        return (lambda: attend(q, k, v, "scaled", need_weights=True).weights), ""
    params = {
        "local": {"window_size": WINDOW},
        "block": {"block_size": BLOCK},
        "strided": {"stride": STRIDE},
    }.get(kind, {})
    return (lambda: attend(q, k, v, kind, need_weights=False, **params).output), ""


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
            torch.set_num_threads(n)
            start = time.perf_counter()
            x.sum()
            times[n].append(time.perf_counter() - start)
    torch.set_num_threads(threads)
    return statistics.median(times[threads]), statistics.median(times[1])


def _probe_answer(before: tuple[float, float], after: tuple[float, float], threads: int) -> dict:
    """The probe row: time with torch's threads after the timed rounds, and both ratios."""
    ratios = (
        f"{before[0] / before[1]:.1f}x before the timed rounds, {after[0] / after[1]:.1f}x after"
    )
    note = f"sum of 4M floats, {threads} threads / 1 thread: {ratios}"
    return {"seconds": after[0], "note": note}


def worker(kinds: list[str], L: int, device: str, repeats: int, threads: int = 0) -> dict:
    """Peak memory growth and median time of each of ``kinds`` at length L, in this process.

    Returns {kind: {"seconds", "peak_bytes", "peak_exact", "alloc_bytes", "note"}}, or
    {kind: {"error"}} for a kind that could not be built (FlexAttention without a compiler).
    """
    import torch

    from attention_core.experiments import measure_peak_bytes

    if threads > 0:
        torch.set_num_threads(threads)
    answer: dict[str, dict] = {}
    with torch.inference_mode():
        q, k, v = _inputs(L, device)
        calls = {}
        for kind in kinds:
            try:
                calls[kind], note = _build_call(kind, q, k, v)
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


# --- the driver ----------------------------------------------------------------------------


def _run_worker(spec: dict) -> dict:
    """Run a worker in a fresh Python process; return its JSON answer or {"error": ...}."""
    cmd = [sys.executable, "-m", "bench.attention_bench", "--worker", json.dumps(spec)]
    try:
        done = subprocess.run(
            cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {WORKER_TIMEOUT_S} s"}
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {done.returncode}: {last}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_device(
    device: str, quick: bool, repeats: int, threads: int = 0
) -> dict[tuple[str, int], Measurement]:
    """Every measurement the goals need on one device, keyed by (kind, L)."""
    small, large = QUICK_SIZES if quick else FULL_SIZES
    dash_repeats = max(repeats, QUICK_REPEATS if quick else DASH_REPEATS)
    results = {}
    for L, kinds, rounds in (
        (DASH_LEN, DASH_KINDS, dash_repeats),
        (small, SMALL_KINDS, repeats),
        (large, LARGE_KINDS, repeats),
    ):
        print(f"  measuring {', '.join(kinds)} at L={L} on {device} ...", file=sys.stderr)
        spec = {"kinds": list(kinds), "L": L, "device": device, "repeats": rounds}
        answer = _run_worker({**spec, "threads": threads})
        probed = [PROBE_KIND] if PROBE_KIND in answer else []  # CPU workers add it
        for kind in [*kinds, *probed]:
            got = answer.get(kind, {})
            results[(kind, L)] = Measurement(
                kind,
                L,
                seconds=got.get("seconds", math.nan),
                peak_bytes=got.get("peak_bytes", math.nan),
                peak_exact=got.get("peak_exact", True),
                error=got.get("error", answer.get("error", "")),
                alloc_bytes=got.get("alloc_bytes", math.nan),
                note=got.get("note", ""),
            )
    return results


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.nan


def goals(results: dict[tuple[str, int], Measurement], small: int, large: int) -> list[Goal]:
    """The product's goals (issue 13's table), computed from the measurements."""

    def t(kind, L):
        return results[(kind, L)].seconds

    def m(kind, L):
        return results[(kind, L)].alloc_bytes

    def rss(kind, L):
        return results[(kind, L)].peak_bytes

    return [
        Goal(
            f"scaled / SDPA time, L={small}",
            _ratio(t("scaled", small), t("sdpa", small)),
            1.02,
            False,
        ),
        Goal(
            f"scaled+weights / SDPA time, L={DASH_LEN}",
            _ratio(t("scaled+w", DASH_LEN), t("sdpa", DASH_LEN)),
            1.1,
            False,
        ),
        Goal(
            f"chunked / SDPA time, L={small}",
            _ratio(t("chunked", small), t("sdpa", small)),
            1.3,
            False,
        ),
        Goal(
            f"chunked peak RSS growth, L={large}", rss("chunked", large) / MIB, 70.0, False, " MiB"
        ),
        Goal(
            f"chunked / naive peak memory, L={small}",
            _ratio(m("chunked", small), m("naive", small)),
            0.1,
            False,
            "",
        ),
        Goal(
            f"local / FlexAttention time, w={WINDOW}, L={large}",
            _ratio(t("local", large), t("flex", large)),
            0.5,
            False,
        ),
        Goal(
            f"SDPA+band / local time, w={WINDOW}, L={large}",
            _ratio(t("sdpa+band", large), t("local", large)),
            25.0,
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
            f"linear / its two matmuls time, L={large}",
            _ratio(t("linear", large), t("linear-mm", large)),
            2.0,
            False,
        ),
        Goal(
            f"SDPA / linear time, L={large}",
            _ratio(t("sdpa", large), t("linear", large)),
            40.0,
            True,
        ),
        Goal(
            f"linear time L={large} / L={large // 2}, side by side",
            _ratio(t("linear", large), t("linear/2", large)),
            2.2,
            False,
            "",
        ),
        Goal(
            f"block b={BLOCK} / SDPA+block peak memory, L={large}",
            _ratio(m("block", large), m("sdpa+block", large)),
            0.1,
            False,
            "",
        ),
        Goal(
            f"strided s={STRIDE} / SDPA+strided peak memory, L={large}",
            _ratio(m("strided", large), m("sdpa+strided", large)),
            0.1,
            False,
            "",
        ),
    ]


def _fmt_ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1e3:.1f}"


def _fmt_mib(nbytes: float) -> str:
    return "-" if math.isnan(nbytes) else f"{nbytes / MIB:.1f}"


def report(
    device: str,
    results: dict[tuple[str, int], Measurement],
    quick: bool,
    repeats: int,
    threads: int = 0,
) -> list[Goal]:
    """Print the measurement table and the goal table for one device; return the goals."""
    small, large = QUICK_SIZES if quick else FULL_SIZES
    memory_how = (
        "max_memory_allocated growth"
        if device == "cuda"
        else "peak of live tensor allocations (torch.profiler), and peak RSS growth"
    )
    print(
        f"\n== {device}: float32, B={BATCH}, H={HEADS}, E={HEAD_DIM}; time = median of "
        f"{repeats} round-robin runs after a warm-up; memory = {memory_how} of one call"
        f"{'; QUICK sizes' if quick else ''}"
        f"{f'; {threads} torch thread(s)' if threads else ''}"
    )
    print(f"{'measure':<14}{'L':>7}{'time ms':>11}{'alloc MiB':>11}{'RSS MiB':>10}")
    for r in results.values():
        rss = "-" if device == "cuda" else _fmt_mib(r.peak_bytes) + ("" if r.peak_exact else "~")
        line = f"{r.kind:<14}{r.L:>7}{_fmt_ms(r.seconds):>11}{_fmt_mib(r.alloc_bytes):>11}{rss:>10}"
        extra = f"  ERROR {r.error}" if r.error else (f"  ({r.note})" if r.note else "")
        print(line + extra)
    checked = goals(results, small, large)
    if device != "cpu":
        print(
            f"\n(the goals were set for the CPU; on {device} they are printed for comparison: "
            "at these sizes a GPU call takes about a millisecond, so Python and kernel-launch "
            "overhead weigh on every ratio)"
        )
    print(f"\n{'goal':<50}{'value':>11}{'target':>12}  result")
    for g in checked:
        sign = ">=" if g.higher_is_better else "<="
        value = "n/a" if math.isnan(g.value) else f"{g.value:.2f}{g.unit}"
        target = f"{sign} {g.target:g}{g.unit}"
        print(f"{g.name:<50}{value:>11}{target:>12}  {'PASS' if g.passed else 'MISS'}")
    if ("local-sdpa", large) in results and ("flex", large) in results:
        fallback = _ratio(results[("local-sdpa", large)].seconds, results[("flex", large)].seconds)
        print(
            f"\n(local's pure-PyTorch path, where the band kernel is not built: local-sdpa / "
            f"FlexAttention = {fallback:.2f}x)"
        )
    return checked


def _devices(choice: str) -> list[str]:
    import torch

    if choice == "auto":
        return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]
    if choice == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: CUDA is not available here")
    return [choice]


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bench``. Returns 0 (a MISS is reported, not an error)."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="auto: the CPU, and CUDA too when available",
    )
    parser.add_argument("--repeats", type=int, default=None, help="timed rounds per length")
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads in each measuring process (default: torch's own choice); 1 "
        "gives steadier ratios on a machine shared with other work",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        spec = json.loads(args.worker)
        answer = worker(
            spec["kinds"], spec["L"], spec["device"], spec["repeats"], spec.get("threads", 0)
        )
        print(json.dumps(answer))
        return 0
    repeats = args.repeats or (QUICK_REPEATS if args.quick else FULL_REPEATS)
    if repeats < 1:
        parser.error(f"--repeats must be >= 1, got {repeats}")
    started = time.perf_counter()
    for device in _devices(args.device):
        results = measure_device(device, args.quick, repeats, args.threads)
        report(device, results, args.quick, repeats, args.threads)
    print(f"\n(total {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
