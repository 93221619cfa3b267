"""Cached calls behind the Scaling, Variants, Properties, Gradients and In-practice pages.

Each wraps one experiment of :mod:`attention_core.experiments`; arguments are plain values
and variant parameters are tuples of ``(name, value)`` pairs.
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pandas as pd
import streamlit as st
import torch

import attention_core as core
from attention_core import experiments
from attention_core.device import resolve_budget
from attention_core.experiments.scaling import MAX_SCALING_LEN, check_d_ks, derived_seed
from attention_core.validation import check_int
from dashboard.config import LayerConfig, ParamPairs
from dashboard.data.catalogue import device_for
from dashboard.data.memo import bounded_cache
from dashboard.data.tables import readonly
from dashboard.runtime import threads

LAB_MAX_D_K = 1024
LAB_MAX_COMPLEXITY_L = 16384
QUADRATIC_MAX_L = 2048
"""Above this length the cost chart measures only the variants whose memory grows slower
than L² and fits the memory budget."""
SUBQUADRATIC_GROWTH = 2.5
"""Estimated peak memory at L over that at L/2: about 4 for an L×L variant, about 2 for a
linear one."""


@st.cache_data(max_entries=32, show_spinner=False)
def scaling_table(d_ks: tuple[int, ...], seq_len: int, seed: int, trials: int) -> pd.DataFrame:
    """Scores and softmax statistics with and without 1/sqrt(d_k), one row per d_k.

    Raises:
        ValueError: for a bad d_k list (each in [1, 1024]), seq_len, seed or trials.
    """
    return experiments.measure_scaling(check_d_ks(d_ks, LAB_MAX_D_K), seq_len, seed, trials)


SCALING_ROW_QUERY = 0  # the query whose weights the scaling page draws


@st.cache_data(max_entries=32, show_spinner=False)
def scaling_row(d_k: int, seq_len: int, seed: int) -> pd.DataFrame:
    """One query's attention weights over ``seq_len`` keys, divided by √d_k and not: q and
    k of N(0, 1) entries (as the scaling table draws them), through ``attention_core.attend``
    with its default scale 1/√d_k and with scale 1.

    Returns:
        One row per key: ``key`` (1-based position), ``scaled`` and ``unscaled`` (weights,
        each column summing to 1).

    Raises:
        ValueError: for a d_k outside [1, :data:`LAB_MAX_D_K`], a length outside [2, 256]
            or a negative seed.
    """
    d_k = check_int("d_k", d_k, low=1, high=LAB_MAX_D_K)
    seq_len = check_int("seq_len", seq_len, low=2, high=MAX_SCALING_LEN)
    seed = check_int("seed", seed, low=0, high=2**63 - 1)
    generator = torch.Generator().manual_seed(derived_seed(seed, d_k))
    q = torch.randn(1, d_k, generator=generator, dtype=torch.float64)  # (1, E): one query
    k = torch.randn(seq_len, d_k, generator=generator, dtype=torch.float64)  # (L, E)
    v = torch.zeros(seq_len, 1, dtype=torch.float64)  # (L, 1): only the weights are read
    weights = {
        name: core.attend(q, k, v, "scaled", scale=scale, need_weights=True).weights[0]  # (L,)
        for name, scale in (("scaled", None), ("unscaled", 1.0))
    }
    return pd.DataFrame(
        {
            "key": np.arange(1, seq_len + 1),
            "scaled": weights["scaled"].numpy(),
            "unscaled": weights["unscaled"].numpy(),
        }
    )


@st.cache_resource(max_entries=64, show_spinner=False)
def variant_pattern(variant: str, params: ParamPairs, seq_len: int) -> np.ndarray | None:
    """The (L, L) bool "may attend" pattern a sparse variant applies, or ``None`` if dense.

    Raises:
        ValueError: for an unknown variant or parameter.
    """
    spec = core.get_variant(variant)
    if spec.pattern is None:
        return None
    resolved = spec.resolve_params(dict(params))
    return readonly(spec.pattern(seq_len, seq_len, **resolved).cpu().numpy())  # (L, L)


@st.cache_resource(max_entries=64, show_spinner=False)
def allowed_pattern(
    variant: str,
    params: ParamPairs,
    seq_len: int,
    mask_kind: str,
) -> np.ndarray:
    """(L, L) 0/1 matrix of the cells a query may attend to: the variant's pattern, the
    causal mask and a causal variant flag together (read-only)."""
    pattern = variant_pattern(variant, params, seq_len)
    allowed = np.ones((seq_len, seq_len), dtype=bool) if pattern is None else pattern.copy()
    if mask_kind == "causal" or dict(params).get("causal") is True:
        allowed &= np.tri(seq_len, dtype=bool)  # (L, L) lower triangle: j <= i
    return readonly(allowed.astype(np.float64))


@st.cache_data(max_entries=128, show_spinner=False)
def memory_estimate(
    variant: str,
    params: ParamPairs,
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


@st.cache_data(max_entries=64, show_spinner=False)
def measurable_variants(
    variants: tuple[str, ...], length: int, heads: int, head_dim: int
) -> tuple[str, ...]:
    """The variants the cost chart measures at ``length``: every one up to
    :data:`QUADRATIC_MAX_L`; above it, those whose estimated peak memory (no weights, batch
    1) grows sub-quadratically (the registry's memory model at L against L/2) and fits the
    memory budget.

    Raises:
        ValueError: for an unknown variant or a size below 1.
    """
    check_int("L", length, low=1, high=LAB_MAX_COMPLEXITY_L)
    if length <= QUADRATIC_MAX_L:
        return variants
    budget = resolve_budget(None)

    def peak(name: str, n: int) -> int:
        return core.estimate_memory(name, batch=1, heads=heads, L=n, E=head_dim)

    return tuple(
        name
        for name in variants
        if peak(name, length) <= budget
        and peak(name, length) <= SUBQUADRATIC_GROWTH * peak(name, length // 2)
    )


@st.cache_data(max_entries=256, show_spinner=False)
def complexity_cell(
    variant: str, length: int, heads: int, head_dim: int, repeats: int, device: str
) -> pd.DataFrame:
    """Measured time and peak memory of one variant at one length, on one CPU thread
    (:func:`dashboard.runtime.threads.single_threaded`): a one-row table of
    :func:`attention_core.experiments.measure_complexity`. One cell per call, so a page can
    drive a progress bar between cached calls (a cached function must not draw elements).

    Raises:
        ValueError: for an unknown variant or a length above 16384.
    """
    check_int("L", length, low=1, high=LAB_MAX_COMPLEXITY_L)
    dev = device_for(device).type
    threads.start_profiler()  # in the thread that imported torch, before the first measurement
    with threads.single_threaded():  # figures that do not depend on the machine's load
        return experiments.measure_complexity(
            (variant,), (length,), batch=1, heads=heads, E=head_dim, repeats=repeats, device=dev
        )


CostCells = tuple[tuple[str, int, int], ...]
"""(variant, L, repeats) of each :func:`complexity_cell` of a cost table."""


@bounded_cache(max_bytes=0, max_entries=16, ttl_s=float("inf"))
def complexity_table(cells: CostCells, heads: int, head_dim: int, device: str) -> pd.DataFrame:
    """Every cell of ``cells`` (:func:`complexity_cell`, each measured once per server) in one
    table shared by every session (callers change copies), kept whole: a page measures the
    cells one by one with a progress bar, then asks for the table, which later runs (a
    room's followers arriving at the step) read at once with ``complexity_table.cached``
    instead of unpickling each cell's row and redrawing the progress bar (30 followers
    of one server arriving at the Variants step: p50 2.09 → 1.53 s).

    Raises:
        ValueError: as :func:`complexity_cell`.
    """
    parts = [complexity_cell(v, n, heads, head_dim, r, device) for v, n, r in cells]
    return pd.concat(parts, ignore_index=True)


def _seeded_layer_check(check, cfg: LayerConfig, **options) -> dict:
    """``check(variant, d_model, heads, seq_len, seed=…, **params, **options)``, one of the
    library's property checks on the seeded layer ``cfg`` describes, as a plain dict of its
    result's fields."""
    result = check(
        cfg.variant, cfg.d_model, cfg.heads, cfg.seq_len, seed=cfg.seed, **cfg.param_dict, **options
    )
    return asdict(result)


@st.cache_data(max_entries=64, show_spinner=False)
def equivariance_check(
    cfg: LayerConfig, *, perm: tuple[int, ...] | None, causal: bool, positional: bool
) -> dict:
    """max |f(Px) - P f(x)| of the seeded layer ``cfg`` describes (its variant, params,
    seq_len, d_model, heads and seed), as a plain dict of
    :class:`attention_core.experiments.EquivarianceResult` fields.

    Raises:
        ValueError: for a bad permutation, variant, parameter or size.
    """
    return _seeded_layer_check(
        experiments.check_permutation_equivariance,
        cfg,
        perm=perm,
        causal=causal,
        positional=positional,
    )


@st.cache_data(max_entries=64, show_spinner=False)
def causal_leak(cfg: LayerConfig, *, cutoff: int, causal: bool) -> dict:
    """Output change at earlier and later positions of the layer ``cfg`` describes when the
    tokens after ``cutoff`` change, as a dict of
    :class:`attention_core.experiments.CausalLeakResult` fields.

    Raises:
        ValueError: for a bad cutoff, variant, parameter or size.
    """
    return _seeded_layer_check(experiments.check_causal_leak, cfg, cutoff=cutoff, causal=causal)


@st.cache_data(max_entries=64, show_spinner=False)
def row_sum_table(cfg: LayerConfig, *, causal: bool) -> pd.DataFrame:
    """Row sums (head, query, row_sum) of the weights of the layer ``cfg`` describes.

    Raises:
        ValueError: for a bad variant, parameter or size.
    """
    return experiments.row_sums(
        cfg.variant, cfg.seq_len, cfg.d_model, cfg.heads, causal, cfg.seed, **cfg.param_dict
    )


@st.cache_data(max_entries=64, show_spinner=False)
def chunked_exact_diff(
    seq_len: int,
    head_dim: int,
    heads: int,
    chunk_size: int,
    key_chunk_size: int,
    *,
    causal: bool,
    seed: int,
) -> float:
    """max |chunked - full attention| on seeded q, k, v (1, H, L, E).

    Raises:
        ValueError: for a bad size or chunk size.
    """
    return experiments.check_chunked_exact(
        seq_len,
        head_dim,
        heads,
        chunk_size=chunk_size,
        key_chunk_size=key_chunk_size,
        causal=causal,
        seed=seed,
    )


@st.cache_data(max_entries=32, show_spinner=False)
def softmax_stability(logit_scale: float, dtype: str, seed: int) -> pd.DataFrame:
    """Naive vs stable softmax on logits up to ``logit_scale`` in ``dtype`` (two rows).

    Raises:
        ValueError: for a bad scale or dtype.
    """
    return experiments.compare_softmax_stability(logit_scale, dtype, seed=seed)


@st.cache_data(max_entries=8, show_spinner=False)
def softmax_sweep(dtypes: tuple[str, ...], seed: int) -> pd.DataFrame:
    """Share of non-finite weights of the naive and stable softmax against the logit scale.

    Raises:
        ValueError: for an unknown dtype.
    """
    scales = (1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1e3, 3e3, 1e4, 3e4)
    return experiments.softmax_overflow_sweep(scales, dtypes, seed=seed)


@st.cache_data(max_entries=32, show_spinner=False)
def gradient_by_variant(
    variants: tuple[str, ...], embed_dim: int, seq_len: int, init: str, seed: int
) -> pd.DataFrame:
    """Gradient norms of W_Q, W_K, W_V and x per variant, scaled and unscaled.

    Raises:
        ValueError: for an unknown variant, init or a bad size.
    """
    return experiments.gradient_table(variants, embed_dim, seq_len, init, seed)


@st.cache_data(max_entries=32, show_spinner=False)
def gradient_by_dk(
    d_ks: tuple[int, ...], variant: str, seq_len: int, init: str, seed: int, trials: int
) -> pd.DataFrame:
    """Mean (and spread of) gradient norms against d_k, scaled and unscaled.

    Raises:
        ValueError: for a bad d_k list, variant, init or size.
    """
    return experiments.gradient_norms_vs_dk(d_ks, variant, seq_len, init, seed, trials)


@st.cache_data(max_entries=16, show_spinner=False)
def precision_table(seq_len: int, d_model: int, heads: int, seed: int) -> pd.DataFrame:
    """max |out_dtype - out_fp32| of a seeded layer for bfloat16, float16 and float64.

    Raises:
        ValueError: for a bad size or heads not dividing d_model.
    """
    return experiments.precision_comparison(seq_len, d_model, heads, seed)


@st.cache_data(max_entries=16, show_spinner=False)
def chunk_memory_estimates(
    lengths: tuple[int, ...], heads: int, head_dim: int, chunk_size: int
) -> pd.DataFrame:
    """Estimated peak bytes of full-weights, fused and chunked attention against L.

    Raises:
        ValueError: for a bad length or size.
    """
    return experiments.chunked_vs_full_memory(lengths, 1, heads, head_dim, chunk_size)


@st.cache_data(max_entries=16, show_spinner=False)
def chunk_memory_measured(
    lengths: tuple[int, ...], heads: int, head_dim: int, chunk_size: int
) -> pd.DataFrame:
    """Measured peak bytes and time of explicit (``stable``) vs ``chunked`` attention.

    Raises:
        ValueError: for a length above 2048 (the explicit variant forms L×L) or a bad size.
    """
    for n in lengths:
        check_int("L", n, low=1, high=QUADRATIC_MAX_L)
    chunk = {"chunk_size": chunk_size, "key_chunk_size": chunk_size}
    threads.start_profiler()  # in the thread that imported torch, before the first measurement
    return experiments.measure_complexity(
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
    return experiments.checkpointing_estimate(layers, 1, heads, seq_len, d_model)
