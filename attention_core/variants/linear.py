"""Linear attention (Katharopoulos et al., 2020): an approximation of softmax attention.

With the feature map φ(x) = elu(x) + 1 (always positive, so the normaliser never crosses
zero — the tutorial's plain ELU can), attention becomes

    out_i = φ(q_i)ᵀ Σ_j φ(k_j) v_jᵀ  /  φ(q_i)ᵀ Σ_j φ(k_j),

computed as φ(Q)(φ(K)ᵀV) in O(L·E·Ev) time and O(E·Ev) state: no L×S matrix. The causal
form keeps running prefix sums of φ(k_j) v_jᵀ and φ(k_j), chunk by chunk.

The non-causal form is written to sit near its two matmuls' cost (:func:`_noncausal`):
φ is computed as exp2(min(x, 0)·log2 e) + max(x, 0) (equal to elu(x) + 1; PyTorch's exp2
is an order of magnitude faster than its exp on this CPU build: 0.9 ms against 13.6 ms for
4M floats on one Zen 4 thread), the scale is folded into those passes, the normaliser rides
in the second matmul as an extra column (φ(K)ᵀ[V | 1] holds Σ φ(k_j) in its last column),
and the untracked form works in chunks of rows that stay in the cache.
"""

from __future__ import annotations

import math

import torch

from attention_core.device import check_budget, compute_dtype, tensor_bytes
from attention_core.types import AttentionResult, Param, VariantSpec
from attention_core.variants.common import (
    allowed_from_mask,
    lead_shape,
    qkv_out_elements,
    records_grad,
    score_itemsize,
)

TINY_DENOMINATOR = 1e-30


LOG2_E = math.log2(math.e)


def feature_map(
    x: torch.Tensor, scale: float = 1.0, out: torch.Tensor | None = None, spare=None
) -> torch.Tensor:
    """φ(x·scale) = elu(x·scale) + 1, elementwise; strictly positive. Shape preserved.

    Computed as exp2(min(x, 0)·scale·log2 e) + scale·max(x, 0) (scale > 0), in place in
    ``out`` (and ``spare``, a second buffer of x's shape) when autograd does not track x.
    Five memory passes, yet faster on 2 threads than ``elu`` + 1 (1.4 against 2.0 ms for
    4M floats on this Zen 4: ELU's expm1 is compute-bound here, exp2 is not), and exact for
    strongly negative x, where 1 + expm1(x) loses its relative precision.

    Args:
        x: any shape. scale: > 0. out, spare: optional buffers shaped like x.

    Returns:
        φ(x·scale), in ``out`` when given.
    """
    if records_grad(x):
        return torch.exp2(torch.clamp_max(x, 0.0) * (scale * LOG2_E)) + torch.relu(x) * scale
    out = torch.clamp_max(x, 0.0, out=out) if out is not None else torch.clamp_max(x, 0.0)
    out.mul_(scale * LOG2_E).exp2_()  # exp(min(x, 0)·scale), two in-place passes
    positive = torch.clamp_min(x, 0.0, out=spare) if spare is not None else x.clamp_min(0.0)
    return out.add_(positive, alpha=scale)  # + max(x, 0)·scale


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
    return num * inverse if records_grad(num, inverse) else num.mul_(inverse)  # (..., L, Ev)


# Rows per chunk of the untracked non-causal form: each chunk's feature maps, product and
# quotient are a few passes over CHUNK_BYTES of features, which stay in the cache between
# passes (1 MiB of L2 per core on this Zen 4, 2 threads). One pass over the whole of φ(K) at
# L=8192, H=8, E=64 (16 MiB) ran from memory: time grew 2.3–2.5× from L=4096 to 8192 (the
# matmuls alone 2.4×); in chunks of 1,024 rows it grows 2.0× and sits 1.4× above its two
# matmuls (one run, 2 threads: whole 16.9 ms, chunks of 256/512/1024/2048 rows 11.4 / 10.7
# / 10.3 / 10.5 ms, the two matmuls 7.5 ms).
CHUNK_BYTES = 2 * 1024 * 1024
MIN_CHUNK_ROWS = 64


def chunk_rows(lead: torch.Size, E: int, itemsize: int) -> int:
    """Rows per chunk so that one chunk of features (*lead, rows, E) is about
    :data:`CHUNK_BYTES`, and at least :data:`MIN_CHUNK_ROWS` (per-op costs take over below)."""
    return max(MIN_CHUNK_ROWS, CHUNK_BYTES // max(1, math.prod(lead) * E * itemsize))


def _tracked_noncausal(q, k, v, scale, keep):
    """Non-causal linear attention for autograd: whole tensors, no buffers reused.

    Returns:
        (..., L, Ev); 0 for a query whose every key is dropped.
    """
    Ev = v.shape[-1]
    fk = feature_map(k) if keep is None else feature_map(k) * keep  # (..., S, E)
    # (..., E, S) @ (..., S, Ev) -> (..., E, Ev), next to Σ_j φ(k_j) (..., E, 1)
    state = torch.cat([fk.transpose(-2, -1) @ v, fk.sum(dim=-2).unsqueeze(-1)], dim=-1)
    both = feature_map(q, scale) @ state  # (..., L, E) @ (..., E, Ev+1) -> (..., L, Ev+1)
    return _divide_by_last_column(both, Ev)


def _key_state(k, v, keep, rows: int) -> torch.Tensor:
    """[Σ_j φ(k_j) v_jᵀ | Σ_j φ(k_j)] (..., E, Ev+1), accumulated over chunks of ``rows``
    keys: each chunk's φ is computed into one reused pair of buffers.

    Args:
        k: (..., S, E). v: (..., S, Ev). keep: (..., S, 1) 0/1 kept keys, or None.
    """
    S, E, Ev = k.shape[-2], k.shape[-1], v.shape[-1]
    k_lead = k.shape[:-2] if keep is None else lead_shape(k.shape[:-2], keep.shape[:-2])
    state = k.new_zeros((*lead_shape(k_lead, v.shape[:-2]), E, Ev + 1))  # (..., E, Ev+1)
    rows = min(rows, S)
    features = k.new_empty((*k_lead, rows, E))  # φ of one chunk
    spare = torch.empty_like(features)
    for start in range(0, S, rows):
        n = min(rows, S - start)
        k_c = k[..., start : start + n, :].expand(*k_lead, n, E)  # (..., n, E)
        fk = feature_map(k_c, out=features[..., :n, :], spare=spare[..., :n, :])
        if keep is not None:
            fk.mul_(keep[..., start : start + n, :])  # dropped keys contribute nothing
        # (..., E, n) @ (..., n, Ev) -> (..., E, Ev), added to the running sum
        state[..., :Ev] += fk.transpose(-2, -1) @ v[..., start : start + n, :]
        state[..., Ev] += fk.sum(dim=-2)  # (..., E): Σ_j φ(k_j)
    return state


def _noncausal(q, k, v, scale, keep):
    """Non-causal linear attention: φ(q·scale) @ [φ(K)ᵀV | Σ φ(k)], then numerator over the
    last column.

    Untracked by autograd it runs in chunks of :func:`chunk_rows` rows, first of the keys
    (:func:`_key_state`), then of the queries: each query chunk's φ, its product with the
    state and its quotient stay in the cache and are written straight into the output.
    Besides the output it allocates a few chunk-sized buffers, whatever L is.

    Args:
        q: (..., L, E). k: (..., S, E). v: (..., S, Ev), all in the compute dtype.
        keep: (..., S, 1) 0/1 kept keys, or None.

    Returns:
        (..., L, Ev); 0 for a query whose every key is dropped.
    """
    if records_grad(q, k, v):
        return _tracked_noncausal(q, k, v, scale, keep)
    L, E, Ev = q.shape[-2], q.shape[-1], v.shape[-1]
    rows = chunk_rows(lead_shape(q.shape[:-2], k.shape[:-2]), E, q.element_size())
    state = _key_state(k, v, keep, rows)  # (..., E, Ev+1)
    lead = lead_shape(q.shape[:-2], state.shape[:-2])
    out = q.new_empty((*lead, L, Ev))
    rows = min(rows, L)
    features = q.new_empty((*q.shape[:-2], rows, E))  # φ of one query chunk
    spare = torch.empty_like(features)
    both = q.new_empty((*lead, rows, Ev + 1))  # [numerator | denominator] of one chunk
    for start in range(0, L, rows):
        n = min(rows, L - start)
        q_c = q[..., start : start + n, :]  # (..., n, E)
        fq = feature_map(q_c, scale, out=features[..., :n, :], spare=spare[..., :n, :])
        # (..., n, E) @ (..., E, Ev+1) -> (..., n, Ev+1)
        product = torch.matmul(fq.expand(*lead, n, E), state, out=both[..., :n, :])
        _divide_by_last_column(product, Ev, out=out[..., start : start + n, :])
    return out


def _divide_by_last_column(both: torch.Tensor, Ev: int, out=None) -> torch.Tensor:
    """both[..., :Ev] / both[..., Ev:] for both (..., L, Ev+1) = [φ(Q)S | φ(Q)z], with 0
    where the denominator is at most :data:`TINY_DENOMINATOR` (no key attended): x / inf
    is 0. Two small ops on the (..., L, 1) column, then one division (into ``out`` when
    given)."""
    den = both[..., Ev:]  # (..., L, 1)
    safe = torch.where(den > TINY_DENOMINATOR, den, math.inf)  # (..., L, 1)
    if out is None:
        return torch.div(both[..., :Ev], safe)  # (..., L, Ev)
    return torch.div(both[..., :Ev], safe, out=out)


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
        fq = feature_map(qw, scale)  # (..., L, E)
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
            fq = feature_map(qw, scale)
            fk = feature_map(kw) if keep is None else feature_map(kw) * keep
        weights = implied_weights(fq, fk, causal).to(q.dtype)
    return AttentionResult(out.to(q.dtype), weights)


def _linear_memory(lead, L, S, E, Ev, *, itemsize, need_weights, chunk_size=64, causal=False, **_):
    """Peak bytes of ``linear``: q, k, v and the output, the state, and the feature maps:
    whole for the causal form, a chunk of :func:`chunk_rows` rows (two buffers and the
    chunk's product) for the non-causal one."""
    work = score_itemsize(itemsize)
    state = (E * Ev + E) * work
    tensors = qkv_out_elements(L, S, E, Ev) * work
    if causal:
        features = (L * E + S * E) * work + chunk_size * chunk_size * work
    else:
        rows = min(max(L, S), chunk_rows(torch.Size([lead]), E, work))
        features = rows * (2 * E + Ev + 1) * work
    extra = L * S * work if need_weights else 0
    return lead * (state + tensors + features + extra)


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
