"""Shared data types and the shape legend.

Shape legend used in every docstring and shape comment:

* ``B`` batch, ``H`` heads, ``L`` query length, ``S`` key/value length,
* ``E`` query/key feature size per head (``d_k``), ``Ev`` value feature size,
* ``D`` model width (``embed_dim = H * E``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from attention_core.validation import check_bool, check_float, check_int


@dataclass(frozen=True)
class AttentionResult:
    """What every attention variant returns.

    Attributes:
        output: attended values, shape (..., L, Ev).
        weights: attention weights, shape (..., L, S), or ``None`` when they were not
            requested (``need_weights=False``). Rows sum to 1, or to 0 for a query that
            may attend to no key.
        scores: the pre-softmax scores actually fed to the softmax, shape (..., L, S), or
            ``None`` (no weights requested, or a variant without a softmax: ``linear``).
            They are q·kᵀ·scale plus a float mask's finite values; every blocked cell (a
            bool mask's False, a float mask's -inf, a cell outside the variant's own
            pattern) holds :func:`blocked_score`, the dtype's minimum, never -inf. They are
            kept in the compute dtype (float32 for float16/bfloat16 inputs), before dropout,
            so ``softmax(scores)`` equals ``weights`` when there is no dropout, except on a
            query row with no allowed key, whose weights are 0.
    """

    output: torch.Tensor
    weights: torch.Tensor | None = None
    scores: torch.Tensor | None = None


def blocked_score(dtype: torch.dtype) -> float:
    """The score a blocked cell holds before the softmax: the dtype's own minimum
    (finite, so a fully blocked row gives no NaN before it is set to zeros)."""
    return torch.finfo(dtype).min


@dataclass(frozen=True)
class Param:
    """One tunable parameter of a variant, described as plain data for the UI.

    Attributes:
        name: keyword argument name, e.g. ``"window_size"``.
        kind: ``"int"``, ``"float"`` or ``"bool"``.
        default: default value.
        low, high: inclusive range accepted by the variant (ignored for ``bool``).
        step: slider step for the UI.
        help: one-line English description.
    """

    name: str
    kind: str
    default: int | float | bool
    low: int | float = 0
    high: int | float = 1
    step: int | float = 1
    help: str = ""

    def validate(self, value: object) -> int | float | bool:
        """Return ``value`` coerced to this parameter's kind.

        Raises:
            ValueError: when the value has the wrong type or lies outside [low, high].
        """
        if self.kind == "bool":
            return check_bool(self.name, value)
        if self.kind == "int":
            if isinstance(value, float) and value.is_integer():
                value = int(value)  # 3.0 from a float slider or a JSON round trip
            return check_int(self.name, value, low=int(self.low), high=int(self.high))
        return check_float(self.name, value, low=self.low, high=self.high)


VariantFn = Callable[..., AttentionResult]
MaskFn = Callable[..., torch.Tensor]


@dataclass(frozen=True)
class VariantSpec:
    """A registry entry: a variant function plus everything the UI and tests need.

    Attributes:
        name: registry key, e.g. ``"local"``.
        label: short human label, e.g. ``"Local window"``.
        explanation: one English sentence saying what it does.
        time_complexity, memory_complexity: e.g. ``"O(L·w·E)"``.
        exact: True when the output equals full scaled attention under ``pattern`` (and
            the user's mask) to float tolerance; False for approximations (``linear``)
            and for ``basic``, which uses a different scale.
        params: the variant's own parameters.
        fn: the implementation, ``fn(q, k, v, *, mask, scale, need_weights, dropout_p,
            generator, memory_budget, **params) -> AttentionResult``.
        pattern: for sparse variants, ``pattern(L, S, **params) -> (L, S)`` bool mask
            (True = may attend) that the variant applies; ``None`` for dense variants.
        supports_dropout: whether ``dropout_p > 0`` is accepted.
        default_scale: ``"inv_sqrt"`` for 1/sqrt(E), ``"one"`` for no scaling.
        memory_model: ``memory_model(lead, L, S, E, Ev, itemsize, need_weights, **params)
            -> int``, the estimated peak bytes of one call (lead = product of leading dims;
            itemsize and need_weights are passed by keyword); ``None``: no estimate, and
            :func:`~attention_core.estimates.estimate_memory` refuses the variant by name.
    """

    name: str
    label: str
    explanation: str
    time_complexity: str
    memory_complexity: str
    exact: bool
    fn: VariantFn
    params: tuple[Param, ...] = field(default_factory=tuple)
    pattern: MaskFn | None = None
    supports_dropout: bool = True
    default_scale: str = "inv_sqrt"
    memory_model: Callable[..., int] | None = None

    def param(self, name: str) -> Param:
        """Return the parameter called ``name``.

        Raises:
            ValueError: when the variant has no such parameter.
        """
        for p in self.params:
            if p.name == name:
                return p
        valid = ", ".join(p.name for p in self.params) or "none"
        raise ValueError(f"variant {self.name!r} has no parameter {name!r}; valid: {valid}")

    def defaults(self) -> dict[str, int | float | bool]:
        """Return ``{param name: default}`` for this variant."""
        return {p.name: p.default for p in self.params}

    def resolve_params(self, given: dict[str, object]) -> dict[str, int | float | bool]:
        """Merge ``given`` over the defaults and validate every value.

        Raises:
            ValueError: for an unknown parameter name or a value out of range.
        """
        resolved = self.defaults()
        for name, value in given.items():
            resolved[name] = self.param(name).validate(value)
        return resolved
