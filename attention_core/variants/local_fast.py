"""``local``'s fast paths: the same values as its readable window path (``local.py``), sooner.

``local.local_attention`` hands a self-attention call (L == S) here when :func:`applies`:

* float32 on the CPU without a user mask, dropout or gradient: the banded C kernel
  (:mod:`band_kernel`, where built), which meets only the 2·halo + 1 keys of each row,
  O(L·(2·halo + 1)·E) time, and writes the dense weights and scores when they are asked for;
* otherwise, without weights or dropout: fused SDPA calls over query blocks of
  :data:`FUSED_QUERY_BLOCK` rows, each against its key window [b·c − halo, b·c + c + halo)
  with a band mask, O(L·(c + 2·halo)) time and memory.

One switch turns all of them off: ``with local_fast.disabled():`` (``local`` then runs its
readable path only; tests compare the two). ``band_kernel.disabled()`` turns off the kernel
alone, leaving the SDPA blocks.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F

from attention_core.device import check_budget, compute_dtype, tensor_bytes
from attention_core.types import AttentionResult
from attention_core.variants import band_kernel
from attention_core.variants.common import lead_shape, mask_windows, window_layout

# Query rows per block of ``local``'s fused calls. Each block computes c + 2·halo keys per
# row for the w + 1 it keeps, so small blocks waste less, down to where the kernel's
# per-block cost takes over (SDPA's CPU kernel splits queries into 32-row pieces anyway).
# Measured on this Zen 4 for the interior call alone at L=8192, w=128 (B=1, H=8, E=64, fp32),
# best of 5: 1 thread 16 rows 37.0 ms, 32 rows 37.0, 64 rows 42.8, 128 rows 54.0; 2 threads
# 26.9, 21.6, 24.5, 30.1. A bool band and an additive one cost the same; contiguous copies
# of the windows cost more than the overlapping views (25.4 ms against 21.6 at 32 rows).
FUSED_QUERY_BLOCK = 32

_enabled = True


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Within the block ``local`` runs its readable window path only: the fused SDPA blocks
    and the band kernel are both off (``band_kernel.status()`` says so meanwhile)."""
    global _enabled
    before, _enabled = _enabled, False
    try:
        with band_kernel.disabled():
            yield
    finally:
        _enabled = before


def is_enabled() -> bool:
    """Whether ``local`` may take its fast paths (False inside :func:`disabled`)."""
    return _enabled


def applies(q, k, v, *, mask, need_weights: bool, dropout_p: float) -> bool:
    """True when a fast path takes this self-attention call of q (..., L, E), k (..., L, E),
    v (..., L, Ev): the fast paths are on, no dropout is asked for, and either no weights
    are wanted (SDPA blocks or the kernel) or the kernel can write them (no user mask)."""
    if not _enabled or dropout_p != 0.0:
        return False
    if not need_weights:
        return True
    return mask is None and band_kernel.can_run(q, k, v)


def flatten_lead(t: torch.Tensor, lead: torch.Size) -> torch.Tensor:
    """(…, n, F) broadcast to ``lead`` and flattened to (N, n, F) (a view unless a lead dim
    is broadcast)."""
    return t.expand(*lead, *t.shape[-2:]).reshape(-1, *t.shape[-2:])


def band_result(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    left: int,
    right: int,
    scale: float,
    need_weights: bool,
) -> AttentionResult:
    """:func:`band_kernel.band_attention` on q (..., L, E), k (..., L, E), v (..., L, Ev)
    whose leading dims broadcast; ``left`` and ``right`` are clipped to L − 1 (no key lies
    further). Callers check :func:`band_kernel.can_run` first.

    Returns:
        AttentionResult(output (..., L, Ev), weights and scores (..., L, L) or None).
    """
    lead = lead_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    L = q.shape[-2]
    flat = [flatten_lead(t, lead) for t in (q, k, v)]  # (N, L, E|Ev)
    result = band_kernel.band_attention(
        *flat, min(left, L - 1), min(right, L - 1), scale, need_weights=need_weights
    )  # (N, L, Ev), (N, L, L)
    if not need_weights:
        return AttentionResult(result.output.view(*lead, L, -1))
    return AttentionResult(
        result.output.view(*lead, L, -1),
        result.weights.view(*lead, L, L),
        result.scores.view(*lead, L, L),
    )


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


def interior_blocks(q, k, v, *, block: int, halo: int, scale: float, first: int, count: int):
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
    interior = interior_blocks(
        q, k, v, block=block, halo=halo, scale=scale, first=first, count=count
    )  # (N, count, c, Ev)
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


def _masked_local(q, k, v, *, halo: int, mask, scale: float) -> torch.Tensor:
    """Local attention under a user mask: the keys are padded once and every query block is
    one SDPA call on an overlapping view of the padded keys, with a (nb, c, W) mask.

    Args:
        q: (..., L, E). k: (..., L, E). v: (..., L, Ev). mask: broadcastable to (..., L, L).

    Returns:
        (..., L, Ev); a query row with no allowed key gives 0.
    """
    L, E, Ev = q.shape[-2], q.shape[-1], v.shape[-1]
    lead = lead_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    block = min(FUSED_QUERY_BLOCK, L)
    nb = math.ceil(L / block)
    q_flat = flatten_lead(q, lead)  # (N, L, E)
    if nb * block != L:
        q_flat = F.pad(q_flat, (0, 0, 0, nb * block - L))  # (N, nb·c, E)
    q_blocks = q_flat.view(q_flat.shape[0], nb, block, E)  # (N, nb, c, E)
    k_win = _overlapping_windows(flatten_lead(k, lead), block, halo, nb)  # (N, nb, W, E)
    v_win = _overlapping_windows(flatten_lead(v, lead), block, halo, nb)  # (N, nb, W, Ev)
    allowed = window_layout(L, block, halo, q.device).unsqueeze(0)  # (1, nb, c, W): band
    # and keys in range; 4-D, as SDPA's fused kernel needs
    user = _flat_window_mask(mask_windows(mask, L, block, halo), lead)  # (N|1, nb, c|1, W)
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


def fused_local(q, k, v, *, halo: int, mask, scale) -> torch.Tensor:
    """Local attention (L == S) without weights or dropout by fused SDPA calls over query
    blocks of :data:`FUSED_QUERY_BLOCK` rows, each against its key window with a band mask,
    no L×L matrix: without a user mask :func:`_unmasked_local` runs the interior blocks as
    one call on views (no copy) and both edges as one more; with one, :func:`_masked_local`.

    Args:
        q: (..., L, E). k: (..., L, E). v: (..., L, Ev). halo: window_size // 2.
        mask: None or broadcastable to (..., L, L). scale: score scale.

    Returns:
        output (..., L, Ev); a query row with no allowed key gives 0.
    """
    if mask is not None:
        return _masked_local(q, k, v, halo=halo, mask=mask, scale=scale)
    L, Ev = q.shape[-2], v.shape[-1]
    lead = lead_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    flat = [flatten_lead(t, lead) for t in (q, k, v)]  # (N, L, E|Ev)
    out = _unmasked_local(*flat, min(FUSED_QUERY_BLOCK, L), halo, scale)
    return out.view(*lead, L, Ev)


def fast_local(
    q, k, v, *, halo: int, mask, scale: float, need_weights: bool, memory_budget
) -> AttentionResult:
    """``local`` by its fast paths, for a call :func:`applies` accepts: the band kernel
    where it can run (no user mask), fused SDPA blocks otherwise (no weights).

    Args:
        q: (..., L, E). k: (..., L, E). v: (..., L, Ev). halo: window_size // 2, <= L.
        mask: None or broadcastable to (..., L, L). scale: score scale.
        need_weights: also the dense weights and scores (the kernel only).

    Returns:
        AttentionResult(output (..., L, Ev); with ``need_weights``, dense weights and
        scores (..., L, L), the band's blocked cells at float32's minimum).

    Raises:
        MemoryBudgetError: when the window scores (float64, or E != Ev, run SDPA's math
            path, which forms them) or the requested dense matrices exceed the budget.
    """
    L = q.shape[-2]
    lead = lead_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    work = compute_dtype(q.dtype)
    if need_weights:
        check_budget(
            2 * tensor_bytes((*lead, L, L), work),
            f"attention weights and scores {(*lead, L, L)}",
            memory_budget,
        )
    else:
        block = min(FUSED_QUERY_BLOCK, L)
        window = (*lead, math.ceil(L / block), block, block + 2 * halo)
        check_budget(2 * tensor_bytes(window, work), f"window scores {window}", memory_budget)
    if mask is None and band_kernel.can_run(q, k, v):  # only the band's keys
        return band_result(q, k, v, left=halo, right=halo, scale=scale, need_weights=need_weights)
    return AttentionResult(fused_local(q, k, v, halo=halo, mask=mask, scale=scale))
