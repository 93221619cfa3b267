"""Training a tiny attention model: attention_core's trainer against a plain PyTorch loop.

Usage: ``python -m bench.training [--repeats 3] [--compare]``

Times 300 Adam steps of the same model (L=16, d_model=32, 2 heads, 1 layer, batch 64, task
``shift``) three ways, interleaved and measured in one run, median of ``--repeats``:

* ``train_task`` as the page calls it (a snapshot every 10 steps: 31 probe passes with
  weights and gradients);
* ``train_task`` with only the first and last snapshots (the training loop's own cost);
* a plain PyTorch loop: ``nn.Embedding``, ``nn.Linear`` projections and
  ``F.scaled_dot_product_attention``, the same batches, one intra-op thread as the trainer
  uses, and again with torch's default thread count.

Also the time from the call to the first snapshot (what the page waits for before it can
draw). Goals: 300 steps ≤ 2 s; first snapshot ≤ 0.5 s. ``--estimate`` checks the page's
time estimate: for a few sizes it measures the cost per step as the page does
(``measure_step_cost``), then trains the run and prints the estimate, the time taken and
their ratio (the training loop only; the model and optimizer built before it are not in the
estimate). ``--compare`` then trains the
side-by-side runs of the page (scaled vs unscaled scores at d_k 256; full vs local window 3
on ``reverse``; induction with one layer and with two) over three seeds and prints what they
measured.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from attention_core.experiments import (
    TrainingConfig,
    estimate_training_seconds,
    iter_training,
    make_batch,
    measure_step_cost,
    train_task,
)
from attention_core.experiments.tasks import IGNORE
from bench import process

STEPS_GOAL_S = 2.0
FIRST_SNAPSHOT_GOAL_S = 0.5
SIZES = dict(task="shift", seq_len=16, d_model=32, heads=2, layers=1, steps=300)
COMPARE_SEEDS = (0, 1, 2)
READY_ACCURACY = 0.99
# the page's thread count (dashboard/data/training.py trains and measures under
# dashboard.runtime.threads.single_threaded; not imported here, as the data layer starts
# streamlit's caches)
TRAINING_THREADS = 1
SMALL_LR = 1e-3
# sizes whose estimate --estimate checks: the defaults, the scaling preset, a deeper model
ESTIMATE_SIZES = (
    dict(task="shift", steps=300),
    dict(task="shift", d_model=256, steps=300),
    dict(task="induction", layers=2, heads=4, d_model=64, seq_len=16, steps=300),
)


class PlainModel(nn.Module):
    """The trainer's model written directly: embeddings, SDPA blocks, readout."""

    def __init__(self, vocab: int, seq_len: int, d_model: int, heads: int, layers: int):
        super().__init__()
        self.heads = heads
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.randn(seq_len, d_model))
        self.qkv = nn.ModuleList(nn.Linear(d_model, 3 * d_model) for _ in range(layers))
        self.out = nn.ModuleList(nn.Linear(d_model, d_model) for _ in range(layers))
        self.readout = nn.Linear(d_model, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos  # (B, L, D)
        B, L, D = x.shape
        for qkv, out in zip(self.qkv, self.out, strict=True):
            q, k, v = qkv(x).view(B, L, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v)  # (B, H, L, E)
            x = x + out(y.transpose(1, 2).reshape(B, L, D))  # (B, L, D)
        return self.readout(x)  # (B, L, V)


def plain_loop(threads: int | None) -> float:
    """Seconds for 300 steps of :class:`PlainModel` on the trainer's batches."""
    config = TrainingConfig(**SIZES)
    with process.torch_threads(threads):
        start = time.perf_counter()
        torch.manual_seed(0)
        model = PlainModel(config.vocab, config.seq_len, config.d_model, config.heads, 1)
        optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
        data = torch.Generator().manual_seed(1)
        for _ in range(config.steps):
            batch = make_batch(config.task, config.batch_size, config.seq_len, data)
            logits = model(batch.tokens)  # (B, L, V)
            loss = F.cross_entropy(
                logits.reshape(-1, config.vocab), batch.targets.reshape(-1), ignore_index=IGNORE
            )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        return time.perf_counter() - start


def trainer(snapshot_every: int) -> float:
    """Seconds for ``train_task`` with the bench sizes."""
    with process.torch_threads(TRAINING_THREADS):
        start = time.perf_counter()
        train_task(**SIZES, snapshot_every=snapshot_every)
        return time.perf_counter() - start


def first_snapshot() -> float:
    """Seconds from building the config to the first snapshot of the stream."""
    with process.torch_threads(TRAINING_THREADS):
        start = time.perf_counter()
        stream = iter_training(TrainingConfig(**SIZES))
        next(stream)
        elapsed = time.perf_counter() - start
        stream.close()
        return elapsed


def measure(repeats: int) -> dict[str, float]:
    """Median seconds of each contender, interleaved so load changes hit them alike."""
    contenders = {
        "train_task, snapshot every 10": lambda: trainer(10),
        "train_task, first and last snapshot": lambda: trainer(SIZES["steps"]),
        f"plain PyTorch loop, {TRAINING_THREADS} thread": lambda: plain_loop(TRAINING_THREADS),
        f"plain PyTorch loop, default ({torch.get_num_threads()}) threads": lambda: plain_loop(
            None
        ),
        "first snapshot": first_snapshot,
    }
    trainer(10)  # warm-up: imports, allocator, first kernels
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, run in contenders.items():
            times[name].append(run())
    return {name: statistics.median(values) for name, values in times.items()}


def report(medians: dict[str, float]) -> None:
    """Print each time, its ratio to the plain loop, and the goals."""
    base_name = f"plain PyTorch loop, {TRAINING_THREADS} thread"
    base = medians[base_name]
    print(f"300 steps at L={SIZES['seq_len']}, d_model={SIZES['d_model']}, {SIZES['heads']} heads")
    print(f"{'':<44}{'seconds':>9}{'× plain':>9}")
    for name, seconds in medians.items():
        ratio = "" if name == "first snapshot" else f"{seconds / base:>9.2f}"
        print(f"{name:<44}{seconds:>9.3f}{ratio}")
    goals = (
        (
            "300 steps (snapshot every 10) ≤ 2 s",
            medians["train_task, snapshot every 10"],
            STEPS_GOAL_S,
        ),
        ("first snapshot ≤ 0.5 s", medians["first snapshot"], FIRST_SNAPSHOT_GOAL_S),
    )
    for name, value, target in goals:
        print(f"{name:<44}{value:>9.3f}  {'PASS' if value <= target else 'MISS'}")


def _summary(runs) -> str:
    """Mean over seeds: final accuracy, step reaching 99% (or never), initial W_Q/W_K grads."""
    acc = statistics.mean(r.final.accuracy for r in runs)
    ready = [
        next((s.step for s in r.snapshots if s.accuracy >= READY_ACCURACY), None) for r in runs
    ]
    grad_q = statistics.mean(float(r.snapshots[0].grad_norms[0, 0]) for r in runs)
    grad_k = statistics.mean(float(r.snapshots[0].grad_norms[0, 1]) for r in runs)
    match = statistics.mean(float(r.final.match.max()) for r in runs)
    later = statistics.mean(
        statistics.median(float(s.grad_norms[0, :2].mean()) for s in r.snapshots[1:]) for r in runs
    )
    return (
        f"acc {acc:.3f}  match {match:.2f}  step to 99%: {ready}  "
        f"|dW_Q|,|dW_K| step 0: {grad_q:.3f}, {grad_k:.3f}; median after: {later:.4f}"
    )


def compare() -> None:
    """Train the page's two side-by-side comparisons over three seeds; print what they show."""
    print(f"\nscaled vs unscaled scores, d_k 256 (1 head, d_model 256), seeds {COMPARE_SEEDS}")
    for task, L in (("shift", 8), ("shift", 16), ("reverse", 8), ("reverse", 16)):
        for scaled in (True, False):
            runs = [
                train_task(task, scaled=scaled, d_model=256, seq_len=L, seed=s)
                for s in COMPARE_SEEDS
            ]
            label = f"{task} L={L} {'scaled' if scaled else 'unscaled'}"
            print(f"  {label:<24}{_summary(runs)}")
    print("  the same at learning rate 1e-3 (Adam's step on the scores is sqrt(d_k) = 16× larger")
    print("  without the scale):")
    for scaled in (True, False):
        runs = [
            train_task("shift", scaled=scaled, d_model=256, lr=SMALL_LR, seed=s)
            for s in COMPARE_SEEDS
        ]
        label = f"shift L=8 {'scaled' if scaled else 'unscaled'} lr 1e-3"
        print(f"  {label:<24}{_summary(runs)}")
    print(f"\nfull vs local (window 3) on reverse, L=8, seeds {COMPARE_SEEDS}")
    for variant, params in (("scaled", {}), ("local", {"window_size": 3})):
        runs = [train_task("reverse", variant=variant, seed=s, **params) for s in COMPARE_SEEDS]
        print(f"  {variant:<24}{_summary(runs)}")
    print(f"\ninduction, L=16, 600 steps, 1 layer vs 2 layers, seeds {COMPARE_SEEDS}")
    for layers in (1, 2):
        runs = [
            train_task("induction", layers=layers, seq_len=16, steps=600, seed=s)
            for s in COMPARE_SEEDS
        ]
        print(f"  {layers} layer(s){'':<15}{_summary(runs)}")
    # how far a window reaches: the mirrored key of query i is |L - 1 - 2i| away
    reachable = sum(abs(8 - 1 - 2 * i) <= 1 for i in range(8)) / 8
    print(f"  (queries whose mirrored key lies in a window of 3 at L=8: {reachable:.2f})")
    print(f"  chance accuracy at vocabulary 16: {1 / 16:.3f}; ln 16 = {math.log(16):.2f}")


def check_estimate() -> None:
    """For each of :data:`ESTIMATE_SIZES`: the estimate from a measured cost per step beside
    the time the run's loop took, measured one after the other."""
    print(f"\n{'run':<58}{'estimate s':>11}{'took s':>9}{'ratio':>7}")
    for sizes in ESTIMATE_SIZES:
        config = TrainingConfig(**sizes)
        with process.torch_threads(TRAINING_THREADS):  # as the page trains and measures
            cost = measure_step_cost(config)
            estimate = estimate_training_seconds(config, cost)
            stream = iter_training(config)
            next(stream)  # the first snapshot, before the loop the estimate covers
            start = time.perf_counter()
            for _ in stream:
                pass
            took = time.perf_counter() - start
        label = ", ".join(f"{k} {v}" for k, v in sizes.items())
        print(f"{label:<58}{estimate:>11.2f}{took:>9.2f}{took / estimate:>7.2f}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bench.training``. Returns 0 (a MISS is reported)."""
    parser = argparse.ArgumentParser(prog="python -m bench.training", description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compare", action="store_true", help="also run the comparisons")
    parser.add_argument("--estimate", action="store_true", help="check the time estimate")
    args = parser.parse_args(argv)
    report(measure(args.repeats))
    if args.estimate:
        check_estimate()
    if args.compare:
        compare()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
