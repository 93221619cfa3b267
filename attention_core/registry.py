"""One table of every attention variant, and the single entry point :func:`attend`."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from attention_core.device import resolve_budget
from attention_core.types import AttentionResult, VariantSpec
from attention_core.variants import ALL_SPECS
from attention_core.variants.common import check_dropout, check_mask, check_qkv, resolve_scale

VARIANTS: dict[str, VariantSpec] = {}


def register(spec: VariantSpec) -> VariantSpec:
    """Add ``spec`` to :data:`VARIANTS` under ``spec.name`` and return it.

    Raises:
        ValueError: when the name is taken.
    """
    if spec.name in VARIANTS:
        raise ValueError(f"variant {spec.name!r} is already registered")
    VARIANTS[spec.name] = spec
    return spec


def get_variant(name: str) -> VariantSpec:
    """Return the registry entry for ``name``.

    Raises:
        ValueError: for an unknown name, listing the valid ones.
    """
    if not isinstance(name, str) or name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r}; valid: {', '.join(sorted(VARIANTS))}")
    return VARIANTS[name]


def variant_names(variants: Iterable[str]) -> list[str]:
    """The registered names of a non-empty list of variants, in the given order.

    Args:
        variants: variant names.

    Returns:
        The names, each checked against :data:`VARIANTS`.

    Raises:
        ValueError: for an empty list, or an unknown name (listing the valid ones).
    """
    names = [get_variant(name).name for name in variants]
    if not names:
        raise ValueError("variants must name at least one variant, got an empty list")
    return names


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    variant: str = "scaled",
    *,
    mask: torch.Tensor | None = None,
    scale: float | None = None,
    need_weights: bool = False,
    dropout_p: float = 0.0,
    generator: torch.Generator | None = None,
    memory_budget: int | None = None,
    **params,
) -> AttentionResult:
    """Compute attention with a registered variant.

    Args:
        q: queries (..., L, E). k: keys (..., S, E). v: values (..., S, Ev). Leading dims
            (batch, heads, …) broadcast.
        variant: a name in :data:`VARIANTS`.
        mask: bool (True = may attend) or float (added to the scores), broadcastable to
            (..., L, S); ``None`` for no mask. A query with no allowed key gets a zero row.
        scale: score scale; default 1/sqrt(E) (``basic`` and ``linear``: 1).
        need_weights: also return the (..., L, S) weights. Default ``False`` so that the
            efficient path runs (fused SDPA, banded, kernelised, chunked) and no L×S matrix
            is formed; ask for weights at small L only.
        dropout_p: dropout on the weights, in [0, 1). Returned weights are the ones used,
            after dropout, as in ``torch.nn.MultiheadAttention``.
        generator: torch.Generator for reproducible dropout (and nothing else).
        memory_budget: bytes allowed for any L×S allocation; default 512 MiB or the
            ``ATTENTION_LAB_MEMORY_BUDGET_MIB`` environment variable.
        **params: the variant's own parameters (see ``VARIANTS[name].params``).

    Returns:
        AttentionResult(output (..., L, Ev), weights (..., L, S) or None).

    Raises:
        ValueError: unknown variant or parameter, parameter out of range, mismatched
            shapes, a mask that does not broadcast, NaN/inf inputs, bad scale or dropout,
            or (MemoryBudgetError) an allocation over the budget.
    """
    spec = get_variant(variant)
    resolved = spec.resolve_params(params)
    check_qkv(q, k, v)
    mask = check_mask(mask, q, k)
    scale = resolve_scale(scale, q.shape[-1], spec.default_scale)
    dropout_p = check_dropout(dropout_p)
    if dropout_p > 0 and not spec.supports_dropout:
        raise ValueError(f"variant {variant!r} does not support dropout (dropout_p={dropout_p})")
    budget = resolve_budget(memory_budget)
    return spec.fn(
        q,
        k,
        v,
        mask=mask,
        scale=scale,
        need_weights=bool(need_weights),
        dropout_p=dropout_p,
        generator=generator,
        memory_budget=budget,
        **resolved,
    )


for _spec in ALL_SPECS:
    register(_spec)
