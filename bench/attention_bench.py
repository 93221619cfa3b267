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
``scaled+w`` is ``scaled`` with ``need_weights=True`` (the dashboard's path: the PyTorch
formula ``dense_attention``, at L=256 and L=1024), whose cost against SDPA is stated below
the goals, not a goal. Goals are printed with PASS or MISS; a MISS is reported,
never hidden.

The modules: :mod:`bench.attention_cases` (sizes and what each row runs),
:mod:`bench.attention_worker` (one measuring process), :mod:`bench.attention_goals` (goals
and stated figures), :mod:`bench.attention_report` (the printed tables) and this driver.

On a machine shared with other work the absolute times swing by 2× or more between runs
(oversubscribed cores make every multi-threaded op wait on its threads, which weighs on
variants made of several ops more than on one fused kernel); read the ratios, which are
measured side by side in one process, round-robin, run the bench twice, and compare with
``--threads 1``, which removes the thread waits.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

from bench.attention_cases import (
    DASH_KINDS,
    DENSE_LENS,
    FULL_SIZES,
    LARGE_KINDS,
    QUICK_SIZES,
    SMALL_KINDS,
)
from bench.attention_goals import Measurement
from bench.attention_report import report
from bench.attention_worker import PROBE_KIND, worker

REPO_ROOT = Path(__file__).resolve().parent.parent
FULL_REPEATS = 5
QUICK_REPEATS = 2
DASH_REPEATS = 30  # calls of a few ms: more rounds for a stable median
WORKER_TIMEOUT_S = 900


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


def _measurements(answer: dict, kinds: list[str], L: int) -> dict[tuple[str, int], Measurement]:
    """A worker's JSON answer at length L as Measurements keyed by (kind, L), with the
    thread-wait probe's row where the worker added one (CPU workers do)."""
    probed = [PROBE_KIND] if PROBE_KIND in answer else []
    results = {}
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


def measure_device(
    device: str, *, quick: bool, repeats: int, threads: int = 0
) -> dict[tuple[str, int], Measurement]:
    """Every measurement the goals and the stated figures need on one device, keyed by
    (kind, L): the dense path at each of ``DENSE_LENS``, then the small and large runs.

    Args:
        device: "cpu" or "cuda". quick: the small sizes. repeats: timed rounds per length
            (the dense runs take at least :data:`DASH_REPEATS`).
        threads: torch threads of each measuring process (0: torch's own choice).

    Returns:
        {(kind, L): Measurement}.
    """
    small, large = QUICK_SIZES if quick else FULL_SIZES
    dash_repeats = max(repeats, QUICK_REPEATS if quick else DASH_REPEATS)
    runs = [(L, DASH_KINDS, dash_repeats) for L in DENSE_LENS]
    runs += [(small, SMALL_KINDS, repeats), (large, LARGE_KINDS, repeats)]
    results = {}
    for L, kinds, rounds in runs:
        print(f"  measuring {', '.join(kinds)} at L={L} on {device} ...", file=sys.stderr)
        spec = {"kinds": list(kinds), "L": L, "device": device, "repeats": rounds}
        answer = _run_worker({**spec, "threads": threads})
        results.update(_measurements(answer, list(kinds), L))
    return results


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
            spec["kinds"],
            spec["L"],
            device=spec["device"],
            repeats=spec["repeats"],
            threads=spec.get("threads", 0),
        )
        print(json.dumps(answer))
        return 0
    repeats = args.repeats or (QUICK_REPEATS if args.quick else FULL_REPEATS)
    if repeats < 1:
        parser.error(f"--repeats must be >= 1, got {repeats}")
    started = time.perf_counter()
    for device in _devices(args.device):
        results = measure_device(device, quick=args.quick, repeats=repeats, threads=args.threads)
        report(device, results, quick=args.quick, repeats=repeats, threads=args.threads)
    print(f"\n(total {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
