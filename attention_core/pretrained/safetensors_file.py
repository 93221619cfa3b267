"""A zero-copy reader for safetensors files held in a memory map.

``safetensors.torch.load`` copies every tensor out of the bytes it is given; this reader
returns views of the mapping instead, so a large table of which a text touches a few rows
(MiniLM's 30,522-row word embedding) costs only the pages it touches, and those pages are
the page cache's, shared with every other process reading the file.

Layout (from the safetensors specification): a u64 little-endian header length N, N bytes
of UTF-8 JSON mapping each tensor name to ``{"dtype", "shape", "data_offsets": [begin,
end]}`` (offsets relative to the end of the header; an optional ``"__metadata__"`` entry of
strings), then the tensor data.
"""

from __future__ import annotations

import json
import mmap
import struct

import torch

HEADER_LENGTH_FORMAT = "<Q"
HEADER_LENGTH_BYTES = struct.calcsize(HEADER_LENGTH_FORMAT)
MAX_HEADER_BYTES = 100_000_000  # the specification's limit
METADATA_KEY = "__metadata__"
DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


def _header(data: mmap.mmap) -> tuple[dict, int]:
    """The parsed JSON header and the offset where the tensor data starts."""
    size = len(data)
    if size < HEADER_LENGTH_BYTES:
        raise ValueError(f"safetensors file truncated: {size} bytes, no header length")
    (length,) = struct.unpack_from(HEADER_LENGTH_FORMAT, data, 0)
    if length > MAX_HEADER_BYTES or HEADER_LENGTH_BYTES + length > size:
        raise ValueError(
            f"safetensors header of {length} bytes does not fit in the {size}-byte file"
        )
    raw = data[HEADER_LENGTH_BYTES : HEADER_LENGTH_BYTES + length]
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"safetensors header is not UTF-8 JSON: {err}") from err
    if not isinstance(header, dict):
        raise ValueError(f"safetensors header must be a JSON object, got {type(header).__name__}")
    return header, HEADER_LENGTH_BYTES + length


def _view(data: mmap.mmap, name: str, entry: object, start: int) -> torch.Tensor:
    """One tensor as a view of ``data`` (checked: dtype, shape, offsets inside the file)."""
    if not isinstance(entry, dict) or entry.get("dtype") not in DTYPES:
        raise ValueError(f"safetensors tensor {name!r}: unknown dtype in {entry!r}")
    dtype = DTYPES[entry["dtype"]]
    shape, offsets = entry.get("shape"), entry.get("data_offsets")
    valid_shape = isinstance(shape, list) and all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
    )
    valid_offsets = isinstance(offsets, list) and len(offsets) == 2
    valid_offsets = valid_offsets and all(isinstance(n, int) and n >= 0 for n in offsets)
    if not valid_shape or not valid_offsets:
        raise ValueError(f"safetensors tensor {name!r}: bad shape or offsets in {entry!r}")
    count = 1
    for n in shape:
        count *= n
    begin, end = start + offsets[0], start + offsets[1]
    itemsize = torch.empty((), dtype=dtype).element_size()
    if end - begin != count * itemsize or end > len(data):
        raise ValueError(
            f"safetensors tensor {name!r} ({entry['dtype']} {shape}) spans bytes "
            f"[{begin}, {end}) of a {len(data)}-byte file"
        )
    if count == 0:
        return torch.empty(shape, dtype=dtype)
    flat = torch.frombuffer(data, dtype=dtype, count=count, offset=begin)  # (count,), no copy
    return flat.view(shape)


def read_safetensors(data: mmap.mmap) -> dict[str, torch.Tensor]:
    """Every tensor of a safetensors file, as a view of its mapping (nothing is copied).

    Args:
        data: the whole file, mapped writable copy-on-write (e.g. by
            :func:`~attention_core.pretrained.checks.map_verified`); the tensors keep it
            alive, and writing one changes a private copy of its pages, never the file.

    Returns:
        Name -> tensor of the stored dtype and shape, sharing memory with ``data``.

    Raises:
        ValueError: for a truncated file, a header that is not a JSON object, an unknown
            dtype, or a tensor whose bytes do not match its shape or lie outside the file.
    """
    header, start = _header(data)
    return {
        name: _view(data, name, entry, start)
        for name, entry in header.items()
        if name != METADATA_KEY
    }
