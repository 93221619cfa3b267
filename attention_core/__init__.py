"""Attention Lab's computation core: every self-attention variant of the tutorial.

Public API (see docs/CONTRACT.md): :func:`attend`, :data:`VARIANTS`, :func:`get_variant`,
:func:`register`, :func:`estimate_memory`, :class:`MultiHeadSelfAttention`,
:class:`AttentionResult`, :class:`VariantSpec`, :class:`Param`, and the modules ``masks``
and ``device``.
"""

from attention_core import device, masks
from attention_core.device import MemoryBudgetError, pick_device
from attention_core.estimates import estimate_memory
from attention_core.modules import MultiHeadSelfAttention
from attention_core.registry import VARIANTS, attend, get_variant, register
from attention_core.types import AttentionResult, Param, VariantSpec

__all__ = [
    "VARIANTS",
    "AttentionResult",
    "MemoryBudgetError",
    "MultiHeadSelfAttention",
    "Param",
    "VariantSpec",
    "attend",
    "device",
    "estimate_memory",
    "get_variant",
    "masks",
    "pick_device",
    "register",
]
