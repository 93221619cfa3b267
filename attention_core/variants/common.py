"""Building blocks shared by the variants: validation, masked softmax, dropout, dense path,
and the window layout of ``local``'s query blocks.

Conventions: q (..., L, E), k (..., S, E), v (..., S, Ev); a mask broadcasts to
(..., L, S), bool (True = may attend) or float (added to the scores).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attention_core.device import check_budget, compute_dtype, tensor_bytes
from attention_core.types import AttentionResult, blocked_score
from attention_core.validation import check_float

SCALE_RULES = ("inv_sqrt", "one")


def _finite_probe(t: torch.Tensor) -> torch.Tensor:
    """A 0-d sum of ``t`` that is NaN or ±inf whenever ``t`` holds NaN or inf (it may also
    overflow to inf for finite values: callers then run the exact check). Half types sum
    in float32, which they would overflow at once."""
    t = t.detach()
    return t.sum(dtype=torch.float32) if t.dtype in (torch.float16, torch.bfloat16) else t.sum()


def check_all_finite(tensors: dict[str, torch.Tensor]) -> None:
    """Raise ``ValueError`` naming the first of ``tensors`` that holds NaN or inf.

    One plain sum per tensor (NaN and inf propagate into it; a vectorised sum reads a
    tensor several times faster than a min/max reduction or an ``isfinite`` pass) and a
    single device-to-host read for all of them: on CUDA each read waits for the GPU. Only
    when a sum is not finite (a bad value, or finite values whose sum overflows) does the
    exact per-tensor check run. On the CPU the sums are read one by one (a read costs no
    wait there; three small tensor ops to combine them cost more).
    """
    probes = [_finite_probe(t) for t in tensors.values()]
    if all(p.device.type == "cpu" for p in probes):
        if all(math.isfinite(p.item()) for p in probes):
            return
    elif bool(torch.isfinite(torch.stack(probes)).all()):  # (n,), promoted dtype
        return
    for name, t in tensors.items():
        if not bool(torch.isfinite(torch.stack(torch.aminmax(t.detach()))).all()):
            bad = "NaN" if torch.isnan(t).any() else "inf"
            raise ValueError(f"{name} contains {bad}; attention needs finite inputs")


def records_grad(*tensors: torch.Tensor) -> bool:
    """Whether autograd records the ops on ``tensors``: grad mode is on and one of them
    requires grad. Paths that update buffers in place, or run a kernel with no backward,
    check it first: autograd needs the tensors it saved intact."""
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def score_itemsize(itemsize: int) -> int:
    """Bytes per score, weight or work value of a call on inputs of ``itemsize`` bytes: half
    types (2) are computed in float32 (4); float32 and float64 in their own size."""
    return max(itemsize, 4)


def qkv_out_elements(L: int, S: int, E: int, Ev: int) -> int:
    """Elements of one head's q (L, E), k (S, E), v (S, Ev) and output (L, Ev): what every
    memory model counts beside its own work buffers."""
    return L * E + S * E + S * Ev + L * Ev


def lead_shape(*shapes: torch.Size) -> torch.Size:
    """The broadcast of leading-dim shapes, e.g. of q.shape[:-2], k.shape[:-2], v.shape[:-2].

    Equal shapes (the usual case) return at once: ``torch.broadcast_shapes`` costs tens of
    microseconds of Python per call, a few percent of a whole attention call at L=256.

    Raises:
        RuntimeError: when the shapes do not broadcast (as ``torch.broadcast_shapes``).
    """
    first = shapes[0]
    if all(shape == first for shape in shapes[1:]):
        return torch.Size(first)
    return torch.broadcast_shapes(*shapes)


def check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Validate the shapes, dtypes and devices of q (..., L, E), k (..., S, E), v (..., S, Ev).

    Raises:
        ValueError: for non-tensors, fewer than 2 dims, empty sizes, mismatched E or S,
            leading dims that do not broadcast, mixed dtypes or devices, integer dtypes,
            or NaN/inf values.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() < 2:
            raise ValueError(
                f"{name} must have shape (..., length, features), got {tuple(t.shape)}"
            )
        if t.shape[-1] < 1 or t.shape[-2] < 1:
            raise ValueError(f"{name} has an empty dimension: {tuple(t.shape)}")
        if not t.is_floating_point():
            raise ValueError(f"{name} must be a floating tensor, got {t.dtype}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must share the feature size E, got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must share the length S, got k {tuple(k.shape)} and v {tuple(v.shape)}"
        )
    try:
        lead_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError as err:
        raise ValueError(
            f"leading dims of q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} "
            "do not broadcast"
        ) from err
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must share a device, got {q.device}, {k.device}, {v.device}")
    check_all_finite({"q": q, "k": k, "v": v})


def scores_shape(q: torch.Tensor, k: torch.Tensor) -> torch.Size:
    """Shape (..., L, S) of the score matrix of q (..., L, E) and k (..., S, E)."""
    lead = lead_shape(q.shape[:-2], k.shape[:-2])
    return torch.Size((*lead, q.shape[-2], k.shape[-2]))


def check_mask(mask: torch.Tensor | None, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor | None:
    """Validate a mask against the scores (..., L, S) and move it to q's device.

    Raises:
        ValueError: for a non-tensor, a dtype other than bool/float, NaN or +inf in a float
            mask, or a shape that does not broadcast to the scores.
    """
    if mask is None:
        return None
    if not isinstance(mask, torch.Tensor):
        raise ValueError(f"mask must be a torch.Tensor or None, got {type(mask).__name__}")
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise ValueError(f"mask must be bool (True = attend) or float (added), got {mask.dtype}")
    target = scores_shape(q, k)
    try:
        shape = torch.broadcast_shapes(mask.shape, target)
    except RuntimeError as err:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to scores {tuple(target)}"
        ) from err
    if shape != target:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} would enlarge scores {tuple(target)} "
            f"to {tuple(shape)}"
        )
    if mask.is_floating_point() and (torch.isnan(mask).any() or (mask == math.inf).any()):
        raise ValueError("a float mask may hold finite values and -inf only (no NaN, no +inf)")
    return mask.to(q.device)


def resolve_scale(scale: float | None, E: int, rule: str) -> float:
    """Return the score scale: ``scale`` if given, else 1/sqrt(E) or 1 by ``rule``.

    Raises:
        ValueError: when ``scale`` is not a finite positive number.
    """
    if rule not in SCALE_RULES:
        raise ValueError(f"unknown scale rule {rule!r}; valid: {SCALE_RULES}")
    if scale is None:
        return 1.0 / math.sqrt(E) if rule == "inv_sqrt" else 1.0
    return check_float("scale", scale, low=0.0, low_open=True)


def check_dropout(dropout_p: float) -> float:
    """Return ``dropout_p`` as float.

    Raises:
        ValueError: unless 0 <= dropout_p < 1.
    """
    return check_float("dropout_p", dropout_p, low=0.0, high=1.0, high_open=True)


def allowed_from_mask(mask: torch.Tensor | None) -> torch.Tensor | None:
    """Bool "may attend" tensor of a bool or float mask (-inf in a float mask = blocked)."""
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        return mask
    return mask != -math.inf


def apply_mask(
    scores: torch.Tensor, mask: torch.Tensor | None, pattern: torch.Tensor | None = None
) -> torch.Tensor:
    """Return scores with a float mask added and every blocked cell (a bool mask's or
    ``pattern``'s False, a float mask's -inf) set to :func:`blocked_score`, the dtype's
    minimum, in place: ``scores`` must be a fresh tensor the caller owns (autograd allows
    it: a matmul does not save its output).

    Shapes: scores (..., L, S); mask and pattern (bool, True = may attend) broadcastable.
    """
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill_(~mask, blocked_score(scores.dtype))
        else:
            scores = scores.add_(mask.to(scores.dtype)).clamp_(min=blocked_score(scores.dtype))
    if pattern is not None:
        scores = scores.masked_fill_(~pattern, blocked_score(scores.dtype))
    return scores


def allowed_cells(mask: torch.Tensor | None, pattern: torch.Tensor | None) -> torch.Tensor | None:
    """Bool "may attend" of a user mask intersected with a pattern; None when neither."""
    allowed = allowed_from_mask(mask)
    if pattern is None:
        return allowed
    return pattern if allowed is None else allowed & pattern


def stable_softmax(
    scores: torch.Tensor, allowed: torch.Tensor | None, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Softmax over the last dim that never gives NaN: a zero row where no key is allowed.

    ``torch.softmax`` subtracts the row maximum internally (one fused pass); blocked cells
    must already hold the dtype's minimum (or -inf). A fully blocked row would come out
    uniform (or NaN with -inf), so it is set to zeros.

    Args:
        scores: (..., L, S) floating scores, already masked.
        allowed: bool, broadcastable to scores, True = may attend; or None.
        out: optional (..., L, S) buffer for the weights (not under autograd).

    Returns:
        (..., L, S) weights (in ``out`` when given); each row sums to 1, or to 0 where no
        key is allowed.
    """
    if out is None:
        weights = torch.softmax(scores, dim=-1)  # (..., L, S)
    else:
        weights = torch.softmax(scores, dim=-1, out=out)
    if allowed is None:
        return weights
    has_key = allowed.any(dim=-1, keepdim=True)  # (..., L, 1)
    if bool(has_key.all()):
        return weights
    if out is not None:
        return weights.masked_fill_(~has_key, 0.0)
    return weights.masked_fill(~has_key, 0.0)


def dropout_keep(
    shape: torch.Size, p: float, generator: torch.Generator | None, device: torch.device
) -> torch.Tensor:
    """Bool keep-mask of ``shape`` with P(keep) = 1 - p, drawn from ``generator``."""
    gen_device = generator.device if generator is not None else device
    draws = torch.rand(shape, generator=generator, device=gen_device)
    return (draws >= p).to(device)


def apply_dropout(
    weights: torch.Tensor, p: float, generator: torch.Generator | None
) -> torch.Tensor:
    """Inverted dropout on weights: zero with probability p, scale survivors by 1/(1-p)."""
    if p == 0.0:
        return weights
    keep = dropout_keep(weights.shape, p, generator, weights.device)
    return weights * keep / (1.0 - p)


PATTERN_BYTES_PER_CELL = 9  # the int64 position difference and the bool result in masks.py


def check_dense_budget(
    q: torch.Tensor, k: torch.Tensor, memory_budget: int | None, with_pattern: bool = False
) -> None:
    """Budget check of explicit attention before anything L×S is allocated: scores and
    weights in the compute dtype, plus a sparse pattern's construction when it is built.

    Raises:
        MemoryBudgetError: over the budget.
    """
    shape = scores_shape(q, k)
    nbytes = 2 * tensor_bytes(shape, compute_dtype(q.dtype))
    if with_pattern:
        nbytes += q.shape[-2] * k.shape[-2] * PATTERN_BYTES_PER_CELL
    check_budget(nbytes, f"attention scores {tuple(shape)}", memory_budget)


def scaled_scores(
    q: torch.Tensor, k: torch.Tensor, scale: float, out: torch.Tensor | None = None
) -> torch.Tensor:
    """q kᵀ · scale, a fresh (..., L, S) tensor (or ``out``), for q (..., L, E), k (..., S, E).

    With equal leading dims the scale rides in one batched matmul as its ``alpha`` (no pass
    over q or the scores for it); otherwise q is scaled first (an L×E pass, not L×S).
    ``out`` (contiguous, (..., L, S)) is used only on the first path, and never under
    autograd.
    """
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    lead = q.shape[:-2]
    if k.shape[:-2] != lead:
        return (q * scale) @ k.transpose(-2, -1)  # (..., L, E) @ (..., E, S) -> (..., L, S)
    q3, k3 = q.reshape(-1, L, E), k.reshape(-1, S, E)  # (N, L, E), (N, S, E): views if dense
    kt = k3.transpose(1, 2)  # (N, E, S)
    # beta=0: the (0-d) input is ignored; (N, L, E) @ (N, E, S) -> (N, L, S), times scale
    if out is None:
        scores = torch.baddbmm(q.new_zeros(()), q3, kt, beta=0.0, alpha=scale)
    else:
        scores = torch.baddbmm(
            out.view(-1, L, S), q3, kt, beta=0.0, alpha=scale, out=out.view(-1, L, S)
        )
    return scores.view(*lead, L, S)


def _score_pair(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor | None:
    """One (2, ..., L, S) buffer for the scores and the weights of q (..., L, E) and
    k (..., S, E) in the compute dtype with equal leading dims, when autograd does not
    track them; else None (half types: the weights are cast to a tensor of their own).

    One allocation instead of two, and a larger one: glibc raises its mmap and trim
    thresholds to the largest block freed, so the pair's memory stays in the heap across
    calls instead of being returned to the system and faulted in again (measured at L=256,
    H=8: two separate 2 MiB buffers were refaulted on every call in some processes, 1024
    page faults, doubling the call's time). The returned scores and weights share it.
    """
    if records_grad(q, k) or q.shape[:-2] != k.shape[:-2]:
        return None
    return q.new_empty((2, *q.shape[:-2], q.shape[-2], k.shape[-2]))


def dense_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    mask: torch.Tensor | None,
    scale: float,
    dropout_p: float,
    generator: torch.Generator | None,
    memory_budget: int | None,
    pattern: torch.Tensor | None = None,
) -> AttentionResult:
    """Explicit attention that forms the (..., L, S) scores and weights.

    q is scaled before the matmul (an L×E pass instead of an L×S one); the mask is applied
    in place; softmax runs in float32 for half types; a row with no allowed key gives zeros.

    Args:
        q, k, v, mask, scale, dropout_p, generator, memory_budget: as in ``attend``.
        pattern: the variant's own (L, S) bool pattern (True = may attend), or None.

    Returns:
        AttentionResult(output (..., L, Ev) in q's dtype, weights (..., L, S) in q's dtype
        after dropout, scores (..., L, S) in the compute dtype, as fed to the softmax).

    Raises:
        MemoryBudgetError: when the score matrices would exceed the budget.
    """
    work = compute_dtype(q.dtype)
    check_dense_budget(q, k, memory_budget)  # scores and weights live at the same time
    same = work == q.dtype  # no casts (each a dispatcher round trip even when a no-op)
    qw, kw, vw = (q, k, v) if same else (q.to(work), k.to(work), v.to(work))
    pair = _score_pair(qw, kw) if same else None  # (2, ..., L, S)
    scores = scaled_scores(qw, kw, scale, out=None if pair is None else pair[0])  # (..., L, S)
    scores = apply_mask(scores, mask, pattern)
    allowed = allowed_cells(mask, pattern)
    weights = stable_softmax(scores, allowed, out=None if pair is None else pair[1])
    weights = apply_dropout(weights, dropout_p, generator)
    out = weights @ vw  # (..., L, S) @ (..., S, Ev) -> (..., L, Ev)
    if same:
        return AttentionResult(out, weights, scores)
    return AttentionResult(out.to(q.dtype), weights.to(q.dtype), scores)


def zero_rows_without_key(out: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Set output rows (..., L, Ev) to 0 where the mask allows no key (also clears NaN)."""
    allowed = allowed_from_mask(mask)
    if allowed is None:
        return out
    has_key = allowed.any(dim=-1, keepdim=True)  # (..., L, 1)
    return out.masked_fill(~has_key, 0.0)


def window_layout(L: int, block: int, halo: int, device) -> torch.Tensor:
    """Bool (nb, c, W) "may attend" of ``local``'s query blocks of c = ``block`` rows against
    their key windows of W = c + 2·halo keys (nb = ceil(L / c)); shared by its readable and
    fast paths.

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


def mask_windows(mask: torch.Tensor, L: int, block: int, halo: int) -> torch.Tensor:
    """Gather a user mask (..., Lm, Sm), Lm in {1, L}, Sm in {1, L}, into the window layout
    (..., nb, c or 1, W) of :func:`window_layout`."""
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


def masked_dense_result(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    mask: torch.Tensor | None,
    scale: float,
    need_weights: bool,
    dropout_p: float,
    generator: torch.Generator | None,
    memory_budget: int | None,
    build_pattern=None,
) -> AttentionResult:
    """Explicit attention as an :class:`AttentionResult`, optionally restricted to the (L, S)
    bool pattern ``build_pattern()`` returns, intersected with the user's ``mask``: always
    :func:`dense_attention`, the PyTorch formula a learner reads.

    The budget is checked before the pattern is built (its construction is L×S too).

    Returns:
        AttentionResult(output, weights and scores when ``need_weights``, else None).

    Raises:
        MemoryBudgetError: when the L×S matrices exceed the budget.
    """
    pattern = None
    if build_pattern is not None:
        check_dense_budget(q, k, memory_budget, with_pattern=True)
        pattern = build_pattern().to(q.device)
    result = dense_attention(
        q,
        k,
        v,
        mask=mask,
        scale=scale,
        dropout_p=dropout_p,
        generator=generator,
        memory_budget=memory_budget,
        pattern=pattern,
    )
    if need_weights:
        return result
    return AttentionResult(result.output)
