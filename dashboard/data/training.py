"""Training runs of the Watch-it-learn page: streamed while they train, kept by configuration.

A run is described whole by a frozen :class:`attention_core.experiments.TrainingConfig`. The
page streams a fresh run's snapshots (:func:`stream_run`) to draw progress as it trains; the
finished run is then kept in one server-wide store (a ``st.cache_resource`` dict, bounded),
so the same configuration, from any session or a copied link, is shown without training
again (:func:`finished_run`). Runs are deterministic on CPU, so a run trained again after it
left the store is the same run.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import streamlit as st

from attention_core.experiments import (
    PROJECTIONS,
    Snapshot,
    TrainingConfig,
    TrainingRun,
    iter_training,
    probe_batch,
    target_pattern,
)
from dashboard.data.tables import readonly

MAX_STORED_RUNS = 32
# intra-op threads while a run trains: the model's ops are too small to split, and on a shared
# machine a second thread mostly waits (300 steps took 60 s with 2 threads, 0.7 s with 1,
# when other processes kept both cores busy)
TRAINING_THREADS = 1


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


def stream_run(config: TrainingConfig) -> Iterator[Snapshot]:
    """Train ``config``, yielding each snapshot as it is made; keep the finished run.

    Args:
        config: the run.

    Yields:
        :class:`Snapshot` at steps 0, every ``snapshot_every`` and the last, with read-only
        arrays.

    Raises:
        ValueError: (MemoryBudgetError) before training, when the run is over the budget.
    """
    snapshots = []
    for snapshot in iter_training(config, threads=TRAINING_THREADS):
        for array in (snapshot.weights, snapshot.match, snapshot.grad_norms):
            readonly(array)
        snapshots.append(snapshot)
        yield snapshot
    target = readonly(training_target(config))
    _keep(TrainingRun(config=config, snapshots=tuple(snapshots), target=target))


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
