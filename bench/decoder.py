"""The real decoder (SmolLM2-135M): load time, cached decoding, a full forward with every map, RSS.

Usage: ``python -m bench.decoder [--runs 3] [--threads N]``

Each load runs in a fresh Python process (imports done first, not counted) that reports the
seconds of ``load_smollm2()`` (SHA-256, parsing, dequantising, tokenizer) and its resident
memory afterwards. In this process, side by side: a cached decoding step against recomputing
the whole sequence for the same token, and a 64-token forward with all 270 attention maps
against the same forward without maps. Goals: load ≤ 2 s, cached step ≤ 50 ms, 64-token
forward with maps ≤ 300 ms, RSS with the decoder loaded ≤ 850 MiB. Absolute times depend on
the machine's load, so the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

import torch

LOAD_GOAL_S = 2.0
STEP_GOAL_S = 0.050
FORWARD_GOAL_S = 0.300
RSS_GOAL_MIB = 850
PROMPT_TOKENS = 64
DECODE_STEPS = 16
FORWARD_REPEATS = 5
MIB = 1 << 20
PROMPT = (
    "The old lighthouse keeper climbed the stairs every evening to light the lamp. Ships "
    "passing in the night relied on its beam to avoid the rocks below, and in forty years "
    "he never missed a single night, not even during the great storm."
)
_CHILD_FLAG = "--child-load"


@dataclass(frozen=True)
class Timing:
    """Median seconds of one call: wall clock, and CPU time of this process (all threads).

    On a shared machine the wall clock includes waiting for a core; with one thread the CPU
    time is close to what the call takes on an idle core.
    """

    wall: float
    cpu: float


def _child_load(threads: int | None) -> None:
    """Run in a fresh process: time one load and print {"load_s", "rss_mib"} as JSON."""
    import gc

    import psutil

    if threads:
        torch.set_num_threads(threads)
    from attention_core.pretrained import load_smollm2

    wall, cpu = time.perf_counter(), time.process_time()
    decoder = load_smollm2()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    gc.collect()
    rss = psutil.Process().memory_info().rss / MIB
    print(
        json.dumps(
            {"load_s": wall, "load_cpu_s": cpu, "rss_mib": rss, "layers": len(decoder.layers)}
        )
    )


def measure_loads(runs: int, threads: int | None) -> list[dict]:
    """Load the decoder ``runs`` times, each in a fresh process."""
    results = []
    command = [sys.executable, "-m", "bench.decoder", _CHILD_FLAG]
    if threads:
        command += ["--threads", str(threads)]
    for _ in range(runs):
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return results


def _median_seconds(fn, repeats: int) -> Timing:
    """Median wall-clock and process CPU seconds of ``fn()`` after one warm-up call."""
    fn()
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return Timing(statistics.median(walls), statistics.median(cpus))


def measure_decoding(decoder) -> tuple[Timing, Timing]:
    """Median seconds per cached step and per full recomputation of the same sequence."""
    ids = torch.tensor([decoder.tokenize(PROMPT).input_ids[:PROMPT_TOKENS]])  # (1, 64)
    prefix = decoder(ids[:, :-1])
    last = ids[:, -1:]  # (1, 1)
    cached = _median_seconds(lambda: decoder(last, cache=prefix.cache), DECODE_STEPS)
    full = _median_seconds(lambda: decoder(ids), FORWARD_REPEATS)
    return cached, full


def measure_forward(decoder) -> tuple[Timing, Timing]:
    """Median seconds of a 64-token forward with all maps and without maps."""
    ids = torch.tensor([decoder.tokenize(PROMPT).input_ids[:PROMPT_TOKENS]])  # (1, 64)
    with_maps = _median_seconds(lambda: decoder(ids, need_weights=True), FORWARD_REPEATS)
    without = _median_seconds(lambda: decoder(ids), FORWARD_REPEATS)
    return with_maps, without


def _verdict(value: float, goal: float) -> str:
    return "PASS" if value <= goal else "MISS"


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bench.decoder``. Returns 0 (a MISS is reported, not an error)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh-process loads")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: torch's)"
    )
    parser.add_argument(_CHILD_FLAG, action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_load:
        _child_load(args.threads)
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    from attention_core.pretrained import load_smollm2

    load_average = os.getloadavg()[0]
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"{os.cpu_count()} CPUs, load average {load_average:.1f}"
    )
    loads = measure_loads(args.runs, args.threads)
    load_s = statistics.median(run["load_s"] for run in loads)
    rss = statistics.median(run["rss_mib"] for run in loads)
    load_times = ", ".join(f"{run['load_s']:.2f} (cpu {run['load_cpu_s']:.2f})" for run in loads)
    print(f"loads, wall (cpu) s: {load_times}")
    decoder = load_smollm2()
    step, full = measure_decoding(decoder)
    maps, plain = measure_forward(decoder)
    print(
        f"cached step {step.wall * 1e3:.1f} ms (cpu {step.cpu * 1e3:.1f}) vs full "
        f"recomputation {full.wall * 1e3:.1f} ms (cpu {full.cpu * 1e3:.1f}): "
        f"x{full.wall / step.wall:.1f} faster with the cache at {PROMPT_TOKENS} tokens"
    )
    print(
        f"{PROMPT_TOKENS}-token forward: with 270 maps {maps.wall * 1e3:.1f} ms "
        f"(cpu {maps.cpu * 1e3:.1f}), without {plain.wall * 1e3:.1f} ms "
        f"(cpu {plain.cpu * 1e3:.1f}): maps cost x{maps.wall / plain.wall:.2f}"
    )
    print(f"cache: {decoder.config.cache_bytes_per_token} bytes per token (float32)")
    rows = [
        ("load (median, fresh process)", load_s, LOAD_GOAL_S, 1, "s"),
        ("cached decoding step", step.wall, STEP_GOAL_S, 1e3, "ms"),
        (f"{PROMPT_TOKENS}-token forward, all maps", maps.wall, FORWARD_GOAL_S, 1e3, "ms"),
        ("RSS with the decoder loaded", rss, RSS_GOAL_MIB, 1, "MiB"),
    ]
    print(f"{'goal':<36}{'measured':>12}{'target':>12}")
    for name, value, goal, unit_scale, unit in rows:
        measured = f"{value * unit_scale:.1f} {unit}"
        target = f"{goal * unit_scale:.0f} {unit}"
        print(f"{name:<36}{measured:>12}{target:>12}  {_verdict(value, goal)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
