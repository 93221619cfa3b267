"""Why a head attends: one cell's score parts and the whole key-side ranking after
the cached run, against one forward pass of the same decoder, side by side in one run.

Usage: ``python -m bench.score_parts [--repeats 7] [--threads N] [--dtype bfloat16|float32]``

SmolLM2 is loaded as the Heads page's "why" section runs it (bfloat16 weights, exact
attention) on the copy test's sequence (BOS, 20 random tokens, the same 20 again). The run the
parts are read from is recorded once (:func:`attention_core.experiments.score_run.score_run`,
cached); then, round-robin after a warm-up (medians of wall clock): one forward pass with every
attention map, ``score_parts`` of one cell (the strongest induction head at a query of the
second copy and its induction target), and ``key_contrast`` of that cell (every key-side part
ranked over every allowed key). Goals: one cell ≤ 50 ms, the whole key-side ranking ≤ 100 ms;
each is also printed as a ratio to the forward. The machine is shared: the load average is
printed with the numbers.
"""

from __future__ import annotations

import argparse
import os

import torch

from attention_core.experiments import head_ablation, heads
from attention_core.experiments.score_parts import key_contrast, score_parts
from attention_core.experiments.score_run import record_run, score_run
from attention_core.pretrained import load_smollm2
from bench import process
from bench.decoder import round_robin

COPY_LENGTH = 20
SEED = 0
LAYER, HEAD = 18, 6  # SmolLM2's strongest induction head (the census's, tests/dashboard)
GOALS_MS = {"score_parts": 50.0, "key_contrast": 100.0}
MS = 1000.0


def _cell(length: int) -> tuple[int, int]:
    """A query in the second copy and its induction target: the token after the earlier
    occurrence of the query's token (BOS is position 0)."""
    query = 1 + length + length // 2
    return query, query - length + 1


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the times, ratios and PASS/MISS."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    args = parser.parse_args(argv)
    process.set_torch_threads(args.threads)
    decoder = load_smollm2(weights_dtype=args.dtype)
    ids = list(head_ablation.repeated_tokens(decoder, COPY_LENGTH, SEED))
    batch = heads.as_ids(ids)
    query, key = _cell(COPY_LENGTH)
    cell = {"layer": LAYER, "head": HEAD, "query": query, "key": key}
    recorded = round_robin({"record": lambda: record_run(decoder, ids)}, 1)["record"]
    score_run(decoder, ids)  # the cached run every call below reads
    calls = {
        "forward": lambda: decoder(batch, need_weights=True),
        "score_parts": lambda: score_parts(decoder, ids, **cell),
        "key_contrast": lambda: key_contrast(decoder, ids, **cell),
    }
    times = round_robin(calls, args.repeats)
    parts = score_parts(decoder, ids, **cell)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.dtype} weights, "
        f"{len(ids)} tokens, head {LAYER}.{HEAD}, query {query}, key {key}, "
        f"{len(parts.names)} parts; load average {os.getloadavg()[0]:.2f}"
    )
    forward = times["forward"].wall
    print(f"{'forward with every map':<36} {forward * MS:8.1f} ms")
    print(f"{'recording the run (once, cached)':<36} {recorded.wall * MS:8.1f} ms")
    for name, goal in GOALS_MS.items():
        wall = times[name].wall * MS
        verdict = "PASS" if wall <= goal else "MISS"
        print(
            f"{name:<36} {wall:8.1f} ms  {wall / (forward * MS):5.2f}× the forward  "
            f"{verdict} (goal ≤ {goal:g} ms)"
        )
    gap = abs(float(parts.total) - float(parts.score)) / max(abs(float(parts.score)), 1e-12)
    print(f"the parts sum to the score within {gap:.1e} relative")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
