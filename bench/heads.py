"""Heads at work: the census, an ablated forward and attribution against the
forward passes they build on, side by side in one run.

Usage: ``python -m bench.heads [--repeats 5] [--threads N]``

The decoder is loaded as the page loads it (int4 weights, exact attention). Attribution
needs a backward pass, which torch's int4 kernel cannot give, so it runs on the bfloat16
decoder and is compared with that decoder's plain forward (and, for reference, with the
int4 one). Every call runs on the same 64 tokens (BOS and random tokens repeated, as the
copy test) and the calls are timed round-robin (one of each in turn, medians of wall clock
and of this process's CPU time). Goals, as ratios of CPU-time medians: census ≤ 1.5× a
forward with maps, ablated forward (5 heads) ≤ 1.15× a plain forward, attribution ≤ 4× a
plain forward. The machine is shared: the load average is printed with the numbers.
"""

from __future__ import annotations

import argparse
import os

import torch

from attention_core.experiments import head_ablation, heads
from attention_core.pretrained import load_smollm2
from bench import process
from bench.decoder import Timing, round_robin

TOKENS = 64
ABLATED = ((18, 6), (17, 4), (17, 5), (17, 3), (18, 7))
GOALS = {"census": 1.5, "ablated": 1.15, "attribution": 4.0}


def _row(name: str, numerator: Timing, denominator: Timing, goal: float | None) -> str:
    wall, cpu = numerator.wall / denominator.wall, numerator.cpu / denominator.cpu
    verdict = "" if goal is None else ("PASS" if cpu <= goal else "MISS") + f" (goal ≤ {goal}×)"
    return f"{name:<44} wall {wall:5.2f}×  cpu {cpu:5.2f}×  {verdict}"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the ratios with PASS/MISS."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    args = parser.parse_args(argv)
    process.set_torch_threads(args.threads)
    int4 = load_smollm2(weights_dtype="int4")
    bf16 = load_smollm2(weights_dtype="bfloat16")
    ids = head_ablation.repeated_tokens(int4, TOKENS // 2, 0)[:TOKENS]
    batch = heads.as_ids(ids)
    calls = {
        "forward": lambda: int4(batch),
        "forward_maps": lambda: int4(batch, need_weights=True),
        "census": lambda: heads.census(int4, ids),
        "ablated": lambda: int4(batch, ablate=ABLATED),
        "bf16_forward": lambda: bf16(batch),
        "attribution": lambda: head_ablation.attribution(bf16, ids),
    }
    times = round_robin(calls, args.repeats)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {TOKENS} tokens, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    for name, timing in times.items():
        print(f"  {name:<14} wall {timing.wall * 1e3:8.1f} ms  cpu {timing.cpu * 1e3:8.1f} ms")
    census, maps = times["census"], times["forward_maps"]
    print(_row("census / forward with maps (int4)", census, maps, GOALS["census"]))
    ablated, plain = times["ablated"], times["forward"]
    print(_row("ablated forward / plain forward (int4)", ablated, plain, GOALS["ablated"]))
    attribution, bf16_plain = times["attribution"], times["bf16_forward"]
    print(_row("attribution / plain forward (bf16)", attribution, bf16_plain, GOALS["attribution"]))
    print(
        _row(
            "attribution (bf16) / plain forward (int4)",
            times["attribution"],
            times["forward"],
            None,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
