"""shown_scores: blocked cells (the dtype's minimum) read −inf, the others are the core's
scores unchanged; ``copy=False`` writes into the run's own tensor instead of a second array."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dashboard.data.runs import shown_scores, zero_fraction

LOW = torch.finfo(torch.float32).min


def scores_with_blocked_cells() -> torch.Tensor:
    scores = torch.arange(2 * 3 * 3, dtype=torch.float32).view(2, 3, 3) - 4.0  # (H, L, S)
    scores[:, 0, 2] = LOW  # a causal-style block in every head
    scores[1, 2, 0] = LOW
    return scores


def expected() -> np.ndarray:
    values = (np.arange(18, dtype=np.float32).reshape(2, 3, 3)) - 4.0
    values[:, 0, 2] = -np.inf
    values[1, 2, 0] = -np.inf
    return values


def test_copy_leaves_the_tensor_alone():
    scores = scores_with_blocked_cells()
    before = scores.clone()
    shown = shown_scores(scores)
    np.testing.assert_array_equal(shown, expected())
    assert torch.equal(scores, before)
    assert not np.shares_memory(shown, scores.numpy())


def test_in_place_writes_into_the_runs_own_tensor():
    scores = scores_with_blocked_cells()
    shown = shown_scores(scores, copy=False)
    np.testing.assert_array_equal(shown, expected())
    assert np.shares_memory(shown, scores.numpy())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_other_dtypes_come_back_as_float32_with_their_minimum_blocked(dtype):
    scores = torch.tensor([[1.5, torch.finfo(dtype).min], [-2.0, 0.25]], dtype=dtype)
    shown = shown_scores(scores, copy=False)
    assert shown.dtype == np.float32
    np.testing.assert_array_equal(shown, np.array([[1.5, -np.inf], [-2.0, 0.25]], np.float32))


@pytest.mark.parametrize(
    "values",
    [
        np.array([[0.0, 0.5], [0.0, 0.0]], np.float32),
        np.array([[-0.0, np.nan, 1e-45]], np.float32),
        np.zeros((0, 3), np.float32),
    ],
)
def test_zero_fraction_is_the_share_of_exact_zeros(values):
    expected = float((np.abs(values) <= 0.0).mean()) if values.size else 0.0
    assert zero_fraction(values) == pytest.approx(expected, abs=0)
