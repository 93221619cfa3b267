"""SmolLM2 with its weight matrices stored in bfloat16, against the same transformers fixture.

The fixture (tests/fixtures/smollm2_reference.npz) is transformers' float32 run of the GGUF
file. bfloat16 keeps 8 mantissa bits: the weights, each linear map's input and its output
are rounded to it, so the model moves by more than float32 noise. The library states how far
(``BF16_ATTENTION_TOLERANCE``, ``BF16_LOGIT_TOLERANCE``, measured here and rounded up) and the
dashboard quotes those constants; these tests hold the model to them, and check that it is
still the same model: the next token of every prompt, cached decoding, half RoPE.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
import torch

from attention_core.pretrained import (
    BF16_ATTENTION_TOLERANCE,
    BF16_LOGIT_TOLERANCE,
    load_smollm2,
)
from attention_core.pretrained.llama_block import linear
from tests.core.mapping import mapped_file, mapped_files
from tests.core.references import needs_smollm2
from tests.core.stored_decoder import MATRICES, ReferenceChecks, deviations

BF16_MANTISSA_STEP = 2.0**-8  # relative spacing of bfloat16 numbers in [1, 2)
LAYERS = 30

pytestmark = needs_smollm2


@pytest.fixture(scope="module")
def bf16():
    return load_smollm2(weights_dtype="bfloat16")


def test_matrices_are_bfloat16_and_norms_float32(bf16):
    assert bf16.weights_dtype == "bfloat16"
    assert bf16.embedding.dtype == torch.bfloat16
    assert bf16.final_norm.dtype == torch.float32
    for layer in bf16.layers:
        assert all(getattr(layer, name).dtype == torch.bfloat16 for name in MATRICES)
        assert layer.attn_norm.dtype == layer.mlp_norm.dtype == torch.float32
    weight_bytes = sum(p.numel() * p.element_size() for p in bf16.parameters())
    weight_count = sum(p.numel() for p in bf16.parameters())
    assert weight_bytes < 2.01 * weight_count  # half of float32's 4 bytes a weight


def test_load_keeps_no_copy_of_the_file(bf16):
    """The GGUF file is mapped while the weights are decoded, then let go: the decoder
    holds its own bfloat16 matrices and nothing of the file."""
    gc.collect()
    assert Path(bf16.source).resolve() not in mapped_files()
    assert all(mapped_file(p) is None for p in bf16.parameters())


def test_weights_are_the_float32_weights_rounded(bf16):
    """Each stored value is the float32 dequantised value rounded to bfloat16."""
    fp32 = load_smollm2()
    assert fp32.weights_dtype == "float32"
    torch.testing.assert_close(bf16.embedding, fp32.embedding.bfloat16(), atol=0, rtol=0)
    for name in MATRICES:
        wide = getattr(fp32.layers[7], name)
        torch.testing.assert_close(getattr(bf16.layers[7], name), wide.bfloat16(), atol=0, rtol=0)
    torch.testing.assert_close(bf16.layers[7].attn_norm, fp32.layers[7].attn_norm, atol=0, rtol=0)
    gap = (bf16.layers[7].gate_up.float() - fp32.layers[7].gate_up).abs()
    assert float((gap / fp32.layers[7].gate_up.abs().clamp_min(1e-30)).max()) <= BF16_MANTISSA_STEP


def test_linear_rounds_input_and_output_to_the_weight_dtype():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 64, generator=generator)
    weight = torch.randn(16, 64, generator=generator)
    torch.testing.assert_close(linear(x, weight), x @ weight.T, atol=1e-5, rtol=1e-5)
    narrow = weight.bfloat16()
    result = linear(x, narrow)
    assert result.dtype == torch.float32
    exact = x.bfloat16().double() @ narrow.double().T  # (3, 5, 16) in float64
    # only the output's rounding to bfloat16 (and the float32 accumulation) is left
    torch.testing.assert_close(result.double(), exact, atol=1e-5, rtol=BF16_MANTISSA_STEP)


class TestAgainstReference(ReferenceChecks):
    MODEL_FIXTURE = "bf16"
    ATTENTION_TOLERANCE = BF16_ATTENTION_TOLERANCE
    LOGIT_TOLERANCE = BF16_LOGIT_TOLERANCE

    def test_half_rope_twin_matches_reference(self, bf16, reference):
        _, data = reference
        attention, logits = deviations(bf16.with_rope_style("half"), data, 1)
        assert attention <= BF16_ATTENTION_TOLERANCE
        assert logits <= BF16_LOGIT_TOLERANCE


def test_cached_step_keeps_the_attention_row(bf16):
    ids = torch.tensor([bf16.tokenize("The old lighthouse keeper climbed the stairs").input_ids])
    full = bf16(ids, need_weights=True)
    prefix = bf16(ids[:, :-1])
    step = bf16(ids[:, -1:], cache=prefix.cache, need_weights=True)
    for layer in (0, 14, LAYERS - 1):
        torch.testing.assert_close(
            step.attentions[layer][0, :, 0],
            full.attentions[layer][0, :, -1],
            atol=BF16_ATTENTION_TOLERANCE,
            rtol=0,
        )
    difference = float((step.logits[0, 0] - full.logits[0, -1]).abs().max())
    assert difference < BF16_LOGIT_TOLERANCE


@pytest.mark.parametrize("bad", ["float16", "bf16", "", None, torch.bfloat16])
def test_bad_weights_dtype_is_a_value_error(bad):
    with pytest.raises(ValueError, match="weights_dtype"):
        load_smollm2(weights_dtype=bad)
