"""Training runs of the Watch-it-learn page: streamed while they train, kept by configuration.

A run is described whole by a frozen :class:`attention_core.experiments.TrainingConfig`. The
page streams a fresh run's snapshots (:func:`stream_run`) to draw progress as it trains; the
finished run is then kept in one server-wide store (a ``st.cache_resource`` dict, bounded),
so the same configuration, from any session or a copied link, is shown without training
again (:func:`finished_run`). Runs are deterministic on CPU, so a run trained again after it
left the store is the same run. A run that diverged is kept with its divergence (the
snapshots up to it), so it is named, not shown as a result.

Before training, :func:`training_time` estimates how long the runs will take from a cost per
step **measured** on this server for the run's own sizes (a few timed steps, cached by shape:
:func:`step_cost`), and says when that is over :data:`MAX_TRAINING_SECONDS`, the most one
Train press may take on a shared server; the page then refuses, as it does a run over the
memory budget.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import streamlit as st

from attention_core import get_variant
from attention_core.experiments import (  # noqa: F401 (TASKS re-exported)
    PROJECTIONS,
    TASKS,
    Snapshot,
    TrainingConfig,
    TrainingRun,
    iter_training,
    probe_batch,
    target_pattern,
)
from attention_core.experiments.training import (  # noqa: F401 (re-exported)
    DIVERGENCE_FACTOR,
    LOSS_EXPLODED,
    LOSS_NOT_FINITE,
    Divergence,
)
from attention_core.experiments.training_cost import (  # noqa: F401 (StepCost re-exported)
    StepCost,
    cost_config,
    estimate_training_seconds,
    measure_step_cost,
)
from dashboard.data.tables import readonly
from dashboard.runtime import threads

MAX_STORED_RUNS = 32
# the most one Train press may train for (all its runs together), estimated before it
# starts: the largest settings (L 32, 4 layers, d_model 256, 16 heads, 2,000 steps) measured
# about 640 s a run on this 2-core server under load; the defaults about 1 s
MAX_TRAINING_SECONDS = 120.0
STEP_COST_TTL_S = 600  # a measured cost is measured again after this (the load changes)


@dataclass
class _RunStore:
    """Finished runs by configuration, oldest dropped first; one lock for all sessions."""

    runs: OrderedDict = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)


@st.cache_resource(show_spinner=False)
def _store() -> _RunStore:
    return _RunStore()


def finished_run(config: TrainingConfig) -> TrainingRun | None:
    """The finished run of ``config`` if one was trained on this server, else ``None``."""
    store = _store()
    with store.lock:
        run = store.runs.get(config)
        if run is not None:
            store.runs.move_to_end(config)
        return run


def _keep(run: TrainingRun) -> None:
    store = _store()
    with store.lock:
        store.runs[run.config] = run
        store.runs.move_to_end(run.config)
        while len(store.runs) > MAX_STORED_RUNS:
            store.runs.popitem(last=False)


def stream_run(config: TrainingConfig) -> Generator[Snapshot, None, Divergence | None]:
    """Train ``config``, yielding each snapshot as it is made; keep the run when it ends
    (finished, or stopped by a divergence, which it then carries).

    Args:
        config: the run.

    Yields:
        :class:`Snapshot` at steps 0, every ``snapshot_every`` and the last reached, with
        read-only arrays.

    Returns:
        The run's :class:`Divergence`, or ``None`` when it ran every step.

    Raises:
        ValueError: (MemoryBudgetError) before training, when the run is over the budget.
    """
    snapshots: list[Snapshot] = []
    divergence = yield from _read_only(single_threaded_steps(iter_training(config)), snapshots)
    target = readonly(training_target(config))
    _keep(
        TrainingRun(config=config, snapshots=tuple(snapshots), target=target, divergence=divergence)
    )
    return divergence


def single_threaded_steps(
    stream: Generator[Snapshot, None, Divergence | None],
) -> Generator[Snapshot, None, Divergence | None]:
    """Pass on ``stream``'s snapshots, each computed on one torch thread
    (:func:`dashboard.runtime.threads.single_threaded`, the process's one owner of the thread
    count), holding nothing while the page draws it: the hold is taken for each ``next`` and
    given back before the yield, so other runs get the usual count back meanwhile.

    Args:
        stream: a training run's snapshots (:func:`attention_core.experiments.iter_training`).

    Yields:
        Its snapshots, unchanged, in order.

    Returns:
        What ``stream`` returns (the run's divergence, or ``None``).
    """
    while True:
        # one intra-op thread while a run trains: the model's ops are too small to split, and
        # on a shared machine a second thread mostly waits (300 steps took 60 s with 2
        # threads, 0.7 s with 1, when other processes kept both cores busy)
        with threads.single_threaded():
            try:
                snapshot = next(stream)
            except StopIteration as stop:
                return stop.value
        yield snapshot


def _read_only(stream: Generator, into: list) -> Generator[Snapshot, None, Divergence | None]:
    """Pass on ``stream``'s snapshots with read-only arrays, appended to ``into`` too, and
    return what it returns."""
    while True:
        try:
            snapshot = next(stream)
        except StopIteration as stop:
            return stop.value
        for array in (snapshot.weights, snapshot.match, snapshot.grad_norms):
            readonly(array)
        into.append(snapshot)
        yield snapshot


def unscaled_scores(config: TrainingConfig) -> bool:
    """Whether ``config``'s scores are not scaled by 1/√d_k (asked for, or the variant's own
    scale is 1)."""
    if config.scaled is not None:
        return not config.scaled
    return get_variant(config.variant).default_scale == "one"


def step_cost(config: TrainingConfig) -> StepCost:
    """The cost of one training step and one snapshot of ``config``'s shape, measured on this
    server (a few timed steps on the page's thread count), cached by shape: runs that differ
    only in learning rate, seed or step count share one measurement for
    :data:`STEP_COST_TTL_S`.

    Args:
        config: the run.

    Returns:
        StepCost in seconds.

    Raises:
        ValueError: (MemoryBudgetError) when the run is over the memory budget.
    """
    return _measured_cost(cost_config(config))


@st.cache_data(max_entries=64, ttl=STEP_COST_TTL_S, show_spinner=False)
def _measured_cost(shape: TrainingConfig) -> StepCost:
    with threads.single_threaded():  # as the run will train (single_threaded_steps)
        return measure_step_cost(shape)


@dataclass(frozen=True)
class TrainingTime:
    """How long training some runs will take, and whether the server allows it.

    Attributes:
        seconds: the estimate for all the runs, one after another.
        train_step_s: the measured cost of one training step, per run.
        limit_s: :data:`MAX_TRAINING_SECONDS`.
    """

    seconds: float
    train_step_s: tuple[float, ...]
    limit_s: float = MAX_TRAINING_SECONDS

    @property
    def over(self) -> bool:
        """The estimate is over the limit: the page refuses to train."""
        return self.seconds > self.limit_s


def estimate_time(
    configs: Sequence[TrainingConfig],
    costs: Sequence[StepCost],
    limit_s: float = MAX_TRAINING_SECONDS,
) -> TrainingTime:
    """The time of ``configs`` trained one after another, at the given costs per step.

    Args:
        configs: the runs. costs: one :class:`StepCost` per run. limit_s: the limit.

    Returns:
        TrainingTime: the sum of each run's steps × step + snapshots × snapshot.

    Raises:
        ValueError: when ``costs`` and ``configs`` differ in length.
    """
    if len(configs) != len(costs):
        raise ValueError(f"{len(configs)} runs but {len(costs)} costs")
    seconds = sum(estimate_training_seconds(c, k) for c, k in zip(configs, costs, strict=True))
    return TrainingTime(float(seconds), tuple(k.train_step_s for k in costs), limit_s)


def training_time(configs: Sequence[TrainingConfig]) -> TrainingTime:
    """The estimated time of ``configs``, from costs measured on this server (:func:`step_cost`).

    Args:
        configs: the runs to train.

    Returns:
        TrainingTime.

    Raises:
        ValueError: (MemoryBudgetError) when a run is over the memory budget.
    """
    return estimate_time(configs, [step_cost(c) for c in configs])


@st.cache_data(max_entries=64, show_spinner=False)
def training_target(config: TrainingConfig) -> np.ndarray:
    """The task's correct attention averaged over the probe batch: float64 (L, L)."""
    return target_pattern(probe_batch(config).target_keys)


def curves_table(snapshots: tuple[Snapshot, ...] | list[Snapshot]) -> pd.DataFrame:
    """Loss and accuracy per snapshot: columns ``step``, ``metric`` (loss|accuracy), ``value``."""
    rows = [
        {"step": s.step, "metric": metric, "value": float(getattr(s, metric))}
        for s in snapshots
        for metric in ("loss", "accuracy")
    ]
    return pd.DataFrame(rows, columns=["step", "metric", "value"])


def match_table(snapshots: tuple[Snapshot, ...] | list[Snapshot]) -> pd.DataFrame:
    """Weight on the correct key per head: columns ``step``, ``layer``, ``head``, ``match``."""
    rows = [
        {"step": s.step, "layer": layer, "head": head, "match": float(s.match[layer, head])}
        for s in snapshots
        for layer in range(s.match.shape[0])
        for head in range(s.match.shape[1])
    ]
    return pd.DataFrame(rows, columns=["step", "layer", "head", "match"])


def grad_table(snapshots: tuple[Snapshot, ...] | list[Snapshot]) -> pd.DataFrame:
    """Gradient norms: columns ``step``, ``layer``, ``tensor`` (W_Q|W_K|W_V), ``grad_norm``."""
    rows = [
        {
            "step": s.step,
            "layer": layer,
            "tensor": name,
            "grad_norm": float(s.grad_norms[layer, i]),
        }
        for s in snapshots
        for layer in range(s.grad_norms.shape[0])
        for i, name in enumerate(PROJECTIONS)
    ]
    return pd.DataFrame(rows, columns=["step", "layer", "tensor", "grad_norm"])
