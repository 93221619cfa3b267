"""SmolLM2 with its layer matrices kept as the file's 4-bit codes (``weights_dtype="int4"``),
against the transformers fixture and the float32 model.

The codes are exact; the scales, each matrix's input and its output are bfloat16, so the
model moves about as far as the bfloat16 one. The library states how far
(``INT4_ATTENTION_TOLERANCE``, ``INT4_LOGIT_TOLERANCE``, measured here and rounded up) and the
dashboard quotes those constants; these tests hold the model to them and check that it is the
same model: each matrix against the float32 one, the next token of every prompt, transformers'
greedy text, cached decoding, shared weights in a twin.
"""

from __future__ import annotations

import gc

import pytest
import torch

from attention_core.pretrained import (
    INT4_ATTENTION_TOLERANCE,
    INT4_LOGIT_TOLERANCE,
    load_smollm2,
)
from attention_core.pretrained.int4 import Int4Matrix
from tests.core.references import needs_smollm2
from tests.core.stored_decoder import MATRICES, ReferenceChecks

BF16_BOUND = 2.0**-7  # |int4 x·Wᵀ − x·Wᵀ| ≤ 2⁻⁷ · Σ|w x| (see attention_core.pretrained.int4)

pytestmark = needs_smollm2


@pytest.fixture(scope="module")
def int4_load():
    """The int4 model, and one entry per call of its loader's ``after_layer`` callback."""
    calls = []
    model = load_smollm2(weights_dtype="int4", after_layer=lambda: calls.append(len(calls)))
    return model, calls


@pytest.fixture(scope="module")
def int4(int4_load):
    return int4_load[0]


def test_after_layer_is_called_after_each_layer_and_the_embedding(int4_load):
    model, calls = int4_load
    assert len(calls) == model.config.num_layers + 1 == 31


def test_matrices_are_int4_and_small(int4):
    assert int4.weights_dtype == "int4"
    assert int4.embedding.dtype == torch.bfloat16
    assert int4.final_norm.dtype == torch.float32
    for layer in int4.layers:
        assert all(isinstance(getattr(layer, name), Int4Matrix) for name in MATRICES)
        assert layer.attn_norm.dtype == layer.mlp_norm.dtype == torch.float32
    packed = sum(b.numel() * b.element_size() for b in int4.layers.buffers())
    weights = sum(
        getattr(layer, name).shape[0] * getattr(layer, name).shape[1]
        for layer in int4.layers
        for name in MATRICES
    )
    # half a byte a weight, plus a bfloat16 scale and zero per block of 32 (float32: 4 bytes)
    assert packed == weights // 2 + weights // 32 * 4


def test_each_matrix_multiplies_like_the_float32_one(int4):
    fp32 = load_smollm2()
    x = torch.randn(5, 1536, generator=torch.Generator().manual_seed(0))
    for index in (0, 17, 29):
        for name in MATRICES:
            wide = getattr(fp32.layers[index], name)  # (N, K) float32
            inputs = x[:, : wide.shape[1]]  # (5, K)
            exact = inputs.double() @ wide.double().T  # (5, N)
            scale = inputs.double().abs() @ wide.double().abs().T  # (5, N)
            got = getattr(int4.layers[index], name)(inputs).double()
            assert float(((got - exact).abs() / scale).max()) <= BF16_BOUND, (index, name)
    del fp32
    gc.collect()


class TestAgainstReference(ReferenceChecks):
    MODEL_FIXTURE = "int4"
    ATTENTION_TOLERANCE = INT4_ATTENTION_TOLERANCE
    LOGIT_TOLERANCE = INT4_LOGIT_TOLERANCE


def test_a_variant_twin_shares_the_packed_codes(int4):
    twin = int4.with_variant("local", window_size=8)
    assert twin.layers[3].gate_up.packed.data_ptr() == int4.layers[3].gate_up.packed.data_ptr()
    assert twin.variant == "local" and int4.variant == "scaled"


def test_reordering_int4_rows_for_the_other_rope_is_refused(int4):
    with pytest.raises(ValueError, match="int4"):
        int4.with_rope_style("half")
    assert int4.with_rope_style("half", reorder_rows=False).rope_style == "half"
