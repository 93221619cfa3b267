"""One place for checking user-supplied scalars: whole numbers, real numbers, flags, choices.

Every public entry point of ``attention_core`` (and the dashboard's data layer) checks its
plain arguments with these helpers, so a bad value always raises the same kind of
``ValueError``, naming the argument and showing the value it got. ``bool`` is never taken for
a number (``True`` is an ``int`` in Python), and NumPy scalars are accepted where a Python
number would be.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

_INT_TYPES = (int, np.integer)
_REAL_TYPES = (int, float, np.integer, np.floating)


def _range_text(low: float | None, high: float | None, *, low_open: bool, high_open: bool) -> str:
    """``"in [1, 8]"``, ``"> 0"``, ``">= 1"`` … for an error message."""
    if low is not None and high is not None:
        left = "(" if low_open else "["
        right = ")" if high_open else "]"
        return f"in {left}{low}, {high}{right}"
    if low is not None:
        return f"{'>' if low_open else '>='} {low}"
    if high is not None:
        return f"{'<' if high_open else '<='} {high}"
    return ""


def _in_range(
    value: float, low: float | None, high: float | None, *, low_open: bool, high_open: bool
) -> bool:
    """Whether ``value`` lies within the (optionally open) bounds."""
    if low is not None and (value <= low if low_open else value < low):
        return False
    return not (high is not None and (value >= high if high_open else value > high))


def check_int(
    name: str,
    value: object,
    *,
    low: int | None = None,
    high: int | None = None,
) -> int:
    """Return ``value`` as a Python ``int`` after checking it is a whole number in range.

    Args:
        name: the argument's name, used in the error message.
        value: what the caller passed (``int`` or NumPy integer; never ``bool``).
        low, high: inclusive bounds; ``None`` for unbounded.

    Returns:
        ``int(value)``.

    Raises:
        ValueError: when ``value`` is not a whole number or lies outside [low, high].
    """
    if isinstance(value, bool) or not isinstance(value, _INT_TYPES):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    if not _in_range(int(value), low, high, low_open=False, high_open=False):
        bounds = _range_text(low, high, low_open=False, high_open=False)
        raise ValueError(f"{name} must be a whole number {bounds}, got {value!r}")
    return int(value)


def check_float(
    name: str,
    value: object,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """Return ``value`` as a finite Python ``float`` after checking its range.

    Args:
        name: the argument's name, used in the error message.
        value: an ``int``, ``float`` or NumPy number (never ``bool``); NaN and ±inf refused.
        low, high: bounds; ``None`` for unbounded.
        low_open, high_open: exclude the bound itself (``low_open=True`` means ``> low``).

    Returns:
        ``float(value)``.

    Raises:
        ValueError: when ``value`` is not a finite number or lies outside the bounds.
    """
    if isinstance(value, bool) or not isinstance(value, _REAL_TYPES):
        raise ValueError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if not _in_range(number, low, high, low_open=low_open, high_open=high_open):
        bounds = _range_text(low, high, low_open=low_open, high_open=high_open)
        raise ValueError(f"{name} must be {bounds}, got {value!r}")
    return number


def check_bool(name: str, value: object) -> bool:
    """Return ``value`` after checking it is ``True`` or ``False`` (NumPy bools accepted).

    Raises:
        ValueError: for anything else, including 0 and 1.
    """
    if isinstance(value, bool | np.bool_):
        return bool(value)
    raise ValueError(f"{name} must be True or False, got {value!r}")


def _same_choice(value: object, choice: object) -> bool:
    """Equal, and a flag only matches a flag (``True == 1`` in Python)."""
    if isinstance(value, bool) != isinstance(choice, bool):
        return False
    try:
        return bool(value == choice)
    except (TypeError, ValueError):
        return False


def check_choice(name: str, value: object, choices: Iterable[object]) -> object:
    """Return ``value`` after checking it is one of ``choices``.

    Raises:
        ValueError: naming the value and listing the valid choices.
    """
    options = tuple(choices)
    if not any(_same_choice(value, c) for c in options):
        valid = ", ".join(repr(c) for c in options)
        raise ValueError(f"{name} must be one of {valid}; got {value!r}")
    return value
