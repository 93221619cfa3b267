"""Scalar arguments across attention_core go through attention_core.validation: a bad value
raises a ValueError naming the argument and the value, and bool is never taken for a number."""

import json

import numpy as np
import pytest

from attention_core import estimate_memory, masks
from attention_core.device import resolve_budget
from attention_core.experiments import (
    check_perm,
    compare_softmax_stability,
    head_patterns,
    measure_complexity,
    measure_gradient_norms,
    softmax_overflow_sweep,
)
from attention_core.pretrained import BertConfig, load_tokenizer

CONFIG = {
    "vocab_size": 10,
    "hidden_size": 8,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 16,
    "max_position_embeddings": 32,
    "type_vocab_size": 2,
    "layer_norm_eps": 1e-12,
}


@pytest.mark.parametrize(
    "call, needle",
    [
        (lambda: masks.causal(True), r"L must be a whole number, got True"),
        (lambda: masks.causal(4, 0), r"S must be a whole number >= 1, got 0"),
        (lambda: masks.local(4, 2.0), r"window_size must be a whole number, got 2.0"),
        (lambda: masks.strided(4, -1), r"stride .*got -1"),
        (lambda: masks.block(4, "2"), r"block_size .*got '2'"),
        (lambda: masks.random(4, True), r"density must be a number, got True"),
        (lambda: masks.random(4, 0.0), r"density must be in \(0.0, 1.0\], got 0.0"),
        (lambda: masks.random(4, 0.5, seed=1.5), r"seed must be a whole number, got 1.5"),
        (lambda: masks.combine(masks.causal(2), how="xor"), r"how must be one of .*'xor'"),
        (lambda: estimate_memory("scaled", batch=1, heads=1, L=0, E=4), r"L .*got 0"),
        (lambda: estimate_memory("scaled", batch=True, heads=1, L=2, E=4), r"batch.*True"),
        (lambda: resolve_budget(-5), r"memory_budget.*-5"),
        (lambda: resolve_budget(1.5), r"memory_budget.*1.5"),
        (lambda: head_patterns(0), r"seq_len .*got 0"),
        (lambda: head_patterns(4, seed=-2), r"seed .*got -2"),
        (lambda: check_perm((0, 1, 2.0), 3), r"perm\[2\] .*got 2.0"),
        (lambda: compare_softmax_stability(logit_scale=1e5, dtype="float16"), r"logit_scale"),
        (lambda: compare_softmax_stability(logit_scale=np.inf), r"logit_scale .*inf"),
        (lambda: softmax_overflow_sweep(logit_scales=(1.0, "big")), r"logit_scale .*'big'"),
        (lambda: measure_gradient_norms(scale=False), r"scale .*False"),
        (lambda: measure_gradient_norms(init="zeros"), r"init must be one of .*'zeros'"),
        (lambda: measure_complexity(["scaled"], [4], device="tpu"), r"device .*'tpu'"),
        (lambda: load_tokenizer("missing.json", max_length=1), r"max_length .*got 1"),
    ],
)
def test_bad_scalar_names_the_value(call, needle):
    with pytest.raises(ValueError, match=needle):
        call()


def test_numpy_integers_are_whole_numbers():
    assert masks.causal(np.int64(3)).shape == (3, 3)
    assert masks.random(np.int32(4), np.float32(0.5), seed=np.int64(1)).shape == (4, 4)
    assert check_perm(np.array([1, 0, 2]), 3) == (1, 0, 2)


@pytest.mark.parametrize(
    "field, value, needle",
    [
        ("hidden_size", 0, r"hidden_size .*got 0"),
        ("num_hidden_layers", True, r"num_hidden_layers .*got True"),
        ("vocab_size", None, r"vocab_size .*got None"),
        ("layer_norm_eps", 1.0, r"layer_norm_eps .*got 1.0"),
    ],
)
def test_bert_config_fields_are_checked(tmp_path, field, value, needle):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIG | {field: value}), encoding="utf-8")
    with pytest.raises(ValueError, match=needle):
        BertConfig.from_file(path)
    path.write_text(json.dumps(CONFIG), encoding="utf-8")
    assert BertConfig.from_file(path).layer_norm_eps == 1e-12
