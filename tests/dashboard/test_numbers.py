"""Numbers as a learner reads them (dashboard.numbers): plain decimals, powers of ten written
out, and read back."""

from __future__ import annotations

import math

import pytest

from dashboard.numbers import parse_plain_number, plain_number


@pytest.mark.parametrize(
    ("value", "digits", "text"),
    [
        (2.98e-08, 2, "3.0 × 10⁻⁸"),
        (0.4423, 2, "0.44"),
        (1e-5, 1, "1 × 10⁻⁵"),
        (-1.2e-4, 2, "−1.2 × 10⁻⁴"),
        (12_345.6, 2, "12,346"),
        (3.2e7, 2, "3.2 × 10⁷"),
        (1.0, 3, "1.00"),
        (0.0, 2, "0"),
        (math.nan, 2, "—"),
        (-math.inf, 2, "−∞"),
    ],
)
def test_plain_number_never_writes_e_notation(value, digits, text):
    shown = plain_number(value, digits)
    assert shown == text
    assert "e" not in shown.lower()


@pytest.mark.parametrize("value", [2.98e-08, 0.4423, -1.2e-4, 12_345.6, 3.2e7, 7.0, -math.inf])
def test_a_plain_number_reads_back_within_its_digits(value):
    assert parse_plain_number(plain_number(value, 3)) == pytest.approx(value, rel=5e-3)


def test_bad_digits_and_text_are_refused():
    with pytest.raises(ValueError, match="digits must be at least 1, got 0"):
        plain_number(1.0, 0)
    with pytest.raises(ValueError):
        parse_plain_number("three")
