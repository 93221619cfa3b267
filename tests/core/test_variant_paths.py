"""The paths added for speed and memory and the pre-softmax scores.

Each path is held to an independent reference in float64: PyTorch's SDPA under the
equivalent mask, or the explicit formula. Helpers come from ``test_variants``.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attention_core import VARIANTS, attend, masks
from attention_core.variants import band_kernel, local_fast
from tests.core.variant_reference import (
    BIG_L,
    COMPARABLE,
    MASK_KINDS,
    SMALL_BUDGET,
    SMALL_PARAMS,
    B,
    H,
    L,
    check_against_reference,
    largest_allocation,
    qkv,
    ref_scale,
    reference_mask,
    user_mask,
)

# --- pre-softmax scores (AttentionResult.scores) -------------------------------------------

SCORE_MASK_KINDS = ("none", "causal", "float", "bool4d")
# Square tilings (L=12) take block's and strided's gather-free views; L=10 the padded gathers.
SCORE_CASES = [
    pytest.param(name, mask_kind, Ls, id=f"{name}-{mask_kind}-L{Ls}")
    for name in sorted(VARIANTS)
    for mask_kind in SCORE_MASK_KINDS
    for Ls in (L, 12)
]


def _expected_scores(name, q, k, mask, params, scale):
    """q·kᵀ·scale (float64) plus the float mask, every blocked cell at float64's minimum."""
    additive = reference_mask(name, mask, q.shape[-2], k.shape[-2], params)
    scores = (q @ k.transpose(-2, -1)) * scale  # (..., L, S)
    if additive is None:
        return scores
    scores = scores + additive
    return scores.masked_fill(additive == -math.inf, torch.finfo(torch.float64).min)


@pytest.mark.parametrize(("name", "mask_kind", "Ls"), SCORE_CASES)
def test_scores_are_the_masked_scaled_logits_and_give_the_weights(name, mask_kind, Ls):
    q, k, v = qkv(torch.float64, L=Ls)
    mask = user_mask(mask_kind, Ls, Ls)
    params = SMALL_PARAMS.get(name, {})
    if name == "linear":  # its masks are key padding and causal only: none is needed here
        result = attend(q, k, v, name, need_weights=True, **params)
        assert result.weights is not None and result.scores is None  # no softmax, no scores
        return
    result = attend(q, k, v, name, mask=mask, need_weights=True, **params)
    expected = _expected_scores(name, q, k, mask, params, ref_scale(name, None))
    assert result.scores is not None and result.scores.dtype == torch.float64
    torch.testing.assert_close(result.scores, expected, atol=1e-10, rtol=0)
    assert not torch.isinf(result.scores).any(), "blocked cells hold the dtype's minimum"
    has_key = (expected > torch.finfo(torch.float64).min).any(dim=-1)  # (..., L)
    softmax = torch.softmax(result.scores, dim=-1)
    torch.testing.assert_close(result.weights[has_key], softmax[has_key], atol=1e-10, rtol=0)
    assert (result.weights[~has_key] == 0).all()
    assert attend(q, k, v, name, mask=mask, need_weights=False, **params).scores is None


@pytest.mark.parametrize("name", COMPARABLE)
def test_scores_of_half_inputs_are_kept_in_float32(name):
    q, k, v = qkv(torch.bfloat16)
    params = SMALL_PARAMS.get(name, {})
    result = attend(q, k, v, name, mask=masks.causal(L), need_weights=True, **params)
    assert result.scores.dtype == torch.float32
    scale = ref_scale(name, None)
    expected = _expected_scores(name, q.double(), k.double(), masks.causal(L), params, scale)
    blocked = expected == torch.finfo(torch.float64).min
    torch.testing.assert_close(
        result.scores.double()[~blocked], expected[~blocked], atol=0.05, rtol=0.02
    )
    assert (result.scores[blocked] == torch.finfo(torch.float32).min).all()


@pytest.mark.parametrize("name", ["block", "strided"])
@pytest.mark.parametrize("mask_kind", MASK_KINDS)
def test_gather_free_views_equal_sdpa(name, mask_kind):
    """L a multiple of the block and the stride: the groups are views of q, k, v."""
    Ls = 12
    q, k, v = qkv(torch.float64, L=Ls)
    mask = user_mask(mask_kind, Ls, Ls)
    params = {"block": {"block_size": 4}, "strided": {"stride": 3}}[name]
    check_against_reference(name, q, k, v, mask, params, need_weights=False)
    q32, k32, v32 = qkv(torch.float32, L=Ls)
    check_against_reference(name, q32, k32, v32, mask, params, need_weights=False)


@pytest.mark.parametrize("window_size", [1, 2, 3, 8, 9, 16, 17, 64, 200])
@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding", "float", "bool4d"])
def test_fused_local_blocks_interior_and_edges(window_size, mask_kind, monkeypatch):
    """Small fused query blocks over L = 70 (so interior blocks, clipped edge blocks and a
    partial last block all occur) equal SDPA under the band, with and without a mask."""
    monkeypatch.setattr(local_fast, "FUSED_QUERY_BLOCK", 8)
    Lw = 70
    q, k, v = qkv(torch.float64, L=Lw)
    mask = user_mask(mask_kind, Lw, Lw) if mask_kind != "bool4d" else None
    if mask_kind == "bool4d":
        mask = torch.rand(B, H, Lw, Lw, generator=torch.Generator().manual_seed(9)) < 0.6
    params = {"window_size": window_size}
    check_against_reference("local", q, k, v, mask, params, need_weights=False)
    q32, k32, v32 = qkv(torch.float32, L=Lw)
    mask32 = mask.float() if mask is not None and mask.is_floating_point() else mask
    check_against_reference("local", q32, k32, v32, mask32, params, need_weights=False)
    with band_kernel.disabled():  # float32 without a mask: the SDPA blocks, not the C kernel
        check_against_reference("local", q32, k32, v32, mask32, params, need_weights=False)


@pytest.mark.parametrize("masked", [False, True], ids=["no_mask", "padding"])
def test_fused_local_gradients_equal_sdpa_gradients(masked, monkeypatch):
    """Gradients flow through the overlapping window views (interior and edge blocks)."""
    monkeypatch.setattr(local_fast, "FUSED_QUERY_BLOCK", 8)
    Lw, params = 30, {"window_size": 9}
    mask = masks.padding([25, 30], Lw).unsqueeze(1) if masked else None  # (B, 1, 1, S)
    leaves = [t.requires_grad_() for t in qkv(torch.float64, L=Lw)]
    attend(*leaves, "local", mask=mask, **params).output.square().sum().backward()
    ref_leaves = [t.detach().clone().requires_grad_() for t in leaves]
    additive = reference_mask("local", mask, Lw, Lw, params)
    ref_out = F.scaled_dot_product_attention(*ref_leaves, attn_mask=additive)
    ref_out.square().sum().backward()
    for ours, ref in zip(leaves, ref_leaves, strict=True):
        torch.testing.assert_close(ours.grad, ref.grad, atol=1e-10, rtol=0)


@pytest.fixture
def fast_calls(monkeypatch):
    """Count the calls ``local`` hands to its fast paths."""
    calls = []
    real = local_fast.fast_local

    def spy(*args, **kwargs):
        calls.append(kwargs["need_weights"])
        return real(*args, **kwargs)

    monkeypatch.setattr(local_fast, "fast_local", spy)
    return calls


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("mask_kind", MASK_KINDS)
@pytest.mark.parametrize("window_size", [1, 9, 64])
def test_local_fast_paths_equal_the_readable_path(
    dtype, need_weights, mask_kind, window_size, fast_calls, monkeypatch
):
    """Whatever fast path runs (the kernel, the SDPA blocks), ``local`` gives what its
    readable window path gives under ``local_fast.disabled()``, and both equal SDPA under
    the band (``check_against_reference``)."""
    monkeypatch.setattr(local_fast, "FUSED_QUERY_BLOCK", 8)  # interior and edge blocks at L=40
    Lw, params = 40, {"window_size": window_size}
    q, k, v = qkv(dtype, L=Lw)
    mask = user_mask(mask_kind, Lw, Lw)
    if mask is not None and mask.is_floating_point():
        mask = mask.to(dtype)
    fast = attend(q, k, v, "local", mask=mask, need_weights=need_weights, **params)
    with local_fast.disabled():
        assert not local_fast.is_enabled() and not band_kernel.status().available
        readable = attend(q, k, v, "local", mask=mask, need_weights=need_weights, **params)
        check_against_reference("local", q, k, v, mask, params, need_weights=need_weights)
    assert local_fast.is_enabled()
    kernel_takes_weights = mask is None and band_kernel.can_run(q, k, v)
    assert fast_calls == ([need_weights] if not need_weights or kernel_takes_weights else [])
    atol = 1e-10 if dtype == torch.float64 else 3e-6
    torch.testing.assert_close(fast.output, readable.output, atol=atol, rtol=0)
    if need_weights:
        torch.testing.assert_close(fast.weights, readable.weights, atol=atol, rtol=0)
        torch.testing.assert_close(fast.scores, readable.scores, atol=atol, rtol=0)
    check_against_reference("local", q, k, v, mask, params, need_weights=need_weights)


# --- chunked's fused tiles ------------------------------------------------------------


@pytest.mark.parametrize("masked", [False, True], ids=["no_mask", "causal"])
def test_fused_chunked_allocates_no_score_matrix_at_L_4096(masked):
    """With E == Ev and no weights, chunked runs fused tiles: nothing L×S is allocated
    (default sizes; with a mask, one float mask tile of chunk × key_chunk per head, so
    smaller tiles), and the output equals SDPA's."""
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, BIG_L, 16, generator=g) for _ in range(3))
    mask = masks.causal(BIG_L) if masked else None
    params = {"chunk_size": 256, "key_chunk_size": 1024} if masked else {}
    largest = largest_allocation(lambda: attend(q, k, v, "chunked", mask=mask, **params))
    assert largest < BIG_L * BIG_L * 4 / 8, f"chunked allocated {largest} bytes at once"
    out = attend(q, k, v, "chunked", mask=mask, memory_budget=SMALL_BUDGET, **params).output
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=0)
