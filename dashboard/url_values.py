"""Parsing the text of a URL value (``?page.name=raw``) into a control's value: pure
functions, no Streamlit. Each refuses what it cannot read with a :class:`RefusedValue` (a
``ValueError``) carrying a reason code; :mod:`dashboard.url_state` then falls back to the
default with a notice that says why, in the page's language.

Text is text: a sentence may hold ``<``, ``{``, backticks or ``javascript:``; the app shows
user text only as literal text (:func:`dashboard.literal.literal`, widget values, chart
labels), never as markdown or HTML. Only control characters (a newline, a NUL, …) are refused.
"""

from __future__ import annotations

import difflib
import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from typing import Any

MAX_RAW_LEN = 200
SUGGEST_CUTOFF = 0.75
"""How close (difflib's ratio) a known key must be to an unknown one to be suggested."""
REASONS = tuple(
    "too_long not_whole_number not_number out_of_range not_boolean unknown_option"
    " forbidden_char item_count too_many_items repeated_choice repeated_key not_accepted"
    " snapped moved_in_range nearest_option unknown_lesson room_code left_out"
    " left_out_lesson".split()
)
"""The reason codes of :class:`RefusedValue`; each has the locale key
``common.url_reason_<code>``."""


class RefusedValue(ValueError):
    """A URL value that cannot be read, with why: ``reason`` (one of :data:`REASONS`) and
    ``detail``, the values its message names (e.g. ``{"low": 4, "high": 1024}``)."""

    def __init__(self, message: str, reason: str, **detail: Any) -> None:
        if reason not in REASONS:
            raise ValueError(f"unknown refusal reason {reason!r}; valid: {', '.join(REASONS)}")
        super().__init__(message)
        self.reason = reason
        self.detail = detail


_CONTROL_NAMES = {"\t": "TAB", "\n": "LINE FEED", "\r": "CARRIAGE RETURN"}


def char_name(char: str) -> str:
    """A character for a notice: ``"U+0009 (TAB)"``, or ``"U+0000"`` without a name."""
    code = f"U+{ord(char):04X}"
    name = unicodedata.name(char, "") or _CONTROL_NAMES.get(char, "")
    return f"{code} ({name})" if name else code


def suggest_key(unknown: str, known: Iterable[str]) -> str | None:
    """The key of ``known`` closest to the ``unknown`` one (difflib), or ``None`` when none
    is close enough: ``"playground.seqlen"`` gives ``"playground.seq_len"``."""
    close = difflib.get_close_matches(unknown, list(known), n=1, cutoff=SUGGEST_CUTOFF)
    return close[0] if close else None


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
    """A whole number in [low, high]; anything else raises :class:`RefusedValue`."""
    if not re.fullmatch(r"[+-]?\d{1,12}", raw.strip()):
        raise RefusedValue(f"not a whole number: {raw!r}", "not_whole_number")
    value = int(raw)
    if not low <= value <= high:
        raise RefusedValue(f"{value} outside [{low}, {high}]", "out_of_range", low=low, high=high)
    return value


def snap_to_step(value: int, low: int, high: int, step: int) -> int:
    """The nearest value a slider of ``low``..``high`` in steps of ``step`` (at least 1, else
    ``ValueError``) offers; ties go down, never past ``high``'s last step."""
    if step < 1:
        raise ValueError(f"slider step must be at least 1, got {step}")
    last = low + (high - low) // step * step
    return min(max(low + (value - low + (step - 1) // 2) // step * step, low), last)


def snap_float_to_step(value: float, low: float, high: float, step: float) -> float:
    """The nearest value a float slider of ``low``..``high`` in steps of ``step`` (positive,
    else ``ValueError``) offers, rounded to the step's decimals (0.3, not 0.30000000000000004)."""
    if not step > 0:
        raise ValueError(f"slider step must be positive, got {step}")
    decimals = max(0, -math.floor(math.log10(step)) + 3)
    last = low + math.floor((high - low) / step + 1e-9) * step
    snapped = low + round((value - low) / step) * step
    return round(min(max(snapped, low), last), decimals)


def is_number(value: Any) -> bool:
    """Whether ``value`` is an int or a float (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def nearest_int(low: int, high: int, step: int, default: int) -> Callable[[Any], int]:
    """The nearest value an integer slider of ``low``..``high`` in steps of ``step`` offers
    (``default`` for anything but a whole number)."""

    def nearest(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            return default
        return snap_to_step(min(max(value, low), high), low, high, step)

    return nearest


def nearest_float(
    low: float, high: float, step: float | None, default: float
) -> Callable[[Any], float]:
    """The nearest value of a float widget of ``low``..``high`` (on a slider's steps when
    ``step`` is given; ``default`` for anything but a finite number)."""

    def nearest(value: Any) -> float:
        if not is_number(value) or not math.isfinite(value):
            return default
        inside = min(max(float(value), low), high)
        return inside if step is None else snap_float_to_step(inside, low, high, step)

    return nearest


def nearest_option(options: Sequence[Any], default: Any) -> Callable[[Any], Any]:
    """The option nearest a value: itself when offered, else the nearest number of numeric
    options (options that depend on another control), else ``default``."""
    numeric = all(map(is_number, options))

    def nearest(value: Any) -> Any:
        if value in options:
            return value
        if numeric and is_number(value):
            return min(options, key=lambda o: (abs(o - value), o))
        return default

    return nearest


def parse_float(raw: str, low: float, high: float) -> float:
    """A finite number in [low, high]; anything else raises :class:`RefusedValue`."""
    if not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d{1,3})?", raw.strip()):
        raise RefusedValue(f"not a number: {raw!r}", "not_number")
    value = float(raw)
    if not math.isfinite(value) or not low <= value <= high:
        raise RefusedValue(f"{value} outside [{low}, {high}]", "out_of_range", low=low, high=high)
    return value


def parse_bool(raw: str) -> bool:
    """``true/false/1/0`` (any case); any other text raises :class:`RefusedValue`."""
    lowered = raw.strip().lower()
    if lowered in ("true", "1", "false", "0"):
        return lowered in ("true", "1")
    raise RefusedValue(f"not a boolean: {raw!r}", "not_boolean")


def parse_choice(raw: str, options: Sequence[Any]) -> Any:
    """The option whose text (:func:`serialise`) is ``raw``, else :class:`RefusedValue`."""
    for option in options:
        if serialise(option) == raw:
            return option
    raise RefusedValue(f"unknown option {raw!r}", "unknown_option")


def parse_text(raw: str) -> str:
    """A link's text as it is (markup characters are text; a long one is the caller's to cut,
    never refused); :class:`RefusedValue` names its first control character, if any."""
    if bad := [c for c in raw if unicodedata.category(c) == "Cc"]:
        name = char_name(bad[0])
        raise RefusedValue(f"text has a control character {name}", "forbidden_char", char=name)
    return raw


def clean_text(text: str) -> str:
    """Typed text with each control character (a pasted tab or line break) made a space."""
    return "".join(" " if unicodedata.category(c) == "Cc" else c for c in text)


def cut_text(text: str, max_len: int) -> str:
    """The first ``max_len`` characters of ``text`` (``ValueError`` when not positive)."""
    if max_len < 1:
        raise ValueError(f"max_len must be positive, got {max_len}")
    return text[:max_len]


def parse_int_list(raw: str, low: int, high: int, max_items: int) -> list[int]:
    """Comma-separated whole numbers in [low, high], 1 to ``max_items`` of them; else
    :class:`RefusedValue`."""
    items = [s for s in raw.split(",") if s.strip()]
    if not items or len(items) > max_items:
        message = f"need 1 to {max_items} numbers, got {len(items)}"
        raise RefusedValue(message, "item_count", high=max_items)
    return [parse_int(s, low, high) for s in items]


def parse_choice_list(raw: str, options: Sequence[Any], max_items: int) -> list[Any]:
    """``"a,b"`` as options, in order: each known, none repeated, at most ``max_items`` of
    them; else :class:`RefusedValue`."""
    by_text = {serialise(o): o for o in options}
    names = [part.strip() for part in raw.split(",") if part.strip()]
    if unknown := [n for n in names if n not in by_text]:
        raise RefusedValue(f"unknown choices {unknown}", "unknown_option")
    if len(set(names)) != len(names):
        raise RefusedValue(f"repeated choices in {names}", "repeated_choice")
    if len(names) > max_items:
        message = f"{len(names)} choices, at most {max_items} allowed"
        raise RefusedValue(message, "too_many_items", count=len(names), high=max_items)
    return [by_text[n] for n in names]
