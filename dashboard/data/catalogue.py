"""The variant registry (the core's own specs, read-only), the devices and the band kernel's
state, for the controls and captions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import streamlit as st
import torch

import attention_core as core
from attention_core.device import available_devices, pick_device
from attention_core.variants import band_kernel


def variant_catalogue() -> Mapping[str, core.VariantSpec]:
    """Every registered variant, in registry order: the registry's own specs, read-only.

    The controls build a variant's widgets from its :class:`~attention_core.VariantSpec`
    (label, explanation, complexities, ``supports_dropout``) and its
    :class:`~attention_core.Param` entries (name, kind, default, low, high, step, help).
    Not cached: a read-only view of the registry costs less than a cache lookup (0.1 µs
    against 10 µs), and a variant registered at run time appears at once.

    Returns:
        A live, read-only mapping ``{name: spec}``.
    """
    return MappingProxyType(core.VARIANTS)


@st.cache_resource
def device_options() -> tuple[str, tuple[str, ...]]:
    """Return ``(automatic choice, every available device)``, e.g. ``("cpu", ("cpu",))``."""
    return pick_device().device.type, available_devices()


def device_for(name: str) -> torch.device:
    """The torch device for a sidebar choice (``"auto"`` picks the best available).

    Raises:
        ValueError: for an unknown or unavailable device name.
    """
    return pick_device(None if name == "auto" else name).device


@dataclass(frozen=True)
class KernelInfo:
    """Whether ``local``'s fast path runs the C band kernel here (it serves ``local`` only).

    Attributes:
        available: built, current and on.
        isa: the instruction set it runs (e.g. ``"avx512"``), or "" when not available.
        reason: why not (English, from the library), or "".
    """

    available: bool
    isa: str
    reason: str


def band_kernel_info() -> KernelInfo:
    """The C band kernel's state in this process (a few attribute reads: not cached)."""
    state = band_kernel.status()
    return KernelInfo(state.available, state.isas[0] if state.available else "", state.reason)
