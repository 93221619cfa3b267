"""Numbers as a learner reads them: plain decimals, and powers of ten written out
(``3.0 × 10⁻⁸``), never a program's e-notation (``2.98e-08``). No Streamlit, no torch."""

from __future__ import annotations

import math
import re

SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
NORMAL = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")
SMALLEST_PLAIN = 1e-3  # below this a number is written as a power of ten
LARGEST_PLAIN = 1e5
MINUS = "\u2212"
_POWER = re.compile(r"^([−-]?[\d.]+) × 10([⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+)$")
_BARE_POWER = re.compile(r"^10([⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+)$")  # an axis label at a power of ten: 10⁻⁸


def plain_number(value: float, digits: int = 2) -> str:
    """``value`` with ``digits`` significant digits: decimals between 10⁻³ and 10⁵
    (``0.44``, ``1,024``), else a mantissa times a power of ten (``3.0 × 10⁻⁸``).

    Args:
        value: any float; 0 prints ``0``, NaN ``—``, infinities ``∞`` / ``−∞``.
        digits: significant digits, at least 1.

    Returns:
        The text, with a true minus sign.

    Raises:
        ValueError: for ``digits`` below 1.
    """
    if digits < 1:
        raise ValueError(f"digits must be at least 1, got {digits}")
    if math.isnan(value):
        return "—"
    if math.isinf(value):
        return "∞" if value > 0 else f"{MINUS}∞"
    if value == 0:
        return "0"
    size = abs(value)
    if SMALLEST_PLAIN <= size < LARGEST_PLAIN:
        decimals = max(0, digits - 1 - math.floor(math.log10(size)))
        text = f"{value:,.{decimals}f}"
    else:
        mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
        text = f"{mantissa} × 10{str(int(exponent)).translate(SUPERSCRIPT)}"
    return text.replace("-", MINUS)


def parse_plain_number(text: str) -> float:
    """The float a :func:`plain_number` text (or a log axis's ``10⁻⁸``) shows (for tests and
    links).

    Raises:
        ValueError: for text that is not such a number.
    """
    cleaned = text.strip().replace(MINUS, "-").replace(",", "")
    if cleaned == "∞":
        return math.inf
    if cleaned == "-∞":
        return -math.inf
    bare = _BARE_POWER.match(cleaned)
    if bare:
        return 10.0 ** int(bare.group(1).translate(NORMAL))
    match = _POWER.match(cleaned)
    if match:
        return float(match.group(1)) * 10.0 ** int(match.group(2).translate(NORMAL))
    return float(cleaned)
