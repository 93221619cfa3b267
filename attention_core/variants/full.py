"""Full (dense) attention: ``basic`` (unscaled), ``scaled`` (fused SDPA) and ``stable``.

All three compute softmax(q kᵀ · scale + mask) v over every (query, key) pair.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attention_core.device import check_budget, compute_dtype, tensor_bytes
from attention_core.types import AttentionResult, VariantSpec
from attention_core.variants.common import (
    allowed_from_mask,
    apply_dropout,
    apply_mask,
    masked_dense_result,
    qkv_out_elements,
    records_grad,
    score_itemsize,
    scores_shape,
    zero_rows_without_key,
)


def dense_memory(
    lead: int, L: int, S: int, E: int, Ev: int, *, itemsize: int, need_weights: bool, **_params
) -> int:
    """Peak bytes of explicit attention: scores and weights (L×S, float32 for half types)
    plus q, k, v and output."""
    work = score_itemsize(itemsize)
    return lead * (2 * L * S * work + qkv_out_elements(L, S, E, Ev) * itemsize)


def fused_memory(
    lead: int, L: int, S: int, E: int, Ev: int, *, itemsize: int, need_weights: bool, **_params
) -> int:
    """Peak bytes of ``scaled``: fused SDPA keeps O(L·E) unless weights are asked for."""
    if need_weights:
        return dense_memory(lead, L, S, E, Ev, itemsize=itemsize, need_weights=need_weights)
    return lead * qkv_out_elements(L, S, E, Ev) * itemsize


def _sdpa_mask(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """A mask as SDPA takes it: at least 2-D, and a float mask in the inputs' dtype."""
    if mask is None:
        return None
    if mask.dim() < 2:
        mask = mask.view(1, -1)  # (S,) -> (1, S): one key mask for every query
    if mask.is_floating_point() and mask.dtype != dtype:
        mask = mask.to(dtype)
    return mask


def _fused_sdpa(q, k, v, mask, scale, memory_budget) -> torch.Tensor:
    """PyTorch's fused scaled_dot_product_attention, with empty rows set to 0 (SDPA gives
    NaN there). float64 runs SDPA's math path, which forms L×S: budget-check it."""
    if q.dtype == torch.float64:
        shape = scores_shape(q, k)
        check_budget(
            2 * tensor_bytes(shape, q.dtype), f"attention scores {tuple(shape)}", memory_budget
        )
    sdpa_mask = _sdpa_mask(mask, q.dtype)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=sdpa_mask, scale=scale)  # (..., L, Ev)
    return zero_rows_without_key(out, sdpa_mask)


def scaled_attention(
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
) -> AttentionResult:
    """Scaled dot-product attention, softmax(q kᵀ · scale + mask) v.

    Without weights and dropout it runs ``torch.nn.functional.scaled_dot_product_attention``
    (fused, no L×S matrix on the flash path); otherwise the explicit path forms the weights.

    Args:
        q: (..., L, E). k: (..., S, E). v: (..., S, Ev). mask: broadcastable to (..., L, S).
        scale: score scale (``attend`` passes 1/sqrt(E) by default).

    Returns:
        AttentionResult(output (..., L, Ev), weights (..., L, S) or None, scores (..., L, S)
        as fed to the softmax, or None; see :class:`AttentionResult` for masked cells).

    Raises:
        MemoryBudgetError: when the explicit path's L×S matrices exceed the budget.
    """
    if not need_weights and dropout_p == 0.0:
        return AttentionResult(_fused_sdpa(q, k, v, mask, scale, memory_budget), None)
    return masked_dense_result(
        q,
        k,
        v,
        mask=mask,
        scale=scale,
        need_weights=need_weights,
        dropout_p=dropout_p,
        generator=generator,
        memory_budget=memory_budget,
    )


def basic_attention(q, k, v, **common) -> AttentionResult:
    """The tutorial's basic self-attention, softmax(q kᵀ) v: no 1/sqrt(E) scaling.

    It is :func:`scaled_attention` at another scale: ``attend`` passes ``scale=1`` unless one
    is given. ``**common``: mask, scale, need_weights, dropout_p, generator, memory_budget
    (the shared variant signature, see :func:`scaled_attention`). Same shapes and errors as
    :func:`scaled_attention`.
    """
    return scaled_attention(q, k, v, **common)


def stable_attention(
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
) -> AttentionResult:
    """Numerically stable attention, written out step by step.

    Scores are computed in float32 for float16/bfloat16 inputs (q and k are upcast before
    the matmul, so logits of 1e4 do not overflow), the row maximum is subtracted before
    ``exp``, blocked cells take the dtype's minimum, and a row with no allowed key gives
    zeros. The output is cast back to the input dtype.

    Args/Returns/Raises: as :func:`scaled_attention`; the returned scores (with weights)
    are the float32 (for half types) masked scores before the row maximum is subtracted.
    """
    work = compute_dtype(q.dtype)
    shape = scores_shape(q, k)
    check_budget(2 * tensor_bytes(shape, work), f"attention scores {tuple(shape)}", memory_budget)
    qw, kw, vw = q.to(work), k.to(work), v.to(work)
    scores = (qw * scale) @ kw.transpose(-2, -1)  # (..., L, E) @ (..., E, S) -> (..., L, S)
    scores = apply_mask(scores, mask)  # blocked cells: the dtype's minimum
    row_max = scores.amax(dim=-1, keepdim=True)  # (..., L, 1)
    # without autograd, exp and the division reuse one (..., L, S) buffer: beside the scores
    # that is the only other one (three more otherwise)
    in_place = not records_grad(q, k, v)
    exp = scores - row_max  # (..., L, S) <= 0
    exp = exp.exp_() if in_place else exp.exp()  # in [0, 1]: cannot overflow
    allowed = allowed_from_mask(mask)
    if allowed is not None:
        exp = exp.masked_fill_(~allowed, 0.0) if in_place else exp.masked_fill(~allowed, 0.0)
    row_sum = exp.sum(dim=-1, keepdim=True)  # (..., L, 1) >= 1 unless the row is empty
    divisor = torch.where(row_sum > 0, row_sum, torch.ones_like(row_sum))  # (..., L, 1)
    weights = exp.div_(divisor) if in_place else exp / divisor  # (..., L, S)
    weights = apply_dropout(weights, dropout_p, generator)
    out = weights @ vw  # (..., L, S) @ (..., S, Ev) -> (..., L, Ev)
    if not need_weights:
        return AttentionResult(out.to(q.dtype))
    return AttentionResult(out.to(q.dtype), weights.to(q.dtype), scores)


SPECS = (
    VariantSpec(
        name="basic",
        label="Basic (no scaling)",
        explanation=(
            "softmax(QKᵀ)V with no scaling: the tutorial's first version; large d_k makes it peaky."
        ),
        time_complexity="O(L·S·E)",
        memory_complexity="O(L·E) fused, O(L·S) with weights",
        exact=False,
        fn=basic_attention,
        default_scale="one",
        memory_model=fused_memory,
    ),
    VariantSpec(
        name="scaled",
        label="Scaled dot-product",
        explanation="softmax(QKᵀ/√d_k)V: the standard attention of transformers.",
        time_complexity="O(L·S·E)",
        memory_complexity="O(L·E) fused, O(L·S) with weights",
        exact=True,
        fn=scaled_attention,
        memory_model=fused_memory,
    ),
    VariantSpec(
        name="stable",
        label="Numerically stable",
        explanation=(
            "Scaled attention that subtracts each row's maximum before exp, so nothing overflows."
        ),
        time_complexity="O(L·S·E)",
        memory_complexity="O(L·S)",
        exact=True,
        fn=stable_attention,
        memory_model=dense_memory,
    ),
)
