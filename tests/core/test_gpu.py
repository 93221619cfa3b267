"""The variants and the module on CUDA, against PyTorch's SDPA and nn.MultiheadAttention on
CUDA. Skipped without CUDA (see tests/conftest.py)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attention_core import VARIANTS, MultiHeadSelfAttention, attend, masks
from tests.core.references import torch_twin
from tests.core.variant_reference import COMPARABLE

pytestmark = pytest.mark.gpu

DEVICE = "cuda"
B, H, L, E = 2, 3, 40, 16
# Sized for L = 40 (variant_reference.SMALL_PARAMS is sized for its L = 10).
SMALL_PARAMS: dict[str, dict[str, object]] = {
    "local": {"window_size": 7},
    "block": {"block_size": 6},
    "strided": {"stride": 3},
    "random": {"density": 0.4, "seed": 1},
    "combined": {"window_size": 5, "stride": 4},
    "chunked": {"chunk_size": 16, "key_chunk_size": 12},
}
TOL = {torch.float32: 1e-5, torch.float16: 2e-2, torch.bfloat16: 6e-2}


def _qkv(dtype):
    g = torch.Generator(device=DEVICE).manual_seed(0)
    shape = (B, H, L, E)
    return tuple(torch.randn(shape, generator=g, device=DEVICE).to(dtype) for _ in range(3))


def _sdpa_reference(name, q, k, v, mask):
    """SDPA in float32 on CUDA with the variant's pattern and the user's bool mask."""
    spec = VARIANTS[name]
    allowed = mask
    if spec.pattern is not None:
        pattern = spec.pattern(L, L, **spec.resolve_params(SMALL_PARAMS.get(name, {})))
        pattern = pattern.to(DEVICE)
        allowed = pattern if allowed is None else allowed & pattern
    scale = 1.0 if name == "basic" else 1.0 / math.sqrt(E)
    out = F.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), attn_mask=allowed, scale=scale
    )
    has_key = (
        torch.ones(B, H, L, dtype=torch.bool, device=DEVICE)
        if allowed is None
        else allowed.expand(B, H, L, L).any(dim=-1)
    )
    return out, has_key


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding"])
@pytest.mark.parametrize("name", COMPARABLE)
def test_exact_variant_on_cuda_equals_sdpa(name, mask_kind, dtype):
    q, k, v = _qkv(dtype)
    mask = {
        "none": None,
        "causal": masks.causal(L, device=DEVICE),
        "padding": masks.padding([L - 5, 0], L, device=DEVICE).unsqueeze(1),
    }[mask_kind]
    params = SMALL_PARAMS.get(name, {})
    result = attend(q, k, v, name, mask=mask, need_weights=False, **params)
    assert result.output.device.type == DEVICE and result.output.dtype == dtype
    ref, has_key = _sdpa_reference(name, q, k, v, mask)
    out = result.output.float()
    assert torch.isfinite(out).all()
    tol = TOL[dtype]
    torch.testing.assert_close(out[has_key], ref[has_key], atol=tol, rtol=tol)
    assert (out[~has_key] == 0).all()
    with_weights = attend(q, k, v, name, mask=mask, need_weights=True, **params)
    torch.testing.assert_close(with_weights.output.float(), out, atol=tol, rtol=tol)
    sums = with_weights.weights.float().sum(-1)
    torch.testing.assert_close(sums, has_key.float(), atol=tol, rtol=0)


@pytest.mark.parametrize("causal", [False, True])
def test_linear_on_cuda_matches_cpu(causal):
    q, k, v = _qkv(torch.float32)
    on_cuda = attend(q, k, v, "linear", causal=causal).output
    on_cpu = attend(q.cpu(), k.cpu(), v.cpu(), "linear", causal=causal).output
    torch.testing.assert_close(on_cuda.cpu(), on_cpu, atol=1e-4, rtol=1e-4)


def test_stable_fp16_huge_logits_on_cuda():
    base = torch.full((E,), 50.0, dtype=torch.float64)  # |base|² / sqrt(E) = 1e4
    g = torch.Generator().manual_seed(5)
    q = (base + torch.randn(1, 1, 8, E, generator=g, dtype=torch.float64) * 0.05).half()
    k = (base + torch.randn(1, 1, 8, E, generator=g, dtype=torch.float64) * 0.05).half()
    v = torch.randn(1, 1, 8, E, generator=g, dtype=torch.float64).half()
    ref = torch.softmax(q.double() @ k.double().mT / math.sqrt(E), -1) @ v.double()
    out = attend(q.to(DEVICE), k.to(DEVICE), v.to(DEVICE), "stable").output
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double().cpu(), ref, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("variant", ["scaled", "chunked", "local"])
def test_module_on_cuda_matches_nn_multihead_attention(variant):
    D, heads = 32, 4
    torch.manual_seed(0)
    params = {"window_size": 9} if variant == "local" else {}
    ours = MultiHeadSelfAttention(D, heads, variant=variant, **params).to(DEVICE).eval()
    ref = torch_twin(ours)
    x = torch.randn(2, L, D, device=DEVICE)
    causal = masks.causal(L, device=DEVICE)
    allowed = causal & masks.local(L, 9, device=DEVICE) if variant == "local" else causal
    out, weights = ours(x, mask=causal)
    ref_out, ref_weights = ref(x, x, x, attn_mask=~allowed)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights.mean(dim=1), ref_weights, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["scaled", "local", "chunked"])
def test_dropout_on_cuda_is_reproducible_with_a_cuda_generator(name):
    q, k, v = _qkv(torch.float32)
    params = SMALL_PARAMS.get(name, {})

    def run(seed):
        gen = torch.Generator(device=DEVICE).manual_seed(seed)
        return attend(q, k, v, name, dropout_p=0.25, generator=gen, need_weights=True, **params)

    first, again, other = run(3), run(3), run(4)
    assert torch.equal(first.output, again.output)
    assert not torch.equal(first.output, other.output)
    torch.testing.assert_close(first.output, first.weights @ v, atol=1e-5, rtol=1e-5)
