"""Device and dtype choice, and memory estimates with a budget.

The budget guards every allocation of an (…, L, S) matrix: before it is made, its bytes
are estimated and, over the budget, a :class:`MemoryBudgetError` (a ``ValueError``) says
what to lower instead of letting the machine swap or the process be killed.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch

from attention_core.validation import check_int

MIB = 2**20
DEFAULT_MEMORY_BUDGET = 512 * MIB
BUDGET_ENV_VAR = "ATTENTION_LAB_MEMORY_BUDGET_MIB"
DEVICE_ORDER = ("cuda", "mps", "cpu")
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float64": torch.float64,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}
HALF_DTYPES = (torch.float16, torch.bfloat16)


class MemoryBudgetError(ValueError):
    """An allocation would exceed the memory budget."""


@dataclass(frozen=True)
class DeviceChoice:
    """The device in use and why it was chosen.

    Attributes:
        device: the torch device.
        reason: a short English sentence, e.g. "cuda available".
        available: names of every device usable on this machine, best first.
    """

    device: torch.device
    reason: str
    available: tuple[str, ...]


def available_devices() -> tuple[str, ...]:
    """Return the usable device names on this machine, best first (cuda, mps, cpu)."""
    found = []
    if torch.cuda.is_available():
        found.append("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append("mps")
    found.append("cpu")
    return tuple(found)


def pick_device(preferred: str | None = None) -> DeviceChoice:
    """Choose cuda, then mps, then cpu; an explicit ``preferred`` choice wins.

    Args:
        preferred: ``None``/``"auto"`` for automatic choice, or a device name.

    Returns:
        DeviceChoice with the device and the reason.

    Raises:
        ValueError: when ``preferred`` names a device that is unknown or unavailable.
    """
    available = available_devices()
    if preferred in (None, "auto"):
        name = available[0]
        reason = f"{name}: best available of {', '.join(available)}"
        return DeviceChoice(torch.device(name), reason, available)
    if preferred not in DEVICE_ORDER:
        raise ValueError(f"unknown device {preferred!r}; valid: auto, {', '.join(DEVICE_ORDER)}")
    if preferred not in available:
        raise ValueError(
            f"device {preferred!r} is not available here; available: {', '.join(available)}"
        )
    return DeviceChoice(torch.device(preferred), f"{preferred}: chosen explicitly", available)


def parse_dtype(name: str | torch.dtype) -> torch.dtype:
    """Return the torch dtype for ``name`` (float32, float64, bfloat16, float16).

    Raises:
        ValueError: for any other dtype.
    """
    if isinstance(name, torch.dtype):
        if name in DTYPES.values():
            return name
        raise ValueError(f"unsupported dtype {name}; valid: {', '.join(DTYPES)}")
    if name not in DTYPES:
        raise ValueError(f"unsupported dtype {name!r}; valid: {', '.join(DTYPES)}")
    return DTYPES[name]


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Return the dtype softmax runs in: float32 for half types, else ``dtype`` itself."""
    return torch.float32 if dtype in HALF_DTYPES else dtype


def resolve_budget(budget: int | None = None) -> int:
    """Return the memory budget in bytes.

    Order: the explicit ``budget``; else the ``ATTENTION_LAB_MEMORY_BUDGET_MIB`` environment
    variable; else 512 MiB.

    Raises:
        ValueError: when the budget is not a positive whole number of bytes.
    """
    if budget is None:
        env = os.environ.get(BUDGET_ENV_VAR)
        if env is None:
            return DEFAULT_MEMORY_BUDGET
        try:
            budget = int(float(env) * MIB)
        except ValueError as err:
            raise ValueError(f"{BUDGET_ENV_VAR} must be a number of MiB, got {env!r}") from err
    return check_int("memory_budget (bytes)", budget, low=1)


def tensor_bytes(shape: tuple[int, ...] | torch.Size, dtype: torch.dtype) -> int:
    """Bytes of a dense tensor of ``shape`` and ``dtype``."""
    return math.prod(shape) * dtype.itemsize


BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def format_bytes(nbytes: float) -> str:
    """Human-readable size in binary units up to EiB, e.g. ``"512 B"``, ``"512.0 MiB"``,
    ``"16.0 TiB"`` (a larger size stays in EiB: a 64-bit count of bytes is below 16 EiB)."""
    if abs(nbytes) < 1024:
        return f"{int(nbytes)} B"
    for unit in BYTE_UNITS[1:-1]:
        nbytes /= 1024
        if abs(nbytes) < 1024:
            return f"{nbytes:.1f} {unit}"
    return f"{nbytes / 1024:.1f} {BYTE_UNITS[-1]}"


DEFAULT_BUDGET_HINT = (
    "lower the sequence length, batch or heads, ask for no weights, or use an efficient "
    "variant (local, linear, chunked)"
)


def check_budget(
    nbytes: int, what: str, budget: int | None = None, hint: str = DEFAULT_BUDGET_HINT
) -> None:
    """Raise before allocating ``nbytes`` for ``what`` when it exceeds the budget.

    Args:
        nbytes: estimated bytes of the allocation.
        what: a short description used in the message, e.g. "attention weights (1, 8, 4096, 4096)".
        budget: bytes; ``None`` uses :func:`resolve_budget`.
        hint: what the caller can lower, appended to the message.

    Raises:
        MemoryBudgetError: a ``ValueError`` naming the size, the budget and what to lower.
    """
    limit = resolve_budget(budget)
    if nbytes > limit:
        raise MemoryBudgetError(
            f"{what} needs {format_bytes(nbytes)}, over the memory budget of "
            f"{format_bytes(limit)}; {hint}"
        )
