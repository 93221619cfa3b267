"""Four-bit weights kept as the GGUF file stores them: the codes of a Q4_0, Q4_1 or Q4_K
matrix, packed for torch's CPU int4 matrix kernel, with one scale and one zero per group of 32
inputs.

torch's kernel (``aten._weight_int4pack_mm_for_cpu``) holds codes q ∈ {0..15} and computes
with w = (q − 8)·scale + zero in every group of 32 inputs. Each 4-bit type is first taken
apart (:class:`Int4Parts`) into its codes and one ``scale`` and ``minimum`` per 32 values,
value = scale·q + minimum, then packed with zero = minimum + 8·scale. The types (block layouts
in :mod:`~attention_core.pretrained.ggml_quants`):

* Q4_1, blocks of 32 with f16 d and m, y = d·q + m: scale = d, minimum = m.
* Q4_0, blocks of 32 with f16 d, y = d·(q − 8): scale = d, minimum = −8·d (so zero = 0).
* Q4_K, super-blocks of 256 with f16 d and dmin and 6-bit sc[s], mn[s] per sub-block s of 32,
  y = (d·sc[s])·q − (dmin·mn[s]): each sub-block is one group, scale = d·sc[s] and minimum =
  −(dmin·mn[s]), both products in float32 as ggml does them (and exact: an f16 times a 6-bit
  integer fits float32's 24 bits).

So :meth:`Int4Parts.dequantize` gives the file's float32 values (``gguf.quants``' and
:func:`~attention_core.pretrained.gguf_file.dequantize`'s) bit for bit, but for the sign of
a zero in Q4_0: ggml's d·(q − 8) is −0.0 where d < 0 and q = 8, d·q + (−8·d) is +0.0 (the
same number; every other value is exact, since (q − 8)·d fits float32). In the kernel the codes are
used exactly; the scale and zero are held in bfloat16, and the input is rounded to bfloat16
(it accumulates in float32). Against the float32 dequantised matrix, each output moves by at
most about 2⁻⁷ · Σ_k |w_k x_k| (three bfloat16 roundings of 2⁻⁹ each, plus the output's);
``tests/core/test_int4.py`` checks that bound.

Memory: half a byte per weight plus 4 bytes per group of 32 (1/8 of float32, 1/4 of
bfloat16; :func:`int4_bytes`). On the CPUs measured (Zen 4) the kernel is also faster than a
float32 matmul of the same shape (see ``bench/decoder.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from attention_core.pretrained.binary import FileData
from attention_core.pretrained.ggml_quants import GGML_Q4_0, GGML_Q4_K, SUPPORTED_TYPES
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
    "INT4_ROW_MULTIPLE",
    "INT4_TYPES",
    "Int4Matrix",
    "Int4Parts",
    "PackedInt4",
    "Q41Parts",
    "Q4_0_BLOCK",
    "Q4_K_BLOCK",
    "check_int4_matrix",
    "concat_parts",
    "int4_available",
    "int4_bytes",
    "int4_linear",
    "int4_parts",
    "pack_int4",
    "pack_int4_codes",
    "q4_1_parts",
    "scale_zero",
]

INT4_GROUP = BLOCK_VALUES
"""Inputs per scale/zero pair: one Q4_0/Q4_1 block, one Q4_K sub-block."""
INT4_CODE_OFFSET = 8
"""torch's kernel centres the codes: w = (q − 8)·scale + zero."""
INT4_ROW_MULTIPLE = 16
"""torch's CPU packing takes matrices of a multiple of 16 rows (output features)."""
_INNER_K_TILES = 1  # the CPU packing's tile argument (the CPU kernel accepts 1)
_CODES_PER_BYTE = 2  # the packed layout: two 4-bit codes a byte
_SCALE_ZERO_BYTES = 2 * torch.bfloat16.itemsize  # a group's bfloat16 scale and zero
_SIX_BITS = 0x3F
_TOP_BITS_SHIFT = 6  # Q4_K: scales 4-7 take their top two bits from bits 6-7 of bytes 0-7

Q4_0_BLOCK = np.dtype([("scale", "<f2"), ("packed", "u1", (BLOCK_VALUES // 2,))])
"""ggml's Q4_0 block (18 bytes): f16 d, 16 bytes of nibbles (value j low, j + 16 high)."""
_Q4_K_SUB_BLOCKS = 8
Q4_K_BLOCK = np.dtype(
    [
        ("scale", "<f2"),  # d
        ("min_scale", "<f2"),  # dmin
        ("scales", "u1", (12,)),  # eight 6-bit sc and eight 6-bit mn, packed
        ("packed", "u1", (_Q4_K_SUB_BLOCKS * BLOCK_VALUES // 2,)),  # 128 bytes of nibbles
    ]
)
"""ggml's Q4_K super-block (144 bytes, 256 values); see
:mod:`~attention_core.pretrained.ggml_quants` for how its fields are laid out."""


@dataclass(frozen=True)
class Int4Parts:
    """A 4-bit matrix (Q4_0, Q4_1 or Q4_K) taken apart: codes (N, K) uint8 in 0..15, scale
    and minimum (N, K/32) float32, one pair per group of 32 inputs (exact: the file's float16
    values, or for Q4_K the float32 products ggml computes); value = scale·q + minimum."""

    codes: torch.Tensor
    scale: torch.Tensor
    minimum: torch.Tensor

    def dequantize(self) -> torch.Tensor:
        """The (N, K) float32 matrix the parts stand for: the file's values exactly (a Q4_0
        zero may be +0.0 where ggml has −0.0)."""
        rows, cols = self.codes.shape
        blocks = self.codes.view(rows, cols // INT4_GROUP, INT4_GROUP).float()  # (N, K/32, 32)
        values = blocks * self.scale[..., None] + self.minimum[..., None]  # (N, K/32, 32)
        return values.view(rows, cols)

    def kernel_values(self) -> torch.Tensor:
        """The (N, K) float64 matrix :func:`int4_linear` multiplies by: the same codes with
        the scale and the zero (minimum + 8·scale) rounded to bfloat16, as :func:`pack_int4`
        holds them.
        """
        rows, cols = self.codes.shape
        scale = self.scale.to(torch.bfloat16).double()[..., None]  # (N, K/32, 1)
        zero = (self.minimum + INT4_CODE_OFFSET * self.scale).to(torch.bfloat16).double()
        codes = self.codes.view(rows, cols // INT4_GROUP, INT4_GROUP).double()  # (N, K/32, 32)
        return ((codes - INT4_CODE_OFFSET) * scale + zero[..., None]).view(rows, cols)


Q41Parts = Int4Parts
"""The former name of :class:`Int4Parts`, from when Q4_1 was the one 4-bit type read."""

BlockFields = tuple[np.ndarray, np.ndarray, np.ndarray]
"""What a type's reader makes of n blocks: codes (n, values per block) uint8, and scale and
minimum (n, groups per block) float32."""
BlockScales = tuple[np.ndarray, np.ndarray]
"""Scale and minimum (n, groups per block) float32 of n blocks."""


def _nibbles(packed: np.ndarray) -> np.ndarray:
    """Bytes (..., k) -> codes (..., 2, k) uint8: their low nibbles, then their high ones."""
    codes = np.empty((*packed.shape[:-1], 2, packed.shape[-1]), dtype=np.uint8)
    np.bitwise_and(packed, NIBBLE_MASK, out=codes[..., 0, :])
    np.right_shift(packed, NIBBLE_BITS, out=codes[..., 1, :])
    return codes  # (..., 2, k)


def _q4_0_scales(blocks: np.ndarray) -> BlockScales:
    """Q4_0 blocks (n,): y = d·(q − 8) = d·q + (−8·d)."""
    scale = blocks["scale"].astype(np.float32)[:, None]  # (n, 1)
    return scale, scale * np.float32(-INT4_CODE_OFFSET)  # −8·d, exact


def _q4_0_fields(blocks: np.ndarray) -> BlockFields:
    """Q4_0 blocks (n,): codes of values j (low nibbles) and j + 16 (high), then scales."""
    codes = _nibbles(blocks["packed"]).reshape(len(blocks), BLOCK_VALUES)  # (n, 32)
    return codes, *_q4_0_scales(blocks)


def _q4_1_scales(blocks: np.ndarray) -> BlockScales:
    """Q4_1 blocks (n,): y = d·q + m."""
    scale = blocks["scale"].astype(np.float32)[:, None]  # (n, 1)
    return scale, blocks["minimum"].astype(np.float32)[:, None]


def _q4_1_fields(blocks: np.ndarray) -> BlockFields:
    """Q4_1 blocks (n,): codes as Q4_0's, then scales."""
    codes = _nibbles(blocks["packed"]).reshape(len(blocks), BLOCK_VALUES)  # (n, 32)
    return codes, *_q4_1_scales(blocks)


def _q4_k_scales_mins(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_K's 12 scale bytes (n, 12) -> sc and mn (n, 8) uint8. With the bytes as a[0:4],
    b[0:4], c[0:4]: sc[s] = a[s] & 63, mn[s] = b[s] & 63 for s < 4; for s = 4 + t,
    sc[s] = (c[t] & 15) | (a[t] >> 6) << 4 and mn[s] = (c[t] >> 4) | (b[t] >> 6) << 4."""
    a, b, c = packed[:, 0:4], packed[:, 4:8], packed[:, 8:12]  # (n, 4) each
    sc_high = (c & NIBBLE_MASK) | (a >> _TOP_BITS_SHIFT) << NIBBLE_BITS  # sc[4:8]
    mn_high = (c >> NIBBLE_BITS) | (b >> _TOP_BITS_SHIFT) << NIBBLE_BITS  # mn[4:8]
    sc = np.concatenate((a & _SIX_BITS, sc_high), axis=1)
    mn = np.concatenate((b & _SIX_BITS, mn_high), axis=1)
    return sc, mn  # (n, 8) each


def _q4_k_scales(blocks: np.ndarray) -> BlockScales:
    """Q4_K super-blocks (n,): y = (d·sc[s])·q − (dmin·mn[s]) in sub-block s of 32 values."""
    sc, mn = _q4_k_scales_mins(blocks["scales"])  # (n, 8) each
    scale = blocks["scale"].astype(np.float32)[:, None] * sc.astype(np.float32)  # d·sc (n, 8)
    min_scale = blocks["min_scale"].astype(np.float32)[:, None]  # dmin (n, 1)
    minimum = -(min_scale * mn.astype(np.float32))  # −(dmin·mn) (n, 8)
    return scale, minimum


def _q4_k_fields(blocks: np.ndarray) -> BlockFields:
    """Q4_K super-blocks (n,): values 64g … 64g + 63 are the low, then the high nibbles of
    bytes 32g … 32g + 31; then the scales."""
    n = len(blocks)
    packed = blocks["packed"].reshape(n, _Q4_K_SUB_BLOCKS // 2, BLOCK_VALUES)  # (n, 4, 32)
    codes = _nibbles(packed).reshape(n, _Q4_K_SUB_BLOCKS * BLOCK_VALUES)  # (n, 256)
    return codes, *_q4_k_scales(blocks)


_READERS: dict[int, tuple[np.dtype, Callable[[np.ndarray], BlockFields]]] = {
    GGML_Q4_0: (Q4_0_BLOCK, _q4_0_fields),
    GGML_Q4_1: (Q4_1_BLOCK, _q4_1_fields),
    GGML_Q4_K: (Q4_K_BLOCK, _q4_k_fields),
}
INT4_TYPES = frozenset(_READERS)
"""The ggml ids of the types torch's int4 kernel holds as they are: Q4_0, Q4_1, Q4_K."""


def _int4_type_names() -> str:
    return ", ".join(SUPPORTED_TYPES[type_id].name for type_id in sorted(INT4_TYPES))


def int4_parts(data: FileData, info: TensorInfo) -> Int4Parts:
    """Read one 4-bit matrix's codes, scales and minimums (no float matrix is made).

    Reads only the tensor's own bytes, all blocks at once (a few numpy passes over them).

    Args:
        data: the whole GGUF file (bytes or a memory map). info: a (rows, cols) tensor
            stored as one of :data:`INT4_TYPES` (Q4_0, Q4_1 or Q4_K).

    Returns:
        :class:`Int4Parts` with codes (rows, cols), scale and minimum (rows, cols/32).

    Raises:
        ValueError: naming the tensor, for another storage type (listing the int4-able
            ones), a tensor that is not a matrix of whole blocks, or bytes outside ``data``.
    """
    rows, cols = check_int4_matrix(data, info)
    codes, scale, minimum = _READERS[info.ggml_type][1](_blocks(data, info))
    return Int4Parts(
        codes=torch.from_numpy(codes.reshape(rows, cols)),
        scale=torch.from_numpy(scale.reshape(rows, cols // INT4_GROUP)),
        minimum=torch.from_numpy(minimum.reshape(rows, cols // INT4_GROUP)),
    )


def _blocks(data: FileData, info: TensorInfo) -> np.ndarray:
    """The blocks of a checked 4-bit matrix, as a (blocks,) structured array over ``data``."""
    count = info.numel // SUPPORTED_TYPES[info.ggml_type].block_values
    return np.frombuffer(data, dtype=_READERS[info.ggml_type][0], count=count, offset=info.start)


def check_int4_matrix(data: FileData, info: TensorInfo) -> tuple[int, int]:
    """(rows, cols) of a tensor stored as one of :data:`INT4_TYPES`, a matrix of whole blocks
    within ``data``; ValueError naming the tensor otherwise (as :func:`int4_parts` raises)."""
    if info.ggml_type not in INT4_TYPES:
        raise ValueError(
            f"tensor {info.name!r} is stored as {info.type_name}, which torch's int4 kernel "
            f"cannot hold as 4-bit codes; int4-able types: {_int4_type_names()}"
        )
    block = _READERS[info.ggml_type][0]
    entry = SUPPORTED_TYPES[info.ggml_type]
    if len(info.shape) != 2 or min(info.shape) < 1 or info.shape[1] % entry.block_values:
        raise ValueError(
            f"tensor {info.name!r} is {entry.name} {info.shape}, expected a matrix with rows "
            f"of whole {entry.block_values}-value blocks"
        )
    rows, cols = info.shape
    count = rows * cols // entry.block_values  # blocks
    if info.nbytes != count * block.itemsize or not 0 <= info.start <= len(data) - info.nbytes:
        raise ValueError(
            f"tensor {info.name!r} ({entry.name} {info.shape}) needs {count * block.itemsize} "
            f"bytes from offset {info.start}; it claims {info.nbytes}, the file has {len(data)}"
        )
    return rows, cols


def q4_1_parts(data: FileData, info: TensorInfo) -> Int4Parts:
    """Read one Q4_1 tensor's codes, scales and minimums (:func:`int4_parts`, for Q4_1 only).

    Args:
        data: the whole GGUF file. info: a (rows, cols) tensor stored as Q4_1.

    Returns:
        :class:`Int4Parts` with codes (rows, cols).

    Raises:
        ValueError: for a tensor that is not a Q4_1 matrix.
    """
    if info.ggml_type != GGML_Q4_1 or len(info.shape) != 2:
        raise ValueError(
            f"tensor {info.name!r} is {info.type_name} {info.shape}, expected a Q4_1 matrix"
        )
    return int4_parts(data, info)


def concat_parts(parts: list[Int4Parts]) -> Int4Parts:
    """Stack matrices of the same width by rows (e.g. q, k and v into one qkv matrix)."""
    return Int4Parts(
        codes=torch.cat([p.codes for p in parts]),  # (ΣN, K)
        scale=torch.cat([p.scale for p in parts]),  # (ΣN, K/32)
        minimum=torch.cat([p.minimum for p in parts]),  # (ΣN, K/32)
    )


def _check_packable(rows: int, cols: int) -> None:
    """ValueError unless torch's CPU packing takes a (rows, cols) matrix."""
    if rows % INT4_ROW_MULTIPLE or cols % INT4_GROUP:
        raise ValueError(
            f"a ({rows}, {cols}) matrix cannot be packed for the int4 kernel: it needs rows "
            f"in multiples of {INT4_ROW_MULTIPLE} and columns in groups of {INT4_GROUP}"
        )


def int4_bytes(rows: int, cols: int) -> int:
    """Bytes :func:`pack_int4` holds for a (rows, cols) matrix: the packed codes (half a byte
    a weight) and a bfloat16 scale and zero per group of 32, to check a memory budget before
    packing. While packing, more is held for a moment: the (rows, cols) uint8 codes of
    :func:`int4_parts` and their int32 copy for torch's packing (5 bytes a weight).

    Args:
        rows, cols: the matrix's shape (rows a multiple of 16, cols of 32).

    Returns:
        rows·cols/2 + rows·(cols/32)·4.

    Raises:
        ValueError: for a shape that is not whole numbers >= 1, or that the packing refuses.
    """
    for name, size in (("rows", rows), ("cols", cols)):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {size!r}")
    _check_packable(rows, cols)
    return rows * cols // _CODES_PER_BYTE + rows * (cols // INT4_GROUP) * _SCALE_ZERO_BYTES


@dataclass(frozen=True)
class PackedInt4:
    """A matrix in torch's CPU int4 layout.

    Attributes:
        packed: (N, K/2) uint8, two codes per byte as ``_convert_weight_to_int4pack_for_cpu``
            lays them out.
        scale_zero: (K/32, N, 2) bfloat16, the scale and zero of every group of 32.
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


def pack_int4(parts: Int4Parts) -> PackedInt4:
    """Pack 4-bit parts (of any of :data:`INT4_TYPES`) for :func:`int4_linear`.

    Args:
        parts: codes (N, K) with N a multiple of 16 and K of 32, scales and minimums
            (N, K/32).

    Returns:
        :class:`PackedInt4` of :func:`int4_bytes` (N, K) bytes.

    Raises:
        ValueError: for codes outside 0..15, mismatched shapes, N not a multiple of 16, or a
            torch build without the kernel.
    """
    if not int4_available():
        raise ValueError(f"torch {torch.__version__} has no CPU int4 kernel")
    rows, cols = parts.codes.shape
    if cols % INT4_GROUP or parts.scale.shape != (rows, cols // INT4_GROUP):
        raise ValueError(
            f"codes {tuple(parts.codes.shape)} and scales {tuple(parts.scale.shape)} do not "
            f"form blocks of {INT4_GROUP}"
        )
    _check_packable(rows, cols)
    if parts.minimum.shape != parts.scale.shape:
        raise ValueError(f"minimums {tuple(parts.minimum.shape)} differ from the scales' shape")
    if int(parts.codes.max()) > NIBBLE_MASK:
        raise ValueError(f"codes must lie in 0..{NIBBLE_MASK}, got {int(parts.codes.max())}")
    packed = pack_int4_codes(parts.codes)  # (N, K/2) uint8
    return PackedInt4(packed, scale_zero(parts.scale, parts.minimum), (rows, cols))


def pack_int4_codes(codes: torch.Tensor) -> torch.Tensor:
    """torch's own packing of (N, K) codes in 0..15 (any integer dtype) into its (N, K/2)
    uint8 layout; it takes them as int32, so an int32 copy (4 bytes a code) is made here."""
    return torch.ops.aten._convert_weight_to_int4pack_for_cpu(
        codes.to(torch.int32).contiguous(), _INNER_K_TILES
    )  # (N, K/2) uint8


def scale_zero(scale: torch.Tensor, minimum: torch.Tensor) -> torch.Tensor:
    """The kernel's (K/32, N, 2) bfloat16 scales and zeros of (N, K/32) scales and minimums:
    zero = minimum + 8·scale, so that d·q + m = d·(q − 8) + zero."""
    zero = minimum + INT4_CODE_OFFSET * scale  # (N, K/32)
    rows, groups = scale.shape
    pairs = torch.empty(groups, rows, 2, dtype=torch.bfloat16)  # (K/32, N, [scale, zero])
    pairs[..., 0].copy_(scale.t())  # rounded to bfloat16 as they are written
    pairs[..., 1].copy_(zero.t())
    return pairs


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
