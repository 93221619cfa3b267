"""The real decoder (SmolLM2-135M), float32, bfloat16 and int4 weights side by side: load time,
RSS, cached decoding, a full forward with every map, and how far the narrow ones move the model.

Usage: ``python -m bench.decoder [--runs 3] [--threads N]``

Each load runs in a fresh Python process (imports done first, not counted) that reports the
seconds of ``load_smollm2(weights_dtype=...)`` (SHA-256, parsing, dequantising, tokenizer)
and its resident memory afterwards, for each storage in turn. In this process all three
decoders are loaded and timed round-robin (one call of each in turn, medians): a cached
decoding step, the full recomputation of the same sequence, and a 64-token forward with all
270 attention maps and without. Last, bfloat16's and int4's largest deviations from float32
on a paragraph: attention weights and logits. Goals: load ≤ 2 s, cached step ≤ 50 ms, 64-token
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
from collections.abc import Callable
from dataclasses import dataclass

import torch

from bench import process

LOAD_GOAL_S = 2.0
STEP_GOAL_S = 0.050
FORWARD_GOAL_S = 0.300
RSS_GOAL_MIB = 850
PROMPT_TOKENS = 64
DECODE_STEPS = 16
FORWARD_REPEATS = 5
MIB = 1 << 20
DTYPES = ("float32", "bfloat16", "int4")
NARROW = DTYPES[1:]
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


def _child_load(dtype: str, threads: int | None) -> None:
    """Run in a fresh process: time one load and print {"load_s", "rss_mib", ...} as JSON."""
    import gc

    import psutil

    process.set_torch_threads(threads)
    from attention_core.pretrained import load_smollm2

    wall, cpu = time.perf_counter(), time.process_time()
    decoder = load_smollm2(weights_dtype=dtype)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    gc.collect()
    rss = psutil.Process().memory_info().rss / MIB
    print(
        json.dumps(
            {"load_s": wall, "load_cpu_s": cpu, "rss_mib": rss, "layers": len(decoder.layers)}
        )
    )


def measure_loads(dtype: str, runs: int, threads: int | None) -> list[dict]:
    """Load the decoder with ``dtype`` weights ``runs`` times, each in a fresh process."""
    results = []
    command = [sys.executable, "-m", "bench.decoder", _CHILD_FLAG, "--dtype", dtype]
    if threads:
        command += ["--threads", str(threads)]
    for _ in range(runs):
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return results


def round_robin(calls: dict[str, Callable[[], object]], repeats: int) -> dict[str, Timing]:
    """Median wall and process-CPU seconds of each call, run in turn after one warm-up each,
    so that both decoders see the same machine load."""
    for call in calls.values():
        call()
    walls: dict[str, list[float]] = {name: [] for name in calls}
    cpus: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            wall, cpu = time.perf_counter(), time.process_time()
            call()
            walls[name].append(time.perf_counter() - wall)
            cpus[name].append(time.process_time() - cpu)
    return {
        name: Timing(statistics.median(walls[name]), statistics.median(cpus[name]))
        for name in calls
    }


def timed_calls(decoders: dict[str, object]) -> tuple[dict, dict]:
    """The cached-step and forward calls of every decoder, keyed (kind, dtype)."""
    steps, forwards = {}, {}
    for dtype, decoder in decoders.items():
        ids = torch.tensor([decoder.tokenize(PROMPT).input_ids[:PROMPT_TOKENS]])  # (1, 64)
        prefix = decoder(ids[:, :-1])
        last = ids[:, -1:]  # (1, 1)
        steps["cached", dtype] = lambda d=decoder, p=prefix, t=last: d(t, cache=p.cache)
        steps["full", dtype] = lambda d=decoder, i=ids: d(i)
        forwards["maps", dtype] = lambda d=decoder, i=ids: d(i, need_weights=True)
        forwards["plain", dtype] = lambda d=decoder, i=ids: d(i)
    return steps, forwards


def deviation(wide, narrow) -> tuple[float, float]:
    """Largest |narrow - float32| of the attention weights and of the logits on PROMPT."""
    ids = torch.tensor([wide.tokenize(PROMPT).input_ids[:PROMPT_TOKENS]])  # (1, 64)
    a, b = wide(ids, need_weights=True), narrow(ids, need_weights=True)
    attention = max(
        float((x - y).abs().max()) for x, y in zip(a.attentions, b.attentions, strict=True)
    )
    return attention, float((a.logits - b.logits).abs().max())


def _verdict(value: float, goal: float) -> str:
    return "PASS" if value <= goal else "MISS"


def _ms(timing: Timing) -> str:
    return f"{timing.wall * 1e3:.1f} ms (cpu {timing.cpu * 1e3:.1f})"


def print_goals(loads: dict[str, list[dict]], steps: dict, forwards: dict) -> None:
    """The goal table: one column per weight dtype."""
    print(f"{'goal':<36}" + "".join(f"{dtype:>14}{'':5}" for dtype in DTYPES) + f"{'target':>9}")
    rows = [
        ("load (median, fresh process)", "s", LOAD_GOAL_S, 1, None),
        ("cached decoding step", "ms", STEP_GOAL_S, 1e3, ("cached", steps)),
        (f"{PROMPT_TOKENS}-token forward, all maps", "ms", FORWARD_GOAL_S, 1e3, ("maps", forwards)),
        ("RSS with the decoder loaded", "MiB", RSS_GOAL_MIB, 1, None),
    ]
    for name, unit, goal, scale, source in rows:
        cells = ""
        for dtype in DTYPES:
            if source is not None:
                value = source[1][source[0], dtype].wall
            else:
                key = "load_s" if unit == "s" else "rss_mib"
                value = statistics.median(run[key] for run in loads[dtype])
            cells += f"{value * scale:>9.1f} {unit:<4}{_verdict(value, goal):<5}"
        print(f"{name:<36}{cells}{goal * scale:>7.0f} {unit}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bench.decoder``. Returns 0 (a MISS is reported, not an error)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh-process loads per dtype")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: torch's)"
    )
    parser.add_argument(_CHILD_FLAG, action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dtype", choices=DTYPES, default="float32", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_load:
        _child_load(args.dtype, args.threads)
        return 0
    process.set_torch_threads(args.threads)
    from attention_core.pretrained import load_smollm2

    load_average = os.getloadavg()[0]
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"{os.cpu_count()} CPUs, load average {load_average:.1f}"
    )
    loads = {dtype: measure_loads(dtype, args.runs, args.threads) for dtype in DTYPES}
    for dtype, runs in loads.items():
        figures = ", ".join(
            f"{run['load_s']:.2f} s (cpu {run['load_cpu_s']:.2f}), {run['rss_mib']:.0f} MiB"
            for run in runs
        )
        print(f"{dtype} loads, wall (cpu), RSS: {figures}")
    decoders = {dtype: load_smollm2(weights_dtype=dtype) for dtype in DTYPES}
    step_calls, forward_calls = timed_calls(decoders)
    steps = round_robin({k: v for k, v in step_calls.items() if k[0] == "cached"}, DECODE_STEPS)
    steps |= round_robin({k: v for k, v in step_calls.items() if k[0] == "full"}, FORWARD_REPEATS)
    forwards = round_robin(forward_calls, FORWARD_REPEATS)
    for dtype in DTYPES:
        step, full = steps["cached", dtype], steps["full", dtype]
        maps, plain = forwards["maps", dtype], forwards["plain", dtype]
        print(
            f"{dtype}: cached step {_ms(step)} vs full recomputation {_ms(full)}: "
            f"x{full.wall / step.wall:.1f} faster with the cache at {PROMPT_TOKENS} tokens; "
            f"{PROMPT_TOKENS}-token forward with 270 maps {_ms(maps)}, without {_ms(plain)}"
        )
    for dtype in NARROW:
        ratio = {
            kind: source[kind, "float32"].wall / source[kind, dtype].wall
            for kind, source in (("cached", steps), ("maps", forwards), ("plain", forwards))
        }
        print(
            f"{dtype} vs float32, speed-up (wall): cached step x{ratio['cached']:.2f}, "
            f"forward with maps x{ratio['maps']:.2f}, without x{ratio['plain']:.2f}"
        )
        attention, logits = deviation(decoders["float32"], decoders[dtype])
        print(
            f"{dtype} vs float32 on the {PROMPT_TOKENS}-token paragraph: attention weights "
            f"moved by up to {attention:.4f}, logits by up to {logits:.3f}"
        )
    print(f"cache: {decoders['float32'].config.cache_bytes_per_token} bytes per token (float32)")
    print_goals(loads, steps, forwards)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
