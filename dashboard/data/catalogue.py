"""The variant registry, the devices and the band kernel's state, as plain values the
controls and captions can use."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st
import torch

import attention_core as core
from attention_core.device import available_devices, pick_device
from attention_core.variants import band_kernel


@dataclass(frozen=True)
class ParamInfo:
    """A variant parameter as plain values (mirrors :class:`attention_core.Param`)."""

    name: str
    kind: str
    default: int | float | bool
    low: int | float
    high: int | float
    step: int | float
    help: str


@dataclass(frozen=True)
class VariantInfo:
    """A registry entry as plain values, for building controls."""

    name: str
    label: str
    explanation: str
    time_complexity: str
    memory_complexity: str
    exact: bool
    supports_dropout: bool
    params: tuple[ParamInfo, ...]


@st.cache_resource
def variant_catalogue() -> dict[str, VariantInfo]:
    """Return every registered variant, in registry order, as plain :class:`VariantInfo`."""
    return {
        name: VariantInfo(
            name=spec.name,
            label=spec.label,
            explanation=spec.explanation,
            time_complexity=spec.time_complexity,
            memory_complexity=spec.memory_complexity,
            exact=spec.exact,
            supports_dropout=spec.supports_dropout,
            params=tuple(
                ParamInfo(p.name, p.kind, p.default, p.low, p.high, p.step, p.help)
                for p in spec.params
            ),
        )
        for name, spec in core.VARIANTS.items()
    }


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
    """Whether ``local`` (and the weights of ``scaled``) run the C band kernel here.

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
