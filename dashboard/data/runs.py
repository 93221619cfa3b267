"""Cached runs of one seeded multi-head self-attention layer, described by a
:class:`~dashboard.config.LayerConfig`: its weights, scores and output, and (separately, so
that a page can draw first) its peak memory.

A cache miss costs one forward pass with weights (two when the weights would exceed the
memory budget: the second runs without them) and, for the peak memory, one profiled pass,
skipped under load (:mod:`dashboard.runtime.threads`). The runs are cached by the bytes they
hold (:mod:`dashboard.data.memo`): a room of learners each at 1,024 tokens must not keep
one 128 MiB run per learner.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

import attention_core as core
from attention_core import experiments
from attention_core.experiments import head_entropy, mean_distance
from attention_core.validation import check_choice
from dashboard.config import LayerConfig, ParamPairs
from dashboard.data.catalogue import device_for
from dashboard.data.inputs import build_input, build_mask
from dashboard.data.memo import bounded_cache
from dashboard.data.tables import readonly
from dashboard.runtime import threads

MIB = 1 << 20
RUN_CACHE_BYTES = 160 * MIB
"""Array bytes the layer-run cache may hold: one run at the largest settings (1,024 tokens,
16 heads: 139 MiB of weights, scores, means and output) and room for smaller ones (a room
at the default 16–64 tokens holds a few hundred). Every byte here adds to the server's
peak at each later page (``python -m bench.coldstart``)."""
RUN_CACHE_ENTRIES = 32
PEAK_CACHE_ENTRIES = 256
CACHE_TTL_S = 30 * 60
"""An unused cached run is dropped after this long (the presenter's next demo recomputes)."""
METHOD_BUSY = "estimated (server busy: measurement skipped)"

LayerPass = tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None, float]
"""One pass of a layer: (output (1, L, D), weights (1, H, L, L) or None, scores (1, H, L, L)
or None, seconds)."""


@dataclass(frozen=True)
class AttentionRun:
    """One computation of a multi-head self-attention layer, as read-only numpy arrays.

    Attributes:
        tokens: the L token labels.
        weights: (H, L, L) post-softmax weights, or ``None`` when they would exceed the budget.
        scores: (H, L, L) the scaled pre-softmax scores the variant formed (from the core),
            −inf where the mask or the variant's pattern blocks a key; ``None`` without
            weights, or for a variant with no softmax (``linear``).
        output: (L, D) layer output.
        sparsity: fraction of weights that are exactly 0 (``nan`` without weights).
        seconds: wall time of the computation (projections, attention, output projection).
        device: device name the computation ran on.
        d_k: per-head width.
        mean_weights: (L, L) head-averaged weights, or ``None`` without weights.
        mean_scores: (L, L) head-averaged raw scores, or ``None`` without weights.
        row_sums: (L,) row sums of ``mean_weights``, or ``None`` without weights.
        entropy: (H,) mean row entropy of each head (nats), or ``None`` without weights.
        distance: (H,) mean attention distance of each head, or ``None`` without weights.
        output_mean, output_std: mean and standard deviation of ``output``.
    """

    tokens: tuple[str, ...]
    output: np.ndarray
    sparsity: float
    seconds: float
    device: str
    d_k: int
    weights: np.ndarray | None = None
    scores: np.ndarray | None = None
    mean_weights: np.ndarray | None = None
    mean_scores: np.ndarray | None = None
    row_sums: np.ndarray | None = None
    entropy: np.ndarray | None = None
    distance: np.ndarray | None = None
    output_mean: float = 0.0
    output_std: float = 0.0


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass(frozen=True)
class PeakMemory:
    """Peak memory of one layer computation.

    Attributes:
        bytes: the peak.
        measured: True when measured (torch.profiler on CPU, the allocator on CUDA), False
            when the library's estimate (no allocation events available, or a busy server).
        method: how it was obtained, one of :data:`attention_core.experiments.PEAK_METHODS`,
            or :data:`METHOD_BUSY`.
        busy: True when the measurement was skipped because other sessions were running
            (the figure is then the estimate; a later quiet run measures it).
    """

    bytes: int
    measured: bool
    method: str = ""
    busy: bool = False


@dataclass
class _Layer:
    """A seeded layer and its input, ready to run: (module, x (1, L, D), mask, generator)."""

    module: core.MultiHeadSelfAttention
    x: torch.Tensor
    mask: torch.Tensor | None
    generator: torch.Generator
    tokens: tuple[str, ...]
    device: torch.device

    def forward(self, need_weights: bool) -> LayerPass:
        """Run the layer once.

        Returns:
            (output (1, L, D), weights (1, H, L, L) or None, scores (1, H, L, L) or None,
            seconds): the scores are the scaled, masked pre-softmax scores the variant
            formed, returned by the core with the weights.
        """
        _synchronize(self.device)
        start = time.perf_counter()
        with torch.no_grad():
            res = self.module.forward_intermediates(
                self.x, mask=self.mask, need_weights=need_weights, generator=self.generator
            )
        _synchronize(self.device)
        return res.output, res.weights, res.scores, time.perf_counter() - start

    def forward_within_budget(self) -> LayerPass:
        """:meth:`forward` with weights, or without them when they would exceed the budget.

        Raises:
            MemoryBudgetError: when even the output does not fit.
        """
        try:
            return self.forward(True)
        except core.MemoryBudgetError:
            return self.forward(False)


PROJECTIONS = ("identity", "random")


def identity_queries_and_keys(module: torch.nn.Module) -> None:
    """Set a layer's query and key projections to the identity (no bias): head h's queries
    and keys are then its own d_k-wide slice of the input vectors, and a score is the dot
    product of two tokens' slices, largest for a token with itself and with its repeats."""
    with torch.no_grad():
        for linear in (module.q_linear, module.k_linear):
            linear.weight.copy_(torch.eye(linear.weight.shape[0], dtype=linear.weight.dtype))
            if linear.bias is not None:
                linear.bias.zero_()


def _layer(cfg: LayerConfig) -> _Layer:
    """Build the seeded layer, its input and mask for ``cfg`` on its device.

    Raises:
        ValueError: for any invalid combination (heads not dividing d_model, bad params…).
    """
    dev = device_for(cfg.device)
    x, tokens = build_input(cfg.input_kind, cfg.sentence, cfg.seq_len, cfg.d_model, cfg.seed)
    L = len(tokens)
    module = core.MultiHeadSelfAttention(
        cfg.d_model,
        cfg.heads,
        cfg.variant,
        dropout=cfg.dropout,
        init_seed=cfg.seed,
        **cfg.param_dict,
    )
    if check_choice("projections", cfg.projections, PROJECTIONS) == "identity":
        identity_queries_and_keys(module)
    module = module.to(dev).train(cfg.dropout > 0)  # training mode only to apply the dropout
    mask = build_mask(cfg.mask_kind, L, min(cfg.pad_len, L))  # (L, L), (1, 1, L) or None
    return _Layer(
        module=module,
        x=x.to(dev),
        mask=None if mask is None else mask.to(dev),
        generator=torch.Generator(device=dev).manual_seed(cfg.seed),
        tokens=tokens,
        device=dev,
    )


@st.cache_resource(max_entries=64, show_spinner=False)
def _warm_up_variant(variant: str, params: ParamPairs, device: str) -> bool:
    """Run ``variant`` once per process at a tiny size (8 tokens, width 8), so that the first
    timed run does not include torch's one-time start-up of those kernels (measured here:
    0.43 s for the first scaled dot-product at 32 tokens, 3 ms after)."""
    tiny = core.MultiHeadSelfAttention(8, 2, variant, **dict(params)).to(device)
    x = torch.zeros(1, 8, 8, device=device)  # (batch, L, d_model)
    with torch.no_grad():
        for need_weights in (True, False):
            try:
                tiny(x, need_weights=need_weights)
            except ValueError:  # e.g. a window wider than 8 tokens: the real run reports it
                return False
    return True


def shown_scores(scores: torch.Tensor, *, copy: bool = True) -> np.ndarray:
    """The core's scores as the tooltips show them: float32, with the cells the mask or the
    variant's pattern blocks (held at the dtype's minimum, which the softmax turns into 0)
    set to −inf, so that they read "−∞" and any pooled block holding one does too.

    Args:
        scores: (…, L, S) scores from :meth:`MultiHeadSelfAttention.forward_intermediates`.
        copy: False to write the −inf cells into ``scores`` itself when it is a float32 CPU
            tensor (a run's own scores, no longer used as a tensor): no second (…, L, S)
            array is made.

    Returns:
        The same shape, float32.
    """
    values = scores.float().cpu().numpy()  # shares memory for a float32 CPU tensor
    if copy and scores.dtype == torch.float32 and scores.device.type == "cpu":
        values = values.copy()  # (…, L, S): leave the caller's tensor as it is
    # the scores' own dtype minimum (float16's is −65504), at most float32's
    blocked_below = max(torch.finfo(scores.dtype).min, torch.finfo(torch.float32).min) / 2
    for matrix in values.reshape(-1, *values.shape[-2:]):  # (L, S) at a time: a small mask
        np.copyto(matrix, -np.inf, where=matrix <= blocked_below)
    return values


def zero_fraction(values: np.ndarray) -> float:
    """The share of exactly-zero entries (the cells a pattern or mask leaves out), counted
    without a temporary array of the input's size.

    Args:
        values: any array, e.g. (H, L, L) weights.

    Returns:
        A number in [0, 1] (NaN counts as non-zero); 0.0 for an empty array.
    """
    if values.size == 0:
        return 0.0
    return float(values.size - np.count_nonzero(values)) / values.size


def _head_arrays(weights: torch.Tensor, scores: torch.Tensor | None) -> dict[str, np.ndarray]:
    """Read-only numpy views of one run's per-head maps and the statistics drawn from them.

    Args:
        weights: (1, H, L, L). scores: (1, H, L, L), or ``None`` for a variant without a
            softmax (``linear``).

    Returns:
        ``weights``/``scores`` (H, L, L), ``mean_weights``/``mean_scores`` (L, L) (scores
        ``None`` when there are none), ``row_sums`` (L,), ``entropy`` and ``distance`` (H,).
    """
    weights_np = readonly(weights[0].float().cpu().numpy())  # (H, L, L)
    scores_np = None if scores is None else readonly(shown_scores(scores[0], copy=False))
    mean_weights = readonly(weights_np.mean(axis=0))  # (H, L, L) -> (L, L)
    # one head at a time: the statistics make float64 temporaries of their input, 8 × the
    # float32 maps for all heads at once (about 400 MiB at 16 heads × 1,024²)
    entropy = np.array([head_entropy(head) for head in weights_np])  # (H,)
    distance = np.array([mean_distance(head) for head in weights_np])  # (H,)
    return {
        "weights": weights_np,
        "scores": scores_np,
        "mean_weights": mean_weights,
        "mean_scores": None if scores_np is None else readonly(scores_np.mean(axis=0)),
        "row_sums": readonly(mean_weights.sum(axis=-1)),  # (L,)
        "entropy": readonly(entropy),  # (H,)
        "distance": readonly(distance),  # (H,)
    }


@bounded_cache(max_bytes=RUN_CACHE_BYTES, max_entries=RUN_CACHE_ENTRIES, ttl_s=CACHE_TTL_S)
def attention_run(cfg: LayerConfig) -> AttentionRun:
    """Run one seeded multi-head self-attention layer and return everything the pages show.

    One forward pass with weights and scores (a second one without them when the (H, L, L)
    matrices would exceed the memory budget). Its peak memory is a separate, cached
    measurement (:func:`attention_peak`), so that a page can draw the heatmaps first.

    Args:
        cfg: the layer, its input, mask, seed and device.

    Returns:
        An :class:`AttentionRun`. Weights and scores are ``None`` when they would exceed the
        memory budget while the output alone fits.

    Raises:
        MemoryBudgetError: when even the output cannot be computed within the budget.
        ValueError: for any invalid combination (heads not dividing d_model, bad params…).
    """
    layer = _layer(cfg)
    _warm_up_variant(cfg.variant, cfg.params, str(layer.device))
    out, weights, scores, seconds = layer.forward_within_budget()
    heads: dict[str, np.ndarray] = {}
    sparsity = float("nan")
    if weights is not None:
        heads = _head_arrays(weights, scores)
        sparsity = zero_fraction(heads["weights"])
    output_np = readonly(out[0].float().cpu().numpy())  # (L, D)
    return AttentionRun(
        tokens=layer.tokens,
        output=output_np,
        sparsity=sparsity,
        seconds=seconds,
        device=str(layer.device),
        d_k=cfg.d_k,
        output_mean=float(output_np.mean()),
        output_std=float(output_np.std()),
        **heads,
    )


def attention_peak(cfg: LayerConfig) -> PeakMemory:
    """Peak memory of the computation :func:`attention_run` makes for the same config
    (weights included when they fit the budget), measured in one profiled pass of its own
    when the server is quiet.

    Under load (another script run going, or another session measuring: see
    :func:`dashboard.runtime.threads.profiler_slot`) nothing is measured, so no session queues
    behind the process-wide profiler: the library's estimate comes back with ``busy=True``,
    and is not cached as the measurement (a later quiet run measures it). A measurement
    already cached is returned in any case.

    Returns:
        A :class:`PeakMemory`: measured when the profiler or allocator saw allocations, else
        the library's estimate.

    Raises:
        MemoryBudgetError, ValueError: as :func:`attention_run`.
    """
    cached = _measured_peak.cached(cfg)
    if cached is not None:
        return cached
    with threads.profiler_slot() as free:
        if free:
            return _measured_peak(cfg)
    run = attention_run(cfg)
    estimate = _estimate_peak(cfg, len(run.tokens), need_weights=run.weights is not None)
    return PeakMemory(estimate, False, METHOD_BUSY, busy=True)


def _estimate_peak(cfg: LayerConfig, seq_len: int, *, need_weights: bool) -> int:
    """The library's estimate of the attention call's peak bytes for ``cfg`` at ``seq_len``
    tokens."""
    estimate = core.estimate_memory(
        cfg.variant,
        batch=1,
        heads=cfg.heads,
        L=seq_len,
        E=cfg.d_k,
        need_weights=need_weights,
        **cfg.param_dict,
    )
    return int(estimate)


@bounded_cache(max_bytes=0, max_entries=PEAK_CACHE_ENTRIES, ttl_s=CACHE_TTL_S)
def _measured_peak(cfg: LayerConfig) -> PeakMemory:
    """:func:`attention_peak`'s profiled pass (the caller holds the profiler slot)."""
    layer = _layer(cfg)
    need_weights = []

    def run() -> None:
        weights = layer.forward_within_budget()[1]
        need_weights.append(weights is not None)

    peak, method = experiments.measure_peak_bytes(run, layer.device)
    if not math.isnan(peak):
        return PeakMemory(int(peak), True, method)
    estimate = _estimate_peak(cfg, len(layer.tokens), need_weights=need_weights[-1])
    return PeakMemory(estimate, False, method)


def max_output_difference(run: AttentionRun, reference: AttentionRun) -> float:
    """max |output − reference output| of two runs on the same input, (L, D) each."""
    return float(np.abs(run.output - reference.output).max())
