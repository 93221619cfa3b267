"""Head ranking and token spans against literal matrices and explicit sums."""

from __future__ import annotations

import pytest
import torch

from attention_core.pretrained import (
    find_span,
    link_weights,
    rank_heads,
    special_share,
    tokens_in_span,
)


def _maps() -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(2, 3, 5, 5, generator=generator, dtype=torch.float64)
    return scores.softmax(dim=-1)  # (N=2, H=3, L=5, L=5)


def test_link_weights_is_the_explicit_mean_of_sums():
    maps = _maps()
    got = link_weights(maps, [1, 3], [0, 4])  # (2, 3)
    for layer in range(2):
        for head in range(3):
            rows = [maps[layer, head, q, 0] + maps[layer, head, q, 4] for q in (1, 3)]
            assert float(got[layer, head]) == pytest.approx(float(sum(rows) / 2), abs=1e-12)


def test_rank_heads_orders_every_head_with_the_uniform_level():
    maps = _maps()
    ranked = rank_heads(maps, [2], [0, 1])
    assert len(ranked) == 6
    weights = [link.weight for link in ranked]
    assert weights == sorted(weights, reverse=True)
    top = ranked[0]
    assert top.weight == pytest.approx(float(maps[top.layer, top.head, 2, :2].sum()))
    assert top.uniform == pytest.approx(2 / 5) and top.ratio == pytest.approx(top.weight / 0.4)


def test_uniform_rows_sit_at_the_uniform_level():
    maps = torch.full((1, 2, 4, 4), 0.25)
    assert all(link.ratio == pytest.approx(1.0) for link in rank_heads(maps, [0, 1], [3]))
    share = special_share(maps, ["<s>", "a", "b", "</s>"], ("<s>", "</s>"))  # (1, 2)
    torch.testing.assert_close(share, torch.full((1, 2), 0.5))


def test_spans_map_words_to_tokens():
    text = "那只猫坐在垫子上，因为它累"
    offsets = [(0, 0), (0, 1), (1, 2), (2, 3), (3, 5), (5, 6), (6, 7), (7, 8), (8, 9)]
    offsets += [(9, 12), (12, 13), (0, 0)]
    assert tokens_in_span(offsets, *find_span(text, "垫子")) == [5, 6]  # two tokens
    assert tokens_in_span(offsets, *find_span(text, "它")) == [9]  # inside 因为它
    assert find_span("它和它", "它", occurrence=1) == (2, 3)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: find_span("abc", "x"), "does not appear"),
        (lambda: find_span("abc", ""), "non-empty"),
        (lambda: find_span("abc", "a", occurrence=-1), "occurrence"),
        (lambda: tokens_in_span([(0, 0), (0, 2)], 5, 6), "no token"),
        (lambda: tokens_in_span([(0, 2)], 1, 1), "empty"),
        (lambda: link_weights(torch.ones(2, 3, 4), [0], [1]), "N, H, L, L"),
        (lambda: link_weights(_maps(), [5], [0]), "queries"),
        (lambda: link_weights(_maps(), [0], []), "keys"),
        (lambda: special_share(_maps(), ["a"] * 5, ("<s>",)), "no token"),
        (lambda: special_share(_maps(), ["a"] * 4, ("a",)), "4 tokens"),
    ],
)
def test_bad_arguments_are_value_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()
