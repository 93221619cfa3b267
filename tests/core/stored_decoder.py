"""Checks shared by the tests of SmolLM2 with narrower stored weights (bfloat16 matrices in
test_decoder_bf16.py, the file's 4-bit codes in test_decoder_int4.py): the same fixture, the
same properties, each storage held to its own stated tolerances."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_core.experiments import decoding
from tests.core.references import fixture_ids, smollm2_reference

MATRICES = ("qkv", "out", "gate_up", "down")
PROMPTS = 4
MIN_MOVE = 1e-3  # a narrower model does differ from the float32 one (the option works)


def deviations(model, data, index) -> tuple[float, float]:
    """Largest |attention - fixture| and |logits - fixture| of one prompt."""
    out = model(fixture_ids(data, index), need_weights=True)
    attentions = torch.stack(out.attentions)[:, 0]  # (30, 9, L, L)
    attention = (attentions - torch.from_numpy(data[f"attentions_{index}"])).abs().max()
    vocab_ids = torch.from_numpy(data["vocab_ids"])
    subset = out.logits[0][:, vocab_ids] - torch.from_numpy(data[f"logits_subset_{index}"])
    last = out.logits[0, -1] - torch.from_numpy(data[f"logits_last_{index}"])
    return float(attention), max(float(subset.abs().max()), float(last.abs().max()))


def check_within_tolerances(model, data, index, attention_tol: float, logit_tol: float):
    """The prompt's maps and logits within the stated bounds, and not float32's own."""
    attention, logits = deviations(model, data, index)
    assert attention <= attention_tol
    assert logits <= logit_tol
    assert logits > MIN_MOVE  # not secretly float32


def check_next_token(model, data, index) -> None:
    """The fixture's most likely next token has the model's highest logit (or ties it: a
    bfloat16 product can round two close logits to the same value)."""
    logits = model(fixture_ids(data, index)).logits[0, -1]  # (V,)
    expected = int(np.argmax(data[f"logits_last_{index}"]))
    assert float(logits[expected]) == float(logits.max())


def check_cached_decoding(model, meta, data, logit_tol: float) -> None:
    """Cached greedy decoding equals full recomputation within ``logit_tol`` and gives
    transformers' greedy text."""
    steps = len(data["greedy_ids_0"])
    result = decoding.compare_cached_decoding(model, meta["prompts"][0], steps)
    assert max(result.max_logit_difference) < logit_tol
    assert result.token_ids == data["greedy_ids_0"].tolist()  # transformers' greedy text


class ReferenceChecks:
    """The checks every narrower storage passes against the transformers fixture, each held
    to the storage's own stated tolerances.

    A test module subclasses it (``class TestAgainstReference(ReferenceChecks)``), names its
    model's fixture in ``MODEL_FIXTURE`` and sets ``ATTENTION_TOLERANCE`` and
    ``LOGIT_TOLERANCE``; its own tests against the fixture go in the subclass too.
    """

    MODEL_FIXTURE: str
    ATTENTION_TOLERANCE: float
    LOGIT_TOLERANCE: float

    @pytest.fixture
    def model(self, request):
        """The subclass's model, by its fixture's name."""
        return request.getfixturevalue(self.MODEL_FIXTURE)

    @pytest.fixture(scope="class")
    def reference(self):
        """The transformers fixture: ``(meta, data)``."""
        return smollm2_reference()

    @pytest.mark.parametrize("index", range(PROMPTS))
    def test_matches_reference_within_the_stated_tolerances(self, model, reference, index):
        _, data = reference
        check_within_tolerances(model, data, index, self.ATTENTION_TOLERANCE, self.LOGIT_TOLERANCE)

    @pytest.mark.parametrize("index", range(PROMPTS))
    def test_next_token_is_the_reference_one(self, model, reference, index):
        """The fixture's most likely next token has the model's highest logit.

        Logits come out of a bfloat16 product, so two close logits can round to the same
        value (bfloat16, prompt 3: 16.274 and 16.221 both become 16.25); the reference token
        must then be among the tied best.
        """
        _, data = reference
        check_next_token(model, data, index)

    def test_cached_decoding_equals_full_recomputation(self, model, reference):
        meta, data = reference
        check_cached_decoding(model, meta, data, self.LOGIT_TOLERANCE)
