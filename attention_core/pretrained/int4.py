"""Four-bit weights kept as the GGUF file stores them: the Q4_1 codes, packed for torch's CPU
int4 matrix kernel, with one scale and one zero per block of 32 inputs.

A Q4_1 block holds 32 codes q ∈ {0..15} with a float16 ``scale`` d and ``minimum`` m, and
stands for the values d·q + m. torch's kernel (``aten._weight_int4pack_mm_for_cpu``) computes
with w = (q − 8)·scale + zero, so zero = m + 8·d. The codes are used exactly; the scale and
zero are held in bfloat16, and the input is rounded to bfloat16 for the kernel (it
accumulates in float32). Against the float32 dequantised matrix, each output moves by at
most about 2⁻⁷ · Σ_k |w_k x_k| (three bfloat16 roundings of 2⁻⁹ each, plus the output's);
``tests/core/test_int4.py`` checks that bound.

Memory: half a byte per weight plus 4 bytes per block of 32 (1/8 of float32, 1/4 of
bfloat16). On the CPUs measured (Zen 4) the kernel is also faster than a float32 matmul of
the same shape (see ``bench/decoder.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from attention_core.pretrained.gguf_file import (
    BLOCK_VALUES,
    GGML_Q4_1,
    NIBBLE_BITS,
    NIBBLE_MASK,
    Q4_1_BLOCK,
    TensorInfo,
)

__all__ = [
    "INT4_CODE_OFFSET",
    "INT4_GROUP",
    "Int4Matrix",
    "PackedInt4",
    "Q41Parts",
    "concat_parts",
    "int4_available",
    "int4_linear",
    "pack_int4",
    "q4_1_parts",
]

INT4_GROUP = BLOCK_VALUES
"""Inputs per scale/zero pair: one Q4_1 block."""
INT4_CODE_OFFSET = 8
"""torch's kernel centres the codes: w = (q − 8)·scale + zero."""
_INNER_K_TILES = 1  # the CPU packing's tile argument (the CPU kernel accepts 1)


@dataclass(frozen=True)
class Q41Parts:
    """A Q4_1 matrix taken apart: codes (N, K) uint8 in 0..15, scale and minimum (N, K/32)
    float32 (exact copies of the file's float16 values); value = scale·q + minimum."""

    codes: torch.Tensor
    scale: torch.Tensor
    minimum: torch.Tensor

    def dequantize(self) -> torch.Tensor:
        """The (N, K) float32 matrix the parts stand for, exactly as the file's values."""
        rows, cols = self.codes.shape
        blocks = self.codes.view(rows, cols // INT4_GROUP, INT4_GROUP).float()  # (N, K/32, 32)
        values = blocks * self.scale[..., None] + self.minimum[..., None]  # (N, K/32, 32)
        return values.view(rows, cols)

    def kernel_values(self) -> torch.Tensor:
        """The (N, K) float64 matrix :func:`int4_linear` multiplies by: the same codes with
        the scale and the zero (m + 8·d) rounded to bfloat16, as :func:`pack_int4` holds them.
        """
        rows, cols = self.codes.shape
        scale = self.scale.to(torch.bfloat16).double()[..., None]  # (N, K/32, 1)
        zero = (self.minimum + INT4_CODE_OFFSET * self.scale).to(torch.bfloat16).double()
        codes = self.codes.view(rows, cols // INT4_GROUP, INT4_GROUP).double()  # (N, K/32, 32)
        return ((codes - INT4_CODE_OFFSET) * scale + zero[..., None]).view(rows, cols)


def q4_1_parts(data: bytes | bytearray, info: TensorInfo) -> Q41Parts:
    """Read one Q4_1 tensor's codes, scales and minimums (no float matrix is made).

    Args:
        data: the whole GGUF file. info: a (rows, cols) tensor stored as Q4_1.

    Returns:
        :class:`Q41Parts` with codes (rows, cols).

    Raises:
        ValueError: for a tensor that is not a Q4_1 matrix.
    """
    if info.ggml_type != GGML_Q4_1 or len(info.shape) != 2:
        raise ValueError(
            f"tensor {info.name!r} is {info.type_name} {info.shape}, expected a Q4_1 matrix"
        )
    rows, cols = info.shape
    count = info.nbytes // Q4_1_BLOCK.itemsize
    blocks = np.frombuffer(data, dtype=Q4_1_BLOCK, count=count, offset=info.start)  # (blocks,)
    packed = blocks["packed"]  # (blocks, 16): byte j = element j (low), j + 16 (high)
    codes = np.concatenate((packed & NIBBLE_MASK, packed >> NIBBLE_BITS), axis=1)  # (blocks, 32)
    return Q41Parts(
        codes=torch.from_numpy(codes.reshape(rows, cols)),
        scale=torch.from_numpy(blocks["scale"].astype(np.float32).reshape(rows, -1)),
        minimum=torch.from_numpy(blocks["minimum"].astype(np.float32).reshape(rows, -1)),
    )


def concat_parts(parts: list[Q41Parts]) -> Q41Parts:
    """Stack matrices of the same width by rows (e.g. q, k and v into one qkv matrix)."""
    return Q41Parts(
        codes=torch.cat([p.codes for p in parts]),  # (ΣN, K)
        scale=torch.cat([p.scale for p in parts]),  # (ΣN, K/32)
        minimum=torch.cat([p.minimum for p in parts]),  # (ΣN, K/32)
    )


@dataclass(frozen=True)
class PackedInt4:
    """A matrix in torch's CPU int4 layout.

    Attributes:
        packed: (N, K/2) uint8, two codes per byte as ``_convert_weight_to_int4pack_for_cpu``
            lays them out.
        scale_zero: (K/32, N, 2) bfloat16, the scale and zero of every block.
        shape: (N, K), the matrix's shape.
    """

    packed: torch.Tensor
    scale_zero: torch.Tensor
    shape: tuple[int, int]

    @property
    def nbytes(self) -> int:
        """Bytes held by the codes and the scales."""
        return sum(t.numel() * t.element_size() for t in (self.packed, self.scale_zero))


def int4_available() -> bool:
    """True when this torch build has the CPU int4 packing and matmul kernels."""
    ops = torch.ops.aten
    return hasattr(ops, "_convert_weight_to_int4pack_for_cpu") and hasattr(
        ops, "_weight_int4pack_mm_for_cpu"
    )


def pack_int4(parts: Q41Parts) -> PackedInt4:
    """Pack Q4_1 parts for :func:`int4_linear`.

    Args:
        parts: codes (N, K) with K a multiple of 32, scales and minimums (N, K/32).

    Returns:
        :class:`PackedInt4`.

    Raises:
        ValueError: for codes outside 0..15, mismatched shapes, or a torch build without the
            kernel.
    """
    if not int4_available():
        raise ValueError(f"torch {torch.__version__} has no CPU int4 kernel")
    rows, cols = parts.codes.shape
    if cols % INT4_GROUP or parts.scale.shape != (rows, cols // INT4_GROUP):
        raise ValueError(
            f"codes {tuple(parts.codes.shape)} and scales {tuple(parts.scale.shape)} do not "
            f"form blocks of {INT4_GROUP}"
        )
    if parts.minimum.shape != parts.scale.shape:
        raise ValueError(f"minimums {tuple(parts.minimum.shape)} differ from the scales' shape")
    if int(parts.codes.max()) > NIBBLE_MASK:
        raise ValueError(f"codes must lie in 0..{NIBBLE_MASK}, got {int(parts.codes.max())}")
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(
        parts.codes.to(torch.int32).contiguous(), _INNER_K_TILES
    )  # (N, K/2) uint8
    zero = parts.minimum + INT4_CODE_OFFSET * parts.scale  # (N, K/32): d·q + m = d·(q−8) + zero
    scale_zero = torch.stack((parts.scale.t(), zero.t()), dim=-1)  # (K/32, N, 2)
    return PackedInt4(packed, scale_zero.to(torch.bfloat16).contiguous(), (rows, cols))


def int4_linear(x: torch.Tensor, weight: PackedInt4) -> torch.Tensor:
    """x · Wᵀ with W in int4: the input goes to the kernel in bfloat16, the result comes back
    in float32.

    Args:
        x: (..., K) float tensor on the CPU. weight: a (N, K) :class:`PackedInt4`.

    Returns:
        (..., N) float32.

    Raises:
        ValueError: when x's last dimension is not K.
    """
    rows, cols = weight.shape
    if x.shape[-1] != cols:
        raise ValueError(f"input has {x.shape[-1]} features, the matrix takes {cols}")
    flat = x.reshape(-1, cols).to(torch.bfloat16)  # (M, K)
    out = torch.ops.aten._weight_int4pack_mm_for_cpu(
        flat, weight.packed, INT4_GROUP, weight.scale_zero
    )  # (M, N) bfloat16
    return out.float().view(*x.shape[:-1], rows)


class Int4Matrix(nn.Module):
    """A (N, K) weight matrix held as :class:`PackedInt4` buffers; calling it on x (..., K)
    returns x · Wᵀ (..., N) in float32 through :func:`int4_linear`.

    Args:
        weight: the packed matrix (its tensors become the module's buffers, not copied).
    """

    def __init__(self, weight: PackedInt4) -> None:
        super().__init__()
        self.register_buffer("packed", weight.packed)
        self.register_buffer("scale_zero", weight.scale_zero)
        self.shape = weight.shape

    @property
    def weight(self) -> PackedInt4:
        """The buffers as a :class:`PackedInt4`."""
        return PackedInt4(self.packed, self.scale_zero, self.shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., K) → x · Wᵀ (..., N) float32 (see :func:`int4_linear`)."""
        return int4_linear(x, self.weight)
