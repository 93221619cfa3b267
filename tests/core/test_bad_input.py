"""Every bad input raises ValueError, and the message names the bad value."""

from __future__ import annotations

import math

import pytest
import torch

from attention_core import (
    VARIANTS,
    MemoryBudgetError,
    MultiHeadSelfAttention,
    attend,
    get_variant,
)

L, E = 6, 4


def _qkv(L=L, S=None, E=E, Ev=E):
    S = L if S is None else S
    g = torch.Generator().manual_seed(0)
    return (
        torch.randn(2, L, E, generator=g),
        torch.randn(2, S, E, generator=g),
        torch.randn(2, S, Ev, generator=g),
    )


def re_number(value) -> str:
    """Regex matching ``value`` as printed."""
    return str(value).replace(".", r"\.").replace("-", r"\-")


def re_shape(shape) -> str:
    """Regex matching a shape tuple as printed."""
    return str(tuple(shape)).replace("(", r"\(").replace(")", r"\)")


def test_unknown_variant_lists_valid_names():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="nope") as info:
        attend(q, k, v, "nope")
    for name in VARIANTS:
        assert name in str(info.value)
    with pytest.raises(ValueError, match="nope"):
        get_variant("nope")
    with pytest.raises(ValueError, match="nope"):
        MultiHeadSelfAttention(8, 2, variant="nope")


@pytest.mark.parametrize(
    ("shapes", "needle"),
    [
        (((2, L, E), (2, L, E + 1), (2, L, E)), r"\(2, 6, 5\)"),  # E differs between q and k
        (((2, L, E), (2, L, E), (2, L + 1, E)), r"\(2, 7, 4\)"),  # S differs between k and v
        (((2, L, E), (3, L, E), (3, L, E)), r"\(3, 6, 4\)"),  # leading dims do not broadcast
        (((E,), (L, E), (L, E)), r"\(4,\)"),  # q is 1-D
        (((2, 0, E), (2, L, E), (2, L, E)), r"\(2, 0, 4\)"),  # empty length
    ],
)
def test_mismatched_shapes(shapes, needle):
    q, k, v = (torch.randn(s) for s in shapes)
    with pytest.raises(ValueError, match=needle):
        attend(q, k, v)


def test_mixed_and_integer_dtypes():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="float64"):
        attend(q, k.double(), v)
    with pytest.raises(ValueError, match="int64"):
        attend(q.long(), k.long(), v.long())
    with pytest.raises(ValueError, match="list"):
        attend(q.tolist(), k, v)


@pytest.mark.parametrize("embed_dim, num_heads", [(10, 3), (8, 0), (0, 2), (8, -2)])
def test_embed_dim_not_divisible_or_not_positive(embed_dim, num_heads):
    with pytest.raises(ValueError, match=str(embed_dim if num_heads > 0 else num_heads)):
        MultiHeadSelfAttention(embed_dim, num_heads)


def test_module_rejects_bad_input_shape_and_dropout():
    module = MultiHeadSelfAttention(8, 2)
    with pytest.raises(ValueError, match=r"\(2, 5, 6\)"):
        module(torch.randn(2, 5, 6))
    with pytest.raises(ValueError, match="1.5"):
        MultiHeadSelfAttention(8, 2, dropout=1.5)
    with pytest.raises(ValueError, match="window_size"):
        MultiHeadSelfAttention(8, 2, variant="local", window_size=0)


@pytest.mark.parametrize(
    ("variant", "param"),
    [
        ("local", "window_size"),
        ("combined", "window_size"),
        ("strided", "stride"),
        ("combined", "stride"),
        ("block", "block_size"),
        ("chunked", "chunk_size"),
        ("chunked", "key_chunk_size"),
        ("linear", "chunk_size"),
    ],
)
@pytest.mark.parametrize("value", [0, -3, 2.5])
def test_sizes_below_one_or_fractional(variant, param, value):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=rf"{param}.*{re_number(value)}"):
        attend(q, k, v, variant, **{param: value})


@pytest.mark.parametrize("density", [0, -0.1, 1.5, "half", True])
def test_density_outside_0_1(density):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="density"):
        attend(q, k, v, "random", density=density)


def test_bool_param_must_be_bool():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="causal"):
        attend(q, k, v, "linear", causal="yes")


@pytest.mark.parametrize(
    "mask_shape",
    [(L, L + 1), (3, L, L), (2, 2, L, L), (L + 1,)],
)
def test_mask_that_does_not_broadcast(mask_shape):
    q, k, v = _qkv()
    mask = torch.ones(mask_shape, dtype=torch.bool)
    with pytest.raises(ValueError, match=re_shape(mask_shape)):
        attend(q, k, v, mask=mask)


@pytest.mark.parametrize(
    "mask",
    [
        torch.ones(L, L, dtype=torch.int64),
        torch.full((L, L), math.nan),
        torch.full((L, L), math.inf),
        [[True] * L] * L,
    ],
    ids=["int", "nan", "+inf", "list"],
)
def test_bad_mask_values_or_types(mask):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="mask"):
        attend(q, k, v, mask=mask)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("which", [0, 1, 2], ids=["q", "k", "v"])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_nan_or_inf_in_the_input(variant, which, bad):
    tensors = list(_qkv())
    tensors[which][0, 1, 2] = bad
    needle = "NaN" if math.isnan(bad) else "inf"
    with pytest.raises(ValueError, match=f"{'qkv'[which]} contains {needle}"):
        attend(*tensors, variant)


def test_nan_in_module_input():
    module = MultiHeadSelfAttention(8, 2)
    x = torch.randn(1, 3, 8)
    x[0, 0, 0] = math.nan
    with pytest.raises(ValueError, match="NaN"):
        module(x)


def test_over_budget_sizes():
    q, k, v = _qkv(L=64)
    with pytest.raises(MemoryBudgetError, match=r"64, 64.*KiB"):
        attend(q, k, v, "stable", memory_budget=1024)
    with pytest.raises(ValueError, match="memory_budget"):
        attend(q, k, v, memory_budget=-1)
    with pytest.raises(ValueError, match="memory_budget"):
        attend(q, k, v, memory_budget=0)


@pytest.mark.parametrize("dropout_p", [-0.1, 1.0, 1.5, math.nan, "0.1", True])
def test_bad_dropout_p(dropout_p):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="dropout_p"):
        attend(q, k, v, dropout_p=dropout_p)


@pytest.mark.parametrize("scale", [0, -1.0, math.nan, math.inf, "1", True])
def test_bad_scale(scale):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="scale"):
        attend(q, k, v, scale=scale)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_unknown_param_name(variant):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="windw_size"):
        attend(q, k, v, variant, windw_size=3)


def test_linear_causal_needs_equal_lengths():
    q, k, v = _qkv(L=4, S=6)
    with pytest.raises(ValueError, match="L=4, S=6"):
        attend(q, k, v, "linear", causal=True)


def test_huge_float64_values_are_finite_not_inf():
    """A float64 beyond float32's range must pass as finite: the shared finite check sums
    each tensor in its own dtype (and its exact recheck reads the tensor's own values)."""
    q = torch.full((1, 2, 4), 1e300, dtype=torch.float64)
    k = torch.zeros(1, 2, 4, dtype=torch.float64)
    v = torch.ones(1, 2, 4, dtype=torch.float64)
    out = attend(q, k, v, "scaled").output
    torch.testing.assert_close(out, torch.ones_like(out))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_finite_values_whose_sum_overflows_pass(dtype):
    """The finite check sums each tensor (a NaN or inf makes the sum non-finite); finite
    values whose sum overflows (the dtype's largest value, eight times) must still pass and
    give their exact average, not be taken for inf."""
    big = torch.finfo(dtype).max
    q = torch.zeros(1, 2, 4, dtype=dtype)
    k = torch.zeros(1, 2, 4, dtype=dtype)
    v = torch.full((1, 2, 4), big, dtype=dtype)
    assert not torch.isfinite(v.sum(dtype=torch.float32 if dtype != torch.float64 else dtype))
    out = attend(q, k, v, "scaled").output  # uniform weights over equal values
    assert torch.equal(out, v)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_nan_or_inf_in_half_inputs(dtype, bad):
    q, k, v = (t.to(dtype) for t in _qkv())
    k[0, 0, 1] = bad
    needle = "NaN" if math.isnan(bad) else "inf"
    with pytest.raises(ValueError, match=f"k contains {needle}"):
        attend(q, k, v)


def test_plus_and_minus_inf_in_one_tensor_is_caught():
    """+inf and -inf sum to NaN: the finite check must still name the tensor."""
    q, k, v = _qkv()
    v[0, 0, 0], v[0, 1, 0] = math.inf, -math.inf
    with pytest.raises(ValueError, match="v contains inf"):
        attend(q, k, v)


def test_variant_names_keeps_order_and_refuses_empty_or_unknown():
    from attention_core.registry import variant_names

    assert variant_names(("linear", "scaled")) == ["linear", "scaled"]
    with pytest.raises(ValueError, match="at least one variant"):
        variant_names([])
    with pytest.raises(ValueError, match="'nope'.*valid: .*scaled"):
        variant_names(["scaled", "nope"])
