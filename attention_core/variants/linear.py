"""Linear attention (Katharopoulos et al., 2020): an approximation of softmax attention.

With the feature map φ(x) = elu(x) + 1 (always positive, so the normaliser never crosses
zero — the tutorial's plain ELU can), attention becomes

    out_i = φ(q_i)ᵀ Σ_j φ(k_j) v_jᵀ  /  φ(q_i)ᵀ Σ_j φ(k_j),

computed as φ(Q)(φ(K)ᵀV) in O(L·E·Ev) time and O(E·Ev) state: no L×S matrix. The causal
form keeps running prefix sums of φ(k_j) v_jᵀ and φ(k_j), chunk by chunk.

The non-causal form is written to sit near its two matmuls' cost (:func:`_noncausal`):
the normaliser rides in the matmuls as an extra column (φ(K)ᵀ[V | 1] holds Σ φ(k_j) in its
last column), the "+1" of φ is folded into that small (E+1)×(Ev+1) state instead of
being added to every feature, the scale is folded into the elu pass, and the key features'
buffer is reused for the query features.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attention_core.device import check_budget, compute_dtype, tensor_bytes
from attention_core.types import AttentionResult, Param, VariantSpec
from attention_core.variants.common import allowed_from_mask

TINY_DENOMINATOR = 1e-30


def feature_map(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = elu(x) + 1, elementwise; strictly positive. Shape preserved."""
    return F.elu(x).add_(1.0)  # in place on elu's fresh output: one pass, autograd-safe


def split_linear_mask(mask: torch.Tensor | None, L: int, S: int):
    """Express a mask as (key_keep (..., 1, S) bool or None, causal: bool).

    Linear attention cannot apply an arbitrary (L, S) pattern without forming it; it
    supports key-padding masks (every row alike) and causal masks (lower-triangular,
    optionally intersected with key padding).

    Raises:
        ValueError: for any other mask, or a float mask with values other than 0 and -inf.
    """
    if mask is None:
        return None, False
    if mask.is_floating_point():
        if not ((mask == 0) | (mask == -math.inf)).all():
            raise ValueError("linear attention takes float masks of 0 and -inf only")
    allowed = allowed_from_mask(mask)
    if allowed.dim() < 2:
        allowed = allowed.view(1, -1)
    if allowed.shape[-1] == 1:
        allowed = allowed.expand(*allowed.shape[:-1], S)
    if allowed.shape[-2] == 1 or bool((allowed == allowed[..., :1, :]).all()):
        return allowed[..., :1, :], False
    if L == S:
        keys = allowed[..., -1:, :]  # (..., 1, S): the last query sees every valid key
        tril = torch.ones(L, S, dtype=torch.bool, device=mask.device).tril()
        if bool((allowed == (tril & keys)).all()):
            return keys, True
    raise ValueError(
        "linear attention supports only key-padding and causal masks (or both); got a mask "
        f"of shape {tuple(mask.shape)} with another pattern"
    )


def _normalise(num: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    """num (..., L, Ev) / den (..., L, 1), with 0 where nothing was attended (den == 0).
    Divides num in place when autograd does not track it (saves an L×Ev allocation)."""
    has_key = den > TINY_DENOMINATOR  # (..., L, 1)
    inverse = torch.where(has_key, 1.0 / torch.where(has_key, den, 1.0), 0.0)  # (..., L, 1)
    tracked = torch.is_grad_enabled() and (num.requires_grad or inverse.requires_grad)
    return num * inverse if tracked else num.mul_(inverse)  # (..., L, Ev)


def _elu_into(x: torch.Tensor, scale: float, out: torch.Tensor | None) -> torch.Tensor:
    """elu(x · scale) in one pass (aten's elu takes the input scale: for x <= 0 it gives
    alpha·scale·(exp(x·input_scale) − 1), so alpha = 1/scale), into ``out`` when given."""
    if out is None:
        return torch.ops.aten.elu(x, 1.0 / scale, scale, scale)
    return torch.ops.aten.elu.out(x, 1.0 / scale, scale, scale, out=out)


def _noncausal_state(ek, v, keep):
    """The (..., E+1, Ev+1) state that maps [elu(q) | 1] to [numerator | denominator].

    With φ = elu + 1 and K' the kept keys: φ(K')ᵀ[V | 1] = elu(K')ᵀ[V | 1] + 1·(Σ_j [v_j | 1])
    (rows 0..E−1), and the query's "+1" adds the column sums of those rows (row E).

    Args:
        ek: elu(k) (..., S, E), dropped keys' rows already zero. v: (..., S, Ev).
        keep: (..., S, 1) 0/1 kept keys, or None (every key).
    """
    E, Ev = ek.shape[-1], v.shape[-1]
    lead = torch.broadcast_shapes(ek.shape[:-2], v.shape[:-2])
    state = ek.new_empty((*lead, E + 1, Ev + 1))  # (..., E+1, Ev+1)
    state[..., :E, :Ev] = ek.transpose(-2, -1) @ v  # (..., E, S) @ (..., S, Ev) -> (..., E, Ev)
    state[..., :E, Ev] = ek.sum(dim=-2)  # (..., E): Σ_j elu(k_j)
    if keep is None:
        v_total = v.sum(dim=-2, keepdim=True)  # (..., 1, Ev)
        count = v.shape[-2]
    else:
        v_total = keep.transpose(-2, -1) @ v  # (..., 1, S) @ (..., S, Ev) -> (..., 1, Ev)
        count = keep.sum(dim=-2, keepdim=True)  # (..., 1, 1)
    state[..., :E, :Ev] += v_total  # the keys' "+1": Σ_j v_j on every row
    state[..., :E, Ev:] += count  # and Σ_j 1
    state[..., E, :] = state[..., :E, :].sum(dim=-2)  # the queries' "+1": column sums
    return state


def _noncausal(q, k, v, scale, keep):
    """Non-causal linear attention: [elu(q·scale) | 1] @ state, then numerator/denominator.

    Args:
        q: (..., L, E). k: (..., S, E). v: (..., S, Ev), all in the compute dtype.
        keep: (..., S, 1) 0/1 kept keys, or None.

    Returns:
        (..., L, Ev); 0 for a query whose every key is dropped.
    """
    L, E, Ev = q.shape[-2], q.shape[-1], v.shape[-1]
    # buffers are reused and updated in place unless autograd tracks them
    tracked = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    ek = _elu_into(k, 1.0, None)  # (..., S, E)
    if keep is not None:
        ek = ek * keep if tracked else ek.mul_(keep)  # dropped keys contribute nothing
    state = _noncausal_state(ek, v, keep)  # (..., E+1, Ev+1)
    lead = state.shape[:-2]
    reuse = ek.shape == (*lead, L, E) and not tracked
    eq = _elu_into(q, scale, ek if reuse else None)  # (..., L, E), in ek's buffer when it fits
    eq3 = eq.expand(*lead, L, E).reshape(-1, L, E)  # (N, L, E)
    state3 = state.reshape(-1, E + 1, Ev + 1)  # (N, E+1, Ev+1)
    # (N, L, E) @ (N, E, Ev+1) + row E (the "+1" of elu(q) + 1) -> (N, L, Ev+1)
    both = torch.baddbmm(state3[:, E:, :], eq3, state3[:, :E, :])
    den = both[..., Ev:]  # (N, L, 1)
    has_key = den > TINY_DENOMINATOR
    inverse = torch.where(has_key, 1.0 / torch.where(has_key, den, 1.0), 0.0)  # (N, L, 1)
    out = torch.mul(both[..., :Ev], inverse)  # (N, L, Ev), contiguous
    return out.view(*lead, L, Ev)


def _causal(fq, fk, v, chunk: int):
    """Chunked prefix sums: state carries Σ_{j < chunk start} φ(k_j) v_jᵀ and Σ φ(k_j)."""
    L, E, Ev = fq.shape[-2], fq.shape[-1], v.shape[-1]
    lead = torch.broadcast_shapes(fq.shape[:-2], fk.shape[:-2], v.shape[:-2])
    kv = fq.new_zeros(*lead, E, Ev)  # (..., E, Ev) running Σ φ(k) vᵀ
    z = fq.new_zeros(*lead, E, 1)  # (..., E, 1) running Σ φ(k)
    tril = torch.ones(chunk, chunk, dtype=torch.bool, device=fq.device).tril()
    outs = []
    for start in range(0, L, chunk):
        stop = min(start + chunk, L)
        q_c, k_c, v_c = fq[..., start:stop, :], fk[..., start:stop, :], v[..., start:stop, :]
        n = stop - start
        intra = (q_c @ k_c.transpose(-2, -1)).masked_fill(~tril[:n, :n], 0.0)  # (..., n, n)
        num = q_c @ kv + intra @ v_c  # (..., n, Ev)
        den = q_c @ z + intra.sum(dim=-1, keepdim=True)  # (..., n, 1)
        outs.append(_normalise(num, den))
        kv = kv + k_c.transpose(-2, -1) @ v_c  # (..., E, n) @ (..., n, Ev) -> (..., E, Ev)
        z = z + k_c.sum(dim=-2).unsqueeze(-1)  # (..., E, 1)
    return torch.cat(outs, dim=-2)  # (..., L, Ev)


def implied_weights(fq: torch.Tensor, fk: torch.Tensor, causal: bool) -> torch.Tensor:
    """The weights linear attention implies: φ(q_i)·φ(k_j) / Σ_j φ(q_i)·φ(k_j), (..., L, S).

    Forms L×S: for display at small L only. A row with no key is all zeros.
    """
    sim = fq @ fk.transpose(-2, -1)  # (..., L, E) @ (..., E, S) -> (..., L, S)
    if causal:
        sim = sim.tril()
    total = sim.sum(dim=-1, keepdim=True)  # (..., L, 1)
    return _normalise(sim, total)


def linear_attention(
    q,
    k,
    v,
    *,
    mask=None,
    scale,
    need_weights=False,
    dropout_p=0.0,
    generator=None,
    memory_budget=None,
    causal: bool = False,
    chunk_size: int = 64,
) -> AttentionResult:
    """Kernelised linear attention with φ(x) = elu(x) + 1. An approximation of softmax.

    q is multiplied by ``scale`` before φ (``attend`` passes 1 by default: the standard
    formulation has no temperature).

    Args:
        q: (..., L, E). k: (..., S, E). v: (..., S, Ev).
        mask: None, a key-padding mask, or a causal mask (see :func:`split_linear_mask`).
        causal: query i sees keys j <= i (needs L == S). chunk_size: rows per prefix-sum
            chunk in the causal form.

    Returns:
        AttentionResult(output (..., L, Ev), implied weights (..., L, S) or None, scores
        None: linear attention has no softmax, so there are no pre-softmax scores; its
        implied weights are φ(q_i)·φ(k_j) / Σ_j φ(q_i)·φ(k_j)).

    Raises:
        ValueError: for an unsupported mask or a causal call with L != S.
        MemoryBudgetError: when requested weights exceed the budget.
    """
    L, S = q.shape[-2], k.shape[-2]
    key_keep, mask_causal = split_linear_mask(mask, L, S)
    causal = causal or mask_causal
    if causal and L != S:
        raise ValueError(f"causal linear attention needs L == S, got L={L}, S={S}")
    work = compute_dtype(q.dtype)
    qw, kw, vw = q.to(work), k.to(work), v.to(work)
    keep = None if key_keep is None else key_keep.transpose(-2, -1).to(work)  # (..., S, 1)
    fq = fk = None
    if causal:
        fq = feature_map(qw if scale == 1.0 else qw * scale)  # (..., L, E)
        fk = feature_map(kw)  # (..., S, E)
        if keep is not None:
            fk = fk * keep  # (..., S, E) * (..., S, 1): drop keys
        out = _causal(fq, fk, vw, chunk_size)
    else:
        out = _noncausal(qw, kw, vw, scale, keep)
    weights = None
    if need_weights:
        lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
        check_budget(
            tensor_bytes((*lead, L, S), work), f"implied weights {(*lead, L, S)}", memory_budget
        )
        if fq is None:
            fq = feature_map(qw if scale == 1.0 else qw * scale)
            fk = feature_map(kw) if keep is None else feature_map(kw) * keep
        weights = implied_weights(fq, fk, causal).to(q.dtype)
    return AttentionResult(out.to(q.dtype), weights)


def _linear_memory(lead, L, S, E, Ev, itemsize, need_weights, chunk_size=64, causal=False, **_):
    work = max(itemsize, 4)
    state = (E * Ev + E) * work
    features = (L * E + S * E + S * Ev + L * Ev) * work
    intra = chunk_size * chunk_size * work if causal else 0
    extra = L * S * work if need_weights else 0
    return lead * (state + features + intra + extra)


SPECS = (
    VariantSpec(
        name="linear",
        label="Linear (kernel)",
        explanation="Kernel trick φ(Q)(φ(K)ᵀV) with φ(x)=elu(x)+1: O(L), an approximation.",
        time_complexity="O(L·E·Ev)",
        memory_complexity="O(L·E + E·Ev)",
        exact=False,
        fn=linear_attention,
        params=(
            Param("causal", "bool", False, help="query i sees keys j <= i (prefix sums)"),
            Param("chunk_size", "int", 64, 1, 4096, 1, "rows per prefix-sum chunk (causal)"),
        ),
        supports_dropout=False,
        default_scale="one",
        memory_model=_linear_memory,
    ),
)
