"""The tiny attention-only transformer that Watch it learn trains, and the run's configuration.

:class:`TrainingConfig` holds everything that determines a run (validated on creation);
:class:`TinyAttentionModel` is token embeddings, optional learned position embeddings,
``layers`` residual blocks ``x = x + MultiHeadSelfAttention(x)`` with any registered variant,
and a linear readout to the vocabulary; :func:`estimate_training_bytes` is a run's peak memory
before it allocates. The loop that trains it is :mod:`~attention_core.experiments.training`.

Shapes: B batch, L sequence length, D model width, H heads, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from attention_core.device import tensor_bytes
from attention_core.estimates import estimate_memory
from attention_core.experiments.scaling import derived_seed
from attention_core.experiments.tasks import (
    CAUSAL_TASKS,
    MAX_TASK_LEN,
    MIN_TASK_LEN,
    check_task,
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
        check_int("seq_len", self.seq_len, low=MIN_TASK_LEN, high=MAX_TASK_LEN)
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
