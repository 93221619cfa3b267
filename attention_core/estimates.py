"""Peak-memory estimates of one attention call, from each variant's registry entry."""

from __future__ import annotations

import torch

from attention_core.device import parse_dtype
from attention_core.registry import get_variant
from attention_core.validation import check_int


def estimate_memory(
    variant: str,
    *,
    batch: int,
    heads: int,
    L: int,
    S: int | None = None,
    E: int,
    Ev: int | None = None,
    dtype: str | torch.dtype = torch.float32,
    need_weights: bool = False,
    **params,
) -> int:
    """Estimated peak bytes of ``attend`` for the given sizes (an analytic model, not a
    measurement: inputs, outputs and the largest intermediate the variant forms).

    Args:
        variant: registry name. batch, heads: leading dims. L, S: query and key lengths
            (S defaults to L). E, Ev: feature sizes (Ev defaults to E). dtype: input dtype.
        need_weights: include the (…, L, S) weights. **params: variant parameters.

    Returns:
        bytes (int).

    Raises:
        ValueError: for an unknown variant or parameter, a size below 1, or a variant
            registered without a ``memory_model`` (named in the message).
    """
    spec = get_variant(variant)
    if spec.memory_model is None:
        raise ValueError(
            f"variant {spec.name!r} has no memory model, so its peak memory cannot be "
            "estimated; register it with memory_model=(lead, L, S, E, Ev, itemsize, "
            "need_weights, **params) -> bytes"
        )
    resolved = spec.resolve_params(params)
    S = L if S is None else S
    Ev = E if Ev is None else Ev
    for name, value in (
        ("batch", batch),
        ("heads", heads),
        ("L", L),
        ("S", S),
        ("E", E),
        ("Ev", Ev),
    ):
        check_int(name, value, low=1)
    itemsize = torch.empty((), dtype=parse_dtype(dtype)).element_size()
    lead = batch * heads
    sizes = {"itemsize": itemsize, "need_weights": need_weights}
    return int(spec.memory_model(lead, L, S, E, Ev, **sizes, **resolved))
