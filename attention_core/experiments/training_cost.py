"""How long a training run will take, before it runs: a cost per step measured on this
machine for the run's own sizes, and the arithmetic from there to the whole run.

A run of ``steps`` Adam steps with ``n`` snapshots costs about
``steps × train_step_s + n × snapshot_s`` (:func:`estimate_training_seconds`). Both costs
are measured (:func:`measure_step_cost`) by building the run's model and timing a few of
its training steps and a snapshot: the time depends on the variant, the sizes and on how
busy the machine is, which no formula knows. The learning rate and the seed do not change
the work done per step.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, replace

from attention_core.experiments.tasks import make_batch
from attention_core.experiments.training import (
    LossWatch,
    optimizing,
    set_up,
    take_snapshot,
    train_step,
)
from attention_core.experiments.training_model import DEFAULT_LR, TrainingConfig
from attention_core.validation import check_float, check_int

COST_STEPS = 5  # training steps timed (after one untimed step); their mean is the cost


@dataclass(frozen=True)
class StepCost:
    """Seconds one training step and one snapshot take.

    Attributes:
        train_step_s: one Adam step on a batch (forward, backward, update), > 0.
        snapshot_s: one snapshot on the probe batch (with weights and gradients), > 0.
    """

    train_step_s: float
    snapshot_s: float

    def __post_init__(self) -> None:
        """Refuse a cost that is not a positive finite number.

        Raises:
            ValueError: naming the bad value.
        """
        check_float("train_step_s", self.train_step_s, low=0.0, low_open=True)
        check_float("snapshot_s", self.snapshot_s, low=0.0, low_open=True)


def estimate_training_seconds(config: TrainingConfig, cost: StepCost) -> float:
    """Seconds a run of ``config`` takes at ``cost``: steps × step + snapshots × snapshot.

    Args:
        config: the run (its ``steps`` and ``snapshot_steps`` count).
        cost: the measured (or given) cost of a step and of a snapshot.

    Returns:
        seconds (float), the training loop only (not building the model or the optimizer).
    """
    return config.steps * cost.train_step_s + len(config.snapshot_steps) * cost.snapshot_s


def cost_config(config: TrainingConfig) -> TrainingConfig:
    """``config`` with what does not change the cost per step set to one value (the
    learning rate, the score scale, the seed, the step count), so runs of one shape share a
    measurement.

    Args:
        config: the run.

    Returns:
        TrainingConfig of ``COST_STEPS + 1`` steps, snapshots at the first and last.
    """
    steps = COST_STEPS + 1
    return replace(config, steps=steps, snapshot_every=steps, lr=DEFAULT_LR, scaled=None, seed=0)


def measure_step_cost(config: TrainingConfig, *, steps: int = COST_STEPS) -> StepCost:
    """Time a few training steps and a snapshot of ``config``'s model on this machine.

    One untimed snapshot and one untimed step come first (the first calls pay one-off
    costs: torch's first optimizer imports torch._dynamo); then one snapshot and ``steps``
    steps (each drawing its batch, as the run does) are timed, and a step's cost is their
    mean (a busy machine's pauses hit the run too, so they count). It measures on torch's
    intra-op threads as the caller has set them (to measure what a run will cost, call it
    as the run will train): the library never sets a thread count.

    Args:
        config: the run whose sizes, variant and task are measured.
        steps: training steps timed, ≥ 1.

    Returns:
        StepCost in seconds.

    Raises:
        ValueError: for a bad ``steps``; MemoryBudgetError (a ValueError) when the run is
            over the memory budget.
    """
    steps = check_int("steps", steps, low=1)
    model, probe, mask = set_up(config)
    start = take_snapshot(model, probe, mask, 0).loss  # untimed: first calls
    began = time.perf_counter()
    take_snapshot(model, probe, mask, 0)
    snapshot_s = time.perf_counter() - began
    optimizer, data = optimizing(config, model)
    watch = LossWatch(start_loss=start, last_finite_loss=start)
    times = []
    for _ in range(steps + 1):
        began = time.perf_counter()
        batch = make_batch(config.task, config.batch_size, config.seq_len, data)
        train_step(model, optimizer, batch, mask, watch)
        times.append(time.perf_counter() - began)
    return StepCost(train_step_s=statistics.mean(times[1:]), snapshot_s=snapshot_s)
