"""The step-by-step walkthrough against the explicit formulas and PyTorch's own SDPA."""

import dataclasses
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_core.experiments import (
    MATRIX_NAMES,
    STEP_D_MODEL,
    explain_cell,
    preset_tokens,
    token_embeddings,
    walk_through_attention,
    walk_through_preset,
)

TOKENS = ("the", "cat", "sat", "on", "the")


def _softmax_rows(scaled, allowed):
    """Row softmax over the allowed keys, in float64 NumPy: exp(s - max) / Σ exp(s - max)."""
    out = np.zeros_like(scaled)
    for i, (row, ok) in enumerate(zip(scaled, allowed, strict=True)):
        e = np.exp(row[ok] - row[ok].max())
        out[i, ok] = e / e.sum()
    return out


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d_k", [1, 3, 8])
def test_intermediates_follow_the_formulas(d_k, causal):
    r = walk_through_attention(TOKENS, d_k=d_k, seed=5, causal=causal)
    n, D = len(TOKENS), STEP_D_MODEL
    assert r.X.shape == (n, D) and r.W_Q.shape == (D, d_k) and r.output.shape == (n, d_k)
    assert all(r.matrices[name].dtype == np.float64 for name in MATRIX_NAMES)
    np.testing.assert_array_equal(r.X, token_embeddings(TOKENS, D, 5).double().numpy())
    np.testing.assert_allclose(r.Q, r.X @ r.W_Q, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(r.K, r.X @ r.W_K, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(r.V, r.X @ r.W_V, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(r.scores, r.Q @ r.K.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(r.scaled, r.scores / math.sqrt(d_k), rtol=1e-12, atol=1e-12)
    allowed = np.tril(np.ones((n, n), bool)) if causal else np.ones((n, n), bool)
    np.testing.assert_array_equal(r.mask, allowed.astype(np.float64))
    np.testing.assert_allclose(r.weights, _softmax_rows(r.scaled, allowed), atol=1e-14)
    np.testing.assert_allclose(r.output, r.weights @ r.V, rtol=1e-12, atol=1e-12)
    assert r.library_max_diff < 1e-12


def test_output_matches_pytorch_sdpa():
    r = walk_through_attention(TOKENS, d_k=4, seed=2, causal=True)
    q, k, v = (torch.from_numpy(m.copy()) for m in (r.Q, r.K, r.V))  # (n, 4) float64
    expected = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True)[0]
    np.testing.assert_allclose(r.output, expected.numpy(), rtol=1e-12, atol=1e-12)


def test_projections_are_seeded_and_scaled():
    a = walk_through_attention(TOKENS, d_k=8, seed=1)
    b = walk_through_attention(TOKENS, d_k=8, seed=1)
    c = walk_through_attention(TOKENS, d_k=8, seed=2)
    np.testing.assert_array_equal(a.W_Q, b.W_Q)
    assert not np.array_equal(a.W_Q, c.W_Q)
    assert not np.array_equal(a.W_Q, a.W_K)  # three separate draws
    # N(0, 1/D) entries: 3 * 64 draws have a variance near 1/8
    draws = np.concatenate([a.W_Q.ravel(), a.W_K.ravel(), a.W_V.ravel()])
    assert 0.5 / STEP_D_MODEL < draws.var() < 2.0 / STEP_D_MODEL


def test_result_is_frozen_and_read_only():
    r = walk_through_attention(TOKENS, d_k=2, seed=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.Q = r.K
    with pytest.raises(ValueError, match="read-only"):
        r.weights[0, 0] = 1.0
    assert list(r.matrices) == list(MATRIX_NAMES)


def test_preset_walkthrough_takes_the_leading_tokens():
    r = walk_through_preset("preset_zh", 6, seed=3, d_k=4, causal=True)
    assert r.tokens == preset_tokens("preset_zh")[:6]
    direct = walk_through_attention(r.tokens, d_k=4, seed=3, causal=True)
    np.testing.assert_array_equal(r.weights, direct.weights)


def test_explain_cell_recomputes_the_weight():
    r = walk_through_attention(TOKENS, d_k=4, seed=9, causal=True)
    cell = explain_cell(r, 3, 1)
    assert cell.dot == pytest.approx(sum(r.Q[3, e] * r.K[1, e] for e in range(4)), abs=1e-12)
    assert cell.sqrt_d_k == 2.0
    assert cell.scaled == pytest.approx(cell.dot / 2.0, abs=1e-12)
    assert cell.allowed and cell.row_max == pytest.approx(r.scaled[3, :4].max(), abs=0)
    assert cell.exp == pytest.approx(math.exp(cell.scaled - cell.row_max), rel=1e-12)
    assert cell.exp / cell.row_sum == pytest.approx(cell.weight, rel=1e-12)
    future = explain_cell(r, 1, 4)
    assert not future.allowed and future.exp == 0.0 and future.weight == 0.0


@pytest.mark.parametrize(
    "call, needle",
    [
        (lambda: walk_through_attention(("a",), d_k=2, seed=0), "got 1"),
        (lambda: walk_through_attention(("a",) * 13, d_k=2, seed=0), "got 13"),
        (lambda: walk_through_attention("abc", d_k=2, seed=0), "'abc'"),
        (lambda: walk_through_attention(TOKENS, d_k=9, seed=0), "d_k.*9"),
        (lambda: walk_through_attention(TOKENS, d_k=2, seed=0, causal=1), "causal.*1"),
        (lambda: walk_through_attention(TOKENS, d_k=2, seed=-3), "seed.*-3"),
        (lambda: walk_through_preset("preset_en", 40, 0, 4), "n_tokens.*40"),
        (lambda: walk_through_preset("preset_fr", 4, 0, 4), "'preset_fr'"),
        (lambda: explain_cell(walk_through_attention(TOKENS, d_k=2, seed=0), 5, 0), "i.*5"),
        (lambda: explain_cell(walk_through_attention(TOKENS, d_k=2, seed=0), 0, -1), "j.*-1"),
    ],
)
def test_walkthrough_bad_input(call, needle):
    with pytest.raises(ValueError, match=needle):
        call()
