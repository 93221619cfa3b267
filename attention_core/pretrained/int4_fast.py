"""The fast path of :func:`~attention_core.pretrained.int4.pack_int4`: a 4-bit GGUF matrix's
nibbles written straight into torch's CPU int4 layout, without codes or their int32 copy.

torch's packing (``aten._convert_weight_to_int4pack_for_cpu``) takes the codes as an (N, K)
int32 matrix and, on AVX-512 and AVX2 builds, lays them out per block of ``B`` rows (64 and
32): byte j of column k of block b holds the code of row bB + j (low nibble) and of row
bB + B/2 + j (high nibble), for j < B/2, column after column: (N/B, K, B/2) bytes. This
layout is not a documented contract, so :func:`torch_layout_rows` checks it at run time: it
packs a small random matrix both ways and returns ``B`` only when the bytes are torch's own;
otherwise, and for matrices whose row count is not a multiple of ``B``, :func:`pack_stack`
returns None and the caller takes the readable path (``int4_parts`` then ``pack_int4``).

A file's blocks keep their nibbles in groups: byte l of a group of L bytes holds value l
(low nibble) and value L + l (high nibble) of that group's 2L values (Q4_0 and Q4_1: one
group of 16 per block of 32; Q4_K: four groups of 32 per block of 256). So with rows a
(= bB + j) and b (= a + B/2), byte l of a group gives two packed bytes:
``(a & 15) | (b << 4)`` for value l and ``(a >> 4) | (b & 0xF0)`` for value L + l.

Switch it off with ``with int4_fast.disabled():`` (the tests compare both paths). Where
``attention_core._ggml`` is built, :func:`_pack_part`'s torch ops give way to its C kernel
(:mod:`attention_core.pretrained.ggml_kernel`), the same bytes in one pass over the file;
``with ggml_kernel.disabled():`` runs the torch ops.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import torch

from attention_core.native import ThreadSwitch
from attention_core.pretrained import ggml_kernel
from attention_core.pretrained.binary import FileData
from attention_core.pretrained.ggml_quants import (
    CHUNK_BYTES,
    GGML_Q4_0,
    GGML_Q4_1,
    GGML_Q4_K,
    SUPPORTED_TYPES,
    k_scales_mins,
)
from attention_core.pretrained.gguf_file import NIBBLE_BITS, NIBBLE_MASK, TensorInfo
from attention_core.pretrained.int4 import (
    INT4_CODE_OFFSET,
    INT4_GROUP,
    PackedInt4,
    check_int4_matrix,
    int4_available,
    pack_int4_codes,
    scale_zero,
)

__all__ = ["disabled", "pack_halves", "pack_stack", "torch_layout_rows"]

LAYOUT_ROWS = (64, 32)
"""The block heights ``B`` of torch's layouts that :func:`torch_layout_rows` tries (AVX-512,
AVX2)."""
PROBE_SHAPE = (128, 64)  # (rows, cols) of the probe matrix: whole blocks of either height
PROBE_SEED = 31
HIGH_NIBBLE = 0xF0
NIBBLE_GROUPS = {GGML_Q4_0: (2, 1, 16), GGML_Q4_1: (4, 1, 16), GGML_Q4_K: (16, 4, 32)}
"""ggml type -> (offset of the nibble bytes in a block, groups per block, bytes per group)."""

_switch = ThreadSwitch()
disabled = _switch.disabled


def pack_halves(codes: torch.Tensor, block_rows: int) -> torch.Tensor:
    """Codes (N, K) uint8 in 0..15, N a multiple of ``block_rows`` = B -> (N, K/2) uint8 in
    the layout above (rows bB + j and bB + B/2 + j share a byte, column after column)."""
    rows, cols = codes.shape
    halves = codes.view(rows // block_rows, 2, block_rows // 2, cols)  # (N/B, 2, B/2, K)
    paired = halves[:, 0] | (halves[:, 1] << NIBBLE_BITS)  # (N/B, B/2, K)
    return paired.transpose(1, 2).contiguous().view(rows, cols // 2)  # (N/B, K, B/2)


@functools.cache
def torch_layout_rows() -> int | None:
    """The block height ``B`` of torch's int4 packing on this machine, when its bytes are
    :func:`pack_halves`'s for one of :data:`LAYOUT_ROWS`; None otherwise (or without the
    kernel). Checked once, on a random (128, 64) matrix."""
    if not int4_available():
        return None
    generator = torch.Generator().manual_seed(PROBE_SEED)
    codes = torch.randint(0, NIBBLE_MASK + 1, PROBE_SHAPE, dtype=torch.uint8, generator=generator)
    theirs = pack_int4_codes(codes)  # (128, 32) uint8
    for block_rows in LAYOUT_ROWS:
        if torch.equal(pack_halves(codes, block_rows), theirs):
            return block_rows
    return None


def _scales(blocks: torch.Tensor, type_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Blocks (n, block bytes) -> scale and minimum (n, groups of 32) float32, the products
    :func:`~attention_core.pretrained.int4.int4_parts` computes (the same float32 bits)."""
    d = blocks[:, 0:2].view(torch.float16).float()  # (n, 1)
    if type_id == GGML_Q4_0:  # y = d·(q − 8): minimum −8·d
        return d, d * -INT4_CODE_OFFSET
    if type_id == GGML_Q4_1:  # y = d·q + m
        return d, blocks[:, 2:4].view(torch.float16).float()
    sc_mn = k_scales_mins(blocks[:, 4:16])  # Q4_K: (n, [sc, mn], 8)
    d_min = blocks[:, 2:4].view(torch.float16).float()  # dmin (n, 1)
    return d * sc_mn[:, 0], -(d_min * sc_mn[:, 1])  # d·sc, −(dmin·mn) (n, 8)


def _pack_part(
    data: FileData, info: TensorInfo, out: torch.Tensor, scales: torch.Tensor, block_rows: int
) -> None:
    """Write one matrix's nibbles into ``out`` (its N/B blocks of (K, B/2) bytes) and its
    scales and minimums into ``scales`` (2, K/32, its N rows) float32, as the kernel lays
    them out, a few blocks of rows (about :data:`CHUNK_BYTES` of the file) at a time
    through a staging copy; or, where it is built and on, by the C kernel
    (:func:`~attention_core.pretrained.ggml_kernel.pack_int4`) in one pass over the file."""
    raw = np.frombuffer(data, dtype=np.uint8, count=info.nbytes, offset=info.start)
    if ggml_kernel.pack_int4(raw, info.ggml_type, info.shape, block_rows, out, scales):
        return  # the C kernel wrote the same bytes in one pass
    rows, cols = info.shape
    entry = SUPPORTED_TYPES[info.ggml_type]
    offset, groups, group_bytes = NIBBLE_GROUPS[info.ggml_type]
    per_row = cols // entry.block_values  # blocks in a row
    row_bytes = per_row * entry.block_bytes
    step = max(1, CHUNK_BYTES // (row_bytes * block_rows))  # blocks of B rows per step
    staging = torch.empty(step * block_rows * row_bytes, dtype=torch.uint8)
    staged = staging.numpy()  # the same memory, for numpy's copy from a read-only buffer
    half = block_rows // 2
    groups_per_row = cols // INT4_GROUP
    for first in range(0, rows // block_rows, step):
        count = min(step, rows // block_rows - first)
        size = count * block_rows * row_bytes
        staged[:size] = raw[first * block_rows * row_bytes : first * block_rows * row_bytes + size]
        blocks = staging[:size].view(count, 2, half, per_row, entry.block_bytes)
        nibbles = blocks[..., offset : offset + groups * group_bytes]  # (n, 2, B/2, blk, G·L)
        nibbles = nibbles.unflatten(-1, (groups, group_bytes))  # (n, 2, B/2, blk, G, L)
        top, bottom = nibbles[:, 0], nibbles[:, 1]  # rows bB + j and bB + B/2 + j
        target = out[first : first + count].view(count, per_row, groups, 2, group_bytes, half)
        low = target[:, :, :, 0].permute(0, 4, 1, 2, 3)  # value l: (n, B/2, blk, G, L)
        high = target[:, :, :, 1].permute(0, 4, 1, 2, 3)  # value L + l
        torch.bitwise_or(top & NIBBLE_MASK, bottom << NIBBLE_BITS, out=low)
        torch.bitwise_or(top >> NIBBLE_BITS, bottom & HIGH_NIBBLE, out=high)
        row_slice = slice(first * block_rows, (first + count) * block_rows)
        found = _scales(staging[:size].view(-1, entry.block_bytes), info.ggml_type)
        for target_scales, values in zip(scales, found, strict=True):  # scale, minimum
            target_scales[:, row_slice] = values.view(-1, groups_per_row).t()  # (K/32, rows)


def pack_stack(data: FileData, parts: Sequence[TensorInfo]) -> PackedInt4 | None:
    """Stack 4-bit matrices of one width by rows and pack them for the int4 kernel, straight
    from the file's nibbles: what ``pack_int4(concat_parts([int4_parts(...) ...]))`` gives,
    byte for byte.

    Args:
        data: the whole GGUF file. parts: (rows, K) matrices stored as Q4_0, Q4_1 or Q4_K.

    Returns:
        :class:`~attention_core.pretrained.int4.PackedInt4`, or None where this path does
        not apply: switched off, torch's layout not the one checked, a part's rows not a
        multiple of its block height, or a part of another type.

    Raises:
        ValueError: as :func:`~attention_core.pretrained.int4.int4_parts` does for a part.
    """
    block_rows = torch_layout_rows()
    if _switch.off or block_rows is None:
        return None
    if any(p.ggml_type not in NIBBLE_GROUPS or len(p.shape) != 2 for p in parts):
        return None
    if any(p.shape[0] % block_rows or p.shape[1] != parts[0].shape[1] for p in parts):
        return None
    for info in parts:
        check_int4_matrix(data, info)  # type, whole blocks, bytes inside the file
    rows, cols = sum(p.shape[0] for p in parts), parts[0].shape[1]
    packed = torch.empty(rows // block_rows, cols, block_rows // 2, dtype=torch.uint8)
    scales = torch.empty(2, cols // INT4_GROUP, rows)  # [scale, minimum] (K/32, N) float32
    first = 0
    for info in parts:
        blocks, stop = info.shape[0] // block_rows, first + info.shape[0]
        part_packed = packed[first // block_rows : first // block_rows + blocks]
        _pack_part(data, info, part_packed, scales[:, :, first:stop], block_rows)
        first = stop
    pairs = scale_zero(scales[0].t(), scales[1].t())  # (N, K/32) views of (K/32, N)
    return PackedInt4(packed.view(rows, cols // 2), pairs, (rows, cols))
