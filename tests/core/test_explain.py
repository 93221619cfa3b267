"""Attention vs explanation and the mask composer (attention_core.experiments.explain,
mask_effects): Spearman on literal data, rollout against its formula written out, the
composed mask against its definition cell by cell, and the composer on SmolLM2."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attention_core.experiments import decoding, explain, heads, mask_effects
from attention_core.experiments.mask_effects import MaskParts, compose_mask
from tests.core.references import needs_smollm2

# ------------------------------------------------------------------ Spearman, rollout


def test_ranks_average_ties():
    assert explain.ranks([10, 20, 20, 5]).tolist() == [2.0, 3.5, 3.5, 1.0]


def test_spearman_without_ties_is_the_textbook_formula():
    a, b = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6], [2.0, 7.0, 1.0, 8.0, 2.8, 1.8]
    # ranks a: 4 1 5 2 6 3; ranks b: 3 5 1 6 4 2 → d: 1 −4 4 −4 2 1, Σd² = 54
    assert explain.spearman(a, b) == pytest.approx(1 - 6 * 54 / (6 * 35))


def test_spearman_with_ties_is_the_pearson_of_mean_ranks():
    # ranks a: 1 2 3 4 5; ranks b: 1 2 3.5 5 3.5
    ra, rb = np.array([1, 2, 3, 4, 5.0]), np.array([1, 2, 3.5, 5, 3.5])
    da, db = ra - 3, rb - 3
    expected = (da @ db) / math.sqrt((da @ da) * (db @ db))
    assert explain.spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) == pytest.approx(expected)
    assert explain.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(explain.spearman([1, 2, 3], [4, 4, 4]))


@pytest.mark.parametrize("a, b", [([1.0], [2.0]), ([1, 2], [1, 2, 3]), ([1, np.nan], [1, 2])])
def test_spearman_refuses_bad_input(a, b):
    with pytest.raises(ValueError):
        explain.spearman(a, b)


def test_rollout_is_the_product_of_mixed_layers():
    first = np.array([[[1.0, 0.0], [0.5, 0.5]], [[1.0, 0.0], [0.1, 0.9]]])  # (H, L, L)
    second = np.array([[[1.0, 0.0], [0.8, 0.2]], [[1.0, 0.0], [0.2, 0.8]]])
    # layer 1: mean row 2 = (0.3, 0.7) → 0.5·I + 0.5·A: row 2 = (0.15, 0.85)
    # layer 2: mean row 2 = (0.5, 0.5) → row 2 = (0.25, 0.75)
    a1 = np.array([[1.0, 0.0], [0.15, 0.85]])
    a2 = np.array([[1.0, 0.0], [0.25, 0.75]])
    rollout = explain.attention_rollout(np.stack([first, second]))
    np.testing.assert_allclose(rollout, a2 @ a1)
    assert rollout[1].tolist() == pytest.approx([0.25 + 0.75 * 0.15, 0.75 * 0.85])


# ------------------------------------------------------------------ the composer


def _defined(parts: MaskParts, length: int) -> np.ndarray:
    """The composed mask cell by cell, from the module docstring's definition."""
    out = np.zeros((length, length), dtype=bool)
    for i in range(length):
        for j in range(i + 1):
            on = [
                parts.window and abs(i - j) <= parts.window // 2,
                parts.sinks and j < parts.sinks,
                parts.prefix and i < parts.prefix,
                parts.stride and (i - j) % parts.stride == 0,
            ]
            out[i, j] = any(on) or not parts.any_on
    return out


@pytest.mark.parametrize(
    "parts",
    [
        MaskParts(),
        MaskParts(window=4),
        MaskParts(window=6, sinks=2),
        MaskParts(prefix=5, stride=3),
        MaskParts(window=2, sinks=1, prefix=3, stride=4),
    ],
    ids=repr,
)
def test_composed_mask_matches_its_definition(parts):
    assert compose_mask(parts, 11).numpy().tolist() == _defined(parts, 11).tolist()


@pytest.mark.parametrize(
    ("parts", "length"),
    [
        (MaskParts(), 11),
        (MaskParts(window=4), 11),
        (MaskParts(window=24), 11),  # a window as long as the text cuts nothing
        (MaskParts(sinks=2), 11),
        (MaskParts(prefix=5, stride=3), 11),
        (MaskParts(window=2, sinks=1, prefix=3, stride=4), 1),
    ],
    ids=repr,
)
def test_kept_share_is_the_defined_masks_share_of_causal_cells(parts, length):
    defined = _defined(parts, length)
    causal_cells = length * (length + 1) // 2
    assert mask_effects.kept_share(parts, length) == defined.sum() / causal_cells
    cuts_nothing = defined.sum() == causal_cells
    assert (mask_effects.kept_share(parts, length) == 1.0) == cuts_nothing


@pytest.mark.parametrize("bad", [{"window": 1}, {"stride": 1}, {"sinks": -1}, {"prefix": 2.5}])
def test_bad_parts_are_refused(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        MaskParts(**bad)


# ------------------------------------------------------------------ SmolLM2


PROMPT = "The keys to the cabinet are on the table, so the keys"


@needs_smollm2
@pytest.mark.slow
def test_explanation_parts_match_their_definitions(decoder32):
    ids = decoder32.tokenize(PROMPT).input_ids
    result = explain.explain_next_token(decoder32, ids)
    batch = heads.as_ids(ids)
    out = decoder32(batch, need_weights=True)
    assert result.target == int(out.logits[0, -1].argmax())
    maps = torch.cat(out.attentions).double().numpy()  # (N, H, L, L)
    np.testing.assert_allclose(result.attention, maps[-1].mean(0)[-1], atol=1e-6)
    np.testing.assert_allclose(result.rollout, explain.attention_rollout(maps)[-1], atol=1e-6)
    magnitude = np.abs(result.saliency)
    assert result.attention_vs_saliency == pytest.approx(
        explain.spearman(result.attention, magnitude)
    )
    assert result.rollout_vs_saliency == pytest.approx(explain.spearman(result.rollout, magnitude))
    assert result.saliency.shape == (len(ids),) and magnitude.max() > 0


@needs_smollm2
@pytest.mark.slow
def test_saliency_is_the_first_order_change_of_the_log_probability(decoder32):
    """Scaling token t's input embedding by (1 + h) changes log P(target) by about
    h · saliency_t: a central difference, the embedding scaled by a hook on the first layer."""
    ids = decoder32.tokenize(PROMPT).input_ids
    result = explain.explain_next_token(decoder32, ids)
    token = int(np.argmax(np.abs(result.saliency)))
    step = 1e-2
    changed = []
    for factor in (1 + step, 1 - step):

        def scaled(module, args, factor=factor):
            x = args[0].clone()  # (1, L, D) the input embeddings
            x[:, token] *= factor
            return (x, *args[1:])

        handle = decoder32.layers[0].register_forward_pre_hook(scaled)
        try:
            logits = decoder32(heads.as_ids(ids)).logits[0, -1].double()
        finally:
            handle.remove()
        changed.append(float(torch.log_softmax(logits, -1)[result.target]))
    derivative = (changed[0] - changed[1]) / (2 * step)
    assert result.saliency[token] == pytest.approx(derivative, rel=0.05, abs=1e-3)


@needs_smollm2
def test_explanation_refuses_int4_and_bad_targets(decoder4, decoder32):
    with pytest.raises(ValueError, match="int4"):
        explain.explain_next_token(decoder4, [1, 2, 3])
    with pytest.raises(ValueError, match="target"):
        explain.explain_next_token(decoder32, [1, 2, 3], target=10**6)


@needs_smollm2
def test_causal_alone_equals_the_plain_forward(decoder4):
    ids = heads.as_ids(decoder4.tokenize(PROMPT).input_ids)
    length = ids.shape[1]
    plain = decoder4(ids).logits
    for mask in (compose_mask(MaskParts(), length), torch.ones(30, length, length, dtype=bool)):
        torch.testing.assert_close(decoder4(ids, mask=mask).logits, plain, rtol=0, atol=0)


@needs_smollm2
def test_a_mask_in_one_layer_changes_only_that_layer(decoder4):
    ids = heads.as_ids(decoder4.tokenize(PROMPT).input_ids)
    length = ids.shape[1]
    sparse = compose_mask(MaskParts(window=2), length)
    per_layer = torch.ones(30, length, length, dtype=bool)
    per_layer[7] = sparse
    out = decoder4(ids, mask=per_layer, need_weights=True).attentions
    plain = decoder4(ids, need_weights=True).attentions
    torch.testing.assert_close(out[6], plain[6], rtol=0, atol=0)
    assert (out[7][0, :, ~sparse] == 0).all() and (plain[7][0, :, ~sparse] > 0).any()


@needs_smollm2
@pytest.mark.slow
def test_window_with_sinks_preset_is_the_decoder_pages_setting(decoder4):
    text = (
        "Once upon a time, in a small village at the edge of a great forest, there lived a "
        "young girl named Mira who walked to the river every morning."
    )
    ids = decoder4.tokenize(text).input_ids
    parts = mask_effects.WINDOW_WITH_SINKS
    passes, calls = [], []
    hook = decoder4.register_forward_hook(lambda *_: calls.append(1))
    try:
        effect = mask_effects.mask_effects(
            decoder4, ids, parts, layers=(0, 29), on_pass=lambda *done: passes.append(done)
        )
    finally:
        hook.remove()
    assert passes == [(1, 4), (2, 4), (3, 4), (4, 4)]  # full, all layers, two layers alone
    assert len(calls) == mask_effects.forward_passes(2) == 4  # the page's estimate
    table = decoding.window_perplexities(decoder4, text, window_size=16, num_sinks=4)
    rows = table.set_index("setting")["perplexity"]
    assert effect.full_perplexity == pytest.approx(rows["full"], rel=1e-9)
    assert effect.all_layers_perplexity == pytest.approx(rows["window + sinks"], rel=1e-9)
    assert effect.layer_kl.shape == (30,) and (effect.layer_kl[[0, 29]] >= 0).all()
    assert np.isnan(effect.layer_kl[1:29]).all() and np.isnan(effect.layer_perplexity[5])
    assert effect.all_layers_kl > 0 and 0 < effect.kept < 1
    with pytest.raises(ValueError, match="layers"):
        mask_effects.mask_effects(decoder4, ids, parts, layers=(30,))
