"""Parsing the text of a URL value (``?page.name=raw``) into a control's value: pure
functions, no Streamlit. Each refuses what it cannot read with a ``ValueError`` naming the
value, and :mod:`dashboard.state` then falls back to the default with a notice."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from typing import Any

MAX_RAW_LEN = 200
_SCRIPT_LIKE = re.compile(r"[<>`{}\\]|javascript:|data:", re.IGNORECASE)


def serialise(value: Any) -> str:
    """The URL text of a control's value: ``true``/``false``, floats to 6 places, lists
    comma-joined."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(round(value, 6))
    if isinstance(value, list | tuple):
        return ",".join(serialise(v) for v in value)
    return str(value)


def parse_int(raw: str, low: int, high: int) -> int:
    """Parse a whole number in [low, high].

    Raises:
        ValueError: for anything else (text, decimals, out of range).
    """
    if not re.fullmatch(r"[+-]?\d{1,12}", raw.strip()):
        raise ValueError(f"not a whole number: {raw!r}")
    value = int(raw)
    if not low <= value <= high:
        raise ValueError(f"{value} outside [{low}, {high}]")
    return value


def parse_float(raw: str, low: float, high: float) -> float:
    """Parse a finite number in [low, high].

    Raises:
        ValueError: for text, NaN, infinities or values out of range.
    """
    if not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d{1,3})?", raw.strip()):
        raise ValueError(f"not a number: {raw!r}")
    value = float(raw)
    if not math.isfinite(value) or not low <= value <= high:
        raise ValueError(f"{value} outside [{low}, {high}]")
    return value


def parse_bool(raw: str) -> bool:
    """Parse ``true/false/1/0`` (any case).

    Raises:
        ValueError: for any other text.
    """
    lowered = raw.strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise ValueError(f"not a boolean: {raw!r}")


def parse_choice(raw: str, options: Sequence[Any]) -> Any:
    """Return the option whose text form equals ``raw``.

    Raises:
        ValueError: when no option matches.
    """
    for option in options:
        if serialise(option) == raw:
            return option
    raise ValueError(f"unknown option {raw!r}")


def parse_text(raw: str, max_len: int) -> str:
    """Accept plain text of at most ``max_len`` characters.

    Raises:
        ValueError: for longer text, control characters or script-like content
            (angle brackets, backticks, braces, backslashes, ``javascript:``/``data:``).
    """
    if len(raw) > max_len:
        raise ValueError(f"text longer than {max_len} characters")
    if any(unicodedata.category(c) == "Cc" for c in raw) or _SCRIPT_LIKE.search(raw):
        raise ValueError(f"text has forbidden characters: {raw!r}")
    return raw


def parse_int_list(raw: str, low: int, high: int, max_items: int) -> list[int]:
    """Parse comma-separated whole numbers in [low, high], at most ``max_items`` of them.

    Raises:
        ValueError: for an empty list, too many items or any bad item.
    """
    items = [s for s in raw.split(",") if s.strip()]
    if not items or len(items) > max_items:
        raise ValueError(f"need 1 to {max_items} numbers, got {len(items)}")
    return [parse_int(s, low, high) for s in items]


def parse_choice_list(raw: str, options: Sequence[Any], max_items: int) -> list[Any]:
    """Parse ``"a,b"`` into options, in order: each known, none repeated, at most
    ``max_items`` of them.

    Raises:
        ValueError: for an unknown or repeated name, or too many names.
    """
    by_text = {serialise(o): o for o in options}
    names = [part.strip() for part in raw.split(",") if part.strip()]
    unknown = [n for n in names if n not in by_text]
    if unknown:
        raise ValueError(f"unknown choices {unknown}")
    if len(set(names)) != len(names):
        raise ValueError(f"repeated choices in {names}")
    if len(names) > max_items:
        raise ValueError(f"{len(names)} choices, at most {max_items} allowed")
    return [by_text[n] for n in names]
