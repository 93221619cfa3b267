"""Train a tiny attention-only transformer on a synthetic task and watch its heads form.

The model: token embeddings, optional learned position embeddings, ``layers`` residual
blocks ``x = x + MultiHeadSelfAttention(x)`` with any registered variant, and a linear
readout to the vocabulary, trained with Adam on fresh batches of one of the tasks of
:mod:`~attention_core.experiments.tasks`. Every ``snapshot_every`` steps (and at step 0 and
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
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attention_core import masks
from attention_core.device import check_budget, tensor_bytes
from attention_core.estimates import estimate_memory
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
    CAUSAL_TASKS,
    IGNORE,
    MAX_SEQ_LEN,
    MIN_SEQ_LEN,
    TaskBatch,
    check_task,
    make_batch,
    pattern_match,
    target_pattern,
    vocab_size,
)
from attention_core.modules import MultiHeadSelfAttention
from attention_core.registry import get_variant
from attention_core.validation import check_bool, check_float, check_int

MAX_LAYERS = 4
MAX_HEADS = 16
MAX_D_MODEL = 512
MAX_STEPS = 5000
MAX_BATCH = 1024
MAX_LR = 1.0
MAX_SEED = 2**32 - 1
PROBE_BATCH = 128
DEFAULT_LR = 1e-2
DEFAULT_BATCH = 64
DEFAULT_SNAPSHOT_EVERY = 10
PROJECTIONS = ("W_Q", "W_K", "W_V")
# copies per token and model dimension kept for backward in one block (x, q, k, v, attention
# output, out projection, residual sum: an analytic upper bound); per token and vocabulary
# entry (logits, softmax, its gradient); per parameter (itself, gradient, Adam's 2 moments)
ACTIVATIONS_PER_BLOCK, LOGIT_COPIES, PARAMETER_COPIES = 8, 3, 4
# offsets that derive the data and probe seeds from the run's seed
DATA_STREAM, PROBE_STREAM, INIT_STREAM = 1, 2, 3


@dataclass(frozen=True)
class TrainingConfig:
    """Everything that determines a training run; frozen, hashable, validated on creation.

    Attributes:
        task: one of ``"shift"``, ``"reverse"``, ``"sort"``, ``"induction"``.
        variant: a registered attention variant.
        variant_params: the variant's parameters, all of them (defaults filled in), as
            sorted ``(name, value)`` pairs.
        scaled: ``None`` for the variant's own score scale (1/sqrt(d_k) for ``scaled``, 1
            for ``basic``), ``True`` for 1/sqrt(d_k), ``False`` for 1 (unscaled scores).
        layers: attention blocks, in [1, 4].
        heads: heads per block, in [1, 16]; must divide ``d_model``.
        d_model: model width D, in [heads, 512]; d_k = D / heads.
        seq_len: L, in [4, 64].
        steps: Adam steps, in [1, 5000].
        lr: Adam's learning rate, in (0, 1].
        batch_size: sequences per step, in [1, 1024].
        positions: add learned position embeddings (without them attention cannot tell
            positions apart, so ``shift`` and ``reverse`` are out of reach).
        seed: in [0, 2**32 - 1]; seeds the weights, the training batches and the probe batch.
        snapshot_every: steps between snapshots, in [1, steps].
    """

    task: str
    variant: str = "scaled"
    variant_params: tuple[tuple[str, int | float | bool], ...] = ()
    scaled: bool | None = None
    layers: int = 1
    heads: int = 1
    d_model: int = 32
    seq_len: int = 8
    steps: int = 300
    lr: float = DEFAULT_LR
    batch_size: int = DEFAULT_BATCH
    positions: bool = True
    seed: int = 0
    snapshot_every: int = DEFAULT_SNAPSHOT_EVERY

    def __post_init__(self) -> None:
        """Validate every field and fill in the variant's default parameters.

        Raises:
            ValueError: naming the first bad value.
        """
        check_task(self.task)
        spec = get_variant(self.variant)
        try:
            given = dict(self.variant_params)
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"variant_params must be (name, value) pairs, got {self.variant_params!r}"
            ) from err
        resolved = spec.resolve_params(given)
        object.__setattr__(self, "variant_params", tuple(sorted(resolved.items())))
        if self.scaled is not None:
            check_bool("scaled", self.scaled)
        check_int("layers", self.layers, low=1, high=MAX_LAYERS)
        heads = check_int("heads", self.heads, low=1, high=MAX_HEADS)
        d_model = check_int("d_model", self.d_model, low=heads, high=MAX_D_MODEL)
        if d_model % heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by heads={heads}")
        check_int("seq_len", self.seq_len, low=MIN_SEQ_LEN, high=MAX_SEQ_LEN)
        steps = check_int("steps", self.steps, low=1, high=MAX_STEPS)
        check_float("lr", self.lr, low=0.0, high=MAX_LR, low_open=True)
        check_int("batch_size", self.batch_size, low=1, high=MAX_BATCH)
        check_bool("positions", self.positions)
        check_int("seed", self.seed, low=0, high=MAX_SEED)
        check_int("snapshot_every", self.snapshot_every, low=1, high=steps)

    @property
    def head_dim(self) -> int:
        """d_k = d_model / heads."""
        return self.d_model // self.heads

    @property
    def vocab(self) -> int:
        """Vocabulary size: max(16, L)."""
        return vocab_size(self.seq_len)

    @property
    def causal(self) -> bool:
        """Whether the task needs a causal mask (``induction``)."""
        return self.task in CAUSAL_TASKS

    @property
    def scale(self) -> float | None:
        """The score scale handed to attention: None (variant default), 1/sqrt(d_k) or 1."""
        if self.scaled is None:
            return None
        return 1.0 / math.sqrt(self.head_dim) if self.scaled else 1.0

    @property
    def snapshot_steps(self) -> tuple[int, ...]:
        """Steps at which a snapshot is taken: 0, every ``snapshot_every``, and the last."""
        steps = list(range(0, self.steps + 1, self.snapshot_every))
        if steps[-1] != self.steps:
            steps.append(self.steps)
        return tuple(steps)


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


class TinyAttentionModel(nn.Module):
    """Embeddings, ``layers`` residual attention blocks, a linear readout.

    Args:
        config: the run's configuration (sizes, variant, scale).
        generator: draws the embeddings (N(0, 1)) and the readout (as ``nn.Linear`` does);
            each attention block draws from its own seed derived from ``config.seed``.
    """

    def __init__(self, config: TrainingConfig, generator: torch.Generator):
        super().__init__()
        D, V, L = config.d_model, config.vocab, config.seq_len
        # torch.empty draws nothing; ``generator`` fills them (the meta device would import
        # torch._dynamo at its first ``normal_``: 3 s)
        self.embed = nn.Parameter(torch.empty(V, D))
        self.pos = nn.Parameter(torch.empty(L, D)) if config.positions else None
        self.readout_weight = nn.Parameter(torch.empty(V, D))
        self.readout_bias = nn.Parameter(torch.empty(V))
        self._init_weights(generator)
        params = dict(config.variant_params)
        self.blocks = nn.ModuleList(
            MultiHeadSelfAttention(
                D,
                config.heads,
                config.variant,
                scale=config.scale,
                init_seed=derived_seed(config.seed, INIT_STREAM, layer),
                **params,
            )
            for layer in range(config.layers)
        )

    def _init_weights(self, generator: torch.Generator) -> None:
        """Embeddings N(0, 1); readout as ``nn.Linear`` initialises itself."""
        nn.init.normal_(self.embed, generator=generator)
        if self.pos is not None:
            nn.init.normal_(self.pos, generator=generator)
        nn.init.kaiming_uniform_(self.readout_weight, a=math.sqrt(5), generator=generator)
        bound = 1.0 / math.sqrt(self.readout_weight.shape[1])
        nn.init.uniform_(self.readout_bias, -bound, bound, generator=generator)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor | None, need_weights: bool):
        """Logits for every position.

        Args:
            tokens: (B, L) int64. mask: (L, L) bool or None. need_weights: return weights.

        Returns:
            (logits (B, L, V), list of per-layer weights (B, H, L, L), empty without weights).
        """
        x = self.embed[tokens]  # (B, L) -> (B, L, D)
        if self.pos is not None:
            x = x + self.pos  # (B, L, D) + (L, D)
        weights = []
        for block in self.blocks:
            out, w = block(x, mask=mask, need_weights=need_weights)  # (B, L, D), (B, H, L, L)
            x = x + out  # residual (B, L, D)
            if need_weights:
                weights.append(w)
        logits = F.linear(x, self.readout_weight, self.readout_bias)  # (B, L, D) -> (B, L, V)
        return logits, weights


def estimate_training_bytes(config: TrainingConfig) -> int:
    """Estimated peak bytes of a run (an analytic model, not a measurement).

    Per block: the attention call with weights (from the variant's memory model) and
    :data:`ACTIVATIONS_PER_BLOCK` (B, L, D) activations; the logits; the parameters with
    their gradients and Adam's moments. B is the larger of the batch and the probe batch.

    Args:
        config: the run.

    Returns:
        bytes (int).
    """
    B, L, D, V = max(config.batch_size, PROBE_BATCH), config.seq_len, config.d_model, config.vocab
    attention = estimate_memory(
        config.variant,
        batch=B,
        heads=config.heads,
        L=L,
        E=config.head_dim,
        need_weights=True,
        **dict(config.variant_params),
    )
    activations = tensor_bytes((ACTIVATIONS_PER_BLOCK, B, L, D), torch.float32)
    logits = tensor_bytes((LOGIT_COPIES, B, L, V), torch.float32)
    n_params = V * D + L * D + config.layers * 4 * (D * D + D) + D * V + V
    parameters = tensor_bytes((PARAMETER_COPIES, n_params), torch.float32)
    return config.layers * (attention + activations) + logits + parameters


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


def iter_training(
    config: TrainingConfig, *, threads: int | None = None
) -> Generator[Snapshot, None, Divergence | None]:
    """Train as ``config`` says, yielding each snapshot as soon as it is made.

    The first snapshot (step 0, the initial weights) comes before any training step. Every
    loss is checked by a :class:`LossWatch` (and its gradient, before Adam uses it); at a
    divergence training stops, a snapshot of the model there is yielded when finite, and
    the generator returns the :class:`Divergence` (``drain`` or :func:`run_training`).

    Args:
        config: the run (validated on creation).
        threads: torch's intra-op thread count while this run computes (restored before
            each yield and at the end); ``None`` leaves torch's setting alone. The caller
            owns the process: the library never picks a thread count itself.

    Yields:
        Snapshot at the steps of ``config.snapshot_steps`` reached, in order.

    Returns:
        The :class:`Divergence` that stopped the run, or ``None`` when it ran every step.

    Raises:
        ValueError: for ``threads`` not a whole number ≥ 1 (checked at the first snapshot);
            MemoryBudgetError (a ValueError) before training, when the estimated peak bytes
            exceed the memory budget.
    """
    if threads is not None:
        threads = check_int("threads", threads, low=1)
    check_training_budget(config)
    with intra_op_threads(threads):
        model = TinyAttentionModel(config, torch.Generator().manual_seed(config.seed))
        probe = probe_batch(config)
        mask = masks.causal(config.seq_len) if config.causal else None  # (L, L) or None
        first = take_snapshot(model, probe, mask, 0)
    yield first
    # made after the first snapshot: building torch's first optimizer in a process imports
    # torch._dynamo (seconds), which the initial snapshot need not wait for
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    data = torch.Generator().manual_seed(derived_seed(config.seed, DATA_STREAM))
    watch = LossWatch(start_loss=first.loss, last_finite_loss=first.loss)
    done = 0
    for step in config.snapshot_steps[1:]:
        shown = done
        with intra_op_threads(threads):  # restored before each yield
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


@contextmanager
def intra_op_threads(count: int | None):
    """Run the block with ``count`` intra-op threads, then restore the previous number.

    Args:
        count: threads (checked by the caller), or ``None`` to leave torch's setting alone.
    """
    if count is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


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


def run_training(config: TrainingConfig, *, threads: int | None = None) -> TrainingRun:
    """Train as ``config`` says and return every snapshot, and the divergence if any.

    Args:
        config: the run.
        threads: torch's intra-op thread count while training, as in :func:`iter_training`;
            ``None`` leaves torch's setting alone.

    Returns:
        TrainingRun with the snapshots, the target pattern (L, L) and ``divergence`` (None
        for a run that ran every step).

    Raises:
        ValueError: for a bad ``threads``; MemoryBudgetError (a ValueError) when the run is
            over the memory budget.
    """
    snapshots: list[Snapshot] = []
    divergence = drain(iter_training(config, threads=threads), snapshots)
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
    threads: int | None = None,
    **variant_params,
) -> TrainingRun:
    """Train a tiny attention-only model on ``task`` and return its snapshots.

    Args:
        task, variant, scaled, layers, heads, d_model, seq_len, steps, lr, batch_size,
        positions, seed, snapshot_every: as in :class:`TrainingConfig` (meaning, range).
        **variant_params: the variant's parameters.
        threads: torch's intra-op thread count while training (:func:`iter_training`).

    Returns:
        TrainingRun: snapshots (weights (layers, heads, L, L) each), the target (L, L) and
        the divergence (``None`` when every step ran).

    Raises:
        ValueError: naming an unknown task, variant or parameter, a value out of range or a
            bad ``threads``; MemoryBudgetError (a ValueError) for a run over the memory budget.
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
    return run_training(config, threads=threads)
