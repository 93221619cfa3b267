"""What the variant tests share: small seeded inputs, user masks of every kind, the
independent float64 reference (SDPA for the output, an explicit softmax for the weights) and
the largest single allocation of a call (torch's profiler). Used by ``test_variants.py`` and
``test_variant_paths.py``."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from attention_core import VARIANTS, attend, masks

B, H, L, E, EV = 2, 3, 10, 6, 5
ATOL = {torch.float64: 1e-10, torch.float32: 1e-5}
# Small, non-default parameters so that every sparse pattern is non-trivial at L = 10.
SMALL_PARAMS: dict[str, dict[str, object]] = {
    "local": {"window_size": 3},
    "block": {"block_size": 3},
    "strided": {"stride": 3},
    "random": {"density": 0.4, "seed": 1},
    "combined": {"window_size": 3, "stride": 4},
    "chunked": {"chunk_size": 3, "key_chunk_size": 4},
}
# ``basic`` is the tutorial's unscaled attention: exact against SDPA at scale 1.
COMPARABLE = sorted(name for name, spec in VARIANTS.items() if spec.exact or name == "basic")
DROPOUT_VARIANTS = sorted(name for name, spec in VARIANTS.items() if spec.supports_dropout)
MASK_KINDS = ("none", "causal", "padding", "float", "bool4d")


def qkv(dtype=torch.float64, lead=(B, H), L=L, S=None, seed=0):
    S = L if S is None else S
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*lead, L, E, generator=g, dtype=torch.float64).to(dtype)
    k = torch.randn(*lead, S, E, generator=g, dtype=torch.float64).to(dtype)
    v = torch.randn(*lead, S, EV, generator=g, dtype=torch.float64).to(dtype)
    return q, k, v


def user_mask(kind: str, L: int, S: int, seed: int = 0) -> torch.Tensor | None:
    """A user mask broadcastable to (B, H, L, S)."""
    g = torch.Generator().manual_seed(seed + 100)
    if kind == "none":
        return None
    if kind == "causal":
        return masks.causal(L, S)  # (L, S)
    if kind == "padding":
        # batch item 1 has length 0: every one of its query rows has no key
        return masks.padding([S - 3, 0], S).unsqueeze(1)  # (B, 1, 1, S)
    if kind == "float":
        add = torch.randn(L, S, generator=g, dtype=torch.float64)  # (L, S)
        blocked = torch.rand(L, S, generator=g) < 0.25
        blocked[2] = True  # one query row with no key at all
        return add.masked_fill(blocked, -math.inf)
    if kind == "bool4d":
        return torch.rand(B, H, L, S, generator=g) < 0.6
    raise AssertionError(kind)


def reference_mask(name: str, mask: torch.Tensor | None, L: int, S: int, params: dict):
    """The user mask intersected with the variant's pattern, as a float64 additive mask
    (0 = attend, -inf = blocked), or None."""
    spec = VARIANTS[name]
    additive = None
    if mask is not None:
        if mask.dtype == torch.bool:
            additive = torch.zeros(mask.shape, dtype=torch.float64).masked_fill(~mask, -math.inf)
        else:
            additive = mask.to(torch.float64)
    if spec.pattern is not None:
        pattern = spec.pattern(L, S, **spec.resolve_params(params))
        assert pattern.shape == (L, S) and pattern.dtype == torch.bool
        blocked = torch.zeros(L, S, dtype=torch.float64).masked_fill(~pattern, -math.inf)
        additive = blocked if additive is None else additive + blocked
    return additive


def reference(q, k, v, additive, scale):
    """(output, weights, has_key) in float64: output from SDPA, weights from an explicit
    softmax; has_key (..., L) is False for query rows with no allowed key."""
    q64, k64, v64 = q.double(), k.double(), v.double()
    if additive is not None and additive.dim() < 2:
        additive = additive.view(1, -1)  # SDPA itself needs (…, L|1, S); (S,) -> (1, S)
    out = F.scaled_dot_product_attention(q64, k64, v64, attn_mask=additive, scale=scale)
    scores = (q64 @ k64.transpose(-2, -1)) * scale  # (..., L, S)
    if additive is not None:
        scores = scores + additive
    has_key = torch.isfinite(scores).any(dim=-1)  # (..., L)
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # empty rows -> 0
    return out, weights, has_key


def ref_scale(name: str, scale: float | None) -> float:
    if scale is not None:
        return scale
    return 1.0 if name == "basic" else 1.0 / math.sqrt(E)


def check_against_reference(name, q, k, v, mask, params, *, need_weights, scale=None):
    L, S = q.shape[-2], k.shape[-2]
    result = attend(q, k, v, name, mask=mask, scale=scale, need_weights=need_weights, **params)
    additive = reference_mask(name, mask, L, S, params)
    ref_out, ref_w, has_key = reference(q, k, v, additive, ref_scale(name, scale))
    atol = ATOL[q.dtype]
    out = result.output
    assert out.dtype == q.dtype
    assert out.shape == ref_out.shape
    has_key = has_key.expand(out.shape[:-1])
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out[has_key].double(), ref_out[has_key], atol=atol, rtol=0)
    assert (out[~has_key] == 0).all(), "a query row with no key must give exactly 0"
    if not need_weights:
        assert result.weights is None
        return
    weights = result.weights
    assert weights is not None and weights.shape == ref_w.shape and weights.dtype == q.dtype
    torch.testing.assert_close(weights.double(), ref_w, atol=atol, rtol=0)
    row_sums = weights.double().sum(dim=-1)
    torch.testing.assert_close(row_sums, has_key.double(), atol=atol, rtol=0)


BIG_L = 4096
SMALL_BUDGET = 64 * 2**20  # far below 2 · L × L · 4 bytes = 128 MiB at L = 4096
EFFICIENT = {
    "local": {"window_size": 8},
    "linear": {},
    # E != Ev here, so chunked runs its explicit online softmax: tiles of 256 × 1024
    "chunked": {"chunk_size": 256, "key_chunk_size": 1024},
    "block": {"block_size": 64},
    "strided": {"stride": 16},  # E != Ev here: SDPA's math path forms L·S/stride scores
}
DENSE = ["stable", "random", "combined"]


def largest_allocation(fn) -> int:
    """Largest memory a single profiled op holds (bytes), on CPU."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    return max(max(e.cpu_memory_usage, 0) for e in prof.events())
