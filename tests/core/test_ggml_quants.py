"""Every storage type the GGUF reader decodes, against the ``gguf`` package (llama.cpp's own
writer, reader and numpy dequantisers), and every kind of bad file it must refuse.

Tensors are quantised with ``gguf.quants.quantize`` where it can (F32, F16, BF16, Q4_0 …
Q8_0) and otherwise made of random blocks with finite, small f16 scales (the K types, and the
simple types again so that every code pattern occurs), written to one small file with
``gguf.GGUFWriter``, read back with our reader and compared with ``gguf.quants.dequantize`` of
``gguf.GGUFReader``'s bytes: bit for bit, since both do the same float32 operations in the same
order (a product, then a sum). Q8_K, which ``gguf.quants`` cannot decode, is compared with its
layout written out in numpy here. Each tensor is 3 rows of several blocks, decoded both in one
step and a few blocks at a time, so row and block order are tested.

The bad files are built byte by byte (:func:`gguf_bytes`) so that one field at a time can be
made wrong; each must give a ``ValueError`` naming the field, and the absurd sizes must be
refused before anything large is allocated (traced with ``tracemalloc``).
"""

from __future__ import annotations

import struct
import tracemalloc

import numpy as np
import pytest
import torch

from attention_core.pretrained import ggml_quants
from attention_core.pretrained.ggml_quants import (
    HALF_SCALE_OFFSETS,
    SUPPORTED_TYPES,
    decode,
    stored_bytes,
)
from attention_core.pretrained.gguf_file import GGML_TYPES, dequantize, parse_gguf

gguf = pytest.importorskip("gguf")
quants = pytest.importorskip("gguf.quants")
constants = pytest.importorskip("gguf.constants")

QType = constants.GGMLQuantizationType
ROWS = 3
BLOCKS_PER_ROW = 4
FLOAT_COLS = 40  # F32, F16, BF16: one value per "block"
FLOAT_TYPES = ("F32", "F16", "BF16")
QUANTIZABLE = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0")  # gguf.quants.quantize can make them
RANDOM_BLOCK_TYPES = (*QUANTIZABLE, "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K")
Q8_K_SCALE, Q8_K_CODES = slice(0, 4), slice(4, 260)  # f32 d, then 256 int8 codes
SCALE_SPREAD = 0.05  # scales drawn from ±0.05: finite, and no product overflows float32
TRACED_LIMIT = 1 << 20  # bytes a refused header may allocate, at most
ALIGNMENT = 32


def _random_blocks(rng: np.random.Generator, name: str, blocks: int) -> np.ndarray:
    """(blocks, block bytes) uint8 of random codes with small finite scales."""
    size = SUPPORTED_TYPES[int(QType[name])].block_bytes
    raw = rng.integers(0, 256, (blocks, size), dtype=np.uint8)
    if name == "Q8_K":
        scale = rng.uniform(-SCALE_SPREAD, SCALE_SPREAD, blocks).astype("<f4")
        raw[:, Q8_K_SCALE] = scale.view(np.uint8).reshape(blocks, 4)
        return raw
    for offset in HALF_SCALE_OFFSETS[name]:
        scale = rng.uniform(-SCALE_SPREAD, SCALE_SPREAD, blocks).astype("<f2")
        raw[:, offset : offset + 2] = scale.view(np.uint8).reshape(blocks, 2)
    return raw


def _q8_k_reference(raw: np.ndarray) -> np.ndarray:
    """Q8_K's layout in numpy: y = d · q per block of 256 (an independent decoder)."""
    blocks = raw.reshape(-1, SUPPORTED_TYPES[int(QType.Q8_K)].block_bytes)
    scale = np.ascontiguousarray(blocks[:, Q8_K_SCALE]).view("<f4")  # (blocks, 1)
    return blocks[:, Q8_K_CODES].view(np.int8).astype(np.float32) * scale


def _reference(tensor) -> np.ndarray:
    """gguf's float32 values of a GGUFReader tensor, in row-major shape."""
    if tensor.tensor_type == QType.Q8_K:
        values = _q8_k_reference(np.asarray(tensor.data))
    else:
        values = quants.dequantize(np.asarray(tensor.data), tensor.tensor_type)
    return values.reshape(tuple(reversed(tensor.shape.tolist())))


def _write_all_types(path) -> list[str]:
    """One GGUF file with a (3, 4 blocks) tensor per type and kind; returns the names."""
    rng = np.random.default_rng(31)
    writer = gguf.GGUFWriter(str(path), "llama")
    names = []
    for name in FLOAT_TYPES + QUANTIZABLE:
        cols = BLOCKS_PER_ROW * SUPPORTED_TYPES[int(QType[name])].block_values
        if name in FLOAT_TYPES:
            cols = FLOAT_COLS
        source = rng.standard_normal((ROWS, cols)).astype(np.float32)
        stored = quants.quantize(source, QType[name])
        raw_dtype = None if name in ("F32", "F16") else QType[name]
        writer.add_tensor(f"quantized.{name}", stored, raw_dtype=raw_dtype)
        names.append(f"quantized.{name}")
    for name in RANDOM_BLOCK_TYPES:
        blocks = _random_blocks(rng, name, ROWS * BLOCKS_PER_ROW)
        writer.add_tensor(f"random.{name}", blocks.reshape(ROWS, -1), raw_dtype=QType[name])
        names.append(f"random.{name}")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return names


@pytest.fixture(scope="module")
def all_types(tmp_path_factory):
    path = tmp_path_factory.mktemp("ggml") / "all_types.gguf"
    names = _write_all_types(path)
    reader = gguf.GGUFReader(str(path))
    return path.read_bytes(), names, {t.name: t for t in reader.tensors}


def _bits(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)


def test_the_type_table_is_ggmls():
    for type_id, entry in SUPPORTED_TYPES.items():
        assert QType[entry.name].value == type_id, entry.name
        assert constants.GGML_QUANT_SIZES[QType[entry.name]] == (
            entry.block_values,
            entry.block_bytes,
        ), entry.name
    assert set(GGML_TYPES) == set(SUPPORTED_TYPES)
    assert {entry.name for entry in SUPPORTED_TYPES.values()} >= {
        "F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K",
    }  # fmt: skip


def test_the_file_holds_every_type(all_types):
    data, names, _ = all_types
    stored = {info.type_name for info in parse_gguf(data).tensors.values()}
    assert stored == {entry.name for entry in SUPPORTED_TYPES.values()}
    assert len(names) == len(FLOAT_TYPES) + len(QUANTIZABLE) + len(RANDOM_BLOCK_TYPES)


def _each_tensor(all_types, monkeypatch, chunk_blocks):
    """Each stored tensor as (name, info, gguf's values), with the decoder's step set to
    ``chunk_blocks`` of the tensor's blocks (``None``: one step)."""
    data, names, reference = all_types
    parsed = parse_gguf(data)
    for name in names:
        info = parsed.tensors[name]
        entry = SUPPORTED_TYPES[info.ggml_type]
        if chunk_blocks is not None:  # several steps, the last one shorter
            monkeypatch.setattr(ggml_quants, "CHUNK_BYTES", chunk_blocks * entry.block_bytes)
        yield name, info, _reference(reference[name])


@pytest.mark.parametrize("chunk_blocks", [None, 3], ids=["one step", "3 blocks a step"])
def test_every_type_decodes_bit_for_bit_like_gguf(all_types, monkeypatch, chunk_blocks):
    parsed = parse_gguf(all_types[0])
    for name, info, expected in _each_tensor(all_types, monkeypatch, chunk_blocks):
        decoded = parsed.tensor(name)
        assert decoded.dtype == torch.float32
        assert tuple(decoded.shape) == expected.shape == info.shape, name
        assert np.isfinite(expected).all(), name  # the comparison is of real values
        assert np.array_equal(_bits(decoded.numpy()), _bits(expected)), name


@pytest.mark.parametrize("chunk_blocks", [None, 3], ids=["one step", "3 blocks a step"])
def test_every_type_decodes_into_bfloat16_as_gguf_s_values_rounded(
    all_types, monkeypatch, chunk_blocks
):
    data = all_types[0]
    for name, info, values in _each_tensor(all_types, monkeypatch, chunk_blocks):
        expected = torch.from_numpy(values).to(torch.bfloat16)
        out = torch.full(info.shape, float("nan"), dtype=torch.bfloat16)
        decoded = dequantize(data, info, out=out)
        assert decoded.data_ptr() == out.data_ptr() and decoded.dtype == torch.bfloat16
        assert torch.equal(out.view(torch.int16), expected.view(torch.int16)), name


def test_tensor_table_matches_gguf_reader(all_types):
    data, names, reference = all_types
    parsed = parse_gguf(data)
    assert list(parsed.tensors) == names
    for name in names:
        info, theirs = parsed.tensors[name], reference[name]
        assert info.start == theirs.data_offset, name
        assert info.nbytes == theirs.n_bytes, name
        assert info.shape == tuple(reversed(theirs.shape.tolist())), name
        assert data[info.start : info.start + info.nbytes] == np.asarray(theirs.data).tobytes()


@pytest.mark.parametrize("name", ["random.Q4_K", "random.Q6_K", "quantized.Q5_0"])
def test_row_ranges_and_stacked_rows(all_types, name):
    data, _, _ = all_types
    parsed = parse_gguf(data)
    info = parsed.tensors[name]
    whole = parsed.tensor(name)
    for start, stop in ((0, 1), (1, 3), (2, 3)):
        assert torch.equal(dequantize(data, info.rows(start, stop)), whole[start:stop])
    stacked = torch.full((ROWS + 2, info.shape[1]), float("nan"))
    parsed.tensor(name, out=stacked[1 : ROWS + 1])
    assert torch.equal(stacked[1 : ROWS + 1], whole)
    assert stacked[0].isnan().all() and stacked[-1].isnan().all()  # nothing written outside


@pytest.mark.parametrize("name", ["Q4_K", "Q5_K", "Q6_K", "Q3_K", "Q2_K", "Q5_1"])
def test_decode_reads_any_buffer_without_copying_it_whole(name):
    rng = np.random.default_rng(7)
    type_id = int(QType[name])
    raw = _random_blocks(rng, name, 5).reshape(-1)
    count = 5 * SUPPORTED_TYPES[type_id].block_values
    expected = quants.dequantize(raw.reshape(5, -1), QType[name]).reshape(-1)
    read_only = np.frombuffer(raw.tobytes(), dtype=np.uint8)
    assert not read_only.flags.writeable
    for source in (raw, read_only, raw.tobytes(), bytearray(raw.tobytes()), memoryview(raw)):
        assert np.array_equal(_bits(decode(type_id, source, count).numpy()), _bits(expected))
    out = torch.empty(5, count // 5)
    result = decode(type_id, read_only, count, out=out)
    assert result.data_ptr() == out.data_ptr() and np.array_equal(
        _bits(out).reshape(-1), _bits(expected)
    )
    assert np.array_equal(raw, np.frombuffer(raw.tobytes(), dtype=np.uint8))  # raw untouched


def test_decode_refuses_bad_arguments():
    q4_k = int(QType.Q4_K)
    raw = np.zeros(2 * 144, dtype=np.uint8)
    with pytest.raises(ValueError, match="ggml type 16 is not supported; supported: F32, "):
        decode(16, raw, 512)
    with pytest.raises(ValueError, match="100 values are not a whole number of Q4_K blocks"):
        decode(q4_k, raw, 100)
    with pytest.raises(ValueError, match="integer >= 0"):
        decode(q4_k, raw, -256)
    with pytest.raises(ValueError, match="take 144 bytes, raw has 288"):
        decode(q4_k, raw, 256)
    with pytest.raises(ValueError, match="1-D uint8"):
        decode(q4_k, raw.view(np.int8), 512)
    with pytest.raises(ValueError, match="raw must be"):
        decode(q4_k, list(raw), 512)
    bad_outs = (
        torch.empty(511),
        torch.empty(512, dtype=torch.float64),
        torch.empty(512, dtype=torch.float16),
        torch.empty(2, 256).T,
        torch.empty(256, 2, dtype=torch.bfloat16).T,
    )
    for out in bad_outs:
        with pytest.raises(ValueError, match="contiguous float32 or bfloat16"):
            decode(q4_k, raw, 512, out=out)
    assert stored_bytes(q4_k, 512) == 288
    assert decode(q4_k, b"", 0).shape == (0,)


# ---- bad files, built a field at a time -------------------------------------------------


def _string(text: str | bytes, length: int | None = None) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw) if length is None else length) + raw


def _tensor_info(name: str, dims, type_id: int, offset: int) -> bytes:
    info = _string(name) + struct.pack("<I", len(dims))
    return info + b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", type_id, offset)


def gguf_bytes(
    tensors=(),
    data: bytes = b"",
    *,
    kv: bytes = b"",
    kv_count: int = 0,
    tensor_count: int | None = None,
    magic: bytes = b"GGUF",
    version: int = 3,
) -> bytes:
    """A GGUF file: header, ``kv`` (already encoded, ``kv_count`` entries), the tensor infos
    ``(name, dims, type, offset)`` (or raw bytes), padding to 32 bytes, ``data``."""
    infos = b"".join(t if isinstance(t, bytes) else _tensor_info(*t) for t in tensors)
    count = len(tensors) if tensor_count is None else tensor_count
    head = magic + struct.pack("<IQQ", version, count, kv_count) + kv + infos
    return head + b"\0" * (-len(head) % ALIGNMENT) + data


def _kv(key: str, value_type: int, payload: bytes, key_length: int | None = None) -> bytes:
    return _string(key, key_length) + struct.pack("<I", value_type) + payload


Q4_K_ID = int(QType.Q4_K)
GOOD_Q4_K = _random_blocks(np.random.default_rng(3), "Q4_K", 2).tobytes()  # (2 blocks)


def one_q4_k(dims, offset: int = 0, data: bytes = GOOD_Q4_K, *, copies: int = 1) -> bytes:
    """A GGUF file whose tensor ``w`` (Q4_K, ``dims``, at ``offset``; ``copies`` infos of it)
    is backed by ``data`` (by default two good Q4_K blocks)."""
    return gguf_bytes([("w", dims, Q4_K_ID, offset)] * copies, data)


def _refused(data: bytes, match: str) -> None:
    """parse_gguf(data) raises ValueError matching ``match``, allocating under 1 MiB."""
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=match):
            parse_gguf(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < TRACED_LIMIT, f"{peak} bytes allocated before refusing"


def test_the_built_file_is_read_like_gguf_reads_it(tmp_path):
    data = gguf_bytes(
        [("w", (512, 1), Q4_K_ID, 0)], GOOD_Q4_K, kv=_kv("k", 4, b"\7\0\0\0"), kv_count=1
    )
    path = tmp_path / "built.gguf"
    path.write_bytes(data)
    theirs = gguf.GGUFReader(str(path)).tensors[0]
    parsed = parse_gguf(data)
    assert parsed.metadata == {"k": 7}
    assert np.array_equal(parsed.tensor("w").numpy(), _reference(theirs))


@pytest.mark.parametrize(
    ("data", "match"),
    [
        pytest.param(gguf_bytes(magic=b"GGML"), "not a GGUF file", id="wrong magic"),
        pytest.param(gguf_bytes(version=1), "GGUF version 1 is not supported", id="version 1"),
        pytest.param(gguf_bytes(version=4), "GGUF version 4 is not supported", id="version 4"),
        pytest.param(b"GGUF\3\0", "version", id="cut in the version"),
        pytest.param(
            gguf_bytes(tensor_count=2**60),
            "tensor count 1152921504606846976",
            id="tensor count 2**60",
        ),
        pytest.param(
            gguf_bytes(kv_count=2**60),
            "metadata count 1152921504606846976",
            id="metadata count 2**60",
        ),
        pytest.param(
            gguf_bytes(kv=_kv("k", 4, b"", key_length=2**62), kv_count=1),
            "metadata key 0",
            id="key length 2**62",
        ),
        pytest.param(
            gguf_bytes(kv=_kv("k", 8, struct.pack("<Q", 2**62)), kv_count=1),
            "value of 'k'",
            id="string value length 2**62",
        ),
        pytest.param(
            gguf_bytes(kv=_kv("k", 9, struct.pack("<IQ", 10, 2**62)), kv_count=1),
            "'k' claims",
            id="number array length 2**62",
        ),
        pytest.param(
            gguf_bytes(kv=_kv("k", 9, struct.pack("<IQ", 8, 2**62)), kv_count=1),
            "strings of 'k'",
            id="string array length 2**62",
        ),
        pytest.param(
            gguf_bytes(kv=_kv("k", 9, struct.pack("<IQ", 9, 1)), kv_count=1),
            "array item type 9",
            id="array of arrays",
        ),
        pytest.param(
            gguf_bytes(kv=_kv("k", 13, b""), kv_count=1),
            "unknown value type 13",
            id="unknown value type",
        ),
        pytest.param(
            gguf_bytes(kv=_kv("k", 0, b"\1") * 2, kv_count=2),
            "key 'k' appears twice",
            id="duplicate key",
        ),
        pytest.param(
            gguf_bytes([_string("w", 2**62) + b"\0" * 40]),
            "name of tensor 0",
            id="tensor name length 2**62",
        ),
        pytest.param(
            gguf_bytes([("w", (2**32, 2**32), Q4_K_ID, 0)]),
            r"dims \[4294967296, 4294967296\]",
            id="dims product 2**64",
        ),
        pytest.param(gguf_bytes([("w", (0, 2**64 - 1), 0, 0)]), "has dims", id="a dim of 2**64-1"),
        pytest.param(gguf_bytes([("w", (256,) * 5, Q4_K_ID, 0)]), "5 dims", id="five dims"),
        pytest.param(
            gguf_bytes([("w", (2**40, 2**20), Q4_K_ID, 0)]),
            "tensor 'w' claims",
            id="2**60 values in a small file",
        ),
        pytest.param(one_q4_k((512,), 2**63), "tensor 'w' claims", id="offset 2**63"),
        pytest.param(one_q4_k((512,), 32), "tensor 'w' claims", id="data past the end"),
        pytest.param(
            one_q4_k((512,), 8, GOOD_Q4_K + b"\0" * 32),
            "not a multiple of",
            id="offset off the alignment",
        ),
        pytest.param(
            one_q4_k((512,), copies=2),
            "name 'w' appears twice",
            id="duplicate tensor name",
        ),
        pytest.param(one_q4_k((100,)), "rows of 100 values", id="1-D count not whole blocks"),
        pytest.param(
            one_q4_k((300, 2), 0, GOOD_Q4_K * 3),
            "block size 256",
            id="row not whole blocks",
        ),
        pytest.param(one_q4_k((512,), 0, GOOD_Q4_K[:-1]), "truncated", id="data cut short"),
    ],
)
def test_bad_files_are_refused_naming_the_field(data, match):
    _refused(data, match)


def test_every_cut_of_a_file_with_every_type_is_refused(all_types):
    data, names, _ = all_types
    parsed = parse_gguf(data)
    end = max(info.start + info.nbytes for info in parsed.tensors.values())
    first_tensor = min(info.start for info in parsed.tensors.values())
    cuts = sorted({*range(0, first_tensor, 7), *range(first_tensor, end, 101), end - 1})
    for cut in cuts:
        with pytest.raises(ValueError, match="truncated|not a GGUF"):
            parse_gguf(data[:cut])


@pytest.mark.parametrize("type_id", [4, 16, 99])
def test_an_unsupported_type_is_named_with_the_readable_ones(type_id):
    data = gguf_bytes([("w.weight", (32, 2), type_id, 0)], b"\0" * 64)
    parsed = parse_gguf(data)  # the table stays readable
    assert parsed.tensors["w.weight"].type_name == f"type {type_id}"
    with pytest.raises(ValueError) as caught:
        parsed.tensor("w.weight")
    message = str(caught.value)
    assert "'w.weight'" in message and f"ggml type {type_id}" in message
    for entry in SUPPORTED_TYPES.values():
        assert entry.name in message
