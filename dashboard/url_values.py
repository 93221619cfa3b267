"""Parsing the text of a URL value (``?page.name=raw``) into a control's value: pure
functions, no Streamlit. Each refuses what it cannot read with a :class:`RefusedValue` (a
``ValueError``) naming the value and carrying a reason code, and :mod:`dashboard.state` then
falls back to the default with a notice that says why, in the page's language.

Text is text: a typed or linked sentence may hold ``<``, ``>``, ``{``, ``}``, ``\\``, backticks
or ``javascript:``; it is safe because the app shows user text only as literal text
(:func:`dashboard.literal.literal`, ``st.code``, widget values and chart labels), never as
markdown or HTML. Only control characters (a newline, a tab, a NUL, …) are refused in a link.
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
REASONS = (
    "too_long",
    "not_whole_number",
    "not_number",
    "out_of_range",
    "not_boolean",
    "unknown_option",
    "forbidden_char",
    "item_count",
    "too_many_items",
    "repeated_choice",
    "repeated_key",
    "not_accepted",
    "snapped",
    "moved_in_range",
    "nearest_option",
    "unknown_lesson",
    "room_code",
)
"""The reason codes of :class:`RefusedValue`; each has the locale key
``common.url_reason_<code>``."""


class RefusedValue(ValueError):
    """A URL value that cannot be read, with why.

    Attributes:
        reason: one of :data:`REASONS`.
        detail: the values the reason's message names (e.g. ``{"low": 4, "high": 1024}``).
    """

    def __init__(self, message: str, reason: str, **detail: Any) -> None:
        if reason not in REASONS:
            raise ValueError(f"unknown refusal reason {reason!r}; valid: {', '.join(REASONS)}")
        super().__init__(message)
        self.reason = reason
        self.detail = detail


_CONTROL_NAMES = {"\t": "TAB", "\n": "LINE FEED", "\r": "CARRIAGE RETURN"}


def char_name(char: str) -> str:
    """A character as ``U+000A`` (with its Unicode name when it has one), for a notice.

    Args:
        char: one character.

    Returns:
        E.g. ``"U+0009 (CHARACTER TABULATION)"`` or ``"U+0000"``.
    """
    code = f"U+{ord(char):04X}"
    name = unicodedata.name(char, "") or _CONTROL_NAMES.get(char, "")
    return f"{code} ({name})" if name else code


def control_chars(text: str) -> list[str]:
    """The control characters (Unicode category Cc) of ``text``, in order, each once."""
    found = [c for c in text if unicodedata.category(c) == "Cc"]
    return list(dict.fromkeys(found))


def suggest_key(unknown: str, known: Iterable[str]) -> str | None:
    """The known key closest to ``unknown`` (difflib), when one is close enough.

    Args:
        unknown: a query key no control used, e.g. ``"playground.seqlen"``.
        known: the keys the page uses, e.g. ``["playground.seq_len", "lang"]``.

    Returns:
        The likely intended key (``"playground.seq_len"``), or ``None``.
    """
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
    """Parse a whole number in [low, high].

    Raises:
        RefusedValue: for anything else (text, decimals, out of range).
    """
    if not re.fullmatch(r"[+-]?\d{1,12}", raw.strip()):
        raise RefusedValue(f"not a whole number: {raw!r}", "not_whole_number")
    value = int(raw)
    if not low <= value <= high:
        raise RefusedValue(f"{value} outside [{low}, {high}]", "out_of_range", low=low, high=high)
    return value


def snap_to_step(value: int, low: int, high: int, step: int) -> int:
    """The nearest value a slider of ``low``..``high`` in steps of ``step`` offers (ties go
    down; never past ``high``'s last step).

    Raises:
        ValueError: for a step below 1.
    """
    if step < 1:
        raise ValueError(f"slider step must be at least 1, got {step}")
    last = low + (high - low) // step * step
    return min(max(low + (value - low + (step - 1) // 2) // step * step, low), last)


def snap_float_to_step(value: float, low: float, high: float, step: float) -> float:
    """The nearest value a float slider of ``low``..``high`` in steps of ``step`` offers,
    rounded to the step's decimals (0.1 + 0.2 gives 0.3, not 0.30000000000000004).

    Raises:
        ValueError: for a step that is not positive.
    """
    if not step > 0:
        raise ValueError(f"slider step must be positive, got {step}")
    decimals = max(0, -math.floor(math.log10(step)) + 3)
    last = low + math.floor((high - low) / step + 1e-9) * step
    snapped = low + round((value - low) / step) * step
    return round(min(max(snapped, low), last), decimals)


def nearest_int(low: int, high: int, step: int, default: int) -> Callable[[Any], int]:
    """The nearest value an integer slider of ``low``..``high`` in steps of ``step`` offers
    (``default`` for anything but a whole number)."""

    def nearest(value: Any) -> int:
        if not isinstance(value, int) or isinstance(value, bool):
            return default
        return snap_to_step(min(max(value, low), high), low, high, step)

    return nearest


def nearest_float(
    low: float, high: float, step: float | None, default: float
) -> Callable[[Any], float]:
    """The nearest value of a float widget of ``low``..``high`` (on a slider's steps when
    ``step`` is given; ``default`` for anything but a finite number)."""

    def nearest(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return default
        if not math.isfinite(value):
            return default
        inside = min(max(float(value), low), high)
        return inside if step is None else snap_float_to_step(inside, low, high, step)

    return nearest


def parse_float(raw: str, low: float, high: float) -> float:
    """Parse a finite number in [low, high].

    Raises:
        RefusedValue: for text, NaN, infinities or values out of range.
    """
    if not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d{1,3})?", raw.strip()):
        raise RefusedValue(f"not a number: {raw!r}", "not_number")
    value = float(raw)
    if not math.isfinite(value) or not low <= value <= high:
        raise RefusedValue(f"{value} outside [{low}, {high}]", "out_of_range", low=low, high=high)
    return value


def parse_bool(raw: str) -> bool:
    """Parse ``true/false/1/0`` (any case).

    Raises:
        RefusedValue: for any other text.
    """
    lowered = raw.strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise RefusedValue(f"not a boolean: {raw!r}", "not_boolean")


def parse_choice(raw: str, options: Sequence[Any]) -> Any:
    """Return the option whose text form equals ``raw``.

    Raises:
        RefusedValue: when no option matches.
    """
    for option in options:
        if serialise(option) == raw:
            return option
    raise RefusedValue(f"unknown option {raw!r}", "unknown_option")


def parse_text(raw: str) -> str:
    """Accept a link's text as it is: markup characters (``<``, ``{``, a backtick, …) are
    text. Its length is the caller's to cut (:func:`cut_text`), so a long value is kept in
    part, never refused.

    Raises:
        RefusedValue: when the text holds a control character (a newline, a tab, a NUL, …),
            naming the first one.
    """
    bad = control_chars(raw)
    if bad:
        name = char_name(bad[0])
        raise RefusedValue(f"text has a control character {name}", "forbidden_char", char=name)
    return raw


def clean_text(text: str) -> str:
    """Typed text with each control character (a pasted tab or line break) made a space."""
    return "".join(" " if unicodedata.category(c) == "Cc" else c for c in text)


def cut_text(text: str, max_len: int) -> str:
    """The first ``max_len`` characters of ``text`` (all of it when it is not longer).

    Raises:
        ValueError: when ``max_len`` is not positive.
    """
    if max_len < 1:
        raise ValueError(f"max_len must be positive, got {max_len}")
    return text[:max_len]


def parse_int_list(raw: str, low: int, high: int, max_items: int) -> list[int]:
    """Parse comma-separated whole numbers in [low, high], at most ``max_items`` of them.

    Raises:
        RefusedValue: for an empty list, too many items or any bad item.
    """
    items = [s for s in raw.split(",") if s.strip()]
    if not items or len(items) > max_items:
        message = f"need 1 to {max_items} numbers, got {len(items)}"
        raise RefusedValue(message, "item_count", high=max_items)
    return [parse_int(s, low, high) for s in items]


def parse_choice_list(raw: str, options: Sequence[Any], max_items: int) -> list[Any]:
    """Parse ``"a,b"`` into options, in order: each known, none repeated, at most
    ``max_items`` of them.

    Raises:
        RefusedValue: for an unknown or repeated name, or too many names.
    """
    by_text = {serialise(o): o for o in options}
    names = [part.strip() for part in raw.split(",") if part.strip()]
    unknown = [n for n in names if n not in by_text]
    if unknown:
        raise RefusedValue(f"unknown choices {unknown}", "unknown_option")
    if len(set(names)) != len(names):
        raise RefusedValue(f"repeated choices in {names}", "repeated_choice")
    if len(names) > max_items:
        message = f"{len(names)} choices, at most {max_items} allowed"
        raise RefusedValue(message, "too_many_items", count=len(names), high=max_items)
    return [by_text[n] for n in names]
