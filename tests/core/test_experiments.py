"""Tests of attention_core.experiments against independent references."""

from __future__ import annotations

import numpy as np
import pytest

from attention_core.experiments import PATTERN_NAMES, head_patterns

# --- head patterns ---------------------------------------------------------------------


def test_head_patterns_names_and_rows_sum_to_one():
    patterns = head_patterns(seq_len=6, seed=3)
    assert tuple(patterns) == PATTERN_NAMES
    assert len(patterns) == 8
    for name, pattern in patterns.items():
        assert pattern.shape == (6, 6), name
        assert (pattern >= 0).all(), name
        np.testing.assert_allclose(pattern.sum(axis=1), np.ones(6), atol=1e-12, err_msg=name)


def test_head_patterns_literal_small_matrices():
    patterns = head_patterns(seq_len=3)
    forward = np.array([[1 / 3, 1 / 3, 1 / 3], [0.0, 0.5, 0.5], [0.0, 0.0, 1.0]])
    backward = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3]])
    local = np.array([[0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3], [0.0, 0.5, 0.5]])
    np.testing.assert_allclose(patterns["forward"], forward)
    np.testing.assert_allclose(patterns["backward"], backward)
    np.testing.assert_allclose(patterns["local"], local)
    np.testing.assert_allclose(patterns["global"], np.full((3, 3), 1 / 3))
    assert np.array_equal(np.triu(patterns["forward"]), patterns["forward"])


def test_head_patterns_random_heads_seeded_and_distinct():
    first = head_patterns(seq_len=5, seed=7)
    again = head_patterns(seq_len=5, seed=7)
    other = head_patterns(seq_len=5, seed=8)
    for i in range(1, 5):
        np.testing.assert_array_equal(first[f"random_{i}"], again[f"random_{i}"])
    assert not np.allclose(first["random_1"], other["random_1"])
    assert not np.allclose(first["random_1"], first["random_2"])


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "10", 10_000])
def test_head_patterns_bad_seq_len(bad):
    with pytest.raises(ValueError, match="seq_len"):
        head_patterns(seq_len=bad)


@pytest.mark.parametrize("bad", [-1, 1.5, None])
def test_head_patterns_bad_seed(bad):
    with pytest.raises(ValueError, match="seed"):
        head_patterns(seed=bad)
