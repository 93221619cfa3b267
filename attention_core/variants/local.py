"""Banded and block-diagonal attention, never as an L×L matrix.

``local``: query i attends to keys |i - j| <= window_size // 2 (the tutorial's
LocalSelfAttention, implemented for real). The sequence is cut into query blocks of ``c``
rows; block b only meets the key window [b·c − halo, b·c + c + halo), so time and memory
are O(L·(c + 2·halo)). This module holds the readable path, :func:`windowed_attention`:
window scores, a softmax, a weighted sum of the window's values. Its fast paths (fused SDPA
calls over the blocks, the banded C kernel) live in ``local_fast.py`` and give the same
values; ``local_fast.disabled()`` switches them all off.
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
from attention_core.variants import local_fast
from attention_core.variants.common import (
    allowed_from_mask,
    apply_dropout,
    mask_windows,
    masked_dense_result,
    records_grad,
    score_itemsize,
    stable_softmax,
    window_layout,
)
from attention_core.variants.groups import block_groups, grouped_attention, grouped_memory

MIN_QUERY_BLOCK = 32  # query rows per block of the readable path (at least the halo)


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
    """Explicit banded attention of query blocks against their key windows (L == S): the
    readable path of ``local``, which its fast paths (``local_fast.py``) must equal.

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
    inplace = not records_grad(q, k, v)
    q_blk = q.to(work) * scale  # (..., L, E), pre-scaled: cheaper than scaling the scores
    if padded_len != L:
        q_blk = F.pad(q_blk, (0, 0, 0, padded_len - L))  # (..., Lp, E)
    q_blk = q_blk.reshape(*q_blk.shape[:-2], nb, block, E)  # (..., nb, c, E)
    k_parts = _window_parts(k.to(work), block, halo, nb)  # views: left halo | block | right
    v_parts = _window_parts(v.to(work), block, halo, nb)
    # (..., nb, c, E) @ (..., nb, E, h|c|h) -> (..., nb, c, W), W = h + c + h
    scores = torch.cat([q_blk @ part.transpose(-2, -1) for part in k_parts], dim=-1)
    allowed = window_layout(L, block, halo, q.device)  # (nb, c, W)
    if mask is not None:
        user = mask_windows(mask, L, block, halo)  # (..., nb, c|1, W)
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
    explicit window scores (:func:`windowed_attention`), or, where
    ``local_fast.applies``, one of the fast paths of ``local_fast.py`` (the band kernel,
    fused SDPA blocks), which give the same values. L != S falls back to masked dense
    attention.

    Args:
        q: (..., L, E). k: (..., S, E). v: (..., S, Ev). window_size: >= 1.

    Returns:
        AttentionResult(output (..., L, Ev); weights and scores (..., L, S) or None).

    Raises:
        MemoryBudgetError: when the window scores or requested weights exceed the budget.
    """
    L, S = q.shape[-2], k.shape[-2]
    halo = window_size // 2
    common = {  # what the dense and the windowed path both take
        "mask": mask,
        "scale": scale,
        "need_weights": need_weights,
        "dropout_p": dropout_p,
        "generator": generator,
        "memory_budget": memory_budget,
    }
    if L != S:

        def pattern():
            return masks.local(L, window_size, S, device=q.device)

        # cross-attention has no band structure to exploit
        return masked_dense_result(q, k, v, build_pattern=pattern, **common)
    halo = min(halo, L)
    if local_fast.applies(q, k, v, mask=mask, need_weights=need_weights, dropout_p=dropout_p):
        return local_fast.fast_local(
            q,
            k,
            v,
            halo=halo,
            mask=mask,
            scale=scale,
            need_weights=need_weights,
            memory_budget=memory_budget,
        )
    return windowed_attention(q, k, v, block=max(MIN_QUERY_BLOCK, halo), halo=halo, **common)


def block_attention(q, k, v, *, block_size: int, **common) -> AttentionResult:
    """Block-diagonal attention: positions attend within their block of ``block_size``.

    Exact: equals full scaled attention under ``masks.block(L, block_size, S)``. The
    blocks are independent: each query block is gathered with its key block and attends
    within it (``groups.py``), O(L·b·E) time and O(L·b) memory, also when L != S; one
    fused SDPA call for all blocks when no weights or dropout are asked for.

    Args/Returns/Raises: as :func:`local_attention`, with block_size >= 1; ``**common``:
    mask, scale, need_weights, dropout_p, generator, memory_budget (the shared variant
    signature), passed on to :func:`~attention_core.variants.groups.grouped_attention`.
    """
    groups = block_groups(q.shape[-2], k.shape[-2], block_size, q.device)
    return grouped_attention(q, k, v, groups, **common)


def _local_memory(lead, L, S, E, Ev, *, itemsize, need_weights, window_size=16, **_):
    """Peak bytes of ``local``: window scores and weights of one block (fused) or of every
    block (explicit, with weights), plus q, k, v and the output."""
    halo = window_size // 2
    block = min(max(MIN_QUERY_BLOCK, halo), L)
    work = score_itemsize(itemsize)
    window = L * (block + 2 * halo) * work * 2
    extra = 2 * L * S * work if need_weights else 0
    return lead * (window + extra + (2 * L * E + 2 * L * Ev) * itemsize)


def _block_memory(lead, L, S, E, Ev, *, itemsize, need_weights, block_size=16, **_):
    """Peak bytes of ``block``: ceil(L/b) blocks of b × b scores."""
    block = min(block_size, max(L, S))
    cells = math.ceil(L / block) * block * block
    sizes = {"itemsize": itemsize, "need_weights": need_weights}
    return grouped_memory(lead, L, S, E, Ev, **sizes, cells=cells)


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
