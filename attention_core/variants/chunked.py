"""Chunked, memory-efficient exact attention (online softmax, as in FlashAttention).

Queries are processed ``chunk_size`` rows at a time and keys in tiles of
``key_chunk_size``; each query chunk keeps a running row maximum m, a running sum l of
exp(score − m) and an accumulator of exp(score − m)·v, rescaled whenever m grows. Peak
memory is O(chunk_size · key_chunk_size) for scores plus O(L·Ev) for the output, whatever
L × S. The tutorial chunked the *input sequence*, which changes the result; chunking the
queries and tiling the keys with an online softmax gives exactly full attention.

Two paths compute the same thing. The explicit one (:func:`_query_chunk`) writes the
online softmax out step by step; it runs when weights, dropout or gradients are asked for.
The fast one (:func:`_fused_tiles`) hands each (query chunk, key tile) to PyTorch's fused
CPU kernel, which returns the tile's normalised output o_t and its log-sum-exp
lse_t = log Σ exp(scores); tiles then merge exactly as the online softmax does, with the
log-sum-exp standing in for (m, l): lse ← log(e^lse + e^lse_t), out ← out·e^(lse_old − lse)
+ o_t·e^(lse_t − lse).
"""

from __future__ import annotations

import math

import torch

from attention_core.device import check_budget, compute_dtype, tensor_bytes
from attention_core.types import AttentionResult, Param, VariantSpec
from attention_core.variants.common import (
    allowed_from_mask,
    apply_mask,
    dropout_keep,
    qkv_out_elements,
    records_grad,
    score_itemsize,
)

FUSED_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def _tile(mask: torch.Tensor | None, rows: slice, cols: slice) -> torch.Tensor | None:
    """Slice a mask broadcastable to (..., L, S) to one tile, keeping size-1 dims."""
    if mask is None:
        return None
    if mask.dim() < 2:
        mask = mask.view(1, -1)
    r = rows if mask.shape[-2] > 1 else slice(None)
    c = cols if mask.shape[-1] > 1 else slice(None)
    return mask[..., r, c]


def _masked_scores(q_c, k_t, mask_t):
    """Scores of one tile with -inf where blocked; q_c is pre-scaled.
    (..., cq, E) @ (..., E, ck) -> (..., cq, ck)."""
    scores = q_c @ k_t.transpose(-2, -1)
    if mask_t is None:
        return scores
    if mask_t.dtype == torch.bool:
        return scores.masked_fill_(~mask_t, -torch.inf)
    return scores.add_(mask_t.to(scores.dtype))


def _query_chunk(q_c, k, v, mask_rows, *, rows, key_chunk, dropout_p, generator, keeps):
    """Online-softmax pass of one (pre-scaled) query chunk over all key tiles.

    Returns (out (..., cq, Ev), row max m (..., cq, 1), row sum l (..., cq, 1)).
    """
    S = k.shape[-2]
    lead = torch.broadcast_shapes(q_c.shape[:-2], k.shape[:-2], v.shape[:-2])
    cq = q_c.shape[-2]
    # in-place updates save memory, but autograd needs the tensors it saved intact
    inplace = not records_grad(q_c, k, v)
    m = q_c.new_full((*lead, cq, 1), -torch.inf)  # running row max
    l_sum = q_c.new_zeros((*lead, cq, 1))  # running Σ exp(s − m)
    acc = q_c.new_zeros((*lead, cq, v.shape[-1]))  # running Σ exp(s − m) v
    for start in range(0, S, key_chunk):
        cols = slice(start, min(start + key_chunk, S))
        mask_t = _tile(mask_rows, slice(None), cols)
        if mask_t is not None and not bool(allowed_from_mask(mask_t).any()):
            continue  # the whole tile is blocked (e.g. the future under a causal mask)
        p = _masked_scores(q_c, k[..., cols, :], mask_t)  # (..., cq, ck) scores
        m_new = torch.maximum(m, p.amax(dim=-1, keepdim=True))  # (..., cq, 1)
        m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        if inplace:
            p = p.sub_(m_safe).exp_()  # (..., cq, ck) in [0, 1]; blocked cells give 0
        else:
            p = torch.exp(p - m_safe)
        correction = torch.exp(m - m_safe)  # (..., cq, 1); 0 while the row saw no key
        if inplace:
            l_sum = l_sum.mul_(correction).add_(p.sum(dim=-1, keepdim=True))
        else:
            l_sum = l_sum * correction + p.sum(dim=-1, keepdim=True)
        if dropout_p > 0:
            keep = dropout_keep(p.shape, dropout_p, generator, p.device)
            if keeps is not None:
                keeps[(rows.start, start)] = keep
            p = p * keep / (1.0 - dropout_p)
        pv = p @ v[..., cols, :]  # (..., cq, ck) @ (..., ck, Ev) -> (..., cq, Ev)
        acc = acc.mul_(correction).add_(pv) if inplace else acc * correction + pv
        m = m_new
    out = torch.where(l_sum > 0, acc / torch.where(l_sum > 0, l_sum, 1.0), 0.0)
    return out, m, l_sum


def _weights_pass(q, k, mask, stats, *, chunk, key_chunk, dropout_p, keeps, budget):
    """Rebuild the exact weights exp(s − m) / l tile by tile into (..., L, S), and the
    scores as fed to the softmax (blocked cells at the dtype's minimum, not the -inf the
    online pass uses internally)."""
    L, S = q.shape[-2], k.shape[-2]
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    check_budget(
        2 * tensor_bytes((*lead, L, S), q.dtype),
        f"attention weights and scores {(*lead, L, S)}",
        budget,
    )
    weights = q.new_zeros((*lead, L, S))
    scores = q.new_empty((*lead, L, S))
    for start_q, (m, l_sum) in stats.items():
        rows = slice(start_q, min(start_q + chunk, L))
        m_safe = torch.where(torch.isinf(m), torch.zeros_like(m), m)
        inv = torch.where(l_sum > 0, 1.0 / torch.where(l_sum > 0, l_sum, 1.0), 0.0)
        for start_k in range(0, S, key_chunk):
            cols = slice(start_k, min(start_k + key_chunk, S))
            tile_scores = q[..., rows, :] @ k[..., cols, :].transpose(-2, -1)  # (..., cq, ck)
            tile_scores = apply_mask(tile_scores, _tile(mask, rows, cols))
            scores[..., rows, cols] = tile_scores
            tile = torch.exp(tile_scores - m_safe) * inv  # (..., cq, ck); blocked cells: 0
            keep = keeps.get((start_q, start_k)) if keeps is not None else None
            if dropout_p > 0:
                tile = tile * keep / (1.0 - dropout_p) if keep is not None else tile * 0.0
            weights[..., rows, cols] = tile
    return weights, scores


def _as_4d(t: torch.Tensor, lead: torch.Size) -> torch.Tensor:
    """(…, n, F) broadcast to ``lead`` and viewed as (N, 1, n, F): the fused kernel takes
    4-D inputs (a copy only where a leading dim was broadcast)."""
    return t.expand(*lead, *t.shape[-2:]).reshape(-1, 1, *t.shape[-2:])


def _fused_tile_mask(mask_t: torch.Tensor, lead: torch.Size, dtype) -> tuple:
    """A mask tile as the fused kernel takes it: float of the inputs' dtype, 4-D
    (N, 1, cq, ck); and the (N, 1, cq) rows that keep a key in this tile."""
    allowed = allowed_from_mask(mask_t)
    shape = (*lead, *torch.broadcast_shapes(mask_t.shape[-2:], allowed.shape[-2:]))
    if mask_t.dtype == torch.bool:
        additive = torch.zeros(shape, dtype=dtype, device=mask_t.device)
        additive = additive.masked_fill_(~mask_t, -math.inf)
    else:
        additive = mask_t.to(dtype).expand(shape).clone()
    has_key = allowed.expand(shape).any(dim=-1)  # (..., cq|1)
    return additive.reshape(-1, 1, *shape[-2:]), has_key.reshape(-1, 1, shape[-2])


def _fused_tiles(q, k, v, mask, *, scale, chunk, key_chunk) -> torch.Tensor:
    """Exact attention from fused (query chunk, key tile) calls merged by log-sum-exp.

    Args:
        q: (..., L, E). k: (..., S, E). v: (..., S, Ev). mask: None or broadcastable to
            (..., L, S). scale: score scale. chunk, key_chunk: tile sizes.

    Returns:
        output (..., L, Ev); a query row with no allowed key gives 0.
    """
    L, S, Ev = q.shape[-2], k.shape[-2], v.shape[-1]
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    kernel = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    q4, k4, v4 = _as_4d(q, lead), _as_4d(k, lead), _as_4d(v, lead)  # (N, 1, ·, ·)
    out = q4.new_empty((q4.shape[0], 1, L, Ev))  # (N, 1, L, Ev): each chunk accumulates here
    for start in range(0, L, chunk):
        rows = slice(start, min(start + chunk, L))
        acc = out[..., rows, :]  # (N, 1, cq, Ev) view: merged in place
        lse = None  # (N, 1, cq) running log Σ exp(scores) over the tiles seen
        for start_k in range(0, S, key_chunk):
            cols = slice(start_k, min(start_k + key_chunk, S))
            mask_t, has_key = _tile(mask, rows, cols), None
            if mask_t is not None:
                if not bool(allowed_from_mask(mask_t).any()):
                    continue  # the whole tile is blocked (e.g. the future under a causal mask)
                mask_t, has_key = _fused_tile_mask(mask_t, lead, q4.dtype)
            o_t, lse_t = kernel(
                q4[..., rows, :], k4[..., cols, :], v4[..., cols, :], attn_mask=mask_t, scale=scale
            )  # (N, 1, cq, Ev), (N, 1, cq) float32 for half types
            if has_key is not None:  # the kernel reports lse 0 for a row with no key
                lse_t = lse_t.masked_fill(~has_key, -math.inf)
                o_t = o_t.masked_fill(~has_key.unsqueeze(-1), 0.0)
            if lse is None:
                acc.copy_(o_t)
                lse = lse_t
                continue
            merged = torch.logaddexp(lse, lse_t)  # (N, 1, cq)
            safe = merged.masked_fill(torch.isinf(merged), 0.0)  # -inf: no key so far
            old_part = torch.exp(lse - safe).unsqueeze(-1).to(acc.dtype)  # (N, 1, cq, 1)
            new_part = torch.exp(lse_t - safe).unsqueeze(-1).to(acc.dtype)
            acc.mul_(old_part).addcmul_(o_t, new_part)
            lse = merged
        if lse is None:
            acc.zero_()  # every tile of this chunk was blocked
    return out.view(*lead, L, Ev)


def chunked_attention(
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
    chunk_size: int = 1024,
    key_chunk_size: int = 4096,
) -> AttentionResult:
    """Exact attention in query chunks and key tiles with an online softmax.

    Equals full scaled attention (same mask) to float tolerance; a query with no allowed
    key gives zeros. Half types are computed in float32.

    Args:
        q: (..., L, E). k: (..., S, E). v: (..., S, Ev). mask: broadcastable to (..., L, S).
        chunk_size: query rows per chunk. key_chunk_size: keys per tile.

    Returns:
        AttentionResult(output (..., L, Ev); weights and scores (..., L, S) or None: they
        are rebuilt in a second pass and need L×S memory).

    Raises:
        MemoryBudgetError: when a score tile or the requested weights exceed the budget.
    """
    L, S = q.shape[-2], k.shape[-2]
    work = compute_dtype(q.dtype)
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    chunk, key_chunk = min(chunk_size, L), min(key_chunk_size, S)
    tracked = records_grad(q, k, v)
    # the fused kernel's terms: PyTorch's CPU flash kernel, one head size for q, k and v
    fusable = q.device.type == "cpu" and q.dtype in FUSED_DTYPES and q.shape[-1] == v.shape[-1]
    fused = fusable and not (need_weights or dropout_p > 0 or tracked)
    # the fused kernel keeps its tiles small inside; it needs a tile only for a mask
    tiles = 0 if (fused and mask is None) else (1 if fused else 2)
    check_budget(
        tiles * tensor_bytes((*lead, chunk, key_chunk), work),
        f"score tile {(*lead, chunk, key_chunk)}",
        memory_budget,
        hint="lower chunk_size or key_chunk_size (the tile is chunk_size × key_chunk_size per "
        "head), or the batch or heads",
    )
    if fused:
        return AttentionResult(
            _fused_tiles(q, k, v, mask, scale=scale, chunk=chunk, key_chunk=key_chunk)
        )
    qw, kw, vw = q.to(work) * scale, k.to(work), v.to(work)  # q pre-scaled once
    out = qw.new_empty((*lead, L, v.shape[-1]))  # (..., L, Ev)
    stats = {}
    keeps = {} if (need_weights and dropout_p > 0) else None
    for start in range(0, L, chunk):
        rows = slice(start, min(start + chunk, L))
        out_c, m, l_sum = _query_chunk(
            qw[..., rows, :],
            kw,
            vw,
            _tile(mask, rows, slice(None)),
            rows=rows,
            key_chunk=key_chunk,
            dropout_p=dropout_p,
            generator=generator,
            keeps=keeps,
        )
        out[..., rows, :] = out_c
        if need_weights:
            stats[start] = (m, l_sum)
    if not need_weights:
        return AttentionResult(out.to(q.dtype))
    weights, scores = _weights_pass(
        qw,
        kw,
        mask,
        stats,
        chunk=chunk,
        key_chunk=key_chunk,
        dropout_p=dropout_p,
        keeps=keeps,
        budget=memory_budget,
    )
    return AttentionResult(out.to(q.dtype), weights.to(q.dtype), scores)


def _chunked_memory(
    lead, L, S, E, Ev, *, itemsize, need_weights, chunk_size=1024, key_chunk_size=4096, **_
):
    """Peak bytes of ``chunked``: without weights the fused path (no score tile of its own;
    a mask adds one chunk_size × key_chunk_size tile); with weights the explicit path's
    tiles and the L×S weights and scores."""
    work = score_itemsize(itemsize)
    io = (qkv_out_elements(L, S, E, Ev) + L * Ev) * work
    if not need_weights:
        return lead * io
    tile = 3 * min(chunk_size, L) * min(key_chunk_size, S) * work
    return lead * (tile + io + 2 * L * S * work)


SPECS = (
    VariantSpec(
        name="chunked",
        label="Chunked (memory-efficient)",
        explanation=(
            "Exact attention computed a chunk of queries and keys at a time (online "
            "softmax) to save memory."
        ),
        time_complexity="O(L·S·E)",
        memory_complexity="O(L·Ev) (+ chunk·key_chunk with a mask or weights)",
        exact=True,
        fn=chunked_attention,
        params=(
            Param("chunk_size", "int", 1024, 1, 8192, 1, "query rows per chunk"),
            Param("key_chunk_size", "int", 4096, 1, 8192, 1, "keys per tile"),
        ),
        memory_model=_chunked_memory,
    ),
)
