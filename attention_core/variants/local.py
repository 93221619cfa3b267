"""Banded and block-diagonal attention, never as an L×L matrix.

``local``: query i attends to keys |i - j| <= window_size // 2 (the tutorial's
LocalSelfAttention, implemented for real). The sequence is cut into query blocks of ``c``
rows; block b only meets the key window [b·c − halo, b·c + c + halo), so time and memory
are O(L·(c + 2·halo)). Without weights or dropout each block is one fused SDPA call against
its window with a small (c, c + 2·halo) band mask, or, for float32 on the CPU without a
user mask, one call of the banded C kernel (``band_kernel.py``), which computes only the
2·halo + 1 keys of each row; otherwise the explicit path below forms the window scores.
``block``: positions attend within their block of ``block_size``: the blocks are
independent groups (``groups.py``), O(L·b).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attention_core import masks
from attention_core.device import check_budget, compute_dtype, tensor_bytes
from attention_core.types import AttentionResult, Param, VariantSpec, blocked_score
from attention_core.variants import band_kernel
from attention_core.variants.common import (
    allowed_from_mask,
    apply_dropout,
    band_result,
    flatten_lead,
    masked_dense_result,
    stable_softmax,
)
from attention_core.variants.groups import block_groups, grouped_attention, grouped_memory

MIN_QUERY_BLOCK = 32
# Query rows per block of ``local``'s fused calls. Each block computes c + 2·halo keys per
# row for the w + 1 it keeps, so small blocks waste less, down to where the kernel's
# per-block cost takes over (SDPA's CPU kernel splits queries into 32-row pieces anyway).
# Measured on this Zen 4 for the interior call alone at L=8192, w=128 (B=1, H=8, E=64, fp32),
# best of 5: 1 thread 16 rows 37.0 ms, 32 rows 37.0, 64 rows 42.8, 128 rows 54.0; 2 threads
# 26.9, 21.6, 24.5, 30.1. A bool band and an additive one cost the same; contiguous copies
# of the windows cost more than the overlapping views (25.4 ms against 21.6 at 32 rows).
FUSED_QUERY_BLOCK = 32


def _window_layout(L: int, block: int, halo: int, device) -> torch.Tensor:
    """Bool (nb, c, W) "may attend" of query block rows against their key windows.

    Query row i' of block b is position b·c + i'; window column j' is key b·c − halo + j'.
    """
    nb = math.ceil(L / block)
    width = block + 2 * halo
    i = torch.arange(block, device=device).view(1, block, 1)  # (1, c, 1)
    j = torch.arange(width, device=device).view(1, 1, width)  # (1, 1, W)
    b = torch.arange(nb, device=device).view(nb, 1, 1)  # (nb, 1, 1)
    key_pos = b * block - halo + j  # (nb, 1, W) absolute key positions
    allowed = (key_pos >= 0) & (key_pos < L)  # (nb, 1, W)
    rel = j - i  # (1, c, W); |query − key| <= halo  <=>  0 <= j' − i' <= 2·halo
    return allowed & (rel >= 0) & (rel <= 2 * halo)  # (nb, c, W)


def _mask_windows(mask: torch.Tensor, L: int, block: int, halo: int) -> torch.Tensor:
    """Gather a user mask (..., Lm, Sm), Lm in {1, L}, Sm in {1, L}, into window layout
    (..., nb, c or 1, W), matching the scores of :func:`blocked_attention`."""
    nb = math.ceil(L / block)
    padded_len = nb * block
    width = block + 2 * halo
    if mask.dim() < 2:
        mask = mask.view(1, -1)
    if mask.shape[-1] == 1:
        mask = mask.expand(*mask.shape[:-1], L)  # (..., Lm, S)
    is_bool = mask.dtype == torch.bool
    m = mask.to(torch.uint8) if is_bool else mask
    m = F.pad(m, (halo, padded_len - L + halo))  # (..., Lm, Lp + 2·halo)
    if m.shape[-2] == 1:
        win = m.unfold(-1, width, block)  # (..., 1, nb, W)
        win = win.transpose(-3, -2)  # (..., nb, 1, W)
    else:
        m = F.pad(m, (0, 0, 0, padded_len - L))  # (..., Lp, Lp + 2·halo)
        win = m.unfold(-1, width, block)  # (..., Lp, nb, W)
        win = win.reshape(*win.shape[:-3], nb, block, nb, width)  # (..., nb, c, nb, W)
        win = torch.diagonal(win, dim1=-4, dim2=-2)  # (..., c, W, nb): block b meets window b
        win = win.movedim(-1, -3)  # (..., nb, c, W)
    return win.bool() if is_bool else win


def _scatter_dense(
    weights: torch.Tensor, L: int, block: int, halo: int, fill: float = 0.0
) -> torch.Tensor:
    """Place window matrices (..., nb, c, W) into a dense (..., L, L) one, ``fill`` elsewhere."""
    nb, width = weights.shape[-3], weights.shape[-1]
    padded = nb * block
    dense = weights.new_full((*weights.shape[:-3], padded, padded + 2 * halo), fill)
    for b in range(nb):
        rows = slice(b * block, (b + 1) * block)
        dense[..., rows, b * block : b * block + width] = weights[..., b, :, :]
    return dense[..., :L, halo : halo + L]


def _window_parts(t: torch.Tensor, block: int, halo: int, nb: int) -> list[torch.Tensor]:
    """Split the key windows of every query block into non-overlapping views.

    t (..., L, E) is padded by one block on each side and viewed as (..., nb + 2, c, E);
    block b's window is then [last ``halo`` rows of block b − 1 | block b | first ``halo``
    rows of block b + 1]. Each piece is a strided view whose batch dims merge, so matmul
    needs no gather copy (unlike overlapping unfold windows).

    Returns:
        [left (..., nb, h, E), centre (..., nb, c, E), right (..., nb, h, E)], or just the
        centre when halo is 0.
    """
    L, E = t.shape[-2], t.shape[-1]
    padded = F.pad(t, (0, 0, block, (nb + 1) * block - L))  # (..., (nb + 2)·c, E)
    blocks = padded.view(*padded.shape[:-2], nb + 2, block, E)  # (..., nb + 2, c, E)
    centre = blocks[..., 1 : nb + 1, :, :]  # (..., nb, c, E)
    if halo == 0:
        return [centre]
    left = blocks[..., 0:nb, block - halo :, :]  # (..., nb, h, E)
    right = blocks[..., 2 : nb + 2, :halo, :]  # (..., nb, h, E)
    return [left, centre, right]


def windowed_attention(
    q,
    k,
    v,
    *,
    block: int,
    halo: int,
    mask,
    scale,
    need_weights,
    dropout_p,
    generator,
    memory_budget,
) -> AttentionResult:
    """Explicit banded attention of query blocks against their key windows (L == S).
    Without a mask or dropout, float32 on the CPU runs the band kernel instead (it writes
    the same dense weights and scores).

    Args:
        q: (..., L, E). k: (..., L, E). v: (..., L, Ev). block: query block size c.
        halo: keys beyond each block edge in the window; only |i − j| <= halo is kept.
        mask: None or broadcastable to (..., L, L).

    Returns:
        AttentionResult(output (..., L, Ev); with ``need_weights``, dense weights and
        scores (..., L, L), the band's blocked cells at the dtype's minimum).

    Raises:
        MemoryBudgetError: when the window scores or the requested dense matrices exceed
            the budget.
    """
    L, E, Ev = q.shape[-2], q.shape[-1], v.shape[-1]
    block = min(block, L)
    nb = math.ceil(L / block)
    padded_len = nb * block
    width = block + 2 * halo
    work = compute_dtype(q.dtype)
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if mask is None and dropout_p == 0.0 and band_kernel.can_run(q, k, v):
        if need_weights:
            check_budget(
                2 * tensor_bytes((*lead, L, L), work),
                f"attention weights and scores {(*lead, L, L)}",
                memory_budget,
            )
        return band_result(q, k, v, left=halo, right=halo, scale=scale, need_weights=need_weights)
    check_budget(
        2 * tensor_bytes((*lead, nb, block, width), work),
        f"window scores {(*lead, nb, block, width)}",
        memory_budget,
    )
    if need_weights:
        check_budget(
            2 * tensor_bytes((*lead, L, L), work),
            f"attention weights and scores {(*lead, L, L)}",
            memory_budget,
        )
    # in-place updates save memory and page faults, but autograd needs saved tensors intact
    inplace = not (torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)))
    q_blk = q.to(work) * scale  # (..., L, E), pre-scaled: cheaper than scaling the scores
    if padded_len != L:
        q_blk = F.pad(q_blk, (0, 0, 0, padded_len - L))  # (..., Lp, E)
    q_blk = q_blk.reshape(*q_blk.shape[:-2], nb, block, E)  # (..., nb, c, E)
    k_parts = _window_parts(k.to(work), block, halo, nb)  # views: left halo | block | right
    v_parts = _window_parts(v.to(work), block, halo, nb)
    # (..., nb, c, E) @ (..., nb, E, h|c|h) -> (..., nb, c, W), W = h + c + h
    scores = torch.cat([q_blk @ part.transpose(-2, -1) for part in k_parts], dim=-1)
    allowed = _window_layout(L, block, halo, q.device)  # (nb, c, W)
    if mask is not None:
        user = _mask_windows(mask, L, block, halo)  # (..., nb, c|1, W)
        if user.dtype == torch.bool:
            allowed = allowed & user
        else:
            scores = scores.add_(user.to(work))
            allowed = allowed & allowed_from_mask(user)
    scores = scores.masked_fill_(~allowed, blocked_score(work))  # also a float mask's -inf
    weights = stable_softmax(scores, allowed)  # (..., nb, c, W)
    weights = apply_dropout(weights, dropout_p, generator)
    # Σ over the three pieces of (..., nb, c, h|c|h) @ (..., nb, h|c|h, Ev) -> (..., nb, c, Ev)
    pieces = weights.split([part.shape[-2] for part in v_parts], dim=-1)
    out = pieces[0] @ v_parts[0]
    for w, part in zip(pieces[1:], v_parts[1:], strict=True):
        out = out.add_(w @ part) if inplace else out + w @ part
    out = out.reshape(*out.shape[:-3], padded_len, Ev)[..., :L, :]  # (..., L, Ev)
    if not need_weights:
        return AttentionResult(out.to(q.dtype))
    dense_weights = _scatter_dense(weights, L, block, halo).to(q.dtype)
    dense_scores = _scatter_dense(scores, L, block, halo, blocked_score(work))
    return AttentionResult(out.to(q.dtype), dense_weights, dense_scores)


def _overlapping_windows(t: torch.Tensor, block: int, halo: int, nb: int) -> torch.Tensor:
    """Key windows of every query block as one overlapping view, no copy per window.

    t (N, L, F) is padded by ``halo`` rows in front and up to nb·c + halo behind (one copy),
    then viewed as (N, nb, c + 2·halo, F) with block b's window starting at row b·c.
    """
    N, L, features = t.shape
    padded = t.new_empty((N, nb * block + 2 * halo, features))  # (N, nb·c + 2·halo, F)
    padded[:, :halo].zero_()  # one pass: zero only the margins (F.pad fills, then copies)
    padded[:, halo + L :].zero_()
    padded[:, halo : halo + L] = t
    return padded.as_strided(
        (N, nb, block + 2 * halo, features), (padded.stride(0), block * features, features, 1)
    )  # (N, nb, W, F)


def _flat_window_mask(user: torch.Tensor, lead: torch.Size) -> torch.Tensor:
    """A user mask in window layout (…, nb, c|1, W) with its lead dims flattened to N, or
    to 1 when they are all 1 (then it broadcasts over N without a copy). Always 4-D: SDPA
    takes a 3-D mask only on its slow math path."""
    if all(size == 1 for size in user.shape[:-3]):
        return user.reshape(1, *user.shape[-3:])  # (1, nb, c|1, W)
    return user.expand(*lead, *user.shape[-3:]).reshape(-1, *user.shape[-3:])


def _band(rows: int, keys: int, offset: int, halo: int, dtype, device) -> torch.Tensor:
    """(rows, keys) additive band: 0 where |i + offset − j| <= halo, -inf elsewhere.

    Row i is the query at position start + i and column j the key at start − offset + j:
    a block against its window (offset = halo), or rows against keys that start with them
    (offset = 0).
    """
    rel = torch.arange(keys, device=device) - torch.arange(rows, device=device).unsqueeze(-1)
    inside = (rel - offset).abs() <= halo  # (rows, keys): |query − key| <= halo
    return torch.zeros(inside.shape, dtype=dtype, device=device).masked_fill_(~inside, -math.inf)


def _strided_blocks(t: torch.Tensor, count: int, rows: int, step: int, start: int) -> torch.Tensor:
    """(N, count, rows, F) view of t (N, L, F) (plain row strides): block n holds rows
    [start + n·step, start + n·step + rows); blocks overlap when step < rows. No copy."""
    features = t.shape[-1]
    return t.as_strided(
        (t.shape[0], count, rows, features),
        (t.stride(0), step * features, features, 1),
        t.storage_offset() + start * features,
    )


def interior_range(L: int, block: int, halo: int) -> tuple[int, int]:
    """(first, count): the query blocks of ``block`` rows whose key windows
    [b·c − halo, b·c + c + halo) lie inside [0, L) are first … first + count − 1 (count may
    be 0 or less when there are none)."""
    first = math.ceil(halo / block)  # blocks before ``first`` have windows starting before 0
    last = (L - block - halo) // block  # blocks up to ``last`` have windows ending by L
    return first, last - first + 1


def interior_blocks(q, k, v, block: int, halo: int, scale: float, first: int, count: int):
    """The one fused call at the heart of unmasked ``local``: query blocks first … first +
    count − 1 of ``block`` rows, each against its key window [b·c − halo, b·c + c + halo),
    which must lie inside [0, L), as ONE SDPA call on overlapping views of contiguous
    q (N, L, E), k (N, L, E), v (N, L, Ev) (no copy) sharing one (c, W) band mask.

    Returns:
        (N, count, c, Ev): the rows [first·c, (first + count)·c) of the output.
    """
    head, width = first * block, block + 2 * halo
    # (N, count, c, E) against (N, count, W, E|Ev) -> (N, count, c, Ev)
    return F.scaled_dot_product_attention(
        _strided_blocks(q, count, block, block, head),
        _strided_blocks(k, count, width, block, head - halo),
        _strided_blocks(v, count, width, block, head - halo),
        attn_mask=_band(block, width, halo, halo, q.dtype, q.device).view(1, 1, block, width),
        scale=scale,
    )


def _unmasked_local(q, k, v, block: int, halo: int, scale: float) -> torch.Tensor:
    """Local attention without a user mask on flat q (N, L, E), k (N, L, E), v (N, L, Ev).

    Three steps, each one fused op (few ops: on a shared machine every op's thread barrier
    can wait for a descheduled thread):

    * the interior blocks, whose window [b·c − halo, b·c + c + halo) lies inside [0, L):
      ONE SDPA call on overlapping views of k and v (no copy), sharing one (c, W) band;
    * the two edges, rows [0, R) against keys [0, R + halo) and rows [L − R, L) against
      keys [L − R − halo, L), R covering the head and tail rows the interior leaves: ONE
      SDPA call on a 2-block view, each block with its own (R, R + halo) band;
    * one concatenation into the output.

    Without interior blocks (L < the head, one block and the halo) it is one call with an
    (L, L) band.

    Returns:
        (N, L, Ev).
    """
    N, L, _ = q.shape
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()  # plain strides for the views
    first, count = interior_range(L, block, halo)
    if count < 1:  # (L, L) band: L < first·c + c + halo, a few blocks
        band = _band(L, L, 0, halo, q.dtype, q.device)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=band, scale=scale)
    head, tail_start = first * block, (first + count) * block
    interior = interior_blocks(q, k, v, block, halo, scale, first, count)  # (N, count, c, Ev)
    Ev = v.shape[-1]
    rows = max(head, L - tail_start)  # R: head rows [0, R), tail rows [L − R, L)
    if rows == 0:  # halo 0 and L a multiple of c: no edges
        return interior.view(N, L, Ev)
    keys = rows + halo  # <= L whenever interior blocks exist
    edge_band = torch.stack(  # (2, R, R + halo): the head's keys start with its rows
        [
            _band(rows, keys, 0, halo, q.dtype, q.device),
            _band(rows, keys, halo, halo, q.dtype, q.device),
        ]
    )
    # (N, 2, R, E) against (N, 2, R + halo, E|Ev) -> (N, 2, R, Ev)
    edges = F.scaled_dot_product_attention(
        _strided_blocks(q, 2, rows, L - rows, 0),
        _strided_blocks(k, 2, keys, L - keys, 0),
        _strided_blocks(v, 2, keys, L - keys, 0),
        attn_mask=edge_band.unsqueeze(0),
        scale=scale,
    )
    parts = [
        edges[:, 0, :head],
        interior.view(N, count * block, Ev),
        edges[:, 1, rows - (L - tail_start) :],
    ]
    return torch.cat(parts, dim=1)  # (N, L, Ev)


def fused_local(q, k, v, *, halo: int, mask, scale, memory_budget) -> torch.Tensor:
    """Local attention (L == S) without weights or dropout, no L×L matrix. Without a user
    mask, float32 on the CPU runs the banded C kernel (:mod:`band_kernel`, where built):
    O(L·(2·halo + 1)·E) time, per-thread buffers of memory. Otherwise fused SDPA calls over
    query blocks of :data:`FUSED_QUERY_BLOCK` rows, each against its key window
    [b·c − halo, b·c + c + halo) with a band mask, O(L·(c + 2·halo)) time and memory:
    without a user mask :func:`_unmasked_local` runs the interior blocks as one call on
    views (no copy) and both edges as one more; with one, the keys are padded once and
    every block is one call on an overlapping view of the padded keys, with a (nb, c, W)
    mask.

    Args:
        q: (..., L, E). k: (..., L, E). v: (..., L, Ev). halo: window_size // 2.
        mask: None or broadcastable to (..., L, L). scale: score scale.

    Returns:
        output (..., L, Ev); a query row with no allowed key gives 0.

    Raises:
        MemoryBudgetError: float64 (or E != Ev) runs SDPA's math path, which forms the
            (nb, c, W) window scores: when those exceed the budget.
    """
    L, E, Ev = q.shape[-2], q.shape[-1], v.shape[-1]
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    block = min(FUSED_QUERY_BLOCK, L)
    nb = math.ceil(L / block)
    width = block + 2 * halo
    check_budget(
        2 * tensor_bytes((*lead, nb, block, width), compute_dtype(q.dtype)),
        f"window scores {(*lead, nb, block, width)}",
        memory_budget,
    )
    if mask is None:
        if band_kernel.can_run(q, k, v):  # only the band's keys: O(L·(2·halo + 1)·E)
            band = band_result(q, k, v, left=halo, right=halo, scale=scale, need_weights=False)
            return band.output
        flat = [flatten_lead(t, lead) for t in (q, k, v)]  # (N, L, E|Ev)
        out = _unmasked_local(*flat, block, halo, scale)
        return out.view(*lead, L, Ev)
    q_flat = flatten_lead(q, lead)  # (N, L, E)
    if nb * block != L:
        q_flat = F.pad(q_flat, (0, 0, 0, nb * block - L))  # (N, nb·c, E)
    q_blocks = q_flat.view(q_flat.shape[0], nb, block, E)  # (N, nb, c, E)
    k_win = _overlapping_windows(flatten_lead(k, lead), block, halo, nb)  # (N, nb, W, E)
    v_win = _overlapping_windows(flatten_lead(v, lead), block, halo, nb)  # (N, nb, W, Ev)
    allowed = _window_layout(L, block, halo, q.device).unsqueeze(0)  # (1, nb, c, W): band
    # and keys in range; 4-D, as SDPA's fused kernel needs
    user = _flat_window_mask(_mask_windows(mask, L, block, halo), lead)  # (N|1, nb, c|1, W)
    if user.dtype == torch.bool:
        sdpa_mask = allowed & user
        has_key = sdpa_mask.any(dim=-1, keepdim=True)
    else:
        sdpa_mask = user.to(q.dtype).masked_fill(~allowed, -math.inf)
        has_key = (sdpa_mask != -math.inf).any(dim=-1, keepdim=True)
    # (N, nb, c, E) against (N, nb, W, E), (N, nb, W, Ev) -> (N, nb, c, Ev)
    out = F.scaled_dot_product_attention(q_blocks, k_win, v_win, attn_mask=sdpa_mask, scale=scale)
    out = out.masked_fill(~has_key, 0.0)
    out = out.reshape(out.shape[0], nb * block, Ev)[:, :L, :]  # (N, L, Ev)
    return out.reshape(*lead, L, Ev)


def local_attention(
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
    window_size: int,
) -> AttentionResult:
    """Local window attention: query i sees keys |i − j| <= window_size // 2.

    Exact: equals full scaled attention under ``masks.local(L, window_size)`` (and the
    user's mask). Self-attention (L == S) runs block by block in O(L·w) time and memory:
    fused SDPA calls per query block without weights or dropout (:func:`fused_local`),
    explicit window scores otherwise (:func:`windowed_attention`). L != S falls back to
    masked dense attention.

    Args:
        q: (..., L, E). k: (..., S, E). v: (..., S, Ev). window_size: >= 1.

    Returns:
        AttentionResult(output (..., L, Ev); weights and scores (..., L, S) or None).

    Raises:
        MemoryBudgetError: when the window scores or requested weights exceed the budget.
    """
    L, S = q.shape[-2], k.shape[-2]
    halo = window_size // 2
    if L != S:

        def pattern():
            return masks.local(L, window_size, S, device=q.device)

        return masked_dense_result(  # cross-attention has no band structure to exploit
            q,
            k,
            v,
            mask=mask,
            scale=scale,
            need_weights=need_weights,
            dropout_p=dropout_p,
            generator=generator,
            memory_budget=memory_budget,
            build_pattern=pattern,
        )
    halo = min(halo, L)
    if not need_weights and dropout_p == 0.0:
        out = fused_local(q, k, v, halo=halo, mask=mask, scale=scale, memory_budget=memory_budget)
        return AttentionResult(out)
    return windowed_attention(
        q,
        k,
        v,
        block=max(MIN_QUERY_BLOCK, halo),
        halo=halo,
        mask=mask,
        scale=scale,
        need_weights=need_weights,
        dropout_p=dropout_p,
        generator=generator,
        memory_budget=memory_budget,
    )


def block_attention(
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
    block_size: int,
) -> AttentionResult:
    """Block-diagonal attention: positions attend within their block of ``block_size``.

    Exact: equals full scaled attention under ``masks.block(L, block_size, S)``. The
    blocks are independent: each query block is gathered with its key block and attends
    within it (``groups.py``), O(L·b·E) time and O(L·b) memory, also when L != S; one
    fused SDPA call for all blocks when no weights or dropout are asked for.

    Args/Returns/Raises: as :func:`local_attention`, with block_size >= 1.
    """
    groups = block_groups(q.shape[-2], k.shape[-2], block_size, q.device)
    return grouped_attention(
        q,
        k,
        v,
        groups,
        mask=mask,
        scale=scale,
        need_weights=need_weights,
        dropout_p=dropout_p,
        generator=generator,
        memory_budget=memory_budget,
    )


def _local_memory(lead, L, S, E, Ev, itemsize, need_weights, window_size=16, **_):
    """Peak bytes of ``local``: window scores and weights of one block (fused) or of every
    block (explicit, with weights), plus q, k, v and the output."""
    halo = window_size // 2
    block = min(max(MIN_QUERY_BLOCK, halo), L)
    window = L * (block + 2 * halo) * max(itemsize, 4) * 2
    extra = 2 * L * S * max(itemsize, 4) if need_weights else 0
    return lead * (window + extra + (2 * L * E + 2 * L * Ev) * itemsize)


def _block_memory(lead, L, S, E, Ev, itemsize, need_weights, block_size=16, **_):
    """Peak bytes of ``block``: ceil(L/b) blocks of b × b scores."""
    block = min(block_size, max(L, S))
    cells = math.ceil(L / block) * block * block
    return grouped_memory(lead, L, S, E, Ev, itemsize, need_weights, cells=cells)


def _local_pattern(L, S=None, *, window_size, **_):
    return masks.local(L, window_size, S)


def _block_pattern(L, S=None, *, block_size, **_):
    return masks.block(L, block_size, S)


WINDOW_PARAM = Param(
    "window_size", "int", 16, 1, 4096, 1, "keys within window_size // 2 positions on each side"
)

SPECS = (
    VariantSpec(
        name="local",
        label="Local window",
        explanation=(
            "Each token attends only to neighbours within half a window on each side: O(L·w)."
        ),
        time_complexity="O(L·w·E)",
        memory_complexity="O(L·w)",
        exact=True,
        fn=local_attention,
        params=(WINDOW_PARAM,),
        pattern=_local_pattern,
        memory_model=_local_memory,
    ),
    VariantSpec(
        name="block",
        label="Block",
        explanation="Tokens attend only inside their own block.",
        time_complexity="O(L·b·E)",
        memory_complexity="O(L·b)",
        exact=True,
        fn=block_attention,
        params=(Param("block_size", "int", 8, 1, 4096, 1, "tokens per block"),),
        pattern=_block_pattern,
        memory_model=_block_memory,
    ),
)
