"""A small reader for GGUF files (llama.cpp's format): header, metadata, tensors, dequantisation.

GGUF versions 2 and 3, every metadata value type, and every common tensor storage type (F32,
F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the K types Q2_K … Q8_K, decoded by
:mod:`~attention_core.pretrained.ggml_quants`). It reads from bytes already in memory or
mapped (the caller checks their SHA-256 first), so nothing is parsed twice, and turns a
truncated or malformed file into a ``ValueError`` that names the field and says where it went
wrong: a wrong magic or version, a file that ends early, a count, length or dims too large
for the file (refused before anything is allocated), a duplicate key or tensor name, a
tensor offset off the alignment or whose data runs past the end, a row that is not a whole
number of blocks.

Layout (little-endian): magic ``GGUF``, version (u32), tensor count (u64), metadata count
(u64); the metadata as (key string, value type u32, value); the tensor infos as (name, number
of dims u32, dims u64 each, ggml type u32, offset u64); then, aligned to
``general.alignment`` (default 32) bytes, the tensor data. A string is a u64 length then
UTF-8 bytes. Dims list the fastest-varying axis first, so a (rows, cols) matrix is stored
with dims (cols, rows).

The storage types' block layouts are described in :mod:`~attention_core.pretrained.ggml_quants`;
Q4_1's is also kept here as a numpy record (:data:`Q4_1_BLOCK`) for
:mod:`~attention_core.pretrained.int4`, which reads its codes without decoding them.
"""

from __future__ import annotations

import math
import mmap
import struct
from dataclasses import dataclass

import numpy as np
import torch

from attention_core.pretrained.binary import BinaryCursor, FileData, TruncatedFileError
from attention_core.pretrained.ggml_quants import (
    GGML_F16,
    GGML_F32,
    GGML_Q4_1,
    GGML_Q8_0,
    SUPPORTED_TYPES,
    decode,
)

__all__ = [
    "BLOCK_VALUES",
    "GGML_F16",
    "GGML_F32",
    "GGML_Q4_1",
    "GGML_Q8_0",
    "GGML_TYPES",
    "GGUFFile",
    "NIBBLE_BITS",
    "NIBBLE_MASK",
    "Q4_1_BLOCK",
    "Q8_0_BLOCK",
    "TensorInfo",
    "dequantize",
    "header_value",
    "parse_gguf",
]

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
ALIGNMENT_KEY = "general.alignment"
MAX_DIMS = 4
MAX_ELEMENTS = 2**63 - 1  # ggml counts values in int64
MIN_TENSOR_INFO_BYTES = 8 + 4 + 8 + 4 + 8  # name length, dims count, one dim, type, offset
MIN_METADATA_BYTES = 8 + 4 + 1  # key length, value type, a one-byte value
STRING_LENGTH_BYTES = 8
BLOCK_VALUES = 32
NIBBLE_MASK = 0x0F
NIBBLE_BITS = 4
HEADER_SCAN_ENTRIES = 16
"""Metadata entries :func:`header_value` reads at most."""

# metadata value types
_SCALAR_FORMATS = {
    0: "B",  # UINT8
    1: "b",  # INT8
    2: "H",  # UINT16
    3: "h",  # INT16
    4: "I",  # UINT32
    5: "i",  # INT32
    6: "f",  # FLOAT32
    7: "?",  # BOOL
    10: "Q",  # UINT64
    11: "q",  # INT64
    12: "d",  # FLOAT64
}
_NUMPY_TYPES = {
    0: np.uint8,
    1: np.int8,
    2: np.uint16,
    3: np.int16,
    4: np.uint32,
    5: np.int32,
    6: np.float32,
    7: np.bool_,
    10: np.uint64,
    11: np.int64,
    12: np.float64,
}
STRING_TYPE = 8
ARRAY_TYPE = 9

# numpy records of the Q8_0 and Q4_1 blocks (int4.py reads Q4_1 codes through them)
Q8_0_BLOCK = np.dtype([("scale", "<f2"), ("quants", "i1", (BLOCK_VALUES,))])
Q4_1_BLOCK = np.dtype(
    [("scale", "<f2"), ("minimum", "<f2"), ("packed", "u1", (BLOCK_VALUES // 2,))]
)
GGML_TYPES = {
    type_id: (entry.name, entry.block_values, entry.block_bytes)
    for type_id, entry in SUPPORTED_TYPES.items()
}
"""The readable storage types: ggml id -> (name, values per block, bytes per block)."""


@dataclass(frozen=True)
class TensorInfo:
    """Where one tensor lies in the file and how it is stored.

    Attributes:
        name: the tensor's name, e.g. ``"blk.0.attn_q.weight"``.
        shape: its shape in row-major (numpy/torch) order, i.e. the file's dims reversed.
        ggml_type: the storage type's ggml id (those of :data:`GGML_TYPES` are readable).
        start: absolute byte offset of its data in the file.
        nbytes: bytes of stored data.
    """

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    start: int
    nbytes: int

    @property
    def type_name(self) -> str:
        """The storage type's name, e.g. ``"Q4_1"`` (``"type <n>"`` when not readable)."""
        entry = GGML_TYPES.get(self.ggml_type)
        return entry[0] if entry else f"type {self.ggml_type}"

    @property
    def numel(self) -> int:
        """Number of values."""
        return math.prod(self.shape)

    def rows(self, start: int, stop: int) -> TensorInfo:
        """The info of rows [start, stop) of this matrix, to decode part of it.

        A row always fills whole blocks (:func:`parse_gguf` checks it), so a run of rows is a
        run of bytes.

        Args:
            start, stop: row range, 0 <= start < stop <= rows.

        Returns:
            :class:`TensorInfo` of shape (stop - start, *shape[1:]) over those bytes.

        Raises:
            ValueError: for a 1-D tensor or a range outside its rows.
        """
        if len(self.shape) < 2 or not 0 <= start < stop <= self.shape[0]:
            raise ValueError(
                f"rows [{start}, {stop}) of tensor {self.name!r} of shape {self.shape}: "
                "need a matrix and 0 <= start < stop <= its rows"
            )
        row_bytes = self.nbytes // self.shape[0]
        return TensorInfo(
            self.name,
            (stop - start, *self.shape[1:]),
            self.ggml_type,
            self.start + start * row_bytes,
            (stop - start) * row_bytes,
        )


@dataclass(frozen=True)
class GGUFFile:
    """A parsed GGUF file: its metadata and tensor table, over the file's bytes.

    Attributes:
        version: the GGUF version (2 or 3).
        metadata: key -> value; numbers as Python scalars, strings as ``str``, arrays of
            numbers as 1-D numpy arrays, arrays of strings as lists of ``str``.
        tensors: name -> :class:`TensorInfo`, in file order.
        data: the whole file's bytes or memory map (read, never written).
    """

    version: int
    metadata: dict[str, object]
    tensors: dict[str, TensorInfo]
    data: FileData

    def tensor(self, name: str, out: torch.Tensor | None = None) -> torch.Tensor:
        """Dequantise one tensor to float32.

        Args:
            name: a tensor name in :attr:`tensors`.
            out: optional contiguous float32 tensor with as many values, written into.

        Returns:
            float32 tensor of shape ``tensors[name].shape`` (owning its memory, or ``out``).

        Raises:
            ValueError: for an unknown name, a storage type this reader cannot decode, or
                an unsuitable ``out``.
        """
        info = self.tensors.get(name)
        if info is None:
            raise ValueError(f"no tensor {name!r} in the GGUF file ({len(self.tensors)} tensors)")
        return dequantize(self.data, info, out)


def _string(cursor: BinaryCursor, what: str) -> str:
    """One GGUF string: a u64 length, then that many UTF-8 bytes."""
    length = cursor.scalar("Q", f"length of {what}")
    raw = cursor.take(length, what)
    try:
        return str(raw, "utf-8")
    except UnicodeDecodeError as err:
        start = cursor.offset - length
        raise ValueError(f"GGUF {what} at offset {start} is not UTF-8") from err


def _strings(cursor: BinaryCursor, count: int, what: str) -> list[str]:
    """``count`` GGUF strings in a row (the tokenizer's 49k tokens): one tight loop."""
    cursor.need(count * STRING_LENGTH_BYTES, f"{count} strings of {what}")
    data, view, offset, size = cursor.data, cursor.view, cursor.offset, len(cursor.data)
    unpack = struct.Struct("<Q").unpack_from
    out: list[str] = []
    append = out.append
    end = offset
    try:
        for _ in range(count):
            end = offset + STRING_LENGTH_BYTES  # where the length ends, until it is read
            (length,) = unpack(data, offset)
            offset, end = end, end + length
            if end > size:
                raise struct.error("string past the end")
            append(str(view[offset:end], "utf-8"))
            offset = end
    except struct.error as err:
        item = f"item {len(out)} of {count} of {what}"
        raise TruncatedFileError("GGUF file", item, end, size) from err
    except UnicodeDecodeError as err:
        raise ValueError(f"GGUF {what} item {len(out)} is not UTF-8") from err
    cursor.offset = offset
    return out


def _read_value(cursor: BinaryCursor, value_type: int, key: str):
    """One metadata value of ``value_type`` (scalar, string or array)."""
    if value_type in _SCALAR_FORMATS:
        return cursor.scalar(_SCALAR_FORMATS[value_type], f"value of {key!r}")
    if value_type == STRING_TYPE:
        return _string(cursor, f"value of {key!r}")
    if value_type == ARRAY_TYPE:
        item_type = cursor.scalar("I", f"item type of {key!r}")
        count = cursor.scalar("Q", f"length of {key!r}")
        if item_type == STRING_TYPE:
            return _strings(cursor, count, repr(key))
        if item_type in _NUMPY_TYPES:
            return cursor.array(_NUMPY_TYPES[item_type], count, repr(key))
        raise ValueError(f"GGUF metadata {key!r}: unsupported array item type {item_type}")
    raise ValueError(f"GGUF metadata {key!r}: unknown value type {value_type}")


def _read_tensor_info(cursor: BinaryCursor, index: int) -> tuple[str, tuple[int, ...], int, int]:
    """One tensor-table entry: (name, row-major shape, ggml type, offset in the data section)."""
    name = _string(cursor, f"name of tensor {index}")
    n_dims = cursor.scalar("I", f"dims of {name!r}")
    if not 1 <= n_dims <= MAX_DIMS:
        raise ValueError(f"GGUF tensor {name!r} has {n_dims} dims; expected 1 to {MAX_DIMS}")
    dims = [cursor.scalar("Q", f"dims of {name!r}") for _ in range(n_dims)]
    if math.prod(dims) > MAX_ELEMENTS or max(dims) > MAX_ELEMENTS:
        raise ValueError(f"GGUF tensor {name!r} has dims {dims}: more than 2**63 - 1 values")
    ggml_type = cursor.scalar("I", f"type of {name!r}")
    offset = cursor.scalar("Q", f"offset of {name!r}")
    return name, tuple(reversed(dims)), ggml_type, offset


def _stored_bytes(name: str, shape: tuple[int, ...], ggml_type: int) -> int:
    """Bytes the tensor occupies, or ValueError when its row does not fill whole blocks."""
    entry = GGML_TYPES.get(ggml_type)
    if entry is None:
        return 0  # unknown type: the table stays readable; dequantize() refuses it by name
    type_name, block_values, block_bytes = entry
    if shape[-1] % block_values:
        raise ValueError(
            f"GGUF tensor {name!r} ({type_name}) has rows of {shape[-1]} values, "
            f"not a multiple of the block size {block_values}"
        )
    return math.prod(shape) // block_values * block_bytes


def _check_count(cursor: BinaryCursor, count: int, entry_bytes: int, what: str) -> None:
    """A header count no larger than the rest of the file can hold (``entry_bytes`` each at
    least), so an absurd one is refused before any loop or allocation."""
    cursor.need(count * entry_bytes, f"{what} {count} (at least {entry_bytes} bytes each)")


def parse_gguf(data: bytes) -> GGUFFile:
    """Parse a GGUF file's header, metadata and tensor table from its bytes.

    Args:
        data: the whole file (kept, not copied: tensors are decoded from it on demand).

    Returns:
        :class:`GGUFFile`; tensors are decoded later, one at a time, by
        :meth:`GGUFFile.tensor`.

    Raises:
        TruncatedFileError: a ``ValueError`` naming the field, the size it claims and the
            file's size, when the file ends before a field or a tensor's data.
        ValueError: naming the field, when the magic is not ``GGUF``, the version is not 2
            or 3, a value type is unknown, a count,
            length or dims are more than the file can hold, a string is not UTF-8, a key or
            tensor name repeats, a tensor's offset is off the alignment or its data lies
            outside the file, or a tensor's rows are not whole blocks of its type.
    """
    if not isinstance(data, bytes | bytearray | mmap.mmap):
        raise ValueError(f"data must be bytes or a memory map, got {type(data).__name__}")
    if data[:4] != GGUF_MAGIC:
        raise ValueError(f"not a GGUF file: it starts with {data[:4]!r}, not {GGUF_MAGIC!r}")
    cursor = BinaryCursor(data, "GGUF file", offset=len(GGUF_MAGIC))
    version = cursor.scalar("I", "version")
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(f"GGUF version {version} is not supported; readable: {SUPPORTED_VERSIONS}")
    tensor_count = cursor.scalar("Q", "tensor count")
    kv_count = cursor.scalar("Q", "metadata count")
    _check_count(cursor, kv_count, MIN_METADATA_BYTES, "metadata count")
    metadata: dict[str, object] = {}
    for index in range(kv_count):
        key = _string(cursor, f"metadata key {index}")
        if key in metadata:
            raise ValueError(f"GGUF metadata key {key!r} appears twice (entry {index})")
        value_type = cursor.scalar("I", f"type of {key!r}")
        metadata[key] = _read_value(cursor, value_type, key)
    _check_count(cursor, tensor_count, MIN_TENSOR_INFO_BYTES, "tensor count")
    entries = [_read_tensor_info(cursor, index) for index in range(tensor_count)]
    alignment = metadata.get(ALIGNMENT_KEY, DEFAULT_ALIGNMENT)
    if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment < 1:
        raise ValueError(f"GGUF {ALIGNMENT_KEY} must be a positive integer, got {alignment!r}")
    data_start = -(-cursor.offset // alignment) * alignment  # round up to the alignment
    tensors: dict[str, TensorInfo] = {}
    for name, shape, ggml_type, offset in entries:
        if name in tensors:
            raise ValueError(f"GGUF tensor name {name!r} appears twice")
        if offset % alignment:
            raise ValueError(
                f"GGUF offset of tensor {name!r} is {offset}, not a multiple of the "
                f"alignment {alignment}"
            )
        nbytes = _stored_bytes(name, shape, ggml_type)
        start = data_start + offset
        if start + nbytes > len(data):
            raise TruncatedFileError("GGUF file", f"tensor {name!r}", start + nbytes, len(data))
        tensors[name] = TensorInfo(name, shape, ggml_type, start, nbytes)
    return GGUFFile(version=version, metadata=metadata, tensors=tensors, data=data)


def header_value(head: FileData, key: str) -> object | None:
    """One metadata value from a GGUF file's first bytes, without parsing the rest (to sort
    files by architecture before any is opened: writers put ``general.architecture`` first).

    Args:
        head: the file's first bytes (a few KiB hold the first metadata entries).
        key: the metadata key.

    Returns:
        The value (as :func:`parse_gguf` reads it) when ``key`` is among the first
        :data:`HEADER_SCAN_ENTRIES` entries that ``head`` holds; None otherwise, and when
        ``head`` is not the start of a GGUF file of a readable version (never an exception).
    """
    if head[: len(GGUF_MAGIC)] != GGUF_MAGIC:
        return None
    cursor = BinaryCursor(head, "GGUF header", offset=len(GGUF_MAGIC))
    try:
        if cursor.scalar("I", "version") not in SUPPORTED_VERSIONS:
            return None
        cursor.scalar("Q", "tensor count")
        count = cursor.scalar("Q", "metadata count")
        for index in range(min(count, HEADER_SCAN_ENTRIES)):
            name = _string(cursor, f"metadata key {index}")
            value = _read_value(cursor, cursor.scalar("I", f"type of {name!r}"), name)
            if name == key:
                return value
    except ValueError:
        return None
    return None


def dequantize(data: FileData, info: TensorInfo, out: torch.Tensor | None = None) -> torch.Tensor:
    """Decode one tensor's stored bytes to float32 (see
    :func:`~attention_core.pretrained.ggml_quants.decode`).

    Args:
        data: the whole file.
        info: the tensor's :class:`TensorInfo`.
        out: optional contiguous float32 or bfloat16 tensor of ``info.numel`` values to
            write into (e.g. rows of a stacked matrix), saving a copy; bfloat16 receives the
            float32 values rounded.

    Returns:
        float32 tensor of shape ``info.shape`` (``out`` viewed in that shape when given).

    Raises:
        ValueError: naming the tensor, for a storage type not in :data:`GGML_TYPES` (with
            its id and the readable names), bytes outside ``data``, or an ``out`` of another
            dtype or size, or not contiguous.
    """
    if info.ggml_type not in GGML_TYPES:
        readable = ", ".join(entry[0] for entry in GGML_TYPES.values())
        raise ValueError(
            f"tensor {info.name!r} is stored as ggml type {info.ggml_type}, which this reader "
            f"cannot decode; readable types: {readable}"
        )
    if info.start < 0 or info.start + info.nbytes > len(data):
        raise ValueError(
            f"tensor {info.name!r} needs bytes [{info.start}, {info.start + info.nbytes}), "
            f"the file has {len(data)}"
        )
    if info.nbytes:
        raw = np.frombuffer(data, dtype=np.uint8, count=info.nbytes, offset=info.start)
    else:  # an empty tensor may sit at the very end, where numpy refuses an offset
        raw = np.empty(0, dtype=np.uint8)
    try:
        values = decode(info.ggml_type, raw, info.numel, out)  # (numel,)
    except ValueError as err:
        raise ValueError(f"tensor {info.name!r}: {err}") from err
    return values.view(info.shape)
