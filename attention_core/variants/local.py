"""Banded and block-diagonal attention computed block by block, never as an L×L matrix.

``local``: query i attends to keys |i - j| <= window_size // 2 (the tutorial's
LocalSelfAttention, implemented for real). ``block``: positions attend within their block of
``block_size``. Both cut the sequence into query blocks of ``c`` rows; block b only meets
the key window [b·c − halo, b·c + c + halo), so time and memory are O(L·(c + 2·halo)).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attention_core import masks
from attention_core.device import check_budget, compute_dtype, tensor_bytes
from attention_core.types import AttentionResult, Param, VariantSpec
from attention_core.variants.common import (
    allowed_from_mask,
    apply_dropout,
    masked_dense_result,
    stable_softmax,
)

MIN_QUERY_BLOCK = 32


def _window_layout(L: int, block: int, halo: int, band: bool, device) -> torch.Tensor:
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
    if band:
        rel = j - i  # (1, c, W); |query − key| <= halo  <=>  0 <= j' − i' <= 2·halo
        allowed = allowed & (rel >= 0) & (rel <= 2 * halo)
    return allowed.expand(nb, block, width)


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


def _scatter_dense(weights: torch.Tensor, L: int, block: int, halo: int) -> torch.Tensor:
    """Place window weights (..., nb, c, W) into a dense (..., L, L) matrix."""
    nb, width = weights.shape[-3], weights.shape[-1]
    padded = nb * block
    dense = weights.new_zeros(*weights.shape[:-3], padded, padded + 2 * halo)
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


def blocked_attention(
    q,
    k,
    v,
    *,
    block: int,
    halo: int,
    band: bool,
    mask,
    scale,
    need_weights,
    dropout_p,
    generator,
    memory_budget,
) -> AttentionResult:
    """Attention of query blocks against their key windows (self-attention, L == S).

    Args:
        q: (..., L, E). k: (..., L, E). v: (..., L, Ev). block: query block size c.
        halo: keys beyond each block edge in the window. band: keep only |i − j| <= halo.
        mask: None or broadcastable to (..., L, L).

    Returns:
        AttentionResult(output (..., L, Ev), dense weights (..., L, L) or None).

    Raises:
        MemoryBudgetError: when the window scores or the requested dense weights exceed the
            budget.
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
            tensor_bytes((*lead, L, L), work), f"attention weights {(*lead, L, L)}", memory_budget
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
    allowed = _window_layout(L, block, halo, band, q.device)  # (nb, c, W)
    if mask is not None:
        user = _mask_windows(mask, L, block, halo)  # (..., nb, c|1, W)
        if user.dtype == torch.bool:
            allowed = allowed & user
        else:
            scores = scores + user.to(work)
            allowed = allowed & allowed_from_mask(user)
    blocked = ~allowed
    if inplace:
        scores = scores.masked_fill_(blocked, torch.finfo(work).min)
    else:
        scores = scores.masked_fill(blocked, torch.finfo(work).min)
    weights = stable_softmax(scores, allowed)  # (..., nb, c, W)
    weights = apply_dropout(weights, dropout_p, generator)
    # Σ over the three pieces of (..., nb, c, h|c|h) @ (..., nb, h|c|h, Ev) -> (..., nb, c, Ev)
    pieces = weights.split([part.shape[-2] for part in v_parts], dim=-1)
    out = pieces[0] @ v_parts[0]
    for w, part in zip(pieces[1:], v_parts[1:], strict=True):
        out = out.add_(w @ part) if inplace else out + w @ part
    out = out.reshape(*out.shape[:-3], padded_len, Ev)[..., :L, :]  # (..., L, Ev)
    dense = _scatter_dense(weights, L, block, halo).to(q.dtype) if need_weights else None
    return AttentionResult(out.to(q.dtype), dense)


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
    user's mask). Self-attention (L == S) runs block by block in O(L·w) time and memory;
    L != S falls back to masked dense attention.

    Args:
        q: (..., L, E). k: (..., S, E). v: (..., S, Ev). window_size: >= 1.

    Returns:
        AttentionResult(output (..., L, Ev), weights (..., L, S) or None).

    Raises:
        MemoryBudgetError: when requested weights exceed the budget.
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
    block = max(MIN_QUERY_BLOCK, halo)
    return blocked_attention(
        q,
        k,
        v,
        block=block,
        halo=min(halo, L),
        band=True,
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

    Exact: equals full scaled attention under ``masks.block(L, block_size)``. Self-attention
    runs per block in O(L·b) time and memory; L != S falls back to masked dense attention.

    Args/Returns/Raises: as :func:`local_attention`, with block_size >= 1.
    """
    L, S = q.shape[-2], k.shape[-2]
    if L != S:

        def pattern():
            return masks.block(L, block_size, S, device=q.device)

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
    return blocked_attention(
        q,
        k,
        v,
        block=block_size,
        halo=0,
        band=False,
        mask=mask,
        scale=scale,
        need_weights=need_weights,
        dropout_p=dropout_p,
        generator=generator,
        memory_budget=memory_budget,
    )


def _local_memory(lead, L, S, E, Ev, itemsize, need_weights, window_size=16, **_):
    halo = window_size // 2
    block = min(max(MIN_QUERY_BLOCK, halo), L)
    window = L * (block + 2 * halo) * max(itemsize, 4) * 2
    extra = L * S * max(itemsize, 4) if need_weights else 0
    return lead * (window + extra + (2 * L * E + 2 * L * Ev) * itemsize)


def _block_memory(lead, L, S, E, Ev, itemsize, need_weights, block_size=16, **_):
    block = min(block_size, L)
    window = L * block * max(itemsize, 4) * 2
    extra = L * S * max(itemsize, 4) if need_weights else 0
    return lead * (window + extra + (2 * L * E + 2 * L * Ev) * itemsize)


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
        "block only.",
        time_complexity="O(L·b·E)",
        memory_complexity="O(L·b)",
        exact=True,
        fn=block_attention,
        params=(Param("block_size", "int", 8, 1, 4096, 1, "tokens per block"),),
        pattern=_block_pattern,
        memory_model=_block_memory,
    ),
)
