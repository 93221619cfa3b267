"""Decoders of ggml's tensor storage types (what a GGUF file's tensors are stored as), in torch.

Every type stores a tensor as a run of equal **blocks**, in file order; a block holds a fixed
number of values and a fixed number of bytes. All numbers are little-endian; ``f16`` is an
IEEE half, ``u8``/``i8`` a byte read unsigned/signed. A "nibble" is half a byte: byte ``b``
holds the nibbles ``b & 15`` (low) and ``b >> 4`` (high). Below, ``q`` is a value's integer
code and ``y`` the float32 value it decodes to.

Plain types (one value per "block"):

* ``F32`` (4 bytes), ``F16`` (2 bytes, exact in float32), ``BF16`` (2 bytes: the top half of
  a float32's bits, exact).

Blocks of 32 values, one scale ``d`` (and for the ``_1`` types a minimum ``m``) per block:

* ``Q8_0`` (34 bytes): d f16, 32 × i8 q; y = q · d.
* ``Q4_0`` (18 bytes): d f16, 16 bytes of nibbles; byte j holds value j (low) and value
  j + 16 (high); y = d · (q − 8).
* ``Q4_1`` (20 bytes): d f16, m f16, nibbles as Q4_0; y = d · q + m.
* ``Q5_0`` (22 bytes): d f16, 4 bytes qh, nibbles as Q4_0. qh is a 32-bit word whose bit j
  is value j's fifth bit: q = nibble | bit << 4; y = d · (q − 16).
* ``Q5_1`` (24 bytes): d f16, m f16, qh, nibbles as Q5_0; y = d · q + m.

"K" super-blocks of 256 values, split into sub-blocks of 32 (or 16) values that each have
their own scale (and minimum), stored in a few bits and multiplied by the block's f16 ``d``
(and ``dmin``):

* ``Q4_K`` (144 bytes): d f16, dmin f16, 12 bytes of eight 6-bit scales sc and eight 6-bit
  minimums mn, 128 bytes of nibbles. Values 64·g … 64·g + 63 come from bytes 32·g … 32·g + 31:
  first the 32 low nibbles (sub-block 2g), then the 32 high ones (sub-block 2g + 1).
  y = (d · sc[s]) · q − (dmin · mn[s]) in sub-block s. Call the 12 bytes a[0:4], b[0:4],
  c[0:4]: for s < 4, sc[s] = a[s] & 63 and mn[s] = b[s] & 63; for s ≥ 4, with t = s − 4,
  sc[s] = (c[t] & 15) | (a[t] >> 6) << 4 and mn[s] = (c[t] >> 4) | (b[t] >> 6) << 4.
* ``Q5_K`` (176 bytes): d, dmin, 12 scale bytes as Q4_K, 32 bytes qh, 128 bytes of nibbles as
  Q4_K; bit s of qh[l] is the fifth bit of value l of sub-block s: q = nibble | bit << 4.
* ``Q6_K`` (210 bytes): 128 bytes ql (low four bits), 64 bytes qh (high two bits), 16 × i8
  scales (one per 16 values), d f16. Each half h (128 values) uses ql[64h : 64h + 64] and
  qh[32h : 32h + 32]; its four quarters k of 32 values, l = 0 … 31, take their low four bits
  from the low (k = 0, 1) or high (k = 2, 3) nibbles of ql[l + 32·(k mod 2)] and their high
  two bits from bits 2k, 2k + 1 of qh[l]. y = (d · scale[i div 16]) · (q − 32) for value i.
* ``Q2_K`` (84 bytes): 16 scale bytes (low nibble a scale, high nibble a minimum, one per 16
  values), 64 bytes of 2-bit codes, d f16, dmin f16. Half h (128 values) uses bytes
  32h … 32h + 31; its quarter k takes bits 2k, 2k + 1 of each byte.
  y = (d · scale) · q − (dmin · min).
* ``Q3_K`` (110 bytes): 32 bytes hmask, 64 bytes of 2-bit codes (as Q2_K), 12 bytes of
  sixteen 6-bit scales, d f16. Quarter k of half h takes its third bit from bit 4h + k of
  hmask[l]: q = low | bit << 2, minus 4. Scale i is the low (i < 8) or high (i ≥ 8) nibble
  of byte i mod 8, plus two high bits from bits 2·(i div 4) of byte 8 + i mod 4, minus 32.
  y = (d · scale) · q.
* ``Q8_K`` (292 bytes): d **f32**, 256 × i8 q, 16 × i16 sums (for llama.cpp's dot products,
  not needed to decode); y = d · q.

The maths follows ggml's reference dequantisers (``ggml-quants.c``, and ``gguf.quants`` in
numpy) operation for operation (a product, then a sum, never a fused multiply-add), so the
float32 results are the same bits. The decoders work on a batch of blocks at once (about a
megabyte of file per step, copied into one reused buffer that stays in cache), never one
block at a time: each bit field of a block is one shift and one mask over all the batch's
bytes (several fields at once by broadcasting the shifts), the integer codes are turned into
float32 once, straight into the output, and the scales are applied in place. Assumes a
little-endian host (x86, ARM), as ggml does. Q6_K into bfloat16 (the 4-bit files' embedding
and their more-bits matrices) goes to the C kernel where it is built and on
(:mod:`attention_core.pretrained.ggml_kernel`): the same bits, in one pass over the file.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from attention_core.pretrained import ggml_kernel

__all__ = [
    "HALF_SCALE_OFFSETS",
    "GGML_BF16",
    "GGML_F16",
    "GGML_F32",
    "GGML_Q2_K",
    "GGML_Q3_K",
    "GGML_Q4_0",
    "GGML_Q4_1",
    "GGML_Q4_K",
    "GGML_Q5_0",
    "GGML_Q5_1",
    "GGML_Q5_K",
    "GGML_Q6_K",
    "GGML_Q8_0",
    "GGML_Q8_K",
    "GGMLType",
    "OUT_DTYPES",
    "SUPPORTED_TYPES",
    "decode",
    "scratch_bytes",
    "stored_bytes",
]

# ggml's type ids (enum ggml_type in ggml.h; Q8_1, the IQ and the integer types are not read)
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q4_1, GGML_Q5_0, GGML_Q5_1 = 0, 1, 2, 3, 6, 7
GGML_Q8_0, GGML_Q2_K, GGML_Q3_K, GGML_Q4_K, GGML_Q5_K, GGML_Q6_K = 8, 10, 11, 12, 13, 14
GGML_Q8_K, GGML_BF16 = 15, 30

HALF_SCALE_OFFSETS = {
    "Q4_0": (0,),
    "Q4_1": (0, 2),
    "Q5_0": (0,),
    "Q5_1": (0, 2),
    "Q8_0": (0,),
    "Q2_K": (80, 82),
    "Q3_K": (108,),
    "Q4_K": (0, 2),
    "Q5_K": (0, 2),
    "Q6_K": (208,),
}
"""Byte offsets of each block's f16 scales (d, then dmin where the type has one), as
llama.cpp's ``block_*`` structs lay them out; Q8_K's d is an f32 at offset 0. What writes
random blocks with sane scales (the tests, the benches) sets these bytes."""

QK = 32
"""Values in a block of the simple types (Q4_0 … Q8_0)."""
QK_K = 256
"""Values in a K super-block."""
CHUNK_BYTES = 1 << 20
"""About how many bytes of the file one decoding step takes (whole blocks)."""

LOW_NIBBLE = 0x0F
SIX_BITS = 0x3F


@dataclass(frozen=True)
class GGMLType:
    """One storage type.

    Attributes:
        type_id: ggml's id, e.g. 12.
        name: e.g. ``"Q4_K"``.
        block_values: values per block (1 for the plain float types).
        block_bytes: bytes per block.
    """

    type_id: int
    name: str
    block_values: int
    block_bytes: int


BlockDecoder = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], None]
"""(blocks (n, block_bytes) uint8, out (n, block_values) float32, codes (n, block_values)
uint8 scratch) -> None: decodes n blocks into ``out``."""


def _half(blocks: torch.Tensor, offset: int) -> torch.Tensor:
    """The f16 at byte ``offset`` of each block, as (n, 1) float32 (exact)."""
    return blocks[:, offset : offset + 2].view(torch.float16).float()  # (n, 1)


def _shifts(*amounts: int) -> torch.Tensor:
    """Shift amounts as a (len, 1) uint8 column, to take several bit fields of a row of
    bytes at once by broadcasting."""
    return torch.tensor(amounts, dtype=torch.uint8).view(-1, 1)  # (len, 1)


def _nibbles(packed: torch.Tensor, out: torch.Tensor) -> None:
    """Bytes (..., k) -> out (..., 2, k): their low nibbles, then their high nibbles."""
    torch.stack((packed & LOW_NIBBLE, packed >> 4), dim=-2, out=out)


def _bit_fields(packed: torch.Tensor, shifts: torch.Tensor, mask: int) -> torch.Tensor:
    """Bytes (..., k) and shifts (f, 1) -> (..., f, k): field i is ``(byte >> shifts[i]) &
    mask`` of every byte."""
    return (packed.unsqueeze(-2) >> shifts) & mask  # (..., f, k)


def _codes_to_float(codes: torch.Tensor, out: torch.Tensor, offset: int = 0) -> None:
    """out = float(codes − offset): the codes (0 … 63) made signed as int8 first, as ggml
    does, then converted once into ``out``."""
    if offset:
        signed = codes.view(torch.int8)
        signed.sub_(offset)
        out.copy_(signed)
    else:
        out.copy_(codes)


def _fifth_bits(qh: torch.Tensor) -> torch.Tensor:
    """Q5_0/Q5_1's 32-bit word of fifth bits, (n, 4) bytes, as (n, 32) uint8 holding 16 where
    value j's bit is set (bit j of the word: byte j div 8, bit j mod 8)."""
    bits = _bit_fields(qh.unsqueeze(-1), _shifts(*range(8)).view(-1), 1)  # (n, 4, 8)
    return (bits << 4).view(qh.shape[0], QK)  # (n, 32)


def _f32(blocks: torch.Tensor, out: torch.Tensor, codes: torch.Tensor) -> None:
    """F32: (n, 4) bytes -> (n, 1)."""
    out.copy_(blocks.view(torch.float32))


def _f16(blocks: torch.Tensor, out: torch.Tensor, codes: torch.Tensor) -> None:
    """F16: (n, 2) bytes -> (n, 1), exact."""
    out.copy_(blocks.view(torch.float16))


def _bf16(blocks: torch.Tensor, out: torch.Tensor, codes: torch.Tensor) -> None:
    """BF16: (n, 2) bytes -> (n, 1), exact (the bits become a float32's top half)."""
    out.copy_(blocks.view(torch.bfloat16))


def _q8_0(blocks: torch.Tensor, out: torch.Tensor, codes: torch.Tensor) -> None:
    """Q8_0: (n, 34) -> (n, 32); y = q · d."""
    out.copy_(blocks[:, 2:].view(torch.int8))  # (n, 32)
    out.mul_(_half(blocks, 0))  # · (n, 1)


def _q4_0(blocks: torch.Tensor, out: torch.Tensor, codes: torch.Tensor) -> None:
    """Q4_0: (n, 18) -> (n, 32); y = d · (q − 8)."""
    _nibbles(blocks[:, 2:18], codes.view(-1, 2, 16))  # values 0-15 low, 16-31 high
    _codes_to_float(codes, out, offset=8)  # (n, 32)
    out.mul_(_half(blocks, 0))  # · (n, 1)


def _q4_1(blocks: torch.Tensor, out: torch.Tensor, codes: torch.Tensor) -> None:
    """Q4_1: (n, 20) -> (n, 32); y = d · q + m."""
    _nibbles(blocks[:, 4:20], codes.view(-1, 2, 16))
    _codes_to_float(codes, out)  # (n, 32)
    out.mul_(_half(blocks, 0)).add_(_half(blocks, 2))  # · d (n, 1), + m (n, 1)


def _q5_0(blocks: torch.Tensor, out: torch.Tensor, codes: torch.Tensor) -> None:
    """Q5_0: (n, 22) -> (n, 32); y = d · (q − 16)."""
    _nibbles(blocks[:, 6:22], codes.view(-1, 2, 16))
    codes.bitwise_or_(_fifth_bits(blocks[:, 2:6]))  # (n, 32)
    _codes_to_float(codes, out, offset=16)
    out.mul_(_half(blocks, 0))


def _q5_1(blocks: torch.Tensor, out: torch.Tensor, codes: torch.Tensor) -> None:
    """Q5_1: (n, 24) -> (n, 32); y = d · q + m."""
    _nibbles(blocks[:, 8:24], codes.view(-1, 2, 16))
    codes.bitwise_or_(_fifth_bits(blocks[:, 4:8]))  # (n, 32)
    _codes_to_float(codes, out)
    out.mul_(_half(blocks, 0)).add_(_half(blocks, 2))


def k_scales_mins(packed: torch.Tensor) -> torch.Tensor:
    """Q4_K/Q5_K's 12 scale bytes (n, 12), 4-byte aligned -> (n, [scales, minimums], 8)
    float32. Read as three 32-bit words a, b, c (bytes 0-3, 4-7, 8-11; see the module
    docstring), a byte at a time in each word: the masks keep each byte's own bits."""
    a, b, c = packed.view(torch.int32).unbind(1)  # (n,) each
    words = torch.stack(
        (
            a & 0x3F3F3F3F,  # scales 0-3: low 6 bits of a
            (c & 0x0F0F0F0F) | ((a >> 2) & 0x30303030),  # scales 4-7: c low, a's top 2
            b & 0x3F3F3F3F,  # minimums 0-3
            ((c >> 4) & 0x0F0F0F0F) | ((b >> 2) & 0x30303030),  # minimums 4-7
        ),
        dim=1,
    )  # (n, 4) int32
    return words.view(torch.uint8).float().view(-1, 2, 8)  # (n, 2, 8)


def _k_apply_scales_mins(blocks: torch.Tensor, out: torch.Tensor) -> None:
    """out (n, 256) holding float codes -> (d · sc) · q − (dmin · mn) per sub-block of 32."""
    d_dmin = blocks[:, 0:4].view(torch.float16).float()  # (n, 2): d, dmin
    factors = k_scales_mins(blocks[:, 4:16]) * d_dmin.unsqueeze(-1)  # (n, 2, 8)
    sub_blocks = out.view(-1, 8, 32)  # (n, sub-block, 32)
    sub_blocks.mul_(factors[:, 0].unsqueeze(-1))  # · d · sc (n, 8, 1)
    sub_blocks.sub_(factors[:, 1].unsqueeze(-1))  # − dmin · mn (n, 8, 1)


def _q4_k(blocks: torch.Tensor, out: torch.Tensor, codes: torch.Tensor) -> None:
    """Q4_K: (n, 144) -> (n, 256)."""
    _nibbles(blocks[:, 16:144].view(-1, 4, 32), codes.view(-1, 4, 2, 32))  # (n, group, lo/hi, 32)
    _codes_to_float(codes, out)
    _k_apply_scales_mins(blocks, out)


def _q5_k(blocks: torch.Tensor, out: torch.Tensor, codes: torch.Tensor) -> None:
    """Q5_K: (n, 176) -> (n, 256)."""
    _nibbles(blocks[:, 48:176].view(-1, 4, 32), codes.view(-1, 4, 2, 32))
    fifth = _bit_fields(blocks[:, 16:48], _shifts(*range(8)), 1)  # (n, sub-block, 32)
    codes.view(-1, 8, 32).bitwise_or_(fifth << 4)
    _codes_to_float(codes, out)
    _k_apply_scales_mins(blocks, out)


def _q6_k(blocks: torch.Tensor, out: torch.Tensor, codes: torch.Tensor) -> None:
    """Q6_K: (n, 210) -> (n, 256); y = (d · scale) · (q − 32), a scale per 16 values.

    The bit fields are taken two bytes at a time, as 16-bit words (a 210-byte block holds
    whole words; no four-byte ones): each mask repeats per byte (0x0F0F, 0x3030), so a shift
    of the word moves each byte's bits as a shift of the byte would, and the masks drop
    what crosses from one byte into the other (or the sign bits an int16 shift brings in).
    """
    ql = blocks[:, 0:128].view(torch.int16).view(-1, 2, 32)  # (n, half, 32 words of ql)
    low = codes.view(torch.int16).view(-1, 2, 2, 32)  # (n, half, low/high nibbles, 32 words)
    torch.bitwise_and(ql, 0x0F0F, out=low[:, :, 0])  # quarters 0-1: low nibbles
    torch.bitwise_and(ql >> 4, 0x0F0F, out=low[:, :, 1])  # quarters 2-3: high nibbles
    qh = blocks[:, 128:192].view(torch.int16).view(-1, 2, 16)  # (n, half, 16 words of qh)
    quarters = codes.view(torch.int16).view(-1, 2, 4, 16)  # (n, half, quarter, 16 words)
    for k, moved in enumerate((qh << 4, qh << 2, qh, qh >> 2)):  # bits 2k, 2k+1 -> 4, 5
        quarters[:, :, k].bitwise_or_(moved & 0x3030)
    _codes_to_float(codes, out, offset=32)
    scales = blocks[:, 192:208].view(torch.int8).float()  # (n, 16)
    out.view(-1, 16, 16).mul_((_half(blocks, 208) * scales).unsqueeze(-1))  # · (n, 16, 1)


def _two_bit_codes(packed: torch.Tensor, codes: torch.Tensor) -> None:
    """Q2_K/Q3_K's 64 bytes of 2-bit codes (n, 64) -> codes (n, 256): half h, quarter k is
    bits 2k, 2k + 1 of bytes 32h … 32h + 31."""
    fields = _bit_fields(packed.view(-1, 2, 32), _shifts(0, 2, 4, 6), 0x03)  # (n, 2, 4, 32)
    codes.view(-1, 2, 4, 32).copy_(fields)


def _q2_k(blocks: torch.Tensor, out: torch.Tensor, codes: torch.Tensor) -> None:
    """Q2_K: (n, 84) -> (n, 256); y = (d · scale) · q − (dmin · min), per 16 values."""
    _two_bit_codes(blocks[:, 16:80], codes)
    _codes_to_float(codes, out)
    packed = blocks[:, 0:16]  # (n, 16): scale low nibble, minimum high nibble
    scales = (_half(blocks, 80) * (packed & LOW_NIBBLE).float()).unsqueeze(-1)  # (n, 16, 1)
    mins = (_half(blocks, 82) * (packed >> 4).float()).unsqueeze(-1)  # (n, 16, 1)
    out.view(-1, 16, 16).mul_(scales).sub_(mins)


def _q3_k_scales(packed: torch.Tensor) -> torch.Tensor:
    """Q3_K's 12 scale bytes (n, 12) -> the sixteen signed scales (n, 16) float32."""
    low = torch.cat((packed[:, 0:8] & LOW_NIBBLE, packed[:, 0:8] >> 4), dim=1)  # (n, 16)
    high = _bit_fields(packed[:, 8:12], _shifts(0, 2, 4, 6), 0x03)  # (n, 4 shifts, 4 bytes)
    return (low | (high.reshape(-1, 16) << 4)).float() - 32  # (n, 16)


def _q3_k(blocks: torch.Tensor, out: torch.Tensor, codes: torch.Tensor) -> None:
    """Q3_K: (n, 110) -> (n, 256); y = (d · scale) · q, a scale per 16 values."""
    _two_bit_codes(blocks[:, 32:96], codes)
    third = _bit_fields(blocks[:, 0:32], _shifts(*range(8)), 1)  # (n, 4h + k, 32)
    codes.view(-1, 8, 32).bitwise_or_(third << 2)
    _codes_to_float(codes, out, offset=4)
    scales = _half(blocks, 108) * _q3_k_scales(blocks[:, 96:108])  # (n, 16)
    out.view(-1, 16, 16).mul_(scales.unsqueeze(-1))


def _q8_k(blocks: torch.Tensor, out: torch.Tensor, codes: torch.Tensor) -> None:
    """Q8_K: (n, 292) -> (n, 256); y = d · q with d float32."""
    out.copy_(blocks[:, 4:260].view(torch.int8))
    out.mul_(blocks[:, 0:4].view(torch.float32))  # · (n, 1)


SUPPORTED_TYPES: dict[int, GGMLType] = {
    t.type_id: t
    for t in (
        GGMLType(GGML_F32, "F32", 1, 4),
        GGMLType(GGML_F16, "F16", 1, 2),
        GGMLType(GGML_BF16, "BF16", 1, 2),
        GGMLType(GGML_Q4_0, "Q4_0", QK, 18),
        GGMLType(GGML_Q4_1, "Q4_1", QK, 20),
        GGMLType(GGML_Q5_0, "Q5_0", QK, 22),
        GGMLType(GGML_Q5_1, "Q5_1", QK, 24),
        GGMLType(GGML_Q8_0, "Q8_0", QK, 34),
        GGMLType(GGML_Q2_K, "Q2_K", QK_K, 84),
        GGMLType(GGML_Q3_K, "Q3_K", QK_K, 110),
        GGMLType(GGML_Q4_K, "Q4_K", QK_K, 144),
        GGMLType(GGML_Q5_K, "Q5_K", QK_K, 176),
        GGMLType(GGML_Q6_K, "Q6_K", QK_K, 210),
        GGMLType(GGML_Q8_K, "Q8_K", QK_K, 292),
    )
}
"""Every type :func:`decode` reads, by ggml id."""

_DECODERS: dict[int, BlockDecoder] = {
    GGML_F32: _f32,
    GGML_F16: _f16,
    GGML_BF16: _bf16,
    GGML_Q4_0: _q4_0,
    GGML_Q4_1: _q4_1,
    GGML_Q5_0: _q5_0,
    GGML_Q5_1: _q5_1,
    GGML_Q8_0: _q8_0,
    GGML_Q2_K: _q2_k,
    GGML_Q3_K: _q3_k,
    GGML_Q4_K: _q4_k,
    GGML_Q5_K: _q5_k,
    GGML_Q6_K: _q6_k,
    GGML_Q8_K: _q8_k,
}


def _type(type_id: int) -> GGMLType:
    """The :class:`GGMLType` of ``type_id``, or ValueError listing the supported ones."""
    entry = SUPPORTED_TYPES.get(type_id)
    if entry is None:
        names = ", ".join(t.name for t in SUPPORTED_TYPES.values())
        raise ValueError(f"ggml type {type_id!r} is not supported; supported: {names}")
    return entry


def stored_bytes(type_id: int, count: int) -> int:
    """Bytes that ``count`` values of a type occupy.

    Args:
        type_id: a ggml type id of :data:`SUPPORTED_TYPES`.
        count: number of values, a whole number of blocks.

    Returns:
        ``count / block_values · block_bytes``.

    Raises:
        ValueError: for an unsupported type, or a ``count`` that is negative, not an integer,
            or not a multiple of the type's block size.
    """
    entry = _type(type_id)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"count of {entry.name} values must be an integer >= 0, got {count!r}")
    if count % entry.block_values:
        raise ValueError(
            f"{count} values are not a whole number of {entry.name} blocks "
            f"({entry.block_values} values each)"
        )
    return count // entry.block_values * entry.block_bytes


def scratch_bytes(type_id: int, out_dtype: torch.dtype = torch.float32) -> int:
    """Bytes :func:`decode` holds besides its output while decoding a type: one step's
    staged bytes and integer codes, and for a bfloat16 output its float32 values.

    Args:
        type_id: a ggml type id of :data:`SUPPORTED_TYPES`. out_dtype: one of
            :data:`OUT_DTYPES`.

    Returns:
        The bytes (about :data:`CHUNK_BYTES` of staging plus the step's values).

    Raises:
        ValueError: for an unsupported type.
    """
    entry = _type(type_id)
    values = CHUNK_BYTES // entry.block_bytes * entry.block_values  # one step's values
    rounded = values * torch.float32.itemsize if out_dtype != torch.float32 else 0
    return CHUNK_BYTES + values * torch.uint8.itemsize + rounded


def _byte_array(raw) -> np.ndarray:
    """``raw`` as a 1-D uint8 numpy array over the same memory (no copy)."""
    if isinstance(raw, np.ndarray):
        if raw.dtype != np.uint8 or raw.ndim != 1:
            raise ValueError(f"raw must be a 1-D uint8 array, got {raw.dtype} {raw.shape}")
        return raw
    if isinstance(raw, bytes | bytearray | memoryview | mmap.mmap):
        return np.frombuffer(raw, dtype=np.uint8)
    raise ValueError(f"raw must be bytes, a memory map or a uint8 array, got {type(raw).__name__}")


OUT_DTYPES = (torch.float32, torch.bfloat16)
"""What :func:`decode` writes: float32, or bfloat16 (the float32 values rounded)."""


def _output(out: torch.Tensor | None, count: int) -> torch.Tensor:
    """(count,) float32 or bfloat16: a view of ``out`` (checked) or a new float32 tensor."""
    if out is None:
        return torch.empty(count, dtype=torch.float32)
    if (
        out.dtype not in OUT_DTYPES
        or out.device.type != "cpu"
        or not out.is_contiguous()
        or out.numel() != count
    ):
        raise ValueError(
            f"out must be a contiguous float32 or bfloat16 tensor of {count} values on the "
            f"CPU, got {out.dtype} {tuple(out.shape)} on {out.device}"
        )
    return out.view(count)


def decode(type_id: int, raw, count: int, out: torch.Tensor | None = None) -> torch.Tensor:
    """Decode one tensor's stored bytes to float32 values, in file order.

    Args:
        type_id: its ggml type id (one of :data:`SUPPORTED_TYPES`, e.g. ``GGML_Q4_K``).
        raw: exactly its bytes: a 1-D uint8 numpy array (e.g. ``np.frombuffer`` of a memory
            map at the tensor's offset, read-only is fine), ``bytes``, a ``memoryview`` or a
            ``mmap``; read a megabyte at a time, never copied whole.
        count: its number of values (the product of its dims).
        out: optional contiguous CPU tensor of ``count`` values (any shape) to write into,
            float32, or bfloat16: then each step's float32 values are rounded into it while
            they are in cache (the same bits as decoding to float32, then ``.to(bfloat16)``),
            and no float32 copy of the tensor is made.

    Returns:
        (count,) float32 tensor, or a view of ``out`` when given.

    Raises:
        ValueError: for an unsupported type (listing the supported ones), a ``count`` not a
            whole number of blocks, ``raw`` of another length than ``count`` values take or
            of another kind, or an unsuitable ``out``.
    """
    entry = _type(type_id)
    nbytes = stored_bytes(type_id, count)
    data = _byte_array(raw)
    if data.size != nbytes:
        raise ValueError(f"{count} {entry.name} values take {nbytes} bytes, raw has {data.size}")
    values = _output(out, count)
    if type_id == GGML_Q6_K and values.dtype == torch.bfloat16:
        if ggml_kernel.q6_k_to_bfloat16(data, values):
            return values  # the C kernel: the same bits in one pass over the file
    size, width = entry.block_bytes, entry.block_values
    total = count // width  # blocks
    step = max(1, min(total, CHUNK_BYTES // size))  # blocks per step
    staging = torch.empty(step * size, dtype=torch.uint8)  # the step's bytes, reused
    codes = torch.empty((step, width), dtype=torch.uint8)  # integer codes scratch, reused
    staged = staging.numpy()  # the same memory, for numpy's copy from a read-only buffer
    rounding = values.dtype != torch.float32
    scratch = torch.empty((step, width), dtype=torch.float32) if rounding else None
    decoder = _DECODERS[type_id]
    for first in range(0, total, step):
        n = min(step, total - first)
        staged[: n * size] = data[first * size : (first + n) * size]
        blocks = staging[: n * size].view(n, size)  # (n, block bytes)
        target = values[first * width : (first + n) * width].view(n, width)
        if rounding:  # decode in float32, then round the step's values into the output
            decoder(blocks, scratch[:n], codes[:n])
            target.copy_(scratch[:n])
        else:
            decoder(blocks, target, codes[:n])
    return values
