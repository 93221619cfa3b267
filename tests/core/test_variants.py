"""Every attention variant against an independent reference.

Exact variants are compared with ``torch.nn.functional.scaled_dot_product_attention`` under
the equivalent mask (the variant's pattern intersected with the user mask) and their weights
with an explicit float64 softmax; ``linear`` with its kernel formula written out in float64.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attention_core import VARIANTS, MemoryBudgetError, attend, estimate_memory, masks
from tests.core.variant_reference import (
    ATOL,
    BIG_L,
    COMPARABLE,
    DENSE,
    DROPOUT_VARIANTS,
    EFFICIENT,
    MASK_KINDS,
    SMALL_BUDGET,
    SMALL_PARAMS,
    B,
    E,
    H,
    L,
    check_against_reference,
    largest_allocation,
    qkv,
    ref_scale,
    reference,
    reference_mask,
    user_mask,
)

# --- the registry ------------------------------------------------------------------------


def test_registry_marks_the_exact_variants():
    expected_exact = {"scaled", "stable", "chunked", "local", "strided", "block", "random"}
    expected_exact.add("combined")
    exact = {name for name, spec in VARIANTS.items() if spec.exact}
    assert expected_exact <= exact
    assert not VARIANTS["linear"].exact
    assert VARIANTS["basic"].default_scale == "one"
    assert VARIANTS["linear"].default_scale == "one"
    assert not VARIANTS["linear"].supports_dropout


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_spec_is_plain_data(name):
    spec = VARIANTS[name]
    assert spec.name == name and spec.label and spec.explanation
    assert spec.time_complexity.startswith("O(") and spec.memory_complexity.startswith("O(")
    for param in spec.params:
        assert param.kind in ("int", "float", "bool")
        assert param.validate(param.default) == param.default
    assert spec.resolve_params({}) == spec.defaults()


# --- exact variants against SDPA ---------------------------------------------------------


@pytest.mark.parametrize("need_weights", [False, True], ids=["no_weights", "weights"])
@pytest.mark.parametrize("mask_kind", MASK_KINDS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", COMPARABLE)
def test_exact_variant_equals_sdpa(name, dtype, mask_kind, need_weights):
    q, k, v = qkv(dtype)
    mask = user_mask(mask_kind, L, L)
    if mask is not None and mask.is_floating_point():
        mask = mask.to(dtype)
    params = SMALL_PARAMS.get(name, {})
    check_against_reference(name, q, k, v, mask, params, need_weights=need_weights)


@pytest.mark.parametrize("name", COMPARABLE)
def test_exact_variant_default_params_and_explicit_scale(name):
    q, k, v = qkv(torch.float64, L=12)
    check_against_reference(name, q, k, v, None, {}, need_weights=True)
    check_against_reference(name, q, k, v, masks.causal(12), {}, need_weights=True, scale=0.3)


@pytest.mark.parametrize("name", COMPARABLE)
def test_exact_variant_without_leading_dims_and_with_broadcast_kv(name):
    params = SMALL_PARAMS.get(name, {})
    q, k, v = qkv(torch.float64, lead=())  # (L, E): no batch, no heads
    check_against_reference(name, q, k, v, masks.causal(L), params, need_weights=True)
    q, _, _ = qkv(torch.float64, lead=(B, H))
    _, k, v = qkv(torch.float64, lead=(1, H), seed=1)  # keys shared across the batch
    check_against_reference(name, q, k, v, None, params, need_weights=False)


@pytest.mark.parametrize("name", COMPARABLE)
def test_exact_variant_cross_attention(name):
    """L != S (queries against a longer key sequence)."""
    q, _, _ = qkv(torch.float64, L=5)
    _, k, v = qkv(torch.float64, L=9, seed=2)
    params = SMALL_PARAMS.get(name, {})
    check_against_reference(name, q, k, v, None, params, need_weights=True)
    check_against_reference(name, q, k, v, masks.causal(5, 9), params, need_weights=False)


@pytest.mark.parametrize("key_chunk_size", [1, 3, 16])
@pytest.mark.parametrize("chunk_size", [1, 3, 4, 11, 16])
def test_chunked_chunk_sizes_that_do_not_divide_L(chunk_size, key_chunk_size):
    q, k, v = qkv(torch.float64, L=11)
    params = {"chunk_size": chunk_size, "key_chunk_size": key_chunk_size}
    for mask_kind in ("none", "causal", "padding", "float"):
        mask = user_mask(mask_kind, 11, 11)
        check_against_reference("chunked", q, k, v, mask, params, need_weights=False)
    check_against_reference("chunked", q, k, v, masks.causal(11), params, need_weights=True)


@pytest.mark.parametrize("window_size", [1, 2, 3, 8, 9, 64, 200])
@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding", "float"])
def test_local_window_sizes_over_several_blocks(window_size, mask_kind):
    """L = 70 spans several query blocks; windows 1, even, odd and larger than L."""
    Lw = 70
    q, k, v = qkv(torch.float64, L=Lw)
    mask = user_mask(mask_kind, Lw, Lw)
    params = {"window_size": window_size}
    check_against_reference("local", q, k, v, mask, params, need_weights=mask_kind == "none")


def test_local_window_larger_than_L_equals_full_attention():
    q, k, v = qkv(torch.float64)
    local = attend(q, k, v, "local", window_size=4 * L, need_weights=True)
    full = attend(q, k, v, "scaled", need_weights=True)
    torch.testing.assert_close(local.output, full.output, atol=1e-10, rtol=0)
    torch.testing.assert_close(local.weights, full.weights, atol=1e-10, rtol=0)


def test_local_window_1_attends_to_itself_only():
    q, k, v = qkv(torch.float64)
    result = attend(q, k, v, "local", window_size=1, need_weights=True)
    torch.testing.assert_close(result.output, v, atol=1e-12, rtol=0)
    eye = torch.eye(L, dtype=torch.float64).expand(B, H, L, L)
    torch.testing.assert_close(result.weights, eye, atol=1e-12, rtol=0)


@pytest.mark.parametrize("block_size", [1, 3, 4, 10, 33])
def test_block_sizes(block_size):
    q, k, v = qkv(torch.float64)
    for mask_kind in ("none", "causal", "padding"):
        mask = user_mask(mask_kind, L, L)
        params = {"block_size": block_size}
        check_against_reference("block", q, k, v, mask, params, need_weights=True)


def test_sparse_patterns_are_applied():
    """Weights are zero exactly outside the pattern (and positive inside, no mask)."""
    q, k, v = qkv(torch.float64)
    for name in ("local", "strided", "block", "random", "combined"):
        params = SMALL_PARAMS[name]
        pattern = VARIANTS[name].pattern(L, L, **VARIANTS[name].resolve_params(params))
        weights = attend(q, k, v, name, need_weights=True, **params).weights
        assert torch.equal(weights > 0, pattern.expand_as(weights)), name


# --- masks of other dtypes and ranks ------------------------------------------------------


def _mask_cases(names):
    return [
        pytest.param(name, need_weights, id=f"{name}-{'weights' if need_weights else 'no_weights'}")
        for name in names
        for need_weights in (False, True)
    ]


@pytest.mark.parametrize(("name", "need_weights"), _mask_cases(COMPARABLE))
def test_float_mask_of_another_dtype_is_accepted(name, need_weights):
    """A float64 additive mask on float32 inputs acts like the same mask in float32."""
    q, k, v = qkv(torch.float32)
    mask64 = user_mask("float", L, L)
    params = SMALL_PARAMS.get(name, {})
    expected = attend(q, k, v, name, mask=mask64.float(), need_weights=need_weights, **params)
    got = attend(q, k, v, name, mask=mask64, need_weights=need_weights, **params)
    torch.testing.assert_close(got.output, expected.output, atol=1e-6, rtol=0)


@pytest.mark.parametrize(("name", "need_weights"), _mask_cases(COMPARABLE))
def test_one_dimensional_key_mask_broadcasts(name, need_weights):
    """A (S,) bool mask broadcasts to (B, H, L, S) like the same mask shaped (1, S)."""
    q, k, v = qkv(torch.float64)
    keys = torch.tensor([True, False, True, True, False, True, True, False, True, True])
    params = SMALL_PARAMS.get(name, {})
    check_against_reference(name, q, k, v, keys, params, need_weights=need_weights)


# --- gradients ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", COMPARABLE)
def test_gradients_equal_sdpa_gradients(name):
    """d(sum(out²))/d(q, k, v) equals SDPA's under the same mask (float64)."""
    params = SMALL_PARAMS.get(name, {})
    mask = user_mask("padding", L, L) & masks.causal(L)
    leaves = [t.requires_grad_() for t in qkv(torch.float64)]
    attend(*leaves, name, mask=mask, **params).output.square().sum().backward()
    ref_leaves = [t.detach().clone().requires_grad_() for t in leaves]
    additive = reference_mask(name, mask, L, L, params)
    ref_out = F.scaled_dot_product_attention(
        *ref_leaves, attn_mask=additive, scale=ref_scale(name, None)
    )
    ref_out.nan_to_num(0.0).square().sum().backward()
    for ours, ref in zip(leaves, ref_leaves, strict=True):
        torch.testing.assert_close(ours.grad, ref.grad.nan_to_num(0.0), atol=1e-10, rtol=0)


# --- linear attention against its kernel formula -----------------------------------------


def _phi(x: torch.Tensor) -> torch.Tensor:
    return F.elu(x) + 1.0


def _linear_reference(q, k, v, *, causal: bool, key_allowed: torch.Tensor | None):
    """out_i = sum_j phi(q_i).phi(k_j) v_j / sum_j phi(q_i).phi(k_j), in float64."""
    kernel = _phi(q.double()) @ _phi(k.double()).transpose(-2, -1)  # (..., L, S) all > 0
    allowed = torch.ones(kernel.shape[-2:], dtype=torch.bool)
    if causal:
        allowed = masks.causal(q.shape[-2], k.shape[-2])
    if key_allowed is not None:
        allowed = allowed & key_allowed
    kernel = kernel * allowed
    total = kernel.sum(dim=-1, keepdim=True)
    weights = kernel / torch.where(total > 0, total, torch.ones_like(total))
    return weights @ v.double(), weights


@pytest.mark.parametrize("chunk_size", [None, 1, 3, 64])
@pytest.mark.parametrize("causal", [False, True])
def test_linear_equals_kernel_formula(causal, chunk_size):
    q, k, v = qkv(torch.float64, L=11)
    params = {"causal": causal}
    if chunk_size is not None:
        params["chunk_size"] = chunk_size
    ref_out, ref_w = _linear_reference(q, k, v, causal=causal, key_allowed=None)
    result = attend(q, k, v, "linear", need_weights=True, **params)
    torch.testing.assert_close(result.output, ref_out, atol=1e-10, rtol=0)
    torch.testing.assert_close(result.weights, ref_w, atol=1e-10, rtol=0)
    torch.testing.assert_close(result.weights.sum(-1), torch.ones(B, H, 11, dtype=torch.float64))
    no_weights = attend(q, k, v, "linear", need_weights=False, **params)
    assert no_weights.weights is None
    torch.testing.assert_close(no_weights.output, ref_out, atol=1e-10, rtol=0)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_linear_with_key_padding(dtype, causal):
    q, k, v = qkv(dtype)
    padding = masks.padding([4, 0], L).unsqueeze(1)  # (B, 1, 1, S); item 1 has no key
    ref_out, ref_w = _linear_reference(q, k, v, causal=causal, key_allowed=padding)
    result = attend(q, k, v, "linear", mask=padding, need_weights=True, causal=causal)
    torch.testing.assert_close(result.output.double(), ref_out, atol=ATOL[dtype], rtol=0)
    torch.testing.assert_close(result.weights.double(), ref_w, atol=ATOL[dtype], rtol=0)
    assert (result.output[1] == 0).all() and (result.weights[1] == 0).all()
    expected_sums = torch.ones(B, H, L, dtype=torch.float64)
    expected_sums[1] = 0.0
    torch.testing.assert_close(result.weights.double().sum(-1), expected_sums, atol=1e-5, rtol=0)


@pytest.mark.parametrize("scale", [None, 0.3], ids=["default_scale", "scale_0.3"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_linear_query_whose_features_all_vanish(dtype, scale):
    """A query of -1000 in every feature has φ(q) = elu(q) + 1 = 0 exactly: its denominator
    is exactly 0 and the formula's row is 0 (no NaN); every other row is unchanged."""
    q, k, v = qkv(dtype)
    q[0, 1, 4] = -1000.0
    s = 1.0 if scale is None else scale
    ref_out, _ = _linear_reference(q * s, k, v, causal=False, key_allowed=None)
    out = attend(q, k, v, "linear", scale=scale).output
    assert torch.isfinite(out).all()
    assert (out[0, 1, 4] == 0).all()
    torch.testing.assert_close(out.double(), ref_out, atol=ATOL[dtype], rtol=0)


@pytest.mark.parametrize("scale", [0.1, 0.3, 3.0])
def test_linear_scale_is_applied_inside_the_feature_map(scale):
    """scale multiplies q before φ: φ(q·scale), as the formula with q·scale."""
    q, k, v = qkv(torch.float64)
    ref_out, _ = _linear_reference(q * scale, k, v, causal=False, key_allowed=None)
    out = attend(q, k, v, "linear", scale=scale).output
    torch.testing.assert_close(out, ref_out, atol=1e-10, rtol=0)


def test_linear_causal_mask_equals_causal_param():
    """A causal bool mask (alone or with key padding) is the prefix-sum form."""
    q, k, v = qkv(torch.float64)
    padding = masks.padding([7, 10], L).unsqueeze(1)  # (B, 1, 1, S)
    both = masks.combine(masks.causal(L), padding, how="and")  # (B, 1, L, S)
    ref_out, _ = _linear_reference(q, k, v, causal=True, key_allowed=padding)
    result = attend(q, k, v, "linear", mask=both)
    torch.testing.assert_close(result.output, ref_out, atol=1e-10, rtol=0)
    by_param = attend(q, k, v, "linear", mask=padding, causal=True, chunk_size=4)
    torch.testing.assert_close(by_param.output, ref_out, atol=1e-10, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_linear_in_chunks_equals_the_formula(monkeypatch, dtype):
    """The untracked non-causal form in chunks of 64 rows (the last one partial), with
    broadcast leading dims, S != L and key padding that empties one item, equals the
    float64 formula."""
    from attention_core.variants import linear

    monkeypatch.setattr(linear, "CHUNK_BYTES", 1)  # every chunk MIN_CHUNK_ROWS = 64 rows
    gen = torch.Generator().manual_seed(5)
    q = torch.randn(2, 1, 150, 8, generator=gen, dtype=dtype)  # (B, 1, L, E)
    k = torch.randn(1, 3, 130, 8, generator=gen, dtype=dtype)  # (1, H, S, E)
    v = torch.randn(2, 3, 130, 5, generator=gen, dtype=dtype)  # (B, H, S, Ev)
    padding = masks.padding([100, 0], 130).view(2, 1, 1, 130)  # item 1 sees no key
    ref_out, _ = _linear_reference(q, k, v, causal=False, key_allowed=padding)
    out = attend(q, k, v, "linear", mask=padding).output
    assert out.shape == (2, 3, 150, 5)
    torch.testing.assert_close(out.double(), ref_out, atol=ATOL[dtype], rtol=0)
    assert (out[1] == 0).all()
    whole = attend(q, k, v, "linear", mask=padding, scale=0.5).output
    monkeypatch.setattr(linear, "CHUNK_BYTES", 1 << 30)  # one chunk
    torch.testing.assert_close(attend(q, k, v, "linear", mask=padding, scale=0.5).output, whole)


@pytest.mark.parametrize("causal", [False, True])
def test_linear_gradients_equal_the_formula_gradients(causal):
    leaves = [t.requires_grad_() for t in qkv(torch.float64)]
    attend(*leaves, "linear", causal=causal, chunk_size=3).output.square().sum().backward()
    ref_leaves = [t.detach().clone().requires_grad_() for t in leaves]
    ref_out, _ = _linear_reference(*ref_leaves, causal=causal, key_allowed=None)
    ref_out.square().sum().backward()
    for ours, ref in zip(leaves, ref_leaves, strict=True):
        torch.testing.assert_close(ours.grad, ref.grad, atol=1e-10, rtol=0)


def test_linear_is_an_approximation_of_softmax_attention():
    """Sanity: linear attention is not softmax attention (it is marked inexact)."""
    q, k, v = qkv(torch.float64)
    linear = attend(q, k, v, "linear").output
    scaled = attend(q, k, v, "scaled", scale=1.0).output
    assert (linear - scaled).abs().max() > 1e-3


@pytest.mark.parametrize(
    "mask",
    [
        masks.local(L, 3),
        masks.random(L, 0.5, seed=1),
        torch.randn(L, L, generator=torch.Generator().manual_seed(0), dtype=torch.float64),
        torch.zeros(L, L, dtype=torch.float64).masked_fill(~masks.local(L, 3), -math.inf),
    ],
    ids=["local", "random", "float", "float_band"],
)
def test_linear_rejects_general_masks(mask):
    q, k, v = qkv(torch.float64)
    with pytest.raises(ValueError, match="mask"):
        attend(q, k, v, "linear", mask=mask)


def test_linear_rejects_dropout():
    q, k, v = qkv(torch.float64)
    with pytest.raises(ValueError, match="dropout"):
        attend(q, k, v, "linear", dropout_p=0.1)


# --- numerical stability -----------------------------------------------------------------


def _huge_logit_qkv():
    """fp16 q = k whose scaled logits are about 1e4, with O(1) differences between keys."""
    g = torch.Generator().manual_seed(5)
    Ls, Es = 8, 16
    base = torch.full((Es,), 1.0, dtype=torch.float64)
    base = base / base.norm() * math.sqrt(1e4 * math.sqrt(Es))  # |base|² · scale = 1e4
    jitter = torch.randn(1, 2, Ls, Es, generator=g, dtype=torch.float64) * 0.05
    q = (base + jitter).half()
    k = (base + torch.randn(1, 2, Ls, Es, generator=g, dtype=torch.float64) * 0.05).half()
    v = torch.randn(1, 2, Ls, Es, generator=g, dtype=torch.float64).half()
    return q, k, v


def test_stable_fp16_with_logits_of_1e4():
    q, k, v = _huge_logit_qkv()
    scale = 1.0 / math.sqrt(q.shape[-1])
    logits = (q.double() @ k.double().transpose(-2, -1)) * scale
    assert 0.9e4 < logits.mean().item() < 1.1e4
    assert logits.std().item() > 0.5  # the softmax is neither uniform nor only argmax
    ref_w = torch.softmax(logits, dim=-1)
    ref_out = ref_w @ v.double()
    result = attend(q, k, v, "stable", need_weights=True)
    assert result.output.dtype == torch.float16
    assert torch.isfinite(result.output).all() and torch.isfinite(result.weights).all()
    torch.testing.assert_close(result.weights.double(), ref_w, atol=2e-3, rtol=0)
    torch.testing.assert_close(result.output.double(), ref_out, atol=1e-2, rtol=1e-2)


def test_stable_fp16_fully_masked_row_is_zero():
    q, k, v = _huge_logit_qkv()
    padding = masks.padding([0], q.shape[-2]).unsqueeze(1)  # (1, 1, 1, S): nothing to see
    causal = masks.causal(q.shape[-2])
    result = attend(q, k, v, "stable", mask=padding, need_weights=True)
    assert (result.output == 0).all() and (result.weights == 0).all()
    result = attend(q, k, v, "stable", mask=causal, need_weights=True)
    assert torch.isfinite(result.output).all()
    torch.testing.assert_close(
        result.weights.float().sum(-1), torch.ones(1, 2, q.shape[-2]), atol=2e-3, rtol=0
    )


@pytest.mark.parametrize("need_weights", [False, True], ids=["no_weights", "weights"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("name", COMPARABLE)
def test_half_precision_matches_float64(name, dtype, need_weights):
    """Every exact variant in half precision stays finite and within half tolerance."""
    q, k, v = qkv(dtype)
    mask = user_mask("padding", L, L)
    params = SMALL_PARAMS.get(name, {})
    result = attend(q, k, v, name, mask=mask, need_weights=need_weights, **params)
    additive = reference_mask(name, mask, L, L, params)
    ref_out, ref_w, has_key = reference(q, k, v, additive, ref_scale(name, None))
    assert result.output.dtype == dtype
    assert torch.isfinite(result.output).all()
    tol = 2e-2 if dtype == torch.float16 else 6e-2
    torch.testing.assert_close(result.output.double(), ref_out.nan_to_num(0.0), atol=tol, rtol=tol)
    assert (result.output[~has_key.expand(B, H, L)] == 0).all()
    if need_weights:
        torch.testing.assert_close(result.weights.double(), ref_w, atol=tol, rtol=0)


# --- dropout -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", DROPOUT_VARIANTS)
def test_dropout_reproducible_with_seed(name):
    q, k, v = qkv(torch.float64)
    params = SMALL_PARAMS.get(name, {})

    def run(seed, need_weights=True):
        gen = torch.Generator().manual_seed(seed)
        return attend(
            q, k, v, name, dropout_p=0.3, generator=gen, need_weights=need_weights, **params
        )

    first, again, other = run(7), run(7), run(8)
    assert torch.equal(first.output, again.output) and torch.equal(first.weights, again.weights)
    assert not torch.equal(first.weights, other.weights)
    assert not torch.equal(first.output, other.output)
    assert torch.equal(run(7, need_weights=False).output, run(7, need_weights=False).output)
    assert not torch.equal(run(7, need_weights=False).output, run(8, need_weights=False).output)


@pytest.mark.parametrize("name", DROPOUT_VARIANTS)
def test_dropout_zeroes_a_fraction_p_and_rescales_survivors(name):
    p = 0.3
    q, k, v = qkv(torch.float64, lead=(4, 4), L=16)
    params = {"window_size": 9} if name == "local" else SMALL_PARAMS.get(name, {})
    if name == "block":
        params = {"block_size": 8}
    plain = attend(q, k, v, name, need_weights=True, **params).weights
    gen = torch.Generator().manual_seed(0)
    dropped = attend(q, k, v, name, dropout_p=p, generator=gen, need_weights=True, **params)
    live = plain > 0
    kept = dropped.weights > 0
    assert not (kept & ~live).any(), "dropout must not create weight outside the pattern"
    fraction_zeroed = 1.0 - kept[live].double().mean().item()
    assert abs(fraction_zeroed - p) < 0.05, fraction_zeroed
    torch.testing.assert_close(dropped.weights[kept], plain[kept] / (1 - p), atol=1e-12, rtol=0)
    # the output is computed with the returned (post-dropout) weights
    torch.testing.assert_close(dropped.output, dropped.weights @ v, atol=1e-10, rtol=0)


@pytest.mark.parametrize("name", DROPOUT_VARIANTS)
def test_dropout_expectation_equals_undropped_weights(name):
    q, k, v = qkv(torch.float64, lead=(1,), L=6)
    params = SMALL_PARAMS.get(name, {})
    plain = attend(q, k, v, name, need_weights=True, **params)
    gen = torch.Generator().manual_seed(1)
    draws = 400
    total_w = torch.zeros_like(plain.weights)
    total_out = torch.zeros_like(plain.output)
    for _ in range(draws):
        r = attend(q, k, v, name, dropout_p=0.2, generator=gen, need_weights=True, **params)
        total_w += r.weights
        total_out += r.output
    torch.testing.assert_close(total_w / draws, plain.weights, atol=0.02, rtol=0.1)
    torch.testing.assert_close(total_out / draws, plain.output, atol=0.08, rtol=0)


# --- efficiency: memory budget and allocations -------------------------------------------


@pytest.mark.parametrize("name", sorted(EFFICIENT))
def test_efficient_variants_fit_a_small_budget_at_L_4096(name):
    q, k, v = qkv(torch.float32, lead=(1, 1), L=BIG_L)
    params = EFFICIENT[name]
    estimate = estimate_memory(name, batch=1, heads=1, L=BIG_L, E=E, **params)
    assert estimate < SMALL_BUDGET
    largest = largest_allocation(
        lambda: attend(q, k, v, name, memory_budget=SMALL_BUDGET, **params)
    )
    full_matrix = BIG_L * BIG_L * 4
    assert largest < full_matrix / 8, f"{name} allocated {largest} bytes at once"
    # the result is still right: spot-check a few rows against an explicit computation
    out = attend(q, k, v, name, memory_budget=SMALL_BUDGET, **params).output
    rows = torch.tensor([0, 1, BIG_L // 2, BIG_L - 1])
    q64, k64, v64 = q.double()[0, 0], k.double()[0, 0], v.double()[0, 0]
    if name == "linear":
        kernel = _phi(q64[rows]) @ _phi(k64).T  # (4, S)
        ref = (kernel @ v64) / kernel.sum(-1, keepdim=True)
    else:
        scores = q64[rows] @ k64.T / math.sqrt(E)  # (4, S)
        if VARIANTS[name].pattern is not None:
            pattern = VARIANTS[name].pattern(BIG_L, BIG_L, **params)[rows]  # (4, S)
            scores = scores.masked_fill(~pattern, -math.inf)
        ref = torch.softmax(scores, -1) @ v64
    torch.testing.assert_close(out[0, 0, rows].double(), ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", DENSE)
def test_dense_variants_refuse_a_small_budget_at_L_4096(name):
    q, k, v = qkv(torch.float32, lead=(1, 1), L=BIG_L)
    assert estimate_memory(name, batch=1, heads=1, L=BIG_L, E=E) > SMALL_BUDGET
    with pytest.raises(MemoryBudgetError):
        attend(q, k, v, name, memory_budget=SMALL_BUDGET)


@pytest.mark.parametrize("name", DENSE)
def test_refused_call_allocates_nothing_over_the_budget(name):
    """The budget guards the allocation itself: a refused call must not first allocate
    more than the budget it is refusing to exceed."""
    q, k, v = qkv(torch.float32, lead=(1, 1), L=BIG_L)
    budget = 16 * 2**20

    def refused():
        with pytest.raises(MemoryBudgetError):
            attend(q, k, v, name, memory_budget=budget)

    largest = largest_allocation(refused)
    assert largest <= budget, f"{name} allocated {largest / 2**20:.0f} MiB before refusing"


@pytest.mark.parametrize("name", ["scaled", "basic"])
def test_weights_over_budget_raise_with_sizes(name):
    q, k, v = qkv(torch.float32, lead=(1, 1), L=BIG_L)
    with pytest.raises(MemoryBudgetError, match=r"4096.*MiB"):
        attend(q, k, v, name, need_weights=True, memory_budget=SMALL_BUDGET)
    assert issubclass(MemoryBudgetError, ValueError)


def test_estimate_memory_orders_variants():
    dims = {"batch": 1, "heads": 8, "L": 4096, "E": 64}
    dense = estimate_memory("stable", **dims)
    assert dense >= 8 * 4096 * 4096 * 4
    assert estimate_memory("scaled", need_weights=True, **dims) >= 8 * 4096 * 4096 * 4
    assert estimate_memory("local", window_size=128, **dims) < dense / 10
    assert estimate_memory("linear", **dims) < dense / 10
    assert estimate_memory("chunked", **dims) < dense / 10
    double_len = estimate_memory("local", window_size=128, **{**dims, "L": 8192})
    assert double_len <= 2.2 * estimate_memory("local", window_size=128, **dims)
