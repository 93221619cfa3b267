"""Head entropy and mean attention distance against their formulas on literal matrices."""

import math

import numpy as np
import pytest
import torch

from attention_core.experiments import head_entropy, mean_distance


def _row_entropy(row):
    """-Σ w log w of one literal row, with 0·log 0 = 0."""
    return -sum(w * math.log(w) for w in row if w > 0)


HEAD_A = [[1.0, 0.0], [0.5, 0.5]]
HEAD_B = [[0.25, 0.75], [0.0, 1.0]]


def test_entropy_of_literal_heads():
    got = head_entropy(np.array([HEAD_A, HEAD_B]))
    expected_a = (0.0 + math.log(2)) / 2
    expected_b = (-(0.25 * math.log(0.25) + 0.75 * math.log(0.75)) + 0.0) / 2
    assert got.shape == (2,)
    assert got[0] == pytest.approx(expected_a, abs=1e-15)
    assert got[1] == pytest.approx(expected_b, abs=1e-15)
    assert got[1] == pytest.approx(np.mean([_row_entropy(r) for r in HEAD_B]), abs=1e-15)


def test_entropy_zero_weights_add_nothing():
    one_hot = [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    assert head_entropy(one_hot) == 0.0
    uniform = np.full((4, 4), 0.25)
    assert head_entropy(uniform) == pytest.approx(math.log(4), abs=1e-15)
    assert np.ndim(head_entropy(uniform)) == 0


def test_entropy_of_a_row_with_no_key_is_zero():
    weights = [[0.0, 0.0], [0.2, 0.8]]  # query 0 may attend to nothing
    expected = (0.0 - (0.2 * math.log(0.2) + 0.8 * math.log(0.8))) / 2
    assert head_entropy(weights) == pytest.approx(expected, abs=1e-15)


def test_mean_distance_of_literal_heads():
    band = [[0.5, 0.5, 0.0], [0.2, 0.6, 0.2], [0.0, 0.0, 1.0]]
    # rows: 0.5·1 = 0.5; 0.2·1 + 0.2·1 = 0.4; 1·0 = 0 -> mean 0.3
    far = [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    # rows: 1·2 = 2; 1·1 = 1; 1·1 = 1 -> mean 4/3
    got = mean_distance(np.array([band, far]))
    assert got.shape == (2,)
    assert got[0] == pytest.approx(0.3, abs=1e-15)
    assert got[1] == pytest.approx(4 / 3, abs=1e-15)


def test_mean_distance_rectangular_and_tensor_input():
    weights = torch.tensor([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])  # (L=2, S=3)
    # rows: |0 - 2| = 2; |1 - 0| = 1 -> mean 1.5
    assert mean_distance(weights) == pytest.approx(1.5, abs=1e-15)
    assert mean_distance(np.eye(5)) == 0.0


def test_stats_keep_leading_dimensions():
    weights = np.full((2, 3, 4, 4), 0.25)  # (B, H, L, S)
    assert head_entropy(weights).shape == (2, 3)
    assert mean_distance(weights).shape == (2, 3)


@pytest.mark.parametrize(
    "weights, needle",
    [
        ([0.5, 0.5], r"\(2,\)"),
        (np.zeros((2, 0)), r"\(2, 0\)"),
        ([[0.5, np.nan]], "NaN"),
        ([[1.5, -0.5]], "-0.5"),
        ([["a", "b"]], "'a'"),
    ],
)
def test_stats_refuse_bad_weights(weights, needle):
    for stat in (head_entropy, mean_distance):
        with pytest.raises(ValueError, match=needle):
            stat(weights)
