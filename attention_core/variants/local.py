"""Banded and block-diagonal attention, never as an L×L matrix.

``local``: query i attends to keys |i - j| <= window_size // 2 (the tutorial's
LocalSelfAttention, implemented for real). The sequence is cut into query blocks of ``c``
rows; block b only meets the key window [b·c − halo, b·c + c + halo), so time and memory
are O(L·(c + 2·halo)). Without weights or dropout each block is one fused SDPA call against
its window with a small (c, c + 2·halo) band mask; otherwise the explicit path below forms
the window scores. ``block``: positions attend within their block of ``block_size``: the
blocks are independent groups (``groups.py``), O(L·b).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attention_core import masks
from attention_core.device import check_budget, compute_dtype, tensor_bytes
from attention_core.types import AttentionResult, Param, VariantSpec, blocked_score
from attention_core.variants.common import (
    allowed_from_mask,
    apply_dropout,
    masked_dense_result,
    stable_softmax,
)
from attention_core.variants.groups import block_groups, grouped_attention, grouped_memory

MIN_QUERY_BLOCK = 32
# Query rows per fused SDPA call of ``local``. Measured at L=8192, w=128 (B=1, H=8, E=64,
# fp32) on this Zen 4: 128 rows 83 ms, 256 rows 105 ms, 512 rows 650 ms (the fused kernel
# slows sharply with a larger mask); the issue measured 128–256 best on a Xeon too.
FUSED_QUERY_BLOCK = 128


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


def _band_mask(block: int, halo: int, device) -> torch.Tensor:
    """(c, c + 2·halo) bool: row i' of a query block sees window column j' when
    0 <= j' − i' <= 2·halo, i.e. |query − key| <= halo."""
    columns = torch.arange(block + 2 * halo, device=device)  # (W,)
    rel = columns - torch.arange(block, device=device).unsqueeze(-1)  # (c, W): j' − i'
    return (rel >= 0) & (rel <= 2 * halo)  # (c, W)


def _user_window(mask: torch.Tensor, rows: slice, cols: slice) -> torch.Tensor:
    """A user mask broadcastable to (..., L, L) cut to one block's rows and key window,
    keeping size-1 dims."""
    if mask.dim() < 2:
        mask = mask.view(1, -1)  # (S,) -> (1, S)
    r = rows if mask.shape[-2] > 1 else slice(None)
    c = cols if mask.shape[-1] > 1 else slice(None)
    return mask[..., r, c]


def _block_mask(band: torch.Tensor, user: torch.Tensor | None, dtype):
    """SDPA mask of one block: the band alone, or intersected with the user's window; and
    the (..., c, 1) rows that keep a key (None: all do, the band holds the diagonal)."""
    if user is None:
        return band, None
    if user.dtype == torch.bool:
        combined = band & user
        return combined, combined.any(dim=-1, keepdim=True)
    combined = user.to(dtype).masked_fill(~band, -math.inf)
    return combined, (combined != -math.inf).any(dim=-1, keepdim=True)


def fused_local(q, k, v, *, halo: int, mask, scale, memory_budget) -> torch.Tensor:
    """Local attention (L == S) as one fused SDPA call per block of
    :data:`FUSED_QUERY_BLOCK` query rows against its key window [start − halo, stop + halo),
    with a (c, W) band mask. O(L·(c + 2·halo)·E) time, no L×L matrix.

    Args:
        q: (..., L, E). k: (..., L, E). v: (..., L, Ev). halo: window_size // 2.
        mask: None or broadcastable to (..., L, L). scale: score scale.

    Returns:
        output (..., L, Ev); a query row with no allowed key gives 0.

    Raises:
        MemoryBudgetError: float64 runs SDPA's math path, which forms each block's
            (c, W) scores: when those exceed the budget.
    """
    L = q.shape[-2]
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    block = min(FUSED_QUERY_BLOCK, L)
    width = block + 2 * halo
    check_budget(
        2 * tensor_bytes((*lead, block, width), compute_dtype(q.dtype)),
        f"window scores {(*lead, block, width)}",
        memory_budget,
    )
    q, k, v = (
        q.expand(*lead, *q.shape[-2:]),
        k.expand(*lead, *k.shape[-2:]),
        v.expand(*lead, *v.shape[-2:]),
    )
    band = _band_mask(block, halo, q.device)  # (c, W)
    out = q.new_empty((*lead, L, v.shape[-1]))  # (..., L, Ev)
    for start in range(0, L, block):
        stop = min(start + block, L)
        lo, hi = max(0, start - halo), min(L, stop + halo)
        offset = lo - (start - halo)  # window columns cut off at the sequence start
        rows, cols = slice(start, stop), slice(lo, hi)
        user = None if mask is None else _user_window(mask, rows, cols)
        block_mask, has_key = _block_mask(
            band[: stop - start, offset : offset + hi - lo], user, q.dtype
        )
        # (..., c, E) against (..., W, E), (..., W, Ev) -> (..., c, Ev)
        part = F.scaled_dot_product_attention(
            q[..., rows, :], k[..., cols, :], v[..., cols, :], attn_mask=block_mask, scale=scale
        )
        out[..., rows, :] = part if has_key is None else part.masked_fill(~has_key, 0.0)
    return out


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
        explanation="Each token attends to window_size // 2 neighbours on each side, computed "
        "block by block without an L×L matrix.",
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
        label="Block (sparse)",
        explanation="The sequence is cut into blocks; tokens attend fully inside their own "
        "block only, gathered block by block without an L×L matrix.",
        time_complexity="O(L·b·E)",
        memory_complexity="O(L·b)",
        exact=True,
        fn=block_attention,
        params=(Param("block_size", "int", 8, 1, 4096, 1, "tokens per block"),),
        pattern=_block_pattern,
        memory_model=_block_memory,
    ),
)
