"""Train the tiny attention-only transformer on a synthetic task and watch its heads form.

The model and the run's configuration are :mod:`~attention_core.experiments.training_model`;
this module is the loop: the run is set up (:func:`set_up`: budget, model, probe batch, mask),
trained with Adam on fresh batches of one of the tasks of
:mod:`~attention_core.experiments.tasks`, and every ``snapshot_every`` steps (and at step 0 and
at the end) a :class:`Snapshot` records, on one fixed probe batch, the loss, the accuracy,
every head's weights averaged over the batch, how much weight each head puts on the correct
key, and the gradient norms of W_Q, W_K, W_V per layer.

Everything is drawn from generators seeded by ``seed`` (never torch's global one), so the
same configuration gives the same snapshots on CPU, and runs in other threads (one per
dashboard session) cannot disturb it. :func:`iter_training` yields the snapshots as they are
made, so a page can draw the first one before training ends.

A run stops at the first loss that breaks :mod:`~attention_core.experiments.divergence`'s
rule; it keeps the snapshots so far and says where and why (``TrainingRun.divergence``).
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from attention_core import masks
from attention_core.device import check_budget
from attention_core.experiments.divergence import (  # noqa: F401 (re-exported)
    DIVERGENCE_FACTOR,
    LOSS_EXPLODED,
    LOSS_NOT_FINITE,
    Divergence,
    LossWatch,
    divergence_at,
    drain,
)
from attention_core.experiments.scaling import derived_seed
from attention_core.experiments.tasks import (
    IGNORE,
    TaskBatch,
    make_batch,
    pattern_match,
    target_pattern,
)
from attention_core.experiments.training_model import (
    DATA_STREAM,
    DEFAULT_BATCH,
    DEFAULT_LR,
    DEFAULT_SNAPSHOT_EVERY,
    PROBE_BATCH,
    PROBE_STREAM,
    TinyAttentionModel,
    TrainingConfig,
    estimate_training_bytes,
)

PROJECTIONS = ("W_Q", "W_K", "W_V")


@dataclass(frozen=True, eq=False)
class Snapshot:
    """The model on the probe batch after ``step`` Adam steps.

    Attributes:
        step: Adam steps taken (0 = the initial weights).
        loss: cross-entropy on the probe batch's scored positions.
        accuracy: fraction of the probe batch's scored positions predicted right.
        weights: float32 (layers, heads, L, L), attention weights averaged over the batch.
        match: float32 (layers, heads), mean weight each head puts on the correct key
            (per example, over scored queries): 1 is the task's pattern exactly.
        grad_norms: float32 (layers, 3), Frobenius norms of the probe loss's gradient
            with respect to W_Q, W_K, W_V (see :data:`PROJECTIONS`).
    """

    step: int
    loss: float
    accuracy: float
    weights: np.ndarray
    match: np.ndarray
    grad_norms: np.ndarray


@dataclass(frozen=True, eq=False)
class TrainingRun:
    """A run, finished or stopped by divergence.

    Attributes:
        config: the configuration it ran.
        snapshots: in step order, from step 0 to ``config.steps`` or to the divergence.
        target: float64 (L, L), the correct attention averaged over the probe batch.
        divergence: where and why training stopped early; ``None`` when every step ran.
    """

    config: TrainingConfig
    snapshots: tuple[Snapshot, ...] = field(default_factory=tuple)
    target: np.ndarray | None = None
    divergence: Divergence | None = None

    @property
    def final(self) -> Snapshot:
        """The last snapshot."""
        return self.snapshots[-1]

    @property
    def diverged_at(self) -> int | None:
        """The step at which the run diverged, or ``None``."""
        return None if self.divergence is None else self.divergence.step


def _loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over scored positions: logits (B, L, V), targets (B, L) -> scalar."""
    V = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=IGNORE)


def _grad_norms(model: TinyAttentionModel) -> np.ndarray:
    """(layers, 3) Frobenius norms of the gradients of W_Q, W_K, W_V (0 when none)."""
    rows = []
    for block in model.blocks:
        layers = (block.q_linear, block.k_linear, block.v_linear)
        rows.append([0.0 if m.weight.grad is None else m.weight.grad.norm().item() for m in layers])
    return np.asarray(rows, dtype=np.float32)


def take_snapshot(
    model: TinyAttentionModel, probe: TaskBatch, mask: torch.Tensor | None, step: int
) -> Snapshot:
    """Measure ``model`` on the probe batch: loss, accuracy, weights, match, gradient norms.

    Leaves no gradient behind (the training step sets its own).

    Args:
        model: the model. probe: the fixed probe batch, tensors (P, L). mask: (L, L) or
            None. step: Adam steps taken so far.

    Returns:
        Snapshot (see its attributes for shapes).
    """
    model.zero_grad(set_to_none=True)
    logits, weights = model(probe.tokens, mask, need_weights=True)  # (P, L, V), [(P, H, L, L)]
    loss = _loss(logits, probe.targets)
    loss.backward()
    grad_norms = _grad_norms(model)
    model.zero_grad(set_to_none=True)
    with torch.no_grad():
        scored = probe.scored  # (P, L)
        right = (logits.argmax(dim=-1) == probe.targets) & scored  # (P, L)
        accuracy = right.sum().item() / max(scored.sum().item(), 1)
        stacked = torch.stack([w.detach() for w in weights])  # (layers, P, H, L, L)
        match = torch.stack([pattern_match(w.detach(), probe.target_keys) for w in weights])
    return Snapshot(
        step=step,
        loss=loss.item(),
        accuracy=float(accuracy),
        weights=stacked.mean(dim=1).numpy().astype(np.float32),  # (layers, H, L, L)
        match=match.numpy().astype(np.float32),  # (layers, H)
        grad_norms=grad_norms,
    )


def probe_batch(config: TrainingConfig) -> TaskBatch:
    """The fixed batch every snapshot of ``config``'s run is measured on (P = 128 sequences).

    Args:
        config: the run.

    Returns:
        TaskBatch of (128, L) tensors, drawn from a seed derived from ``config.seed``.
    """
    generator = torch.Generator().manual_seed(derived_seed(config.seed, PROBE_STREAM))
    return make_batch(config.task, PROBE_BATCH, config.seq_len, generator)


def iter_training(config: TrainingConfig) -> Generator[Snapshot, None, Divergence | None]:
    """Train as ``config`` says, yielding each snapshot as soon as it is made.

    The first snapshot (step 0, the initial weights) comes before any training step. Every
    loss is checked by a :class:`LossWatch` (and its gradient, before Adam uses it); at a
    divergence training stops, a snapshot of the model there is yielded when finite, and
    the generator returns the :class:`Divergence` (``drain`` or :func:`run_training`).

    The run computes on torch's intra-op threads as the caller has set them: the library
    never sets a thread count (the caller owns the process; the dashboard's is
    ``dashboard/runtime/``).

    Args:
        config: the run (validated on creation).

    Yields:
        Snapshot at the steps of ``config.snapshot_steps`` reached, in order.

    Returns:
        The :class:`Divergence` that stopped the run, or ``None`` when it ran every step.

    Raises:
        MemoryBudgetError: (a ValueError) before training, when the estimated peak bytes
            exceed the memory budget (raised at the first ``next``).
    """
    model, probe, mask = set_up(config)
    first = take_snapshot(model, probe, mask, 0)
    yield first
    # made after the first snapshot: building torch's first optimizer in a process imports
    # torch._dynamo (seconds), which the initial snapshot need not wait for
    optimizer, data = optimizing(config, model)
    watch = LossWatch(start_loss=first.loss, last_finite_loss=first.loss)
    done = 0
    for step in config.snapshot_steps[1:]:
        shown = done
        while done < step and watch.divergence is None:
            batch = make_batch(config.task, config.batch_size, config.seq_len, data)
            if train_step(model, optimizer, batch, mask, watch.at(done)):
                done += 1
        fresh = done > shown  # a step that diverged at once leaves the model as shown
        snapshot = checked_snapshot(model, probe, mask, watch.at(done)) if fresh else None
        if snapshot is not None:
            yield snapshot
        if watch.divergence is not None:
            return watch.divergence
    return None


def set_up(config: TrainingConfig) -> tuple[TinyAttentionModel, TaskBatch, torch.Tensor | None]:
    """What a run of ``config`` starts from: its budget checked, then its model at the
    initial weights, its probe batch and its mask.

    Returns:
        (model, probe batch of (128, L) tensors, mask (L, L) bool for a causal task or None).

    Raises:
        MemoryBudgetError: (a ValueError) when the run is over the memory budget.
    """
    check_training_budget(config)
    model = TinyAttentionModel(config, torch.Generator().manual_seed(config.seed))
    mask = masks.causal(config.seq_len) if config.causal else None  # (L, L) or None
    return model, probe_batch(config), mask


def optimizing(
    config: TrainingConfig, model: TinyAttentionModel
) -> tuple[torch.optim.Optimizer, torch.Generator]:
    """The run's Adam over ``model``'s parameters and the generator its training batches
    are drawn from (a seed derived from ``config.seed``).

    Returns:
        (optimizer, generator for :func:`~attention_core.experiments.tasks.make_batch`).
    """
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    return optimizer, torch.Generator().manual_seed(derived_seed(config.seed, DATA_STREAM))


def check_training_budget(config: TrainingConfig) -> None:
    """Refuse ``config`` before it allocates anything.

    Raises:
        MemoryBudgetError: (a ValueError) when its estimated peak bytes exceed the budget.
    """
    check_budget(
        estimate_training_bytes(config),
        f"training {config.layers} layer(s) × {config.heads} head(s) at L={config.seq_len}, "
        f"batch {config.batch_size}",
        hint="lower the batch size, sequence length, heads, layers or d_model",
    )


def checked_snapshot(
    model: TinyAttentionModel, probe: TaskBatch, mask: torch.Tensor | None, watch: LossWatch
) -> Snapshot | None:
    """A snapshot at ``watch.step``, its probe loss checked by ``watch`` unless the run has
    already diverged.

    Returns:
        The snapshot, or ``None`` when any of its values is not finite (a NaN heatmap).
    """
    snapshot = take_snapshot(model, probe, mask, watch.step)
    arrays = (snapshot.weights, snapshot.match, snapshot.grad_norms)
    finite = all(bool(np.isfinite(a).all()) for a in arrays) and math.isfinite(snapshot.loss)
    if watch.divergence is None:
        watch.ok(snapshot.loss, gradient_finite=finite)
    return snapshot if finite else None


def train_step(
    model: TinyAttentionModel,
    optimizer: torch.optim.Optimizer,
    batch: TaskBatch,
    mask: torch.Tensor | None,
    watch: LossWatch,
) -> bool:
    """One Adam step on ``batch``, taken only when ``watch`` finds the loss and its gradient
    sound (so the weights stay finite).

    Args:
        model, optimizer: the run's. batch: tensors (B, L). mask: (L, L) or None.
        watch: the run's divergence rule, set to the steps taken so far.

    Returns:
        Whether the step was taken.
    """
    logits, _ = model(batch.tokens, mask, need_weights=False)  # (B, L, V)
    loss = _loss(logits, batch.targets)
    if not watch.ok(loss.item()):
        return False
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    finite = bool(torch.isfinite(torch.nn.utils.get_total_norm(grads)))
    if finite:
        optimizer.step()
    return finite or watch.ok(watch.last_finite_loss, gradient_finite=False)


def run_training(config: TrainingConfig) -> TrainingRun:
    """Train as ``config`` says and return every snapshot, and the divergence if any (on
    torch's thread count as the caller set it, as :func:`iter_training`).

    Args:
        config: the run.

    Returns:
        TrainingRun with the snapshots, the target pattern (L, L) and ``divergence`` (None
        for a run that ran every step).

    Raises:
        MemoryBudgetError: (a ValueError) when the run is over the memory budget.
    """
    snapshots: list[Snapshot] = []
    divergence = drain(iter_training(config), snapshots)
    target = target_pattern(probe_batch(config).target_keys)
    return TrainingRun(
        config=config, snapshots=tuple(snapshots), target=target, divergence=divergence
    )


def train_task(
    task: str,
    *,
    variant: str = "scaled",
    scaled: bool | None = None,
    layers: int = 1,
    heads: int = 1,
    d_model: int = 32,
    seq_len: int = 8,
    steps: int = 300,
    lr: float = DEFAULT_LR,
    batch_size: int = DEFAULT_BATCH,
    positions: bool = True,
    seed: int = 0,
    snapshot_every: int = DEFAULT_SNAPSHOT_EVERY,
    **variant_params,
) -> TrainingRun:
    """Train a tiny attention-only model on ``task`` and return its snapshots.

    Args:
        task, variant, scaled, layers, heads, d_model, seq_len, steps, lr, batch_size,
        positions, seed, snapshot_every: as in :class:`TrainingConfig` (meaning, range).
        **variant_params: the variant's parameters.

    Returns:
        TrainingRun: snapshots (weights (layers, heads, L, L) each), the target (L, L) and
        the divergence (``None`` when every step ran).

    Raises:
        ValueError: naming an unknown task, variant or parameter, or a value out of range;
            MemoryBudgetError (a ValueError) for a run over the memory budget.
    """
    config = TrainingConfig(
        task=task,
        variant=variant,
        variant_params=tuple(variant_params.items()),
        scaled=scaled,
        layers=layers,
        heads=heads,
        d_model=d_model,
        seq_len=seq_len,
        steps=steps,
        lr=lr,
        batch_size=batch_size,
        positions=positions,
        seed=seed,
        snapshot_every=snapshot_every,
    )
    return run_training(config)
