"""The general GGUF loader against an independent float64 forward of the same file.

Tiny files are written with ``gguf.GGUFWriter`` (``tests/tiny_gguf.py``): each architecture
(llama, qwen2, qwen3), each storage type, tied and separate output, grouped-query attention,
a head size that is not width / heads, linear RoPE scaling and Llama 3's frequency factors.
The reference (:func:`tests.tiny_gguf.reference_forward`) runs from ``gguf.quants``'
decoded values with llama.cpp's semantics written out in float64; the loaded decoder's logits
and every attention map must equal it (float32 loads within :data:`FLOAT32_TOLERANCE`, the
bfloat16 and int4 forms within their named tolerances). Then the memory budget, the plan's
bytes against what the decoder really holds, and every bad file, each a ``ValueError`` that
names the field.
"""

from __future__ import annotations

import pytest
import torch

from attention_core.device import MemoryBudgetError
from attention_core.pretrained import gguf_model, load_gguf, read_gguf_card, weights_bytes
from attention_core.pretrained.checks import map_verified, release_range
from attention_core.pretrained.int4 import Int4Matrix
from tests.tiny_gguf import reference_forward, write_tiny_gguf

pytest.importorskip("gguf")

FLOAT32_TOLERANCE = 1e-5
WIDE_FLOAT32_TOLERANCE = 5e-5
"""Width 256 (the K types' rows): four times the terms in every dot product; measured up to
2.8e-5 on an attention weight and 3.6e-5 on a logit of about 8 (under 5e-6 relative)."""
BF16_TOLERANCE = {"attention": 0.02, "logits": 0.2}
"""bfloat16 weights (8 bits of mantissa) against the float64 model: measured 0.0036 and 0.021
(the test below), with room for other seeds."""
INT4_TOLERANCE = {"attention": 0.03, "logits": 0.25}
"""The int4 kernel (the file's codes exact; bfloat16 inputs, scales and outputs): measured at
most 0.0062 and 0.088 over Q4_0, Q4_1 and Q4_K, with room for other seeds."""
TEXT = "the cat sat on the mat, 猫 🍕 12345"
K_SPEC = {"width": 256, "heads": 4, "kv_heads": 2, "head_dim": 64, "ffn": 256, "layers": 1}
FLOAT_AND_BLOCK_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1")
K_TYPES = ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K")
ALL_MATRICES = ("token_embd", "output", "attn_q", "attn_k", "attn_v", "attn_output",
                "ffn_gate", "ffn_up", "ffn_down")  # fmt: skip


def _every_matrix(type_name: str) -> tuple[tuple[str, str], ...]:
    return tuple((kind, type_name) for kind in ALL_MATRICES)


def _written(tmp_path, name: str = "tiny.gguf", **options):
    return write_tiny_gguf(tmp_path / name, **options)


def _compare(tiny, loaded, *, tolerance: dict[str, float] | float, start: int = 0):
    """Max differences of logits and of every attention map against the reference."""
    ids = loaded.tokenize(TEXT).input_ids
    out = loaded(torch.tensor([ids]), need_weights=True, position_offset=start)
    logits, attentions = reference_forward(tiny, ids, start=start)
    logit_gap = float((out.logits[0].double() - logits).abs().max())
    attention_gap = max(
        float((mine[0].double() - ref).abs().max())
        for mine, ref in zip(out.attentions, attentions, strict=True)
    )
    limits = tolerance
    if not isinstance(tolerance, dict):
        limits = dict.fromkeys(("attention", "logits"), tolerance)
    assert attention_gap <= limits["attention"], attention_gap
    assert logit_gap <= limits["logits"], logit_gap
    return attention_gap, logit_gap


@pytest.mark.parametrize("architecture", ["llama", "qwen2", "qwen3"])
@pytest.mark.parametrize("tied", [True, False])
def test_each_architecture_equals_the_reference_in_float32(tmp_path, architecture, tied):
    tiny = _written(tmp_path, architecture=architecture, tied=tied)
    loaded = load_gguf(tiny.path, weights_dtype="float32")
    assert loaded.config.architecture == architecture
    assert (loaded.output is None) == tied
    assert loaded.rope_style == ("interleaved" if architecture == "llama" else "half")
    _compare(tiny, loaded, tolerance=FLOAT32_TOLERANCE)


@pytest.mark.parametrize(
    "options",
    [
        {"heads": 4, "kv_heads": 1},  # one KV head for all (multi-query)
        {"heads": 4, "kv_heads": 4},  # no grouping
        {"architecture": "qwen3", "width": 64, "heads": 4, "head_dim": 32},  # E ≠ D / H
        {"rope_linear": 4.0},  # linear RoPE scaling
        {"rope_factors": True},  # Llama 3's frequency factors
        {"architecture": "qwen2", "rope_linear": 2.0, "rope_base": 1e6},
    ],
    ids=["mqa", "mha", "head-size", "rope-linear", "rope-llama3", "qwen2-scaled"],
)
def test_gqa_head_sizes_and_rope_scaling_equal_the_reference(tmp_path, options):
    tiny = _written(tmp_path, **options)
    loaded = load_gguf(tiny.path, weights_dtype="float32")
    _compare(tiny, loaded, tolerance=FLOAT32_TOLERANCE)
    _compare(tiny, loaded, tolerance=FLOAT32_TOLERANCE, start=37)  # RoPE at other positions


def test_rope_scaling_changes_the_model(tmp_path):
    plain = load_gguf(_written(tmp_path, "a.gguf").path, weights_dtype="float32")
    scaled_file = _written(tmp_path, "b.gguf", rope_factors=True)
    scaled = load_gguf(scaled_file.path, weights_dtype="float32")
    ids = torch.tensor([plain.tokenize(TEXT).input_ids])
    assert not torch.allclose(plain(ids).logits, scaled(ids).logits, atol=1e-3)


@pytest.mark.parametrize("type_name", FLOAT_AND_BLOCK_TYPES + K_TYPES)
def test_every_storage_type_decodes_to_the_reference_model(tmp_path, type_name):
    tiny = _written(tmp_path, types=_every_matrix(type_name), tied=False, **K_SPEC)
    loaded = load_gguf(tiny.path, weights_dtype="float32")
    _compare(tiny, loaded, tolerance=WIDE_FLOAT32_TOLERANCE)


def test_the_kv_cache_continues_exactly(tmp_path):
    loaded = load_gguf(_written(tmp_path, architecture="qwen3").path, weights_dtype="float32")
    ids = torch.tensor([loaded.tokenize(TEXT).input_ids])
    full = loaded(ids)
    first = loaded(ids[:, :5])
    rest = loaded(ids[:, 5:], cache=first.cache)
    assert torch.allclose(rest.logits, full.logits[:, 5:], atol=FLOAT32_TOLERANCE)


@pytest.mark.parametrize("type_name", ["Q4_0", "Q4_1", "Q4_K"])
def test_auto_keeps_4_bit_matrices_on_the_int4_kernel(tmp_path, type_name):
    types = _every_matrix(type_name) + (("attn_v", "Q6_K"), ("token_embd", "Q8_0"))
    tiny = _written(tmp_path, types=types, tied=False, **K_SPEC)
    loaded = load_gguf(tiny.path)  # "auto"
    layer = loaded.layers[0]
    assert isinstance(layer.gate_up, Int4Matrix) and isinstance(layer.down, Int4Matrix)
    assert isinstance(loaded.output, Int4Matrix)
    assert layer.qkv.dtype == torch.bfloat16  # v is Q6_K: the stacked q/k/v share one form
    assert loaded.embedding.dtype == torch.bfloat16
    _compare(tiny, loaded, tolerance=INT4_TOLERANCE)


def test_bfloat16_weights_stay_within_their_tolerance(tmp_path):
    tiny = _written(tmp_path, architecture="qwen2", types=_every_matrix("Q8_0"), tied=False)
    loaded = load_gguf(tiny.path, weights_dtype="bfloat16")
    assert loaded.layers[0].qkv.dtype == torch.bfloat16
    _compare(tiny, loaded, tolerance=BF16_TOLERANCE)


def _held_bytes(loaded) -> int:
    return sum(t.numel() * t.element_size() for t in (*loaded.parameters(), *loaded.buffers()))


@pytest.mark.parametrize("dtype", ["auto", "float32", "bfloat16"])
def test_the_planned_bytes_are_what_the_decoder_holds(tmp_path, dtype):
    types = _every_matrix("Q4_K") + (("ffn_down", "Q6_K"),)
    tiny = _written(tmp_path, types=types, tied=False, **K_SPEC)
    assert weights_bytes(tiny.path, dtype) == _held_bytes(load_gguf(tiny.path, weights_dtype=dtype))


def test_over_the_budget_is_refused_before_any_weight_is_decoded(tmp_path, monkeypatch):
    tiny = _written(tmp_path, types=_every_matrix("Q4_K"), **K_SPEC)
    needed = weights_bytes(tiny.path, "float32")

    def decoded(*_args):
        raise AssertionError("a weight was decoded before the budget check")

    monkeypatch.setattr(gguf_model, "_materialise", decoded)
    with pytest.raises(MemoryBudgetError, match=r"needs .* over the budget of 1\.0 KiB"):
        load_gguf(tiny.path, weights_dtype="float32", memory_budget=1024)
    with pytest.raises(MemoryBudgetError, match="memory available"):
        monkeypatch.setattr(gguf_model, "available_memory", lambda: needed)  # half is too little
        load_gguf(tiny.path, weights_dtype="float32")
    with pytest.raises(ValueError, match="memory_budget"):
        load_gguf(tiny.path, memory_budget=-5)


def test_int4_is_refused_for_a_file_that_is_not_4_bit(tmp_path):
    tiny = _written(tmp_path, types=_every_matrix("Q8_0"))
    with pytest.raises(ValueError, match=r"blk\.0\.attn_q\.weight.* is Q8_0"):
        load_gguf(tiny.path, weights_dtype="int4")


def test_the_card_reads_the_header_alone(tmp_path):
    types = _every_matrix("Q4_K") + (("ffn_down", "Q6_K"),)
    tiny = _written(tmp_path, architecture="qwen3", types=types, tied=False, **K_SPEC)
    card = read_gguf_card(tiny.path)
    assert (card.architecture, card.layers, card.heads, card.kv_heads, card.head_dim) == (
        "qwen3",
        1,
        4,
        2,
        64,
    )
    assert card.vocab_size == len(tiny.vocab) and not card.tied
    assert dict(card.storage_types) == {"Q4_K": 8, "Q6_K": 1, "F32": 5}
    assert card.parameters == sum(v.size for v in tiny.tensors.values())
    assert card.file_bytes == tiny.path.stat().st_size


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"drop": ("blk.1.ffn_up.weight",)}, r"'blk\.1\.ffn_up\.weight' is missing"),
        ({"drop": ("output_norm.weight",)}, r"'output_norm\.weight' is missing"),
        ({"architecture": "qwen2", "drop": ("blk.0.attn_k.bias",)}, r"attn_k\.bias' is missing"),
        ({"extra": (("llama.expert_count", 8),)}, r"expert_count.* 8"),
        ({"extra": (("llama.rope.scaling.type", "yarn"),)}, r"rope\.scaling\.type.*'yarn'"),
        ({"extra": (("llama.rope.dimension_count", 8),)}, r"rope\.dimension_count.* 8"),
        ({"extra": (("general.architecture", "gemma"),)}, r"general\.architecture.*'gemma'"),
        ({"extra": (("llama.attention.head_count", [4, 4]),)}, r"head_count.*per-layer"),
        ({"extra": (("tokenizer.ggml.unknown_token_id", 10**6),)}, r"unknown_token_id"),
        ({"tokenizer": "llama", "extra": (("tokenizer.ggml.add_space_prefix", 1),)}, "prefix"),
    ],
    ids=[
        "missing-layer",
        "missing-norm",
        "missing-bias",
        "experts",
        "yarn",
        "partial-rope",
        "architecture",
        "per-layer-heads",
        "tokenizer-id",
        "tokenizer-flag",
    ],  # fmt: skip
)
def test_unsupported_or_broken_models_are_refused_by_name(tmp_path, options, match):
    tiny = _written(tmp_path, **options)
    with pytest.raises(ValueError, match=match):
        load_gguf(tiny.path)


@pytest.mark.parametrize(
    ("cut", "match"),
    [
        (lambda data: data[: len(data) // 2], "truncated|past the end|ends"),
        (lambda data: data[:200], "truncated|ends"),
        (lambda data: b"GGML" + data[4:], "not a GGUF file"),
        (lambda data: data[:4] + (9).to_bytes(4, "little") + data[8:], "version 9"),
        (lambda data: data[:8] + (2**60).to_bytes(8, "little") + data[16:], "tensor count"),
    ],
    ids=["half", "header", "magic", "version", "absurd-count"],
)
def test_bad_files_are_value_errors_naming_the_field(tmp_path, cut, match):
    data = _written(tmp_path).path.read_bytes()
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(cut(data))
    with pytest.raises(ValueError, match=match):
        load_gguf(bad)
    with pytest.raises(FileNotFoundError):
        load_gguf(tmp_path / "absent.gguf")


def test_handing_back_a_decoded_range_leaves_the_file_s_bytes_as_they_were(tmp_path):
    path = _written(tmp_path).path
    data = path.read_bytes()
    mapped = map_verified(path, None)
    assert mapped[:] == data  # every page touched
    release_range(mapped, 5, len(data) - 1000)  # not page aligned: the pages wholly inside
    release_range(mapped, 0, 10)  # inside one page: nothing to drop
    assert mapped[:] == data  # dropped pages are read again from the file
    release_range(data, 0, len(data))  # bytes, not a map: nothing to do


def test_the_tokenizer_is_built_on_first_use(tmp_path):
    loaded = load_gguf(_written(tmp_path).path, weights_dtype="float32")
    assert not loaded.tokenizer.is_built  # checked at load, built when first needed
    ids = loaded.tokenize(TEXT).input_ids
    assert loaded.tokenizer.is_built and loaded.decode(ids) == TEXT
    twin = loaded.with_variant("scaled")
    assert twin.tokenizer is loaded.tokenizer


def test_a_sentencepiece_llama_file_tokenizes_like_sentencepiece_and_runs(tmp_path):
    pytest.importorskip("sentencepiece")
    tiny = _written(tmp_path, tokenizer="llama")
    loaded = load_gguf(tiny.path, weights_dtype="float32")
    assert loaded.token_spelling == "sentencepiece"
    for text in (TEXT, "  two spaces", "那只猫 sat"):
        ids = loaded.tokenize(text).input_ids
        assert ids == [1, *tiny.sentencepiece.encode(text)]  # BOS, as the file says
        assert loaded.decode(ids) == text
    _compare(tiny, loaded, tolerance=FLOAT32_TOLERANCE)
