"""Mask builders against literal matrices (True = may attend)."""

import pytest
import torch

from attention_core import masks


def _literal(rows: list[str]) -> torch.Tensor:
    """Bool matrix from rows of '1'/'0' characters."""
    return torch.tensor([[c == "1" for c in row] for row in rows], dtype=torch.bool)


LITERALS = [
    pytest.param(masks.causal, (3,), ["100", "110", "111"], id="causal 3"),
    pytest.param(masks.causal, (2, 4), ["1000", "1100"], id="causal rectangular"),
    # window_size // 2 = 1 key on each side
    pytest.param(masks.local, (5, 3), ["11000", "11100", "01110", "00111", "00011"], id="local 3"),
    # window 4 -> 2 on each side, the same as window 5
    pytest.param(masks.local, (5, 4), ["11100", "11110", "11111", "01111", "00111"], id="local 4"),
    pytest.param(masks.local, (5, 5), ["11100", "11110", "11111", "01111", "00111"], id="local 5"),
    pytest.param(
        masks.strided, (5, 2), ["10101", "01010", "10101", "01010", "10101"], id="strided"
    ),
    pytest.param(masks.block, (5, 2), ["11000", "11000", "00110", "00110", "00001"], id="block"),
]


@pytest.mark.parametrize(("build", "args", "rows"), LITERALS)
def test_mask_is_the_literal_matrix(build, args, rows):
    assert torch.equal(build(*args), _literal(rows))


def test_local_window_1_is_identity():
    assert torch.equal(masks.local(4, 1), torch.eye(4, dtype=torch.bool))


def test_padding_lengths_2_0():
    expected = torch.tensor([[[True, True, False]], [[False, False, False]]])
    got = masks.padding([2, 0], 3)
    assert got.shape == (2, 1, 3)
    assert torch.equal(got, expected)


def test_combine_or_and():
    a = _literal(["100", "110", "111"])
    b = _literal(["110", "011", "001"])
    assert torch.equal(masks.combine(a, b, how="or"), _literal(["110", "111", "111"]))
    assert torch.equal(masks.combine(a, b, how="and"), _literal(["100", "010", "001"]))
    assert torch.equal(masks.combine(a, b), masks.combine(a, b, how="or"))


def test_combine_broadcasts_causal_with_padding():
    got = masks.combine(masks.causal(3), masks.padding([2, 3], 3), how="and")
    expected = torch.stack([_literal(["100", "110", "110"]), _literal(["100", "110", "111"])])
    assert torch.equal(got, expected)


def test_random_density_seed_and_diagonal():
    L = 64
    m1 = masks.random(L, 0.25, seed=3)
    m2 = masks.random(L, 0.25, seed=3)
    m3 = masks.random(L, 0.25, seed=4)
    assert m1.dtype == torch.bool and m1.shape == (L, L)
    assert torch.equal(m1, m2)
    assert not torch.equal(m1, m3)
    assert bool(torch.diagonal(m1).all())
    off_diag = m1[~torch.eye(L, dtype=torch.bool)].float().mean().item()
    assert abs(off_diag - 0.25) < 0.04


def test_random_density_one_is_full():
    assert bool(masks.random(6, 1.0, seed=0).all())


@pytest.mark.parametrize("density", [0, 0.0, -0.1, 1.5])
def test_random_bad_density(density):
    with pytest.raises(ValueError, match="density"):
        masks.random(4, density)


@pytest.mark.parametrize(
    "build",
    [
        lambda: masks.local(4, 0),
        lambda: masks.strided(4, 0),
        lambda: masks.block(4, 0),
        lambda: masks.causal(0),
        lambda: masks.padding([4], 3),
        lambda: masks.padding([-1], 3),
    ],
)
def test_builders_reject_bad_sizes(build):
    with pytest.raises(ValueError):
        build()


def test_combine_rejects_unknown_how_and_non_bool():
    with pytest.raises(ValueError, match="xor"):
        masks.combine(masks.causal(2), how="xor")
    with pytest.raises(ValueError):
        masks.combine(masks.causal(2).float())


def test_causal_lower_right_continues_after_cached_keys():
    # 2 new queries after 3 cached keys: positions 3 and 4
    expected = _literal(["11110", "11111"])
    assert torch.equal(masks.causal_lower_right(2, 5), expected)
    assert torch.equal(masks.causal_lower_right(4), masks.causal(4))


@pytest.mark.parametrize(("L", "S"), [(1, 1), (1, 9), (3, 7), (6, 6)])
def test_causal_lower_right_matches_pytorch(L, S):
    from torch.nn.attention.bias import causal_lower_right

    assert torch.equal(masks.causal_lower_right(L, S), causal_lower_right(L, S)._materialize())


def test_causal_lower_right_rejects_more_queries_than_keys():
    with pytest.raises(ValueError, match="S must be >= L"):
        masks.causal_lower_right(5, 3)


def test_sinks_with_a_causal_window():
    expected_sinks = _literal(["11000", "11000", "11000"])
    assert torch.equal(masks.sinks(3, 2, 5), expected_sinks)
    assert not masks.sinks(2, 0).any()
    window = masks.combine(masks.local(6, 2), masks.sinks(6, 1), how="or")
    causal_window = masks.combine(masks.causal(6), window, how="and")
    expected = _literal(["100000", "110000", "111000", "101100", "100110", "100011"])
    assert torch.equal(causal_window, expected)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_sinks_rejects_bad_counts(bad):
    with pytest.raises(ValueError, match="num_sinks"):
        masks.sinks(4, bad)
