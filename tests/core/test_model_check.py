"""The one-click model check (attention_core.experiments.model_check) on tiny GGUF files
(tests/tiny_gguf.py, random weights, no real model: the fast tier): the cache check against
a deliberately broken cache, the weights check against the file's own float64 forward pass,
and the perplexity against torch's cross-entropy computed separately in float64."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from attention_core.experiments import model_check
from attention_core.experiments.model_check import (
    CHECK_PROMPT,
    PERPLEXITY_TEXT,
    PERPLEXITY_WARNING,
    ModelCheck,
    check_cached_decoding,
    check_model,
    check_perplexity,
    compare_weights,
)
from attention_core.pretrained import DecoderCache, load_gguf
from tests.tiny_gguf import reference_forward, write_tiny_gguf

ROUND_OFF = 1e-4  # float32 against float64, or a cached step against the whole prompt
Q4_MATRICES = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


@pytest.fixture(scope="module")
def tiny_written(tmp_path_factory):
    """A tiny llama file with float32 matrices and what it holds."""
    return write_tiny_gguf(tmp_path_factory.mktemp("tiny") / "tiny.gguf", seed=3)


@pytest.fixture(scope="module")
def tiny_f32(tiny_written):
    return load_gguf(tiny_written.path, weights_dtype="float32")


@pytest.fixture(scope="module")
def tiny_bf16(tiny_written):
    return load_gguf(tiny_written.path, weights_dtype="bfloat16")


@pytest.fixture(scope="module")
def tiny_q4_pair(tmp_path_factory):
    """A tiny file with Q4_1 layer matrices, loaded as its 4-bit codes and in float32."""
    path = tmp_path_factory.mktemp("tiny_q4") / "q4.gguf"
    write_tiny_gguf(path, types=tuple((kind, "Q4_1") for kind in Q4_MATRICES), seed=4)
    return load_gguf(path, weights_dtype="int4"), load_gguf(path, weights_dtype="float32")


class _BrokenCache:
    """A decoder whose cache is damaged between the steps: ``how`` is ``"values"`` (every
    cached value halved) or ``"position"`` (the next token placed one position too far)."""

    def __init__(self, inner, how: str) -> None:
        self.inner, self.how, self.config = inner, how, inner.config

    def tokenize(self, text):
        return self.inner.tokenize(text)

    def __call__(self, ids, *, cache=None, **options):
        if cache is not None and self.how == "values":
            cache = DecoderCache(
                cache.keys, tuple(v * 0.5 for v in cache.values), cache.next_position
            )
        elif cache is not None:
            cache = DecoderCache(cache.keys, cache.values, cache.next_position + 1)
        return self.inner(ids, cache=cache, **options)


def _ids(decoder, text: str, limit: int) -> list[int]:
    return decoder.tokenize(text).input_ids[:limit]


def test_cached_decoding_equals_the_full_pass_up_to_round_off(tiny_f32):
    result = check_cached_decoding(tiny_f32)
    assert result.tokens == min(len(_ids(tiny_f32, CHECK_PROMPT, 10**6)), 24)
    assert result.logit_difference < ROUND_OFF
    assert result.attention_difference < ROUND_OFF


@pytest.mark.parametrize("how", ["values", "position"])
def test_the_cache_check_catches_a_broken_cache(tiny_f32, how):
    honest = check_cached_decoding(tiny_f32)
    broken = check_cached_decoding(_BrokenCache(tiny_f32, how))
    assert broken.attention_difference > 1e3 * max(honest.attention_difference, 1e-7)
    assert broken.attention_difference > 1e-3
    assert broken.logit_difference > 1e-3


def test_the_cache_check_runs_at_most_max_tokens(tiny_f32):
    assert check_cached_decoding(tiny_f32, max_tokens=5).tokens == 5
    with pytest.raises(ValueError, match="max_tokens"):
        check_cached_decoding(tiny_f32, max_tokens=1)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        check_cached_decoding(tiny_f32, "a")


def test_the_weights_check_matches_the_files_own_float64_forward(tiny_written, tiny_bf16, tiny_f32):
    result = compare_weights(tiny_bf16, tiny_f32)
    ids = _ids(tiny_bf16, CHECK_PROMPT, model_check.CHECK_MAX_TOKENS)
    logits64, maps64 = reference_forward(tiny_written, ids)  # (L, V), N × (H, L, L)
    out = tiny_bf16(torch.tensor([ids]), need_weights=True)
    logit_gap = float((out.logits[0].double() - logits64).abs().max())
    map_gap = max(
        float((a[0].double() - ref).abs().max())
        for a, ref in zip(out.attentions, maps64, strict=True)
    )
    assert (result.weights_dtype, result.reference_dtype) == ("bfloat16", "float32")
    assert result.tokens == len(ids)
    assert result.logit_difference == pytest.approx(logit_gap, abs=ROUND_OFF)
    assert result.attention_difference == pytest.approx(map_gap, abs=ROUND_OFF)
    assert result.attention_difference > 10 * ROUND_OFF  # bfloat16 does move the maps
    top = int(out.logits[0, -1].argmax()) == int(logits64[-1].argmax())
    assert result.same_next_token == top


def test_the_weights_check_of_int4_codes_and_of_a_model_against_itself(
    tiny_q4_pair, tiny_f32, tmp_path
):
    int4, float32 = tiny_q4_pair
    result = compare_weights(int4, float32)
    assert result.weights_dtype == "int4"
    assert 0 < result.attention_difference < 0.1
    same = compare_weights(tiny_f32, tiny_f32)
    assert same.logit_difference == 0.0 and same.attention_difference == 0.0
    assert same.same_next_token
    other = load_gguf(write_tiny_gguf(tmp_path / "other.gguf", layers=1).path)
    with pytest.raises(ValueError, match="same model"):
        compare_weights(other, tiny_f32)


def test_perplexity_equals_cross_entropy_in_float64(tiny_f32):
    limit = min(model_check.PERPLEXITY_MAX_TOKENS, tiny_f32.config.context_length)
    ids = torch.tensor(_ids(tiny_f32, PERPLEXITY_TEXT, limit))
    result = check_perplexity(tiny_f32)
    logits = tiny_f32(ids[None]).logits[0].double()  # (L, V)
    expected = math.exp(float(F.cross_entropy(logits[:-1], ids[1:], reduction="mean")))
    assert result.tokens == len(ids) == limit
    assert result.perplexity == pytest.approx(expected, rel=1e-9)
    assert result.threshold == PERPLEXITY_WARNING


def test_the_perplexity_warning_follows_the_threshold(tiny_f32):
    value = check_perplexity(tiny_f32, CHECK_PROMPT).perplexity
    assert check_perplexity(tiny_f32, CHECK_PROMPT, threshold=value * 2).suspicious is False
    assert check_perplexity(tiny_f32, CHECK_PROMPT, threshold=value / 2).suspicious is True
    assert check_perplexity(tiny_f32, CHECK_PROMPT, max_tokens=3).tokens == 3
    for bad in (1, 0.5, -3, float("nan"), "25", None):
        with pytest.raises(ValueError, match="threshold"):
            check_perplexity(tiny_f32, CHECK_PROMPT, threshold=bad)


def test_a_model_that_gives_nan_is_suspicious(tiny_f32):
    class NanLogits(_BrokenCache):
        def __call__(self, ids, **options):
            out = self.inner(ids, **options)
            return type(out)(out.logits * float("nan"), out.attentions, out.cache)

    assert check_perplexity(NanLogits(tiny_f32, "none"), CHECK_PROMPT).suspicious


def test_check_model_runs_all_three_and_the_weights_check_only_with_a_reference(tiny_q4_pair):
    int4, float32 = tiny_q4_pair
    full = check_model(int4, float32)
    assert isinstance(full, ModelCheck)
    assert full.weights == compare_weights(int4, float32)
    assert full.cache == check_cached_decoding(int4)
    assert full.perplexity.perplexity == pytest.approx(check_perplexity(int4).perplexity)
    assert check_model(int4).weights is None
