"""attention_core.validation: the one set of scalar checks."""

import math

import numpy as np
import pytest

from attention_core.validation import check_bool, check_choice, check_float, check_int


@pytest.mark.parametrize("value", [3, np.int64(3)])
def test_check_int_accepts_whole_numbers(value):
    out = check_int("n", value, low=1, high=8)
    assert out == 3 and type(out) is int


@pytest.mark.parametrize("value", [True, 3.0, "3", None, np.float32(3)])
def test_check_int_refuses_non_integers(value):
    with pytest.raises(ValueError, match=r"n must be a whole number, got"):
        check_int("n", value)


@pytest.mark.parametrize(("value", "text"), [(0, r"in \[1, 8\]"), (9, r"in \[1, 8\]")])
def test_check_int_range(value, text):
    with pytest.raises(ValueError, match=text) as info:
        check_int("n", value, low=1, high=8)
    assert repr(value) in str(info.value)


def test_check_int_one_sided():
    assert check_int("seed", 0, low=0) == 0
    with pytest.raises(ValueError, match=">= 0"):
        check_int("seed", -1, low=0)


def test_check_float_bounds():
    assert check_float("p", 0.5, low=0, high=1, high_open=True) == 0.5
    assert check_float("p", np.float32(0.25), low=0, high=1) == 0.25
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\), got 1"):
        check_float("p", 1, low=0, high=1, high_open=True)
    with pytest.raises(ValueError, match="> 0"):
        check_float("scale", 0.0, low=0, low_open=True)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_check_float_refuses_non_finite(value):
    with pytest.raises(ValueError, match="finite"):
        check_float("x", value)


@pytest.mark.parametrize("value", [True, "0.5", None, [0.5]])
def test_check_float_refuses_non_numbers(value):
    with pytest.raises(ValueError, match="must be a number"):
        check_float("x", value)


def test_check_bool():
    assert check_bool("flag", True) is True
    assert check_bool("flag", np.bool_(False)) is False
    for bad in (0, 1, "true", None):
        with pytest.raises(ValueError, match="flag must be True or False"):
            check_bool("flag", bad)


def test_check_choice():
    assert check_choice("mask", "causal", ("none", "causal")) == "causal"
    with pytest.raises(ValueError, match=r"mask must be one of 'none', 'causal'; got 'x'"):
        check_choice("mask", "x", ("none", "causal"))
    with pytest.raises(ValueError, match="got True"):
        check_choice("k", True, (1, 2))
    assert check_choice("k", True, (True, False)) is True
    with pytest.raises(ValueError):
        check_choice("k", [1], (1, 2))
