"""The int4 fast path (``int4_fast.pack_stack``: nibbles straight into torch's CPU layout)
against the readable one (``int4_parts``, ``concat_parts``, then torch's own packing), byte
for byte, for every 4-bit type and stacks of parts; the run-time check of torch's layout,
which must turn the fast path off when torch packs otherwise; and the loader, whose weights
must be the same bytes with the fast path on and off."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_core.pretrained import int4_fast, load_gguf
from attention_core.pretrained.ggml_quants import GGML_Q4_0, GGML_Q4_K, SUPPORTED_TYPES
from attention_core.pretrained.gguf_file import GGML_Q4_1, TensorInfo
from attention_core.pretrained.int4 import (
    Int4Matrix,
    concat_parts,
    int4_available,
    int4_parts,
    pack_int4,
    pack_int4_codes,
)
from tests.core.test_int4 import PAD, random_blocks
from tests.tiny_gguf import write_tiny_gguf

pytestmark = pytest.mark.skipif(not int4_available(), reason="no CPU int4 kernel in this torch")
TYPES = {"Q4_0": GGML_Q4_0, "Q4_1": GGML_Q4_1, "Q4_K": GGML_Q4_K}
K_SPEC = {"width": 256, "heads": 4, "kv_heads": 2, "head_dim": 64, "ffn": 256, "layers": 1}


@pytest.fixture
def layout_rows():
    rows = int4_fast.torch_layout_rows()
    if rows is None:
        pytest.skip("torch's int4 layout on this machine is not one the fast path writes")
    return rows


def _file(type_id: int, shapes: list[tuple[int, int]], seed: int):
    """Bytes holding one random matrix per shape (between other bytes), and their infos."""
    data, infos = bytearray(b"\xa5" * PAD), []
    for index, shape in enumerate(shapes):
        raw = random_blocks(type_id, *shape, seed=seed + index)
        infos.append(TensorInfo(f"blk.0.part{index}.weight", shape, type_id, len(data), len(raw)))
        data += raw + b"\x5a" * PAD
    return bytes(data), infos


def _readable(data, infos):
    return pack_int4(concat_parts([int4_parts(data, info) for info in infos]))


def test_the_layout_check_finds_torch_s_own_packing(layout_rows):
    generator = torch.Generator().manual_seed(5)
    codes = torch.randint(0, 16, (4 * layout_rows, 96), dtype=torch.uint8, generator=generator)
    assert torch.equal(int4_fast.pack_halves(codes, layout_rows), pack_int4_codes(codes))


@pytest.mark.parametrize("name", sorted(TYPES))
@pytest.mark.parametrize("step_bytes", [None, 1], ids=["one step", "a block of rows a step"])
def test_the_fast_path_packs_the_readable_path_s_bytes(layout_rows, name, step_bytes, monkeypatch):
    if step_bytes is not None:  # the smallest steps: one block of B rows each
        monkeypatch.setattr(int4_fast, "CHUNK_BYTES", step_bytes)
    cols = 2 * SUPPORTED_TYPES[TYPES[name]].block_values
    shapes = [(2 * layout_rows, cols), (layout_rows, cols), (3 * layout_rows, cols)]
    data, infos = _file(TYPES[name], shapes, seed=11)
    fast, readable = int4_fast.pack_stack(data, infos), _readable(data, infos)
    assert fast is not None and fast.shape == readable.shape == (6 * layout_rows, cols)
    assert torch.equal(fast.packed, readable.packed)
    assert torch.equal(fast.scale_zero, readable.scale_zero)


def test_the_fast_path_steps_aside_where_it_does_not_apply(layout_rows):
    data, infos = _file(GGML_Q4_K, [(layout_rows, 256), (16, 256)], seed=3)
    assert int4_fast.pack_stack(data, infos) is None  # 16 rows: not whole blocks of B
    data, infos = _file(GGML_Q4_K, [(layout_rows, 256)], seed=3)
    with int4_fast.disabled():
        assert int4_fast.pack_stack(data, infos) is None
    assert int4_fast.pack_stack(data, infos) is not None


def test_a_bad_part_is_refused_as_the_readable_path_refuses_it(layout_rows):
    data, infos = _file(GGML_Q4_K, [(layout_rows, 256)], seed=3)
    short = TensorInfo(infos[0].name, infos[0].shape, GGML_Q4_K, infos[0].start, len(data))
    for read in (int4_fast.pack_stack, _readable):
        with pytest.raises(ValueError, match="'blk.0.part0.weight'.* needs"):
            read(data, [short])


def test_another_torch_layout_turns_the_fast_path_off(layout_rows, monkeypatch):
    def packs_otherwise(codes):  # rows paired with their neighbours, as torch's portable build
        rows, cols = codes.shape
        pairs = codes.view(rows // 2, 2, cols)
        return (pairs[:, 0] | (pairs[:, 1] << 4)).view(rows, cols // 2)

    monkeypatch.setattr(int4_fast, "pack_int4_codes", packs_otherwise)
    int4_fast.torch_layout_rows.cache_clear()
    try:
        assert int4_fast.torch_layout_rows() is None
        data, infos = _file(GGML_Q4_K, [(layout_rows, 256)], seed=3)
        assert int4_fast.pack_stack(data, infos) is None
    finally:
        int4_fast.torch_layout_rows.cache_clear()


@pytest.mark.parametrize("name", sorted(TYPES))
def test_the_loader_holds_the_same_bytes_with_the_fast_path_on_and_off(tmp_path, name):
    types = tuple((kind, name) for kind in ("attn_q", "attn_k", "attn_v", "ffn_gate", "ffn_up"))
    tiny = write_tiny_gguf(tmp_path / "tiny.gguf", types=types, **K_SPEC)
    fast = load_gguf(tiny.path, weights_dtype="auto")
    with int4_fast.disabled():
        readable = load_gguf(tiny.path, weights_dtype="auto")
    layer, other = fast.layers[0], readable.layers[0]
    for module in ("qkv", "gate_up"):
        mine, theirs = getattr(layer, module), getattr(other, module)
        assert isinstance(mine, Int4Matrix) and isinstance(theirs, Int4Matrix)
        assert torch.equal(mine.packed, theirs.packed)
        assert torch.equal(mine.scale_zero, theirs.scale_zero)
    ids = torch.tensor([fast.tokenize("the cat sat").input_ids])
    assert np.array_equal(fast(ids).logits.numpy(), readable(ids).logits.numpy())
