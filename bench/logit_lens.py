"""What a head writes: the logit lens grid, every part's direct logit attribution,
one head's write read as tokens and every head's OV copying score, on SmolLM2.

Usage: ``python -m bench.logit_lens [--repeats 5] [--threads N] [--dtype bfloat16|float32]
[--copy-length 20] [--positions 6]``

SmolLM2 is loaded with exact attention on the copy test's sequence (BOS, ``--copy-length``
random tokens, the same tokens again). The run the first three read is recorded once
(:func:`attention_core.experiments.logit_lens.lens_run`, cached, timed apart); then,
round-robin after a warm-up (medians of wall clock): the lens grid as What a head writes draws
it (every layer × the last ``--positions`` positions, the page's default, × the vocabulary),
the whole prompt's lens, the attribution of the last position's logit difference to every
part, one head's write as its top and bottom 10 tokens (the induction head 18.6), and the
copying scores of all 270 heads (from the weights alone). Goals: lens ≤ 0.3 s, attribution ≤
0.1 s, one head ≤ 0.2 s, copying grid ≤ 1 s. The machine is shared: the CPU, the core count
and the load average are printed with the numbers.
"""

from __future__ import annotations

import argparse
import os
import subprocess

import torch

from attention_core.experiments import head_ablation
from attention_core.experiments.heads import as_ids
from attention_core.experiments.logit_lens import (
    direct_logit_attribution,
    head_write_tokens,
    lens_run,
    logit_lens,
    record_lens_run,
)
from attention_core.experiments.ov_copying import ov_copying_scores
from attention_core.pretrained import load_smollm2
from bench import process
from bench.decoder import round_robin
from dashboard.data.writes import LENS_POSITIONS_DEFAULT

SEED = 0
LAYER, HEAD = 18, 6  # SmolLM2's strongest induction head (the census's, tests/dashboard)
GOALS_S = {
    "lens_grid": 0.3,
    "logit_lens_all": 0.3,
    "attribution": 0.1,
    "head_tokens": 0.2,
    "copying": 1.0,
}
MS = 1000.0


def cpu_model() -> str:
    """The CPU's model name from ``lscpu`` (or ``"unknown"``)."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    names = [line.split(":", 1)[1].strip() for line in text.splitlines() if "Model name" in line]
    return names[0] if names else "unknown"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the times and PASS/MISS."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    parser.add_argument("--copy-length", type=int, default=20)
    parser.add_argument("--positions", type=int, default=LENS_POSITIONS_DEFAULT)
    args = parser.parse_args(argv)
    process.set_torch_threads(args.threads)
    decoder = load_smollm2(weights_dtype=args.dtype)
    ids = list(head_ablation.repeated_tokens(decoder, args.copy_length, SEED))
    answer, alternative = ids[1], ids[2]  # the last token came first before ids[1] (induction)
    batch = as_ids(ids)  # (1, L)
    recorded = round_robin({"record": lambda: record_lens_run(decoder, batch)}, 1)["record"]
    lens_run(decoder, ids)  # the cached run the first three calls read
    calls = {
        "lens_grid": lambda: logit_lens(decoder, ids, positions=args.positions),
        "logit_lens_all": lambda: logit_lens(decoder, ids),
        "attribution": lambda: direct_logit_attribution(decoder, ids, answer, alternative),
        "head_tokens": lambda: head_write_tokens(decoder, ids, LAYER, HEAD),
        "copying": lambda: ov_copying_scores(decoder),
    }
    times = round_robin(calls, args.repeats)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, os.cpu_count() "
        f"{os.cpu_count()}, CPU {cpu_model()}; {args.dtype} weights, {len(ids)} tokens "
        f"(the grid: the last {args.positions}); "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'recording the run (once, cached)':<36} {recorded.wall * MS:8.1f} ms")
    for name, goal in GOALS_S.items():
        wall = times[name].wall
        verdict = "PASS" if wall <= goal else "MISS"
        print(f"{name:<36} {wall * MS:8.1f} ms  {verdict} (goal ≤ {goal * MS:g} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
