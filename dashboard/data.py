"""The only place the dashboard touches torch and ``attention_core``.

Every public function takes plain values (names, sizes, seeds, tuples) so that Streamlit can
cache it: ``st.cache_resource`` for results holding read-only numpy arrays, ``st.cache_data``
for small tables (DataFrames). Arrays handed out are marked read-only.

Inputs are either random vectors or token embeddings: each token gets a deterministic
pseudo-random vector seeded by its text (so a repeated word gets the same vector) plus a
sinusoidal position code; projections are seeded random ``nn.Linear`` layers.
"""

from __future__ import annotations

import math
import re
import threading
import time
import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st
import torch

import attention_core as core
from attention_core import experiments, masks, pretrained
from attention_core.device import available_devices, format_bytes, pick_device

MAX_SEQ_LEN = 1024
FULL_HEATMAP_MAX = 128
POOLED_SIDE = 64
MAX_CHART_ROWS = FULL_HEATMAP_MAX * FULL_HEATMAP_MAX
MAX_SENTENCE_TOKENS = 128
MASK_KINDS = ("none", "causal", "padding")
INPUT_KINDS = ("random", "preset_en", "preset_zh", "typed")
PRESET_SENTENCES = {
    "preset_en": "the cat sat on the mat because it was comfortable",
    "preset_zh": "那只猫坐在垫子上，它看起来很舒服。",
}
POSITION_BASE = 10000.0
ZERO_WEIGHT_TOL = 0.0
_CJK = (
    "\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
)
_TOKEN_RE = re.compile(rf"[{_CJK}]|(?:(?![{_CJK}])\w)+|[^\w\s]")


def _warm_up_profiler() -> None:
    """Pay torch.profiler's one-time start-up (about 0.7 s here) in the background when the
    app first loads, instead of inside the first visitor's first computation."""
    experiments.measure_peak_bytes(lambda: None, torch.device("cpu"))


threading.Thread(target=_warm_up_profiler, name="profiler-warm-up", daemon=True).start()


# ---------------------------------------------------------------- registry and devices


@dataclass(frozen=True)
class ParamInfo:
    """A variant parameter as plain values (mirrors :class:`attention_core.Param`)."""

    name: str
    kind: str
    default: int | float | bool
    low: int | float
    high: int | float
    step: int | float
    help: str


@dataclass(frozen=True)
class VariantInfo:
    """A registry entry as plain values, for building controls."""

    name: str
    label: str
    explanation: str
    time_complexity: str
    memory_complexity: str
    exact: bool
    supports_dropout: bool
    params: tuple[ParamInfo, ...]


@st.cache_resource
def variant_catalogue() -> dict[str, VariantInfo]:
    """Return every registered variant, in registry order, as plain :class:`VariantInfo`."""
    return {
        name: VariantInfo(
            name=spec.name,
            label=spec.label,
            explanation=spec.explanation,
            time_complexity=spec.time_complexity,
            memory_complexity=spec.memory_complexity,
            exact=spec.exact,
            supports_dropout=spec.supports_dropout,
            params=tuple(
                ParamInfo(p.name, p.kind, p.default, p.low, p.high, p.step, p.help)
                for p in spec.params
            ),
        )
        for name, spec in core.VARIANTS.items()
    }


@st.cache_resource
def device_options() -> tuple[str, tuple[str, ...]]:
    """Return ``(automatic choice, every available device)``, e.g. ``("cpu", ("cpu",))``."""
    return pick_device().device.type, available_devices()


def _device(name: str) -> torch.device:
    return pick_device(None if name == "auto" else name).device


# ---------------------------------------------------------------- tokens and inputs


def tokens_for(sentence: str) -> tuple[str, ...]:
    """Split a sentence into tokens: words for Latin text, characters for CJK, punctuation alone.

    Args:
        sentence: any text.

    Returns:
        The tokens in order, e.g. ``("the", "cat", ".")`` or ``("那", "只", "猫", "，")``.
    """
    return tuple(_TOKEN_RE.findall(sentence))


def has_words(tokens: tuple[str, ...]) -> bool:
    """True when some token holds a letter, digit or CJK character (not only punctuation)."""
    return any(any(c.isalnum() for c in tok) for tok in tokens)


def input_tokens(input_kind: str, sentence: str, seq_len: int) -> tuple[str, ...]:
    """Return the token labels of an input: positions for random vectors, else the tokens.

    Args:
        input_kind: one of :data:`INPUT_KINDS`.
        sentence: the typed sentence (used only for ``"typed"``).
        seq_len: number of random vectors (used only for ``"random"``).

    Returns:
        Token strings; at most :data:`MAX_SENTENCE_TOKENS` for sentences. A typed sentence
        without a word (empty, blank or punctuation only) gives the English preset.

    Raises:
        ValueError: for an unknown input kind or a bad sequence length.
    """
    if input_kind == "random":
        _check_int("seq_len", seq_len, 1, MAX_SEQ_LEN)
        return tuple(str(i) for i in range(seq_len))
    if input_kind == "typed":
        tokens = tokens_for(sentence)
        if not has_words(tokens):
            tokens = tokens_for(PRESET_SENTENCES["preset_en"])
    elif input_kind in PRESET_SENTENCES:
        tokens = tokens_for(PRESET_SENTENCES[input_kind])
    else:
        raise ValueError(f"unknown input kind {input_kind!r}; valid: {', '.join(INPUT_KINDS)}")
    return tokens[:MAX_SENTENCE_TOKENS]


def axis_labels(tokens: tuple[str, ...]) -> list[str]:
    """Return unique axis labels ``"<position> <token>"`` (a word may repeat in a sentence)."""
    return [tok if tok == str(i) else f"{i} {tok}" for i, tok in enumerate(tokens)]


def _check_int(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be a whole number in [{low}, {high}], got {value!r}")
    return value


def sinusoidal_positions(seq_len: int, d_model: int) -> torch.Tensor:
    """Return the (L, D) sinusoidal position code of "Attention Is All You Need"."""
    pos = torch.arange(seq_len, dtype=torch.float32)[:, None]  # (L, 1)
    dims = torch.arange(0, d_model, 2, dtype=torch.float32)  # (ceil(D/2),)
    freq = torch.exp(-math.log(POSITION_BASE) * dims / d_model)  # (ceil(D/2),)
    angles = pos * freq  # (L, ceil(D/2))
    code = torch.zeros(seq_len, d_model)
    code[:, 0::2] = torch.sin(angles)
    code[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return code


def token_embeddings(tokens: tuple[str, ...], d_model: int, seed: int) -> torch.Tensor:
    """Return (L, D) embeddings: a seeded random vector per token text plus positions.

    The vector of a token depends only on its lower-cased text and ``seed``, so repeated
    words share it; the sinusoidal position code tells them apart.
    """
    rows = []
    for tok in tokens:
        token_id = zlib.crc32(tok.lower().encode("utf-8"))
        gen = torch.Generator().manual_seed(token_id * 1_000_003 + seed)
        rows.append(torch.randn(d_model, generator=gen))  # (D,)
    return torch.stack(rows) + sinusoidal_positions(len(tokens), d_model)  # (L, D)


def build_input(
    input_kind: str, sentence: str, seq_len: int, d_model: int, seed: int
) -> tuple[torch.Tensor, tuple[str, ...]]:
    """Return the input x (1, L, D) and its token labels.

    Raises:
        ValueError: for an unknown input kind or bad sizes.
    """
    tokens = input_tokens(input_kind, sentence, seq_len)
    if input_kind == "random":
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(1, len(tokens), d_model, generator=gen)  # (1, L, D)
    else:
        x = token_embeddings(tokens, d_model, seed)[None]  # (1, L, D)
    return x, tokens


def build_mask(mask_kind: str, seq_len: int, pad_len: int) -> torch.Tensor | None:
    """Return the bool mask (True = may attend) for a mask kind, or ``None``.

    Args:
        mask_kind: ``"none"``, ``"causal"`` ((L, L)) or ``"padding"`` ((1, 1, L): the last
            ``L - pad_len`` keys are padding).
        seq_len: L.
        pad_len: number of real tokens for ``"padding"``, in [1, L].

    Raises:
        ValueError: for an unknown kind or ``pad_len`` out of range.
    """
    if mask_kind == "none":
        return None
    if mask_kind == "causal":
        return masks.causal(seq_len)  # (L, L)
    if mask_kind == "padding":
        _check_int("pad_len", pad_len, 1, seq_len)
        return masks.padding([pad_len], seq_len)  # (1, 1, L)
    raise ValueError(f"unknown mask kind {mask_kind!r}; valid: {', '.join(MASK_KINDS)}")


def _readonly(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


# ---------------------------------------------------------------- pooling and tidy frames


def pool_edges(n: int, max_side: int) -> np.ndarray:
    """Return ``min(n, max_side) + 1`` bin edges splitting ``range(n)`` into near-equal bins."""
    side = min(n, max_side)
    return np.linspace(0, n, side + 1).round().astype(int)


def pool_matrix(matrix: np.ndarray, max_side: int = POOLED_SIDE) -> np.ndarray:
    """Average-pool a 2-D matrix so that neither side exceeds ``max_side``.

    Args:
        matrix: (R, C) array.
        max_side: the largest side of the result (>= 1).

    Returns:
        (min(R, max_side), min(C, max_side)) array of block means; unchanged when small.

    Raises:
        ValueError: for a non-2-D matrix or ``max_side < 1``.
    """
    if matrix.ndim != 2:
        raise ValueError(f"pool_matrix needs a 2-D matrix, got shape {matrix.shape}")
    if max_side < 1:
        raise ValueError(f"max_side must be >= 1, got {max_side}")
    rows, cols = matrix.shape
    if rows <= max_side and cols <= max_side:
        return matrix
    r_side, c_side = min(rows, max_side), min(cols, max_side)
    if rows % r_side == 0 and cols % c_side == 0:  # equal blocks: one strided sum, 2x faster
        # (R, C) -> (r, R/r, c, C/c) -> (r, c)
        blocks = matrix.reshape(r_side, rows // r_side, c_side, cols // c_side)
        return blocks.sum(axis=(1, 3), dtype=np.float64) / ((rows // r_side) * (cols // c_side))
    r_edges, c_edges = pool_edges(rows, max_side), pool_edges(cols, max_side)
    wide = np.asarray(matrix, dtype=np.float64)
    sums = np.add.reduceat(np.add.reduceat(wide, r_edges[:-1], axis=0), c_edges[:-1], axis=1)
    counts = np.outer(np.diff(r_edges), np.diff(c_edges))  # (r, c) cells per block
    return sums / counts


def heatmap_side(seq_len: int, panels: int = 1) -> int:
    """Return the side each of ``panels`` heatmaps is drawn at (full up to 128, else pooled).

    Full resolution when ``seq_len <= 128`` and all panels together stay within
    :data:`MAX_CHART_ROWS`; otherwise pooled to at most 64 and small enough that
    ``panels * side**2 <= MAX_CHART_ROWS``.
    """
    if seq_len <= FULL_HEATMAP_MAX and panels * seq_len * seq_len <= MAX_CHART_ROWS:
        return seq_len
    return max(1, min(seq_len, POOLED_SIDE, math.isqrt(MAX_CHART_ROWS // max(panels, 1))))


def _bin_labels(labels: list[str], edges: np.ndarray) -> list[str]:
    out = []
    for start, stop in zip(edges[:-1], edges[1:], strict=True):
        out.append(labels[start] if stop - start == 1 else f"{start}–{stop - 1}")
    return out


@dataclass(frozen=True)
class Heatmap:
    """A tidy heatmap table and whether it was pooled.

    Attributes:
        frame: columns ``row``, ``col`` (labels), ``row_index``, ``col_index``, ``value``,
            optional ``score`` and ``panel``; one row per cell.
        shape: (rows, cols) drawn per panel.
        pooled: True when cells are block averages of a bigger matrix.
        row_order, col_order: label order for the axes.
    """

    frame: pd.DataFrame
    shape: tuple[int, int]
    pooled: bool
    row_order: tuple[str, ...]
    col_order: tuple[str, ...]


def heatmap_frame(
    values: np.ndarray,
    row_labels: list[str],
    col_labels: list[str],
    scores: np.ndarray | None = None,
    panels: list[str] | None = None,
    max_side: int | None = None,
) -> Heatmap:
    """Turn one or more (R, C) matrices into a tidy, pooled-if-needed heatmap table.

    Args:
        values: (R, C) or (P, R, C) array (P panels, e.g. heads).
        row_labels, col_labels: R and C axis labels (unique).
        scores: optional array of the same shape shown in tooltips (e.g. raw scores).
        panels: P panel names for a 3-D ``values``.
        max_side: side limit; default :func:`heatmap_side` of the larger side and P.

    Returns:
        A :class:`Heatmap` with at most :data:`MAX_CHART_ROWS` rows.

    Raises:
        ValueError: when shapes and labels disagree.
    """
    stack = values[None] if values.ndim == 2 else values
    if stack.ndim != 3:
        raise ValueError(f"values must be 2-D or 3-D, got shape {values.shape}")
    n_panels, rows, cols = stack.shape
    if len(row_labels) != rows or len(col_labels) != cols:
        raise ValueError(
            f"labels ({len(row_labels)}, {len(col_labels)}) do not match shape {(rows, cols)}"
        )
    if scores is not None and scores.shape != values.shape:
        raise ValueError(f"scores shape {scores.shape} != values shape {values.shape}")
    names = panels if panels is not None else [""] * n_panels
    if len(names) != n_panels:
        raise ValueError(f"{len(names)} panel names for {n_panels} panels")
    side = max_side or heatmap_side(max(rows, cols), n_panels)
    score_stack = None if scores is None else (scores[None] if scores.ndim == 2 else scores)
    pooled = rows > side or cols > side
    r_lab = _bin_labels(row_labels, pool_edges(rows, side)) if pooled else list(row_labels)
    c_lab = _bin_labels(col_labels, pool_edges(cols, side)) if pooled else list(col_labels)
    parts = []
    for p in range(n_panels):
        v = np.asarray(pool_matrix(stack[p], side), dtype=np.float64)  # (r, c)
        r, c = v.shape
        part = {
            "row": np.repeat(r_lab, c),
            "col": np.tile(c_lab, r),
            "row_index": np.repeat(np.arange(r), c),
            "col_index": np.tile(np.arange(c), r),
            "value": v.ravel(),
        }
        if score_stack is not None:
            part["score"] = np.asarray(pool_matrix(score_stack[p], side), np.float64).ravel()
        if panels is not None:
            part["panel"] = names[p]
        parts.append(pd.DataFrame(part))
    frame = pd.concat(parts, ignore_index=True)
    shape = (len(r_lab), len(c_lab))
    return Heatmap(frame, shape, pooled, tuple(r_lab), tuple(c_lab))


def weights_table(weights: np.ndarray, row_labels: list[str], col_labels: list[str]) -> str:
    """Return a 2-D (or per-head 3-D) weight array as CSV text with labelled rows/columns."""
    if weights.ndim == 2:
        return pd.DataFrame(weights, index=row_labels, columns=col_labels).to_csv()
    frames = [
        pd.DataFrame(w, index=row_labels, columns=col_labels).assign(head=h)
        for h, w in enumerate(weights)
    ]
    return pd.concat(frames).rename_axis("query").reset_index().to_csv(index=False)


# ---------------------------------------------------------------- playground / multi-head


@dataclass(frozen=True)
class AttentionRun:
    """One computation of a multi-head self-attention layer, as read-only numpy arrays.

    Attributes:
        tokens: the L token labels.
        weights: (H, L, L) post-softmax weights, or ``None`` when they would exceed the budget.
        scores: (H, L, L) raw scaled scores q·k·scale before the mask, or ``None`` likewise.
        output: (L, D) layer output.
        sparsity: fraction of weights that are exactly 0 (``nan`` without weights).
        seconds: wall time of the computation (projections, attention, output projection).
        device: device name the computation ran on.
        d_k: per-head width.
        mean_weights: (L, L) head-averaged weights, or ``None`` without weights.
        mean_scores: (L, L) head-averaged raw scores, or ``None`` without weights.
        row_sums: (L,) row sums of ``mean_weights``, or ``None`` without weights.
        output_mean, output_std: mean and standard deviation of ``output``.
    """

    tokens: tuple[str, ...]
    weights: np.ndarray | None
    scores: np.ndarray | None
    output: np.ndarray
    sparsity: float
    seconds: float
    device: str
    d_k: int
    mean_weights: np.ndarray | None = None
    mean_scores: np.ndarray | None = None
    row_sums: np.ndarray | None = None
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
            when the library's estimate (no allocation events available).
    """

    bytes: int
    measured: bool


@dataclass
class _Layer:
    """A seeded layer and its input, ready to run: (module, x (1, L, D), mask, generator)."""

    module: core.MultiHeadSelfAttention
    x: torch.Tensor
    mask: torch.Tensor | None
    generator: torch.Generator
    tokens: tuple[str, ...]
    device: torch.device

    def forward(self, need_weights: bool) -> tuple[torch.Tensor, torch.Tensor | None, float]:
        """Run the layer; returns (output (1, L, D), weights (1, H, L, L) or None, seconds)."""
        _synchronize(self.device)
        start = time.perf_counter()
        with torch.no_grad():
            out, weights = self.module(
                self.x, mask=self.mask, need_weights=need_weights, generator=self.generator
            )
        _synchronize(self.device)
        return out, weights, time.perf_counter() - start

    def forward_within_budget(self) -> tuple[torch.Tensor, torch.Tensor | None, float]:
        """:meth:`forward` with weights, or without them when they would exceed the budget.

        Raises:
            MemoryBudgetError: when even the output does not fit.
        """
        try:
            return self.forward(True)
        except core.MemoryBudgetError:
            return self.forward(False)


def _layer(
    variant: str,
    params: tuple[tuple[str, int | float | bool], ...],
    seq_len: int,
    d_model: int,
    heads: int,
    mask_kind: str,
    pad_len: int,
    dropout: float,
    seed: int,
    input_kind: str,
    sentence: str,
    device: str,
) -> _Layer:
    dev = _device(device)
    x, tokens = build_input(input_kind, sentence, seq_len, d_model, seed)
    L = len(tokens)
    module = core.MultiHeadSelfAttention(
        d_model, heads, variant, dropout=dropout, init_seed=seed, **dict(params)
    )
    module = module.to(dev).train(dropout > 0)  # training mode only to apply the dropout
    mask = build_mask(mask_kind, L, min(pad_len, L))  # (L, L), (1, 1, L) or None
    return _Layer(
        module=module,
        x=x.to(dev),
        mask=None if mask is None else mask.to(dev),
        generator=torch.Generator(device=dev).manual_seed(seed),
        tokens=tokens,
        device=dev,
    )


TIMING_BUDGET_S = 0.03


def _settled_seconds(layer: _Layer, need_weights: bool, first: float) -> float:
    """The best of up to three runs, repeated only while all runs so far took under
    :data:`TIMING_BUDGET_S` together: a lone run of a small layer mostly measures whatever
    else the machine was doing at that moment (a 0.5 ms layer once read 25 ms), while a
    slow layer is timed once."""
    best, spent = first, first
    for _ in range(2):
        if spent >= TIMING_BUDGET_S:
            break
        seconds = layer.forward(need_weights)[2]
        best, spent = min(best, seconds), spent + seconds
    return best


@st.cache_resource(max_entries=64, show_spinner=False)
def _warm_up_variant(
    variant: str, params: tuple[tuple[str, int | float | bool], ...], device: str
) -> bool:
    """Run ``variant`` once at a tiny size (8 tokens, width 8), so that the first timed run
    of the process does not include torch's one-time start-up of those kernels (measured
    here: 0.43 s for the first scaled dot-product at 32 tokens, 3 ms after)."""
    tiny = core.MultiHeadSelfAttention(8, 2, variant, **dict(params)).to(device)
    x = torch.zeros(1, 8, 8, device=device)  # (batch, L, d_model)
    with torch.no_grad():
        for need_weights in (True, False):
            try:
                tiny(x, need_weights=need_weights)
            except ValueError:  # e.g. a window wider than 8 tokens: the real run reports it
                return False
    return True


@st.cache_resource(max_entries=32, show_spinner=False)
def attention_run(
    variant: str,
    params: tuple[tuple[str, int | float | bool], ...],
    seq_len: int,
    d_model: int,
    heads: int,
    mask_kind: str,
    pad_len: int,
    dropout: float,
    seed: int,
    input_kind: str,
    sentence: str,
    device: str,
) -> AttentionRun:
    """Run one seeded multi-head self-attention layer and return everything the pages show.

    Its peak memory is a separate, cached measurement (:func:`attention_peak`), so that a page
    can draw the heatmaps first.

    Args:
        variant: registry name. params: the variant's ``(name, value)`` pairs.
        seq_len: L for random input (sentences use their own token count).
        d_model: model width D; heads: H, must divide D.
        mask_kind: ``"none"``, ``"causal"`` or ``"padding"``; pad_len: real tokens for padding.
        dropout: dropout on the weights (applied, seeded, when > 0).
        seed: seeds the input, the projections and the dropout.
        input_kind: one of :data:`INPUT_KINDS`; sentence: text for ``"typed"``.
        device: ``"auto"`` or a device name.

    Returns:
        An :class:`AttentionRun`. Weights are skipped (``None``) when the (H, L, L) matrix
        would exceed the memory budget while the output alone fits.

    Raises:
        MemoryBudgetError: when even the output cannot be computed within the budget.
        ValueError: for any invalid combination (heads not dividing d_model, bad params…).
    """
    layer = _layer(
        variant, params, seq_len, d_model, heads, mask_kind, pad_len, dropout, seed,
        input_kind, sentence, device,
    )  # fmt: skip
    _warm_up_variant(variant, params, str(layer.device))
    module, x = layer.module, layer.x
    spec = core.get_variant(variant)
    scale = 1.0 if spec.default_scale == "one" else 1.0 / math.sqrt(module.head_dim)
    out, weights, seconds = layer.forward_within_budget()
    seconds = _settled_seconds(layer, weights is not None, seconds)
    scores_np = weights_np = None
    sparsity = float("nan")
    if weights is not None:
        with torch.no_grad():
            q, k, _ = module.project_qkv(x)  # (1, H, L, E)
            # (1, H, L, E) @ (1, H, E, L) -> (1, H, L, L)
            scores = (q @ k.transpose(-2, -1)) * scale
        weights_np = _readonly(weights[0].float().cpu().numpy())  # (H, L, L)
        scores_np = _readonly(scores[0].float().cpu().numpy())  # (H, L, L)
        sparsity = float((np.abs(weights_np) <= ZERO_WEIGHT_TOL).mean())
    output_np = _readonly(out[0].float().cpu().numpy())  # (L, D)
    mean_weights = mean_scores = row_sums = None
    if weights_np is not None:
        mean_weights = _readonly(weights_np.mean(axis=0))  # (H, L, L) -> (L, L)
        mean_scores = _readonly(scores_np.mean(axis=0))  # (H, L, L) -> (L, L)
        row_sums = _readonly(mean_weights.sum(axis=-1))  # (L,)
    return AttentionRun(
        tokens=layer.tokens,
        weights=weights_np,
        scores=scores_np,
        output=output_np,
        sparsity=sparsity,
        seconds=seconds,
        device=str(layer.device),
        d_k=d_model // heads,
        mean_weights=mean_weights,
        mean_scores=mean_scores,
        row_sums=row_sums,
        output_mean=float(output_np.mean()),
        output_std=float(output_np.std()),
    )


@st.cache_resource(max_entries=32, show_spinner=False)
def attention_peak(
    variant: str,
    params: tuple[tuple[str, int | float | bool], ...],
    seq_len: int,
    d_model: int,
    heads: int,
    mask_kind: str,
    pad_len: int,
    dropout: float,
    seed: int,
    input_kind: str,
    sentence: str,
    device: str,
) -> PeakMemory:
    """Peak memory of the computation :func:`attention_run` makes with the same arguments
    (weights included when they fit the budget), measured in a run of its own.

    Returns:
        A :class:`PeakMemory`: measured when the profiler or allocator saw allocations, else
        the library's estimate.

    Raises:
        MemoryBudgetError, ValueError: as :func:`attention_run`.
    """
    layer = _layer(
        variant, params, seq_len, d_model, heads, mask_kind, pad_len, dropout, seed,
        input_kind, sentence, device,
    )  # fmt: skip
    need_weights = []

    def run() -> None:
        _out, weights, _seconds = layer.forward_within_budget()
        need_weights.append(weights is not None)

    peak, _method = experiments.measure_peak_bytes(run, layer.device)
    if not math.isnan(peak):
        return PeakMemory(int(peak), True)
    estimate = core.estimate_memory(
        variant,
        batch=1,
        heads=heads,
        L=len(layer.tokens),
        E=d_model // heads,
        need_weights=need_weights[-1],
        **dict(params),
    )
    return PeakMemory(int(estimate), False)


def max_output_difference(run: AttentionRun, reference: AttentionRun) -> float:
    """max |output − reference output| of two runs on the same input, (L, D) each."""
    return float(np.abs(run.output - reference.output).max())


def describe_bytes(nbytes: int) -> str:
    """Human-readable size, e.g. ``"4.0 MiB"``."""
    return format_bytes(nbytes)


def describe_seconds(seconds: float) -> str:
    """A short duration that fits a metric tile: ``"0.84 ms"``, ``"12.3 ms"``, ``"315 ms"``,
    ``"2.41 s"``."""
    ms = seconds * 1000.0
    if ms < 10:
        return f"{ms:.2f} ms"
    if ms < 100:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    return f"{seconds:.2f} s"


def head_entropy(weights: np.ndarray) -> np.ndarray:
    """Mean row entropy (nats) of each head.

    Args:
        weights: (H, L, S) or (L, S) non-negative weights with rows summing to 1 or 0.

    Returns:
        (H,) array (or a 0-d array for 2-D input): mean over query rows of -Σ w log w.
    """
    w = np.asarray(weights, dtype=np.float64)
    safe = np.where(w > 0, w, 1.0)
    return -(w * np.log(safe)).sum(axis=-1).mean(axis=-1)  # (H, L) -> (H,)


def mean_distance(weights: np.ndarray) -> np.ndarray:
    """Mean attention distance of each head: Σ_j w_ij |i - j|, averaged over queries i.

    Args:
        weights: (H, L, S) or (L, S) weights.

    Returns:
        (H,) array (or 0-d) in token positions.
    """
    w = np.asarray(weights, dtype=np.float64)
    L, S = w.shape[-2:]
    dist = np.abs(np.arange(L)[:, None] - np.arange(S)[None, :])  # (L, S)
    return (w * dist).sum(axis=-1).mean(axis=-1)  # (H, L) -> (H,)


@st.cache_data(max_entries=16, show_spinner=False)
def pattern_gallery(seq_len: int, seed: int) -> tuple[Heatmap, pd.DataFrame]:
    """The tutorial's eight synthetic head patterns as one heatmap table plus statistics.

    Args:
        seq_len: L in [2, 64]. seed: seed of the four random heads.

    Returns:
        (heatmap with panels named by pattern, table with columns ``pattern``, ``entropy``,
        ``mean_distance``).

    Raises:
        ValueError: when seq_len or seed is out of range.
    """
    from attention_core.experiments.patterns import head_patterns

    patterns = head_patterns(seq_len, seed)
    names = list(patterns)
    stack = np.stack([patterns[n] for n in names])  # (8, L, L)
    labels = [str(i) for i in range(seq_len)]
    heatmap = heatmap_frame(stack, labels, labels, panels=names)
    stats = pd.DataFrame(
        {"pattern": names, "entropy": head_entropy(stack), "mean_distance": mean_distance(stack)}
    )
    return heatmap, stats


# ---------------------------------------------------------------- step by step


STEP_D_MODEL = 8


@dataclass(frozen=True)
class StepByStep:
    """Every intermediate of single-head attention on a few tokens (float64, read-only).

    Attributes:
        tokens: the n tokens.
        matrices: name -> array, in teaching order: ``X`` (n, D), ``W_Q``/``W_K``/``W_V``
            (D, d_k), ``Q``/``K``/``V`` (n, d_k), ``scores`` = QKᵀ (n, n), ``scaled`` =
            scores/√d_k, ``mask`` (1 = may attend), ``weights`` (softmax rows), ``output``
            = weights·V (n, d_k).
        d_k: key width.
        library_max_diff: max |weights - attention_core.attend weights| (a cross-check).
    """

    tokens: tuple[str, ...]
    matrices: dict[str, np.ndarray]
    d_k: int
    library_max_diff: float


@st.cache_resource(max_entries=32, show_spinner=False)
def step_by_step(
    sentence_kind: str, n_tokens: int, seed: int, d_k: int, causal: bool
) -> StepByStep:
    """Compute the tutorial's Q, K, V walkthrough explicitly, in float64.

    Args:
        sentence_kind: ``"preset_en"`` or ``"preset_zh"``.
        n_tokens: how many leading tokens to use, in [2, 12].
        seed: seeds the embeddings and the projection matrices.
        d_k: width of queries/keys/values, in [1, 8].
        causal: apply a causal mask.

    Returns:
        A :class:`StepByStep`.

    Raises:
        ValueError: for an unknown sentence or sizes out of range.
    """
    if sentence_kind not in PRESET_SENTENCES:
        raise ValueError(
            f"unknown sentence {sentence_kind!r}; valid: {', '.join(PRESET_SENTENCES)}"
        )
    tokens = tokens_for(PRESET_SENTENCES[sentence_kind])
    _check_int("n_tokens", n_tokens, 2, min(12, len(tokens)))
    _check_int("d_k", d_k, 1, STEP_D_MODEL)
    tokens = tokens[:n_tokens]
    x = token_embeddings(tokens, STEP_D_MODEL, seed).double()  # (n, D)
    gen = torch.Generator().manual_seed(seed)
    w_q, w_k, w_v = (
        torch.randn(STEP_D_MODEL, d_k, generator=gen, dtype=torch.float64) / math.sqrt(STEP_D_MODEL)
        for _ in range(3)
    )  # each (D, d_k)
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # (n, D) @ (D, d_k) -> (n, d_k)
    scores = q @ k.T  # (n, d_k) @ (d_k, n) -> (n, n)
    scaled = scores / math.sqrt(d_k)
    mask = masks.causal(n_tokens) if causal else torch.ones(n_tokens, n_tokens, dtype=torch.bool)
    masked = scaled.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(masked, dim=-1)  # (n, n)
    output = weights @ v  # (n, n) @ (n, d_k) -> (n, d_k)
    check = core.attend(q, k, v, "scaled", mask=mask, need_weights=True)
    diff = float((check.weights - weights).abs().max())
    named = {
        "X": x,
        "W_Q": w_q,
        "W_K": w_k,
        "W_V": w_v,
        "Q": q,
        "K": k,
        "V": v,
        "scores": scores,
        "scaled": scaled,
        "mask": mask.double(),
        "weights": weights,
        "output": output,
    }
    return StepByStep(
        tokens=tokens,
        matrices={name: _readonly(t.numpy().copy()) for name, t in named.items()},
        d_k=d_k,
        library_max_diff=diff,
    )


def cell_breakdown(result: StepByStep, i: int, j: int) -> dict[str, float | bool]:
    """The numbers behind one weight: q_i·k_j, ÷√d_k, mask, exp, row sum, weight.

    Uses the numerically stable form: ``exp(s_ij - max_j s_ij)`` over the allowed keys.

    Args:
        result: a :class:`StepByStep`.
        i, j: query and key positions.

    Returns:
        dict with ``dot``, ``sqrt_d_k``, ``scaled``, ``allowed``, ``row_max``, ``exp``,
        ``row_sum``, ``weight``.

    Raises:
        ValueError: when i or j is out of range.
    """
    n = len(result.tokens)
    _check_int("i", i, 0, n - 1)
    _check_int("j", j, 0, n - 1)
    m = result.matrices
    allowed_row = m["mask"][i] > 0
    scaled_row = m["scaled"][i]
    row_max = float(scaled_row[allowed_row].max())
    exps = np.where(allowed_row, np.exp(scaled_row - row_max), 0.0)
    return {
        "dot": float(m["Q"][i] @ m["K"][j]),
        "sqrt_d_k": math.sqrt(result.d_k),
        "scaled": float(scaled_row[j]),
        "allowed": bool(allowed_row[j]),
        "row_max": row_max,
        "exp": float(exps[j]),
        "row_sum": float(exps.sum()),
        "weight": float(m["weights"][i, j]),
    }


# --- lab pages ---
# Cached calls behind the Scaling, Variants, Properties, Gradients and In-practice pages.
# Each wraps one experiment of attention_core.experiments; arguments are plain values and
# variant parameters are tuples of (name, value) pairs.

LAB_MAX_D_K = 1024
LAB_MAX_COMPLEXITY_L = 2048


@st.cache_data(max_entries=32, show_spinner=False)
def scaling_table(d_ks: tuple[int, ...], seq_len: int, seed: int, trials: int) -> pd.DataFrame:
    """Scores and softmax statistics with and without 1/sqrt(d_k), one row per d_k.

    Raises:
        ValueError: for a bad d_k list (each in [1, 1024]), seq_len, seed or trials.
    """
    from attention_core.experiments import measure_scaling
    from attention_core.experiments.scaling import check_d_ks

    return measure_scaling(check_d_ks(d_ks, LAB_MAX_D_K), seq_len, seed, trials)


@st.cache_resource(max_entries=64, show_spinner=False)
def variant_pattern(
    variant: str, params: tuple[tuple[str, int | float | bool], ...], seq_len: int
) -> np.ndarray | None:
    """The (L, L) bool "may attend" pattern a sparse variant applies, or ``None`` if dense.

    Raises:
        ValueError: for an unknown variant or parameter.
    """
    spec = core.get_variant(variant)
    if spec.pattern is None:
        return None
    resolved = spec.resolve_params(dict(params))
    return _readonly(spec.pattern(seq_len, seq_len, **resolved).cpu().numpy())  # (L, L)


@st.cache_resource(max_entries=64, show_spinner=False)
def allowed_pattern(
    variant: str,
    params: tuple[tuple[str, int | float | bool], ...],
    seq_len: int,
    mask_kind: str,
) -> np.ndarray:
    """(L, L) 0/1 matrix of the cells a query may attend to: the variant's pattern, the
    causal mask and a causal variant flag together (read-only)."""
    pattern = variant_pattern(variant, params, seq_len)
    allowed = np.ones((seq_len, seq_len), dtype=bool) if pattern is None else pattern.copy()
    if mask_kind == "causal" or dict(params).get("causal") is True:
        allowed &= np.tri(seq_len, dtype=bool)  # (L, L) lower triangle: j <= i
    return _readonly(allowed.astype(np.float64))


@st.cache_data(max_entries=128, show_spinner=False)
def memory_estimate(
    variant: str,
    params: tuple[tuple[str, int | float | bool], ...],
    heads: int,
    seq_len: int,
    head_dim: int,
    need_weights: bool,
) -> int:
    """Estimated peak bytes of one ``attend`` call (batch 1), from the registry's model.

    Raises:
        ValueError: for an unknown variant or parameter or a size below 1.
    """
    return core.estimate_memory(
        variant,
        batch=1,
        heads=heads,
        L=seq_len,
        E=head_dim,
        need_weights=need_weights,
        **dict(params),
    )


@st.cache_data(max_entries=256, show_spinner=False)
def complexity_cell(
    variant: str, length: int, heads: int, head_dim: int, repeats: int, device: str
) -> pd.DataFrame:
    """Measured time and peak memory of one variant at one length: a one-row table of
    :func:`attention_core.experiments.measure_complexity`. One cell per call, so a page can
    drive a progress bar between cached calls (a cached function must not draw elements).

    Raises:
        ValueError: for an unknown variant or a length above 2048.
    """
    from attention_core.experiments import measure_complexity

    _check_int("L", length, 1, LAB_MAX_COMPLEXITY_L)
    dev = _device(device).type
    return measure_complexity(
        (variant,), (length,), batch=1, heads=heads, E=head_dim, repeats=repeats, device=dev
    )


@st.cache_data(max_entries=64, show_spinner=False)
def equivariance_check(
    variant: str,
    params: tuple[tuple[str, int | float | bool], ...],
    perm: tuple[int, ...] | None,
    seq_len: int,
    d_model: int,
    heads: int,
    causal: bool,
    positional: bool,
    seed: int,
) -> dict:
    """max |f(Px) - P f(x)| of a seeded layer, as a plain dict of
    :class:`attention_core.experiments.EquivarianceResult` fields.

    Raises:
        ValueError: for a bad permutation, variant, parameter or size.
    """
    from dataclasses import asdict

    from attention_core.experiments import check_permutation_equivariance

    result = check_permutation_equivariance(
        variant, d_model, heads, seq_len, perm, causal, positional, seed, **dict(params)
    )
    return asdict(result)


@st.cache_data(max_entries=64, show_spinner=False)
def causal_leak(
    variant: str,
    params: tuple[tuple[str, int | float | bool], ...],
    seq_len: int,
    d_model: int,
    heads: int,
    cutoff: int,
    causal: bool,
    seed: int,
) -> dict:
    """Output change at earlier and later positions when the tokens after ``cutoff`` change,
    as a dict of :class:`attention_core.experiments.CausalLeakResult` fields.

    Raises:
        ValueError: for a bad cutoff, variant, parameter or size.
    """
    from dataclasses import asdict

    from attention_core.experiments import check_causal_leak

    result = check_causal_leak(
        variant, d_model, heads, seq_len, cutoff, causal, seed, **dict(params)
    )
    return asdict(result)


@st.cache_data(max_entries=64, show_spinner=False)
def row_sum_table(
    variant: str,
    params: tuple[tuple[str, int | float | bool], ...],
    seq_len: int,
    d_model: int,
    heads: int,
    causal: bool,
    seed: int,
) -> pd.DataFrame:
    """Row sums (head, query, row_sum) of a seeded layer's weights.

    Raises:
        ValueError: for a bad variant, parameter or size.
    """
    from attention_core.experiments import row_sums

    return row_sums(variant, seq_len, d_model, heads, causal, seed, **dict(params))


@st.cache_data(max_entries=64, show_spinner=False)
def chunked_exact_diff(
    seq_len: int,
    head_dim: int,
    heads: int,
    chunk_size: int,
    key_chunk_size: int,
    causal: bool,
    seed: int,
) -> float:
    """max |chunked - full attention| on seeded q, k, v (1, H, L, E).

    Raises:
        ValueError: for a bad size or chunk size.
    """
    from attention_core.experiments import check_chunked_exact

    return check_chunked_exact(seq_len, head_dim, heads, chunk_size, key_chunk_size, causal, seed)


@st.cache_data(max_entries=32, show_spinner=False)
def softmax_stability(logit_scale: float, dtype: str, seed: int) -> pd.DataFrame:
    """Naive vs stable softmax on logits up to ``logit_scale`` in ``dtype`` (two rows).

    Raises:
        ValueError: for a bad scale or dtype.
    """
    from attention_core.experiments import compare_softmax_stability

    return compare_softmax_stability(logit_scale, dtype, seed=seed)


@st.cache_data(max_entries=8, show_spinner=False)
def softmax_sweep(dtypes: tuple[str, ...], seed: int) -> pd.DataFrame:
    """Share of non-finite weights of the naive and stable softmax against the logit scale.

    Raises:
        ValueError: for an unknown dtype.
    """
    from attention_core.experiments import softmax_overflow_sweep

    scales = (1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1e3, 3e3, 1e4, 3e4)
    return softmax_overflow_sweep(scales, dtypes, seed=seed)


@st.cache_data(max_entries=32, show_spinner=False)
def gradient_by_variant(
    variants: tuple[str, ...], embed_dim: int, seq_len: int, init: str, seed: int
) -> pd.DataFrame:
    """Gradient norms of W_Q, W_K, W_V and x per variant, scaled and unscaled.

    Raises:
        ValueError: for an unknown variant, init or a bad size.
    """
    from attention_core.experiments import gradient_table

    return gradient_table(variants, embed_dim, seq_len, init, seed)


@st.cache_data(max_entries=32, show_spinner=False)
def gradient_by_dk(
    d_ks: tuple[int, ...], variant: str, seq_len: int, init: str, seed: int, trials: int
) -> pd.DataFrame:
    """Mean (and spread of) gradient norms against d_k, scaled and unscaled.

    Raises:
        ValueError: for a bad d_k list, variant, init or size.
    """
    from attention_core.experiments import gradient_norms_vs_dk

    return gradient_norms_vs_dk(d_ks, variant, seq_len, init, seed, trials)


@st.cache_data(max_entries=16, show_spinner=False)
def precision_table(seq_len: int, d_model: int, heads: int, seed: int) -> pd.DataFrame:
    """max |out_dtype - out_fp32| of a seeded layer for bfloat16, float16 and float64.

    Raises:
        ValueError: for a bad size or heads not dividing d_model.
    """
    from attention_core.experiments import precision_comparison

    return precision_comparison(seq_len, d_model, heads, seed)


@st.cache_data(max_entries=16, show_spinner=False)
def chunk_memory_estimates(
    lengths: tuple[int, ...], heads: int, head_dim: int, chunk_size: int
) -> pd.DataFrame:
    """Estimated peak bytes of full-weights, fused and chunked attention against L.

    Raises:
        ValueError: for a bad length or size.
    """
    from attention_core.experiments import chunked_vs_full_memory

    return chunked_vs_full_memory(lengths, 1, heads, head_dim, chunk_size)


@st.cache_data(max_entries=16, show_spinner=False)
def chunk_memory_measured(
    lengths: tuple[int, ...], heads: int, head_dim: int, chunk_size: int
) -> pd.DataFrame:
    """Measured peak bytes and time of explicit (``stable``) vs ``chunked`` attention.

    Raises:
        ValueError: for a length above 2048 or a bad size.
    """
    from attention_core.experiments import measure_complexity

    for n in lengths:
        _check_int("L", n, 1, LAB_MAX_COMPLEXITY_L)
    chunk = {"chunk_size": chunk_size, "key_chunk_size": chunk_size}
    return measure_complexity(
        ("stable", "chunked"),
        lengths,
        heads=heads,
        E=head_dim,
        repeats=1,
        params={"chunked": chunk},
    )


@st.cache_data(max_entries=16, show_spinner=False)
def checkpoint_table(layers: int, heads: int, seq_len: int, d_model: int) -> pd.DataFrame:
    """Estimated activation bytes kept for backward, with and without checkpointing.

    Raises:
        ValueError: for a bad size.
    """
    from attention_core.experiments import checkpointing_estimate

    return checkpointing_estimate(layers, 1, heads, seq_len, d_model)


# --- real model ---


MODEL_INSTALL_HINT = pretrained.INSTALL_HINT
MODEL_TEXT_MAX_CHARS = 200
MODEL_GRID_MAX_TOKENS = 32
WEIGHT_MILLI = 1000
MODEL_HEAD_VIEW_MAX_TOKENS = 40
MODEL_LINE_MIN_WEIGHT = 0.01
MODEL_PRESETS = {
    "cat_comfortable": "The cat sat on the mat because it was comfortable.",
    "cat_soft": "The cat sat on the mat because it was soft.",
    "zh_cat": "那只猫坐在垫子上，它看起来很舒服。",
    "bank": "She sat on the bank of the river and watched the water.",
}


@dataclass(frozen=True)
class ModelRun:
    """One text through all-MiniLM-L6-v2 with one attention variant (read-only arrays).

    Attributes:
        tokens: the L WordPiece tokens (``[CLS]`` … ``[SEP]``).
        attentions: (N, H, L, L) weights of every layer and head (N = 6, H = 12).
        embedding: (D,) mean-pooled sentence embedding (D = 384), before normalisation.
        unk_share: fraction of the non-special tokens that are ``[UNK]``.
        truncated: True when the text was cut at the model's maximum length.
        variant: the attention variant used in every layer.
        params: its resolved ``(name, value)`` pairs, sorted by name.
    """

    tokens: tuple[str, ...]
    attentions: np.ndarray
    embedding: np.ndarray
    unk_share: float
    truncated: bool
    variant: str
    params: tuple[tuple[str, int | float | bool], ...]


def model_installed() -> bool:
    """Return True when the all-MiniLM-L6-v2 package is installed (nothing is imported)."""
    return pretrained.model_available()


@st.cache_resource(show_spinner=False)
def minilm_encoder() -> pretrained.Encoder:
    """Load all-MiniLM-L6-v2 once per server process (SHA-256 checked, exact attention).

    Returns:
        The shared encoder. Never mutate it: :func:`model_run` uses weight-sharing twins
        (:meth:`attention_core.pretrained.Encoder.with_variant`).

    Raises:
        ModelNotInstalledError: when the package is missing (the message has the pip line).
        ValueError: when the weights' SHA-256 differs from the pinned one.
    """
    return pretrained.load_minilm()


@st.cache_resource(max_entries=32, show_spinner=False)
def model_run(
    text: str, variant: str, params: tuple[tuple[str, int | float | bool], ...]
) -> ModelRun:
    """Encode ``text`` with ``variant`` replacing the attention in all six layers.

    Args:
        text: the sentence, 1 to :data:`MODEL_TEXT_MAX_CHARS` characters.
        variant: registry name; params: the variant's ``(name, value)`` pairs.

    Returns:
        A :class:`ModelRun` (weights (6, 12, L, L), embedding (384,)).

    Raises:
        ValueError: for blank or over-long text, an unknown variant or a bad parameter.
        ModelNotInstalledError: when the package is missing.
    """
    if not isinstance(text, str) or len(text) > MODEL_TEXT_MAX_CHARS:
        raise ValueError(
            f"text must be a string of at most {MODEL_TEXT_MAX_CHARS} characters, got {text!r}"
        )
    encoder = minilm_encoder().with_variant(variant, **dict(params))
    result = encoder.encode(text)
    tokenized = pretrained.Tokenized(result.tokens, result.input_ids.tolist(), result.truncated)
    return ModelRun(
        tokens=tuple(result.tokens),
        attentions=_readonly(result.attentions.numpy().copy()),  # (N, H, L, L)
        embedding=_readonly(result.sentence_embedding.numpy().copy()),  # (D,)
        unk_share=tokenized.unk_share,
        truncated=result.truncated,
        variant=variant,
        params=tuple(sorted(encoder.variant_params.items())),
    )


def embedding_cosine(a: ModelRun, b: ModelRun) -> float:
    """Cosine similarity of two runs' mean-pooled sentence embeddings, in float64.

    Raises:
        ValueError: when the embeddings differ in shape or one is zero.
    """
    return pretrained.cosine_similarity(
        torch.from_numpy(a.embedding.copy()), torch.from_numpy(b.embedding.copy())
    )


SAME_MAPS_TOL = 1e-5  # float32 round-off between exact variants


@dataclass(frozen=True)
class SwapComparison:
    """How a swapped-in variant changes the real model.

    Attributes:
        cosine: sentence-embedding cosine to the exact model.
        swapped_map: (L, L) the variant's weights in the chosen layer and head.
        difference: (L, L) swapped minus exact weights there.
        max_change: max |difference|.
        same_maps: whether all 72 maps agree within :data:`SAME_MAPS_TOL`.
    """

    cosine: float
    swapped_map: np.ndarray
    difference: np.ndarray
    max_change: float
    same_maps: bool


def compare_swap(swapped: ModelRun, exact: ModelRun, layer: int, head: int) -> SwapComparison:
    """Compare a swapped-variant run with the exact one (1-based ``layer`` and ``head``)."""
    swapped_map = swapped.attentions[layer - 1, head - 1]  # (L, L)
    difference = swapped_map - exact.attentions[layer - 1, head - 1]  # (L, L)
    all_maps_change = float(np.abs(swapped.attentions - exact.attentions).max())  # (6, 12, L, L)
    return SwapComparison(
        cosine=embedding_cosine(swapped, exact),
        swapped_map=swapped_map,
        difference=difference,
        max_change=float(np.abs(difference).max()),
        same_maps=all_maps_change <= SAME_MAPS_TOL,
    )


def top_key(run: ModelRun, layer: int, head: int, query: int) -> tuple[int, float]:
    """The key a query token attends to most in one head, with its weight.

    Args:
        run: a :class:`ModelRun`.
        layer, head: 1-based layer and head.
        query: 0-based query position.

    Returns:
        ``(key position, weight)``.

    Raises:
        ValueError: when layer, head or query is out of range.
    """
    n_layers, n_heads, length = run.attentions.shape[:3]
    _check_int("layer", layer, 1, n_layers)
    _check_int("head", head, 1, n_heads)
    _check_int("query", query, 0, length - 1)
    row = run.attentions[layer - 1, head - 1, query]  # (L,)
    key = int(np.argmax(row))
    return key, float(row[key])


def model_grid_frame(run: ModelRun, max_tokens: int = MODEL_GRID_MAX_TOKENS) -> pd.DataFrame:
    """Every layer's and head's weights on the first ``max_tokens`` tokens, compactly.

    One row per (layer, head, query) holds the whole weight row as whole thousandths in
    one text field, so the browser receives N·H·l short rows instead of N·H·l² (about 7x
    smaller); :func:`dashboard.charts.model_view_chart` expands them in the browser.

    Args:
        run: a :class:`ModelRun`.
        max_tokens: crop to this many leading tokens (at most 72 · max_tokens² cells).

    Returns:
        Columns ``layer``, ``head`` (1-based), ``i`` (query position) and ``w``: text of l
        comma-separated integers, the weights to keys 0..l-1 in thousandths (0..1000).
    """
    weights = run.attentions[:, :, :max_tokens, :max_tokens]  # (N, H, l, l)
    n_layers, n_heads, n, _ = weights.shape
    layer, head, i = np.meshgrid(
        np.arange(1, n_layers + 1), np.arange(1, n_heads + 1), np.arange(n), indexing="ij"
    )  # each (N, H, l)
    milli = np.rint(weights * WEIGHT_MILLI).astype(np.int16).reshape(-1, n)  # (N·H·l, l)
    return pd.DataFrame(
        {
            "layer": layer.ravel(),
            "head": head.ravel(),
            "i": i.ravel(),
            "w": [",".join(map(str, row.tolist())) for row in milli],
        }
    )


def model_token_frame(run: ModelRun, max_tokens: int) -> pd.DataFrame:
    """The first ``max_tokens`` tokens as a table: ``i`` (position) and ``token`` (label)."""
    labels = axis_labels(run.tokens)[:max_tokens]
    return pd.DataFrame({"i": np.arange(len(labels)), "token": labels})


def head_view_frame(
    run: ModelRun, layer: int, head: int, max_tokens: int = MODEL_HEAD_VIEW_MAX_TOKENS
) -> pd.DataFrame:
    """Lines from query to key tokens of one head, for weights >= :data:`MODEL_LINE_MIN_WEIGHT`.

    Args:
        run: a :class:`ModelRun`.
        layer, head: 1-based layer and head.
        max_tokens: crop to this many leading tokens.

    Returns:
        Columns ``i`` (query position), ``j`` (key position), ``query``, ``key`` (labels)
        and ``weight``.

    Raises:
        ValueError: when layer or head is out of range.
    """
    n_layers, n_heads = run.attentions.shape[:2]
    _check_int("layer", layer, 1, n_layers)
    _check_int("head", head, 1, n_heads)
    weights = run.attentions[layer - 1, head - 1, :max_tokens, :max_tokens]  # (l, l)
    i, j = np.nonzero(weights >= MODEL_LINE_MIN_WEIGHT)
    labels = axis_labels(run.tokens)
    return pd.DataFrame(
        {
            "i": i,
            "j": j,
            "query": [labels[k] for k in i],
            "key": [labels[k] for k in j],
            "weight": weights[i, j].astype(np.float64),
        }
    )
