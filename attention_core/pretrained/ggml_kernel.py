"""The C fast paths of loading a GGUF file: optional, checked, with their own switches.

``attention_core._ggml`` (``attention_core/_native/ggml.c``, built by ``pip install -e .``
where a C compiler exists) does in one pass over the file's memory map what the torch
decoders do in several passes over staged copies:

* :func:`q6_k_to_bfloat16`: Q6_K blocks to bfloat16, the same bits as
  :func:`~attention_core.pretrained.ggml_quants.decode` into a bfloat16 output (float32
  products as ggml computes them, no fused multiply-add, rounded to nearest even);
* :func:`pack_int4`: a Q4_0, Q4_1 or Q4_K matrix's nibbles into torch's CPU int4 layout and
  its groups' scales and minimums, the same bytes as
  :func:`~attention_core.pretrained.int4_fast.pack_stack`'s torch path.

Both run on PyTorch's own OpenMP threads (``torch.get_num_threads()`` of them) with the GIL
released; each output byte is written once, by one thread, so the result does not depend on
the thread count. The readable torch code stays what runs without the extension, and the
tests compare both. Switches: ``with ggml_kernel.disabled():`` within a block (this
thread); ``ATTENTION_CORE_NO_KERNEL=1`` (read at import) for the whole process, as for the
band kernel.
"""

from __future__ import annotations

import numpy as np
import torch

from attention_core.native import ThreadSwitch, switched_off_by_env, torch_openmp_parallel

__all__ = ["available", "disabled", "pack_int4", "q6_k_to_bfloat16", "KERNEL_VERSION"]

KERNEL_VERSION = 1  # must equal the built extension's VERSION (a stale build is not used)
Q6_K_BLOCK_BYTES = 210
Q6_K_BLOCK_VALUES = 256
PACKED_TYPES = {2: (32, 18), 3: (32, 20), 12: (256, 144)}
"""ggml type id (Q4_0, Q4_1, Q4_K) -> (values, bytes) of its block."""

_ggml = None
if not switched_off_by_env():
    try:
        from attention_core import _ggml
    except ImportError:  # not built here: the torch decoders run
        _ggml = None
if _ggml is not None and getattr(_ggml, "VERSION", None) != KERNEL_VERSION:
    _ggml = None
if _ggml is not None:
    _ggml.use_openmp(torch_openmp_parallel())

_switch = ThreadSwitch()
disabled = _switch.disabled


def available() -> bool:
    """The extension is built, of this version, and not switched off (here or by env)."""
    return _ggml is not None and not _switch.off


def _address(data: np.ndarray) -> int:
    """The address of a 1-D uint8 array's first byte (read-only memory maps too)."""
    return data.__array_interface__["data"][0]


def q6_k_to_bfloat16(raw: np.ndarray, out: torch.Tensor) -> bool:
    """Decode Q6_K blocks straight into a bfloat16 tensor, when the kernel runs here.

    Args:
        raw: (blocks · 210,) uint8, the tensor's bytes (a view of the memory map).
        out: contiguous CPU bfloat16 tensor of blocks · 256 values.

    Returns:
        True when decoded; False (``out`` untouched) without the kernel.

    Raises:
        ValueError: ``raw`` not whole blocks, or ``out`` of another size, dtype or layout.
    """
    if not available():
        return False
    if raw.dtype != np.uint8 or raw.ndim != 1 or raw.size % Q6_K_BLOCK_BYTES:
        raise ValueError(f"raw must be whole Q6_K blocks of uint8, got {raw.dtype} {raw.shape}")
    blocks = raw.size // Q6_K_BLOCK_BYTES
    if (
        out.dtype != torch.bfloat16
        or out.device.type != "cpu"
        or not out.is_contiguous()
        or out.numel() != blocks * Q6_K_BLOCK_VALUES
    ):
        raise ValueError(
            f"out must be a contiguous CPU bfloat16 tensor of {blocks * Q6_K_BLOCK_VALUES} "
            f"values, got {out.dtype} {tuple(out.shape)} on {out.device}"
        )
    _ggml.q6_k_bfloat16(_address(raw), out.data_ptr(), blocks, torch.get_num_threads())
    return True


def pack_int4(
    raw: np.ndarray,
    ggml_type: int,
    shape: tuple[int, int],
    block_rows: int,
    packed: torch.Tensor,
    scales: torch.Tensor,
) -> bool:
    """Pack one 4-bit matrix for torch's int4 kernel, when the kernel runs here.

    Args:
        raw: the matrix's bytes, (rows · K / block values · block bytes,) uint8.
        ggml_type: 2 (Q4_0), 3 (Q4_1) or 12 (Q4_K).
        shape: (rows, K); rows a multiple of ``block_rows``.
        block_rows: B of torch's layout (64 or 32; see ``int4_fast``).
        packed: contiguous uint8 (rows / B, K, B / 2), written whole.
        scales: float32 (2, K / 32, rows) view whose last dim has stride 1 (a column slice of
            a larger array is fine): [scale, minimum] of each group of 32 values.

    Returns:
        True when packed; False (nothing written) without the kernel.

    Raises:
        ValueError: a type not packed here, or any size or layout that does not match.
    """
    if not available():
        return False
    if ggml_type not in PACKED_TYPES:
        raise ValueError(f"ggml_type must be one of {sorted(PACKED_TYPES)}, got {ggml_type!r}")
    rows, cols = shape
    values, size = PACKED_TYPES[ggml_type]
    if block_rows < 2 or block_rows % 2 or rows % block_rows or cols % values or rows < 1:
        raise ValueError(f"shape {shape} does not split into blocks of {block_rows} rows")
    if raw.dtype != np.uint8 or raw.ndim != 1 or raw.size != rows * cols // values * size:
        raise ValueError(f"raw must be the matrix's {rows * cols // values * size} bytes")
    if (
        packed.dtype != torch.uint8
        or not packed.is_contiguous()
        or tuple(packed.shape) != (rows // block_rows, cols, block_rows // 2)
    ):
        raise ValueError(f"packed must be contiguous uint8 {(rows // block_rows, cols)}")
    groups = cols // 32
    if (
        scales.dtype != torch.float32
        or tuple(scales.shape) != (2, groups, rows)
        or scales.stride(2) != 1
        or scales.stride(0) != groups * scales.stride(1)
    ):
        raise ValueError(f"scales must be float32 (2, {groups}, {rows}) with rows last")
    _ggml.pack_int4(
        _address(raw),
        ggml_type,
        rows,
        cols,
        block_rows,
        packed.data_ptr(),
        scales.data_ptr(),
        scales.stride(1),
        torch.get_num_threads(),
    )
    return True
