"""Heads at work (attention_core.experiments.heads, pretrained.ablation): census scores
against explicit loops over the float32 maps, ablation against a re-forward with the head's
output-projection columns zeroed, attribution against a central finite difference, and the
copy test on the int4 decoder the page loads."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from attention_core.experiments import head_ablation, heads
from attention_core.pretrained import load_minilm, model_available
from tests.core.references import encoder_with_heads_zeroed, needs_smollm2

COPY_LENGTH, COPY_SEED = 24, 0
# measured on the int4 decoder, seed 0: second copy 4.85 nats with every head on, 11.23 with
# the top-5 induction heads off, 4.87 with the 5 weakest heads of layers 17-18 off; first copy
# 14.25. The thresholds sit well between.
COPY_BREAK_RISE = 4.0
COPY_KEEP_RISE = 0.5


# ------------------------------------------------------------------ without a model


def _loop_scores(w: np.ndarray, ids: list[int]) -> dict[str, float]:
    """The census definitions for one (L, L) map, as explicit Python loops."""
    L = len(ids)
    prev = sum(w[i, i - 1] for i in range(1, L)) / (L - 1)
    sink = sum(w[i, 0] for i in range(1, L)) / (L - 1)
    self_ = sum(w[i, i] for i in range(1, L)) / (L - 1)
    local = sum(sum(w[i, j] for j in range(L) if abs(i - j) <= 3) for i in range(1, L)) / (L - 1)
    hits = []
    for i in range(L):
        earlier = [j for j in range(i) if ids[j] == ids[i]]
        if earlier:
            hits.append(w[i, max(earlier) + 1])
    induction = sum(hits) / len(hits) if hits else float("nan")
    scores = {"previous_token": prev, "sink": sink, "self": self_, "local": local}
    return {**scores, "induction": induction}


def _check_against_loops(weights: torch.Tensor, ids: list[int], scores: dict) -> None:
    maps = weights.double().numpy()
    for layer in range(maps.shape[0]):
        for head in range(maps.shape[1]):
            expected = _loop_scores(maps[layer, head], ids)
            for name, value in expected.items():
                np.testing.assert_allclose(
                    scores[name][layer, head], value, rtol=1e-5, atol=1e-6, err_msg=name
                )


def test_pattern_scores_equal_loops_on_random_maps():
    generator = torch.Generator().manual_seed(3)
    raw = torch.rand(2, 3, 9, 9, generator=generator).tril()  # (N, H, L, L), causal
    weights = raw / raw.sum(-1, keepdim=True)
    ids = [5, 7, 9, 5, 7, 2, 9, 9, 5]
    _check_against_loops(weights, ids, heads.pattern_scores(weights, ids))


def test_induction_is_nan_without_repeats():
    weights = torch.eye(4).expand(1, 2, 4, 4)
    scores = heads.pattern_scores(weights, [1, 2, 3, 4])
    assert np.isnan(scores["induction"]).all()
    assert scores["self"][0, 0] == 1.0 and scores["previous_token"][0, 0] == 0.0


def test_labels_follow_the_written_rule():
    shape = (1, 7)
    base = {name: np.zeros(shape) for name in heads.SCORE_NAMES}
    base["induction"] = np.array([[0.5, np.nan, 0.1, 0.1, 0.1, 0.1, 0.1]])
    base["previous_token"] = np.array([[0.9, 0.6, 0.2, 0.2, 0.2, 0.2, 0.2]])
    base["self"] = np.array([[0, 0, 0.6, 0, 0, 0, 0]])
    base["sink"] = np.array([[0, 0, 0, 0.55, 0.2, 0, 0]])
    base["local"] = np.array([[0, 0, 0, 0, 0.8, 0.2, 0.2]])
    uniform = heads.uniform_entropy(10, causal=True)
    base["entropy"] = np.array([[0, 0, 0, 0, 0, 0.75 * uniform, 0.5 * uniform]])
    labels = heads.head_labels(base, 10, causal=True)
    assert labels.tolist() == [
        ["induction", "previous-token", "self", "first-token", "local", "broad", "mixed"]
    ]


def test_uniform_entropy_is_the_mean_log_of_visible_keys():
    assert heads.uniform_entropy(4, causal=True) == pytest.approx(np.log([1, 2, 3, 4]).mean())
    assert heads.uniform_entropy(4, causal=False) == pytest.approx(np.log(4))


def test_ranked_heads_orders_and_filters():
    scores = np.array([[0.1, 0.9, np.nan], [0.5, 0.2, 0.7]])
    assert head_ablation.ranked_heads(scores, 2) == ((0, 1), (1, 2))
    assert head_ablation.ranked_heads(scores, 2, largest=False) == ((0, 0), (1, 1))
    assert head_ablation.ranked_heads(scores, 1, layers=[1]) == ((1, 2),)
    with pytest.raises(ValueError, match="layers"):
        head_ablation.ranked_heads(scores, 1, layers=[2])


@pytest.mark.parametrize("bad", [[], [[1, 2], [3, 4]], [0.5, 1.5]])
def test_as_ids_refuses_bad_input(bad):
    with pytest.raises(ValueError, match="input_ids"):
        heads.as_ids(bad)


# ------------------------------------------------------------------ SmolLM2


def _zeroed_twin(decoder, pairs):
    """The reference ablation: the head's columns of the output projection set to zero."""
    twin = decoder._twin()
    size = decoder.config.head_dim
    for layer, head in pairs:
        weight = twin.layers[layer].out.detach().clone()  # (D, H·E)
        weight[:, head * size : (head + 1) * size] = 0.0
        twin.layers[layer].out = nn.Parameter(weight, requires_grad=False)
    return twin


@needs_smollm2
@pytest.mark.slow
def test_census_equals_loops_over_float32_maps(decoder32):
    ids = head_ablation.repeated_tokens(decoder32, 6, 1)
    census = heads.census(decoder32, ids)
    weights = torch.cat(decoder32(heads.as_ids(ids), need_weights=True).attentions)
    _check_against_loops(weights, list(ids), census.scores)
    assert census.labels.shape == (30, 9) and set(census.labels.ravel()) <= set(heads.LABELS)
    assert census.input_ids == tuple(int(i) for i in ids)
    with pytest.raises(ValueError):
        census.scores["sink"][0, 0] = 1.0  # read-only


@needs_smollm2
def test_repeated_tokens_are_seeded_and_avoid_control_tokens(decoder4):
    ids = head_ablation.repeated_tokens(decoder4, 24, 5)
    assert ids.shape == (49,) and ids[0] == decoder4.tokenizer.token_to_id(head_ablation.BOS_TOKEN)
    assert (ids[1:25] == ids[25:]).all() and len(set(ids[1:25].tolist())) == 24
    assert min(ids[1:]) >= 17  # ids 0..16 are SmolLM2's control tokens
    assert (head_ablation.repeated_tokens(decoder4, 24, 5) == ids).all()
    assert not (head_ablation.repeated_tokens(decoder4, 24, 6) == ids).all()


@needs_smollm2
@pytest.mark.slow
def test_zero_ablation_equals_zeroed_output_columns(decoder32):
    pairs = ((3, 2), (10, 7), (29, 0))
    ids = heads.as_ids(decoder32.tokenize("The cat sat on the mat because it was tired.").input_ids)
    ablated = decoder32(ids, ablate=pairs).logits
    reference = _zeroed_twin(decoder32, pairs)(ids).logits
    torch.testing.assert_close(ablated, reference, rtol=0, atol=1e-4)
    assert (ablated - decoder32(ids).logits).abs().max() > 0.1


@needs_smollm2
def test_mean_ablation_of_one_token_changes_nothing(decoder4):
    ids = heads.as_ids([1, 504])
    plain = decoder4(ids[:, :1]).logits
    meaned = decoder4(ids[:, :1], ablate=((5, 5),), ablation="mean").logits
    torch.testing.assert_close(meaned, plain, rtol=0, atol=0)
    zeroed = decoder4(ids[:, :1], ablate=((5, 5),)).logits
    assert (zeroed - plain).abs().max() > 0


@needs_smollm2
@pytest.mark.parametrize("bad", [((30, 0),), ((0, 9),), ((-1, 0),), ((1,),), "0,1", ((1.0, 2),)])
def test_a_bad_pair_is_named(decoder4, bad):
    with pytest.raises(ValueError, match="ablate"):
        decoder4(heads.as_ids([1, 2]), ablate=bad)


@needs_smollm2
def test_bad_ablation_and_head_scale_are_refused(decoder4):
    ids = heads.as_ids([1, 2])
    with pytest.raises(ValueError, match="ablation"):
        decoder4(ids, ablate=((0, 0),), ablation="half")
    with pytest.raises(ValueError, match="head_scale"):
        decoder4(ids, head_scale=torch.ones(9, 30))
    with pytest.raises(ValueError, match="int4"):
        head_ablation.attribution(decoder4, [1, 2, 3])


@needs_smollm2
@pytest.mark.slow
def test_attribution_equals_central_difference(decoder32):
    ids = head_ablation.repeated_tokens(decoder32, 8, 2)
    positions = list(range(8, 16))  # the second copy's predictions
    estimate = head_ablation.attribution(decoder32, ids, positions=positions)
    chosen = ((17, 4), (18, 6), (2, 1), (25, 3))
    step = 1e-2
    scale = torch.ones(2 * len(chosen), 30, 9)
    for k, (layer, head) in enumerate(chosen):
        scale[2 * k, layer, head] = 1 + step
        scale[2 * k + 1, layer, head] = 1 - step
    batch = heads.as_ids(ids).expand(len(scale), -1)
    logits = decoder32(batch, head_scale=scale).logits.double()  # (2k, L, V)
    targets = torch.tensor(ids[9:17])
    log_probs = torch.log_softmax(logits[:, 8:16], dim=-1)  # (2k, 8, V)
    loss = -log_probs.gather(2, targets.expand(len(scale), -1)[..., None])[..., 0].mean(-1)
    for k, pair in enumerate(chosen):
        derivative = (loss[2 * k] - loss[2 * k + 1]) / (2 * step)
        assert estimate[pair] == pytest.approx(-float(derivative), rel=0.02, abs=2e-3), pair
    assert abs(estimate).max() > 0.05


@needs_smollm2
@pytest.mark.slow
def test_ablation_effects_equal_single_ablations(decoder4):
    ids = head_ablation.repeated_tokens(decoder4, 8, 2)
    pairs = ((18, 6), (0, 0), (17, 4))
    passes, calls = [], []
    hook = decoder4.register_forward_hook(lambda *_: calls.append(1))
    try:
        effects = head_ablation.ablation_effects(
            decoder4, ids, pairs, on_pass=lambda *done: passes.append(done)
        )
    finally:
        hook.remove()
    assert passes[0] == (1, 4) and passes[-1] == (4, 4)  # the intact pass, then the heads
    assert (
        len(calls) == head_ablation.ablation_forward_calls(len(pairs)) == 2
    )  # the page's estimate
    assert [done for done, _ in passes] == sorted({done for done, _ in passes})
    base = head_ablation.token_losses(decoder4, ids).mean()
    for k, pair in enumerate(pairs):
        alone = head_ablation.token_losses(decoder4, ids, ablate=(pair,)).mean()
        assert effects[k] == pytest.approx(alone - base, abs=1e-4)


@needs_smollm2
@pytest.mark.slow
def test_copy_test_breaks_without_induction_heads_only(decoder4):
    ids = head_ablation.repeated_tokens(decoder4, COPY_LENGTH, COPY_SEED)
    induction = heads.census(decoder4, ids).scores["induction"]
    top = head_ablation.ranked_heads(induction, 5)
    layers = sorted({layer for layer, _ in top})
    weakest = head_ablation.ranked_heads(induction, 5, largest=False, layers=layers)
    plain = head_ablation.copy_test(decoder4, COPY_LENGTH, COPY_SEED)
    broken = head_ablation.copy_test(decoder4, COPY_LENGTH, COPY_SEED, ablate=top)
    kept = head_ablation.copy_test(decoder4, COPY_LENGTH, COPY_SEED, ablate=weakest)
    assert plain.second < plain.first - 5  # the model copies
    assert broken.second > plain.second + COPY_BREAK_RISE
    assert kept.second < plain.second + COPY_KEEP_RISE


@needs_smollm2
@pytest.mark.slow
def test_batched_copy_tests_equal_the_readable_path(decoder4):
    """One batched forward (the page's) gives what one copy_test per set of heads gives."""
    sets = ((), ((18, 6), (17, 5), (17, 3)), ((17, 0), (18, 1)))
    batched = head_ablation.copy_tests(decoder4, COPY_LENGTH, COPY_SEED, sets)
    for result, pairs in zip(batched, sets, strict=True):
        alone = head_ablation.copy_test(decoder4, COPY_LENGTH, COPY_SEED, ablate=pairs)
        np.testing.assert_allclose(result.losses, alone.losses, rtol=0, atol=1e-6)
        assert f"{result.second:.2f}" == f"{alone.second:.2f}"
        assert f"{result.first:.2f}" == f"{alone.first:.2f}"
    assert batched[1].second > batched[0].second + 2  # 3 of the 5 induction heads off
    with pytest.raises(ValueError, match=r"\(30, 0\)"):
        head_ablation.copy_tests(decoder4, COPY_LENGTH, COPY_SEED, ((), ((30, 0),)))
    with pytest.raises(ValueError, match="at least one"):
        head_ablation.copy_tests(decoder4, COPY_LENGTH, COPY_SEED, ())


needs_minilm = pytest.mark.skipif(not model_available(), reason="all-MiniLM-L6-v2 not installed")


@pytest.fixture(scope="module")
def encoder():
    return load_minilm()


@needs_minilm
def test_encoder_ablation_equals_zeroed_output_columns(encoder):
    ids = torch.tensor([encoder.tokenize("The cat sat on the mat.").input_ids])
    pairs = ((1, 3), (4, 11))
    with torch.no_grad():
        ablated = encoder(ids, ablate=pairs).hidden_states
        twin = encoder_with_heads_zeroed(encoder, pairs)
        reference = twin(ids).hidden_states
        plain = encoder(ids).hidden_states
    torch.testing.assert_close(ablated, reference, rtol=0, atol=1e-5)
    assert (ablated - plain).abs().max() > 1e-2
    with pytest.raises(ValueError, match=r"\(6, 0\)"):
        encoder(ids, ablate=((6, 0),))


@needs_minilm
def test_encoder_census_with_a_link_equals_loops(encoder):
    ids = encoder.tokenize("The cat sat on the mat because it was tired.").input_ids
    census = heads.census(encoder, ids, link=([8], [2]))
    with torch.no_grad():
        weights = torch.cat(encoder(heads.as_ids(ids), need_weights=True).attentions)
    _check_against_loops(weights, list(ids), census.scores)
    np.testing.assert_allclose(census.scores["link"], weights[:, :, 8, 2].double(), atol=1e-7)
    assert census.labels.shape == (6, 12)


def _control_by_loop(scores: np.ndarray, chosen) -> list[tuple[int, int]]:
    """The matched control written out: every other head, sorted by (distance of its layer
    to the chosen layers, score, index), the first len(chosen) of them."""
    own = {layer for layer, _ in chosen}
    others = [
        (layer, head)
        for layer in range(scores.shape[0])
        for head in range(scores.shape[1])
        if (layer, head) not in chosen
    ]
    key = lambda p: (min(abs(p[0] - c) for c in own), scores[p], p)  # noqa: E731
    return sorted(others, key=key)[: len(chosen)]


@pytest.mark.parametrize(
    "chosen",
    [
        ((3, 1),),
        ((3, 0), (3, 1), (3, 2), (3, 3)),  # the whole layer: the control comes from 2 and 4
        ((0, 0), (0, 1), (0, 2), (0, 3), (5, 2)),  # layer 0 full, the rest from layers 1, 4
        ((2, 0), (2, 1), (2, 2), (2, 3), (3, 0), (3, 1), (3, 2), (3, 3)),
    ],
)
def test_control_heads_are_matched_in_number_and_nearest_in_layer(chosen):
    scores = np.random.default_rng(len(chosen)).normal(size=(6, 4))
    control = head_ablation.control_heads(scores, chosen)
    assert len(control) == len(chosen) and not set(control) & set(chosen)
    assert list(control) == _control_by_loop(scores, chosen)


def test_control_heads_refuse_a_bad_pair():
    with pytest.raises(ValueError, match="9"):
        head_ablation.control_heads(np.zeros((6, 4)), ((9, 0),))
    assert head_ablation.control_heads(np.zeros((6, 4)), ()) == ()


@pytest.mark.parametrize(("count", "calls"), [(0, 1), (1, 2), (4, 2), (5, 3), (30, 9)])
def test_ablation_forward_calls_count_the_intact_pass_and_each_batch(count, calls):
    assert head_ablation.ablation_forward_calls(count) == 1 + math.ceil(
        count / head_ablation.ATTRIBUTION_BATCH
    )
    assert head_ablation.ablation_forward_calls(count) == calls
    with pytest.raises(ValueError, match="heads"):
        head_ablation.ablation_forward_calls(-1)
