"""Attention inside independent groups of positions: the engine of ``block`` and ``strided``.

Both patterns split the positions into groups that never see one another: ``block`` into
runs of ``block_size`` consecutive positions, ``strided`` into the ``stride`` residue
classes (position i is in class i mod stride, and (i − j) mod stride == 0 exactly when i and
j share a class). So instead of masking an L×S matrix, each group's queries are gathered
with its keys and attend among themselves: G groups of n queries and m keys cost
O(G·n·m·E) time and O(G·n·m) memory, that is O(L·b) for blocks and O(L·S/stride) for
strides. A :class:`Groups` holds the gather indices; padding slots (where a group is
shorter than the others) are blocked keys and discarded queries. When the groups tile the
sequence exactly (L a multiple of the block or the stride), the fused path needs no gather
at all: the groups are a view of q, k, v ((N, G, b, E) runs, or the (N, n, s, E) view
transposed to (N, s, n, E) residue classes), and SDPA's output comes back in position
order, so only the output itself is allocated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from attention_core.device import check_budget, compute_dtype, tensor_bytes
from attention_core.types import AttentionResult, blocked_score
from attention_core.variants.common import (
    apply_dropout,
    apply_mask,
    qkv_out_elements,
    score_itemsize,
    stable_softmax,
)


@dataclass(frozen=True)
class Groups:
    """Gather indices of G groups: group g's queries are positions ``rows[g]`` and its keys
    ``cols[g]``; a position >= L (rows) or >= S (cols) is a padding slot.

    Attributes:
        rows: (G, n) int64 query positions, padding slots included.
        cols: (G, m) int64 key positions, padding slots included.
        L, S: query and key lengths.
        view: ``"runs"`` when group g is positions [g·n, g·n + n) of both q and k with no
            padding, ``"residues"`` when it is positions g, g + G, … with no padding (the
            groups are then views of the inputs); ``None`` otherwise (gathered).
    """

    rows: torch.Tensor
    cols: torch.Tensor
    L: int
    S: int
    view: str | None = None

    @property
    def padded(self) -> bool:
        """Whether any slot is padding (then a layout mask is needed)."""
        return self.rows.numel() > self.L or self.cols.numel() > self.S


def block_groups(L: int, S: int, block_size: int, device) -> Groups:
    """Groups of ``block``: query block g holds positions [g·b, g·b + b), and so do its keys
    (i // b == j // b). Keys in a block no query reaches are never gathered."""
    count = math.ceil(L / block_size)
    offsets = torch.arange(block_size, device=device)  # (b,)
    starts = torch.arange(count, device=device).unsqueeze(-1) * block_size  # (G, 1)
    span = starts + offsets  # (G, b)
    exact = L == S and L % block_size == 0
    return Groups(rows=span, cols=span, L=L, S=S, view="runs" if exact else None)


def strided_groups(L: int, S: int, stride: int, device) -> Groups:
    """Groups of ``strided``: residue class r holds positions r, r + s, r + 2s, … for the
    queries (below L) and the keys (below S); classes without a query are dropped."""
    count = min(stride, L)
    residues = torch.arange(count, device=device).unsqueeze(-1)  # (G, 1)
    rows = residues + stride * torch.arange(math.ceil(L / stride), device=device)  # (G, n)
    cols = residues + stride * torch.arange(math.ceil(S / stride), device=device)  # (G, m)
    exact = L % stride == 0 and S % stride == 0
    return Groups(rows=rows, cols=cols, L=L, S=S, view="residues" if exact else None)


def _gather(t: torch.Tensor, index: torch.Tensor, length: int) -> torch.Tensor:
    """t (..., length, F) gathered at ``index`` (G, n) -> (..., G, n, F); padding slots
    read the last position (their value is masked or discarded)."""
    return t[..., index.clamp(max=length - 1), :]  # (..., G, n, F)


def gather_mask(mask: torch.Tensor, groups: Groups) -> torch.Tensor:
    """A user mask broadcastable to (..., L, S) in group layout (..., G, n|1, m|1); a size-1
    query or key dim stays size 1 (no L×S expansion)."""
    if mask.dim() < 2:
        mask = mask.view(1, -1)  # (S,) -> (1, S)
    G = groups.rows.shape[0]
    zero = torch.zeros(G, 1, 1, dtype=torch.long, device=mask.device)
    if mask.shape[-2] > 1:
        row_index = groups.rows.clamp(max=groups.L - 1).unsqueeze(-1)  # (G, n, 1)
    else:
        row_index = zero
    if mask.shape[-1] > 1:
        col_index = groups.cols.clamp(max=groups.S - 1).unsqueeze(-2)  # (G, 1, m)
    else:
        col_index = zero
    return mask[..., row_index, col_index]  # (..., G, n|1, m|1)


def layout_allowed(groups: Groups) -> torch.Tensor | None:
    """(G, 1, m) bool: False at padding keys; None when no slot is padding. (Padding
    queries are discarded, so they need no mask.)"""
    if groups.cols.numel() <= groups.S:
        return None
    return (groups.cols < groups.S).unsqueeze(-2)  # (G, 1, m)


def _group_mask(mask: torch.Tensor | None, groups: Groups, dtype: torch.dtype):
    """The mask of every group, in SDPA's terms: (allowed bool (..., G, n|1, m) or None,
    additive float (..., G, n|1, m|1) or None)."""
    layout = layout_allowed(groups)
    if mask is None:
        return layout, None
    user = gather_mask(mask, groups)
    if user.dtype == torch.bool:
        return (user if layout is None else user & layout), None
    return layout, user.to(dtype)


def _scatter_rows(out_g: torch.Tensor, groups: Groups) -> torch.Tensor:
    """Group outputs (..., G, n, F) back to positions (..., L, F), padding rows dropped."""
    G, n = groups.rows.shape
    flat = out_g.reshape(*out_g.shape[:-3], G * n, out_g.shape[-1])  # (..., G·n, F)
    if groups.rows.numel() == groups.L and bool(
        (groups.rows.flatten() == torch.arange(groups.L, device=out_g.device)).all()
    ):
        return flat  # blocks that tile L exactly: the layout is already position order
    where = torch.empty(groups.L, dtype=torch.long, device=out_g.device)
    valid = groups.rows.flatten() < groups.L
    where[groups.rows.flatten()[valid]] = torch.arange(G * n, device=out_g.device)[valid]
    return flat[..., where, :]  # (..., L, F)


def _scatter_dense(t_g: torch.Tensor, groups: Groups, fill: float) -> torch.Tensor:
    """Place group matrices (..., G, n, m) into a dense (..., L, S) matrix filled with
    ``fill`` elsewhere (the cells the pattern blocks)."""
    padded_l = int(groups.rows.max()) + 1
    padded_s = max(int(groups.cols.max()) + 1, groups.S)
    dense = t_g.new_full((*t_g.shape[:-3], padded_l, padded_s), fill)
    dense[..., groups.rows.unsqueeze(-1), groups.cols.unsqueeze(-2)] = t_g  # (..., G, n, m)
    return dense[..., : groups.L, : groups.S]


def _sdpa_mask(allowed, additive, dtype):
    """One SDPA mask from a bool and a float part (either may be None)."""
    if additive is None:
        return allowed
    if allowed is None:
        return additive
    return additive.masked_fill(~allowed, -math.inf).to(dtype)


def _as_4d(t: torch.Tensor, lead: torch.Size) -> torch.Tensor:
    """(…lead', G, r, c) broadcast to ``lead`` and flattened to (N, G, r, c) for the fused
    kernel (it takes 4-D inputs; 5-D ones fall back to the slow math path)."""
    tail = t.shape[-3:]
    n = math.prod(lead)
    return t.expand(*lead, *tail).reshape(n, *tail)


def _mask_4d(mask: torch.Tensor | None, lead: torch.Size) -> torch.Tensor | None:
    """A group mask for :func:`_as_4d` inputs: (1, G, r, c) when it does not vary over the
    lead dims (no copy), else flattened like the inputs. Always 4-D: SDPA takes a 3-D
    mask only on its slow math path."""
    if mask is None:
        return None
    if all(size == 1 for size in mask.shape[:-3]):
        return mask.reshape(1, *mask.shape[-3:])  # (1, G, n|1, m|1) broadcasts over N
    return _as_4d(mask, lead)


def _group_view(t: torch.Tensor, groups: Groups, lead: torch.Size) -> torch.Tensor:
    """(…, length, F) as (N, G, n, F) without a copy (unless a lead dim is broadcast)."""
    length, features = t.shape[-2], t.shape[-1]
    G = groups.rows.shape[0]
    flat = t.expand(*lead, length, features).reshape(-1, length, features)  # (N, length, F)
    if groups.view == "runs":
        return flat.view(flat.shape[0], G, length // G, features)  # (N, G, n, F)
    residues = flat.view(flat.shape[0], length // G, G, features)  # (N, n, G, F)
    return residues.transpose(1, 2)  # (N, G, n, F): strided view, no copy


def _ungroup_view(out: torch.Tensor, groups: Groups, lead: torch.Size) -> torch.Tensor:
    """(N, G, n, Ev) group outputs of :func:`_group_view` inputs back to (..., L, Ev)."""
    if groups.view == "residues":
        out = out.transpose(1, 2)  # (N, n, G, Ev): SDPA's own layout, so usually no copy
    return out.reshape(*lead, groups.L, out.shape[-1])


def _fused_views(q, k, v, groups, mask, *, scale, memory_budget) -> torch.Tensor:
    """The fused path when the groups are views of q, k, v: no gather, no scatter."""
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    q_g, k_g, v_g = (_group_view(t, groups, lead) for t in (q, k, v))  # (N, G, n|m, ·)
    allowed, additive = _group_mask(mask, groups, compute_dtype(q.dtype))
    allowed = None if allowed is None else _flat_lead(allowed, lead)
    additive = None if additive is None else _flat_lead(additive, lead)
    out = _fused_groups(q_g, k_g, v_g, allowed, additive, scale=scale, memory_budget=memory_budget)
    return _ungroup_view(out, groups, lead)


def _flat_lead(mask: torch.Tensor, lead: torch.Size) -> torch.Tensor:
    """A group mask (…, G, r, c) with its lead dims flattened like :func:`_group_view`'s
    (N, …), or to 1 when it has no lead dims of its own (4-D either way)."""
    if mask.dim() <= 3 or all(size == 1 for size in mask.shape[:-3]):
        return mask.reshape(1, *mask.shape[-3:])
    return mask.expand(*lead, *mask.shape[-3:]).reshape(-1, *mask.shape[-3:])


def math_path(q: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether SDPA falls back to its math path, which forms the scores: float64 inputs,
    or a value size other than the query size (its fused kernels need one head size)."""
    return q.dtype == torch.float64 or q.shape[-1] != v.shape[-1]


def _fused_groups(q_g, k_g, v_g, allowed, additive, *, scale, memory_budget):
    """Fused SDPA over the groups; rows with no allowed key give 0 (SDPA gives NaN)."""
    lead = torch.broadcast_shapes(q_g.shape[:-3], k_g.shape[:-3], v_g.shape[:-3])
    G, n, m = q_g.shape[-3], q_g.shape[-2], k_g.shape[-2]
    if math_path(q_g, v_g):  # SDPA's math path forms the group scores: check them
        shape = (*lead, G, n, m)
        work = compute_dtype(q_g.dtype)
        check_budget(2 * tensor_bytes(shape, work), f"group scores {shape}", memory_budget)
    sdpa_mask = _mask_4d(_sdpa_mask(allowed, additive, q_g.dtype), lead)
    out = F.scaled_dot_product_attention(
        _as_4d(q_g, lead), _as_4d(k_g, lead), _as_4d(v_g, lead), attn_mask=sdpa_mask, scale=scale
    )  # (N, G, n, Ev)
    out = out.view(*lead, G, n, v_g.shape[-1])
    has_key = _has_key(allowed, additive)
    return out if has_key is None else out.masked_fill(~has_key, 0.0)


def _has_key(allowed, additive) -> torch.Tensor | None:
    """(..., G, n|1, 1) bool: whether a group query row may attend to any key; None = all."""
    rows = None
    if allowed is not None:
        rows = allowed.any(dim=-1, keepdim=True)
    if additive is not None:
        finite = (additive != -math.inf).any(dim=-1, keepdim=True)
        rows = finite if rows is None else rows & finite
    return rows


def grouped_attention(
    q, k, v, groups: Groups, *, mask, scale, need_weights, dropout_p, generator, memory_budget
) -> AttentionResult:
    """Attention restricted to ``groups``: exact against dense attention under the groups'
    pattern (intersected with the user's mask).

    Without weights and dropout each group runs PyTorch's fused SDPA (one call for all
    groups); otherwise the explicit path forms the (..., G, n, m) group scores, and the
    dense (..., L, S) weights and scores only when they are asked for.

    Args:
        q: (..., L, E). k: (..., S, E). v: (..., S, Ev). groups: from :func:`block_groups`
            or :func:`strided_groups`. mask and the rest: as in ``attend``.

    Returns:
        AttentionResult(output (..., L, Ev); with ``need_weights``, weights (..., L, S) and
        scores (..., L, S) with the pattern's blocked cells at the dtype's minimum).

    Raises:
        MemoryBudgetError: when the group scores or the requested dense matrices exceed
            the budget.
    """
    L, S = q.shape[-2], k.shape[-2]
    work = compute_dtype(q.dtype)
    fused = not need_weights and dropout_p == 0.0
    if fused and groups.view is not None:
        return AttentionResult(
            _fused_views(q, k, v, groups, mask, scale=scale, memory_budget=memory_budget)
        )
    q_g = _gather(q, groups.rows, L)  # (..., G, n, E)
    k_g = _gather(k, groups.cols, S)  # (..., G, m, E)
    v_g = _gather(v, groups.cols, S)  # (..., G, m, Ev)
    allowed, additive = _group_mask(mask, groups, work)
    if fused:
        out_g = _fused_groups(
            q_g, k_g, v_g, allowed, additive, scale=scale, memory_budget=memory_budget
        )
        return AttentionResult(_scatter_rows(out_g, groups).to(q.dtype))
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    G, n, m = groups.rows.shape[0], groups.rows.shape[1], groups.cols.shape[1]
    check_budget(
        2 * tensor_bytes((*lead, G, n, m), work), f"group scores {(*lead, G, n, m)}", memory_budget
    )
    if need_weights:
        check_budget(
            2 * tensor_bytes((*lead, L, S), work),
            f"attention weights and scores {(*lead, L, S)}",
            memory_budget,
        )
    scores = (q_g.to(work) * scale) @ k_g.to(work).transpose(-2, -1)  # (..., G, n, m)
    scores = apply_mask(scores, additive, allowed)  # blocked cells: the dtype's minimum
    weights = stable_softmax(scores, _allowed_cells(allowed, additive))  # (..., G, n, m)
    weights = apply_dropout(weights, dropout_p, generator)
    out_g = weights @ v_g.to(work)  # (..., G, n, m) @ (..., G, m, Ev) -> (..., G, n, Ev)
    out = _scatter_rows(out_g, groups).to(q.dtype)
    if not need_weights:
        return AttentionResult(out)
    dense_weights = _scatter_dense(weights, groups, 0.0).to(q.dtype)
    dense_scores = _scatter_dense(scores, groups, blocked_score(work))
    return AttentionResult(out, dense_weights, dense_scores)


def _allowed_cells(allowed, additive):
    """Bool "may attend" of a group layout from its bool and float parts."""
    if additive is None:
        return allowed
    finite = additive != -math.inf
    return finite if allowed is None else allowed & finite


def grouped_memory(lead, L, S, E, Ev, *, itemsize, need_weights, cells: int) -> int:
    """Peak bytes of :func:`grouped_attention` with ``cells`` = G·n·m group score cells:
    the gathered q, k, v and the output; the group scores and weights where they are formed
    (with weights, or on SDPA's math path: float64 or E != Ev; the fused kernel keeps only
    small tiles); and the dense weights and scores when asked for."""
    work = score_itemsize(itemsize)
    gathered = (qkv_out_elements(L, S, E, Ev) + L * Ev) * itemsize
    formed = need_weights or itemsize >= 8 or E != Ev
    scores = 2 * cells * work if formed else 0
    extra = 2 * L * S * work if need_weights else 0
    return lead * (gathered + scores + extra)
