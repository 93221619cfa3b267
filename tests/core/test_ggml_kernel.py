"""The C kernels of loading a GGUF file (``attention_core._ggml``) against the torch paths
they stand in for and against ``gguf``'s own decoder: Q6_K into bfloat16 bit for bit
(special scales too), the int4 packing byte for byte for every 4-bit type, the same result on
any thread count and on either kind of thread, the switches, and bad arguments refused."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch

from attention_core import native
from attention_core.pretrained import ggml_kernel, ggml_quants, int4_fast
from attention_core.pretrained.ggml_quants import GGML_Q4_0, GGML_Q4_1, GGML_Q4_K, GGML_Q6_K
from attention_core.pretrained.gguf_file import TensorInfo
from attention_core.pretrained.int4 import INT4_GROUP, int4_available
from tests.core.test_int4 import random_blocks

gguf_quants = pytest.importorskip("gguf.quants")
QType = pytest.importorskip("gguf.constants").GGMLQuantizationType

needs_kernel = pytest.mark.skipif(
    not ggml_kernel.available(), reason="attention_core._ggml is not built here"
)
Q6_K_BYTES, Q6_K_VALUES = 210, 256
SPECIAL_HALVES = np.array(
    [np.inf, -np.inf, np.nan, -0.0, 0.0, 6e-8, -6e-8, 3e-5, 65504, -65504, 1e-4, 2.0**-14],
    dtype="<f2",
)  # subnormal, zero, largest, infinite and NaN scales beside ordinary ones
THREADS = (1, 2, 3, 7)


def _q6_k_blocks(count: int, seed: int, halves: np.ndarray | None = None) -> np.ndarray:
    """(count · 210,) random Q6_K blocks; their scales d are ``halves`` repeated, or small
    normal ones."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=(count, Q6_K_BYTES), dtype=np.uint8)
    if halves is None:
        halves = rng.uniform(-0.01, 0.01, count).astype("<f2")
    raw[:, 208:210] = np.resize(halves, count).view(np.uint8).reshape(count, 2)
    return raw.reshape(-1)


def _torch_q6_k(raw: np.ndarray) -> torch.Tensor:
    out = torch.empty(raw.size // Q6_K_BYTES * Q6_K_VALUES, dtype=torch.bfloat16)
    with ggml_kernel.disabled():
        return ggml_quants.decode(GGML_Q6_K, raw, out.numel(), out=out)


def _kernel_q6_k(raw: np.ndarray) -> torch.Tensor:
    out = torch.full((raw.size // Q6_K_BYTES * Q6_K_VALUES,), float("nan"), dtype=torch.bfloat16)
    assert ggml_kernel.q6_k_to_bfloat16(raw, out)
    return out


def _same_bits(mine: torch.Tensor, theirs: torch.Tensor) -> bool:
    """Equal bits, NaNs at the same places (their bits may differ: see ggml.c)."""
    nan = mine.isnan()
    if not torch.equal(nan, theirs.isnan()):
        return False
    return torch.equal(mine.view(torch.int16)[~nan], theirs.view(torch.int16)[~nan])


@needs_kernel
def test_q6_k_decodes_to_gguf_s_values_rounded_and_the_torch_path_s_bits():
    raw = _q6_k_blocks(1500, seed=0)
    mine = _kernel_q6_k(raw)
    reference = gguf_quants.dequantize(raw.reshape(-1, Q6_K_BYTES), QType.Q6_K).reshape(-1)
    assert np.isfinite(reference).all()
    expected = torch.from_numpy(reference).to(torch.bfloat16)
    assert torch.equal(mine.view(torch.int16), expected.view(torch.int16))
    assert torch.equal(mine.view(torch.int16), _torch_q6_k(raw).view(torch.int16))


@needs_kernel
def test_q6_k_special_scales_give_the_torch_path_s_values():
    raw = _q6_k_blocks(len(SPECIAL_HALVES) * 20, seed=1, halves=SPECIAL_HALVES)
    mine, theirs = _kernel_q6_k(raw), _torch_q6_k(raw)
    assert mine.isnan().any() and mine.isinf().any()  # the special values are really there
    assert _same_bits(mine, theirs)


@needs_kernel
def test_decode_takes_the_kernel_for_q6_k_into_bfloat16_only(monkeypatch):
    raw = _q6_k_blocks(10, seed=2)
    calls = []
    real = ggml_kernel.q6_k_to_bfloat16
    monkeypatch.setattr(ggml_kernel, "q6_k_to_bfloat16", lambda *a: calls.append(1) or real(*a))
    as_float = ggml_quants.decode(GGML_Q6_K, raw, 10 * Q6_K_VALUES)
    assert calls == []  # float32 output: the torch path
    rounded = ggml_quants.decode(
        GGML_Q6_K, raw, 10 * Q6_K_VALUES, out=torch.empty(10 * Q6_K_VALUES, dtype=torch.bfloat16)
    )
    assert calls == [1]
    assert torch.equal(rounded.view(torch.int16), as_float.to(torch.bfloat16).view(torch.int16))


def _with_posix_threads(run):
    """``run()`` once on PyTorch's OpenMP team and once on the kernel's own POSIX threads."""
    openmp = native.torch_openmp_parallel()
    first = run()
    ggml_kernel._ggml.use_openmp(0)
    try:
        second = run()
    finally:
        ggml_kernel._ggml.use_openmp(openmp)
    return first, second


@needs_kernel
def test_any_thread_count_and_either_kind_of_thread_gives_the_same_bits():
    raw = _q6_k_blocks(3 * 512 + 17, seed=3)  # several work items, the last one short
    runs = []
    for threads in THREADS:
        out = torch.empty(raw.size // Q6_K_BYTES * Q6_K_VALUES, dtype=torch.bfloat16)
        ggml_kernel._ggml.q6_k_bfloat16(raw.ctypes.data, out.data_ptr(), raw.size // 210, threads)
        runs.append(out.view(torch.int16))
    runs += _with_posix_threads(lambda: _kernel_q6_k(raw).view(torch.int16))
    for other in runs[1:]:
        assert torch.equal(runs[0], other)


def _packed_by(raw: np.ndarray, type_id: int, shape, block_rows: int, use_kernel: bool):
    """(packed, scales) of one matrix by the kernel or by int4_fast's torch ops."""
    rows, cols = shape
    packed = torch.full((rows // block_rows, cols, block_rows // 2), 0xEE, dtype=torch.uint8)
    wider = torch.full((2, cols // INT4_GROUP, rows + 8), float("nan"))  # a column slice
    scales = wider[:, :, 4 : 4 + rows]
    info = TensorInfo("m.weight", shape, type_id, 0, raw.size)
    if use_kernel:
        int4_fast._pack_part(raw.tobytes(), info, packed, scales, block_rows)
    else:
        with ggml_kernel.disabled():
            int4_fast._pack_part(raw.tobytes(), info, packed, scales, block_rows)
    assert wider[:, :, :4].isnan().all() and wider[:, :, 4 + rows :].isnan().all()
    return packed, scales


@needs_kernel
@pytest.mark.skipif(not int4_available(), reason="no CPU int4 kernel in this torch")
@pytest.mark.parametrize("type_id", [GGML_Q4_0, GGML_Q4_1, GGML_Q4_K])
@pytest.mark.parametrize("block_rows", [64, 32])
def test_the_int4_packing_is_the_torch_path_s_bytes(type_id, block_rows):
    values = 256 if type_id == GGML_Q4_K else 32
    shape = (3 * block_rows, 3 * values)
    raw = np.frombuffer(random_blocks(type_id, *shape, seed=type_id), dtype=np.uint8)
    mine, theirs = (_packed_by(raw, type_id, shape, block_rows, k) for k in (True, False))
    assert torch.equal(mine[0], theirs[0])
    assert torch.equal(
        mine[1].contiguous().view(torch.int32), theirs[1].contiguous().view(torch.int32)
    )


@needs_kernel
def test_the_int4_packing_does_not_depend_on_threads():
    shape = (6 * 64, 512)
    raw = np.frombuffer(random_blocks(GGML_Q4_K, *shape, seed=9), dtype=np.uint8)
    runs = []
    for threads in THREADS:
        packed = torch.empty((6, 512, 32), dtype=torch.uint8)
        scales = torch.empty((2, 512 // INT4_GROUP, 6 * 64))
        ggml_kernel._ggml.pack_int4(
            raw.ctypes.data,
            GGML_Q4_K,
            384,
            512,
            64,
            packed.data_ptr(),
            scales.data_ptr(),
            384,
            threads,
        )
        runs.append((packed, scales))
    for packed, scales in runs[1:]:
        assert torch.equal(packed, runs[0][0]) and torch.equal(scales, runs[0][1])


@needs_kernel
def test_the_switch_turns_the_kernel_off_within_its_block():
    raw = _q6_k_blocks(2, seed=4)
    out = torch.zeros(2 * Q6_K_VALUES, dtype=torch.bfloat16)
    with ggml_kernel.disabled():
        assert not ggml_kernel.available()
        assert ggml_kernel.q6_k_to_bfloat16(raw, out) is False
    assert torch.count_nonzero(out) == 0  # nothing written
    assert ggml_kernel.available()


def test_the_environment_switch_runs_the_process_without_the_kernel():
    code = "from attention_core.pretrained import ggml_kernel; print(ggml_kernel.available())"
    env = {**os.environ, native.NO_KERNEL_ENV: "1"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


@needs_kernel
@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: ggml_kernel.q6_k_to_bfloat16(
                np.zeros(209, np.uint8), torch.empty(256, dtype=torch.bfloat16)
            ),
            "whole Q6_K blocks",
        ),
        (
            lambda: ggml_kernel.q6_k_to_bfloat16(
                np.zeros(210, np.uint8), torch.empty(255, dtype=torch.bfloat16)
            ),
            "of 256 values",
        ),
        (
            lambda: ggml_kernel.q6_k_to_bfloat16(np.zeros(210, np.uint8), torch.empty(256)),
            "bfloat16",
        ),
        (
            lambda: ggml_kernel.pack_int4(
                np.zeros(18, np.uint8), 8, (1, 32), 2, torch.empty(0), torch.empty(0)
            ),
            "ggml_type must be one of",
        ),
        (
            lambda: ggml_kernel.pack_int4(
                np.zeros(18 * 3, np.uint8), GGML_Q4_0, (3, 32), 2, torch.empty(0), torch.empty(0)
            ),
            r"shape \(3, 32\)",
        ),
        (
            lambda: ggml_kernel.pack_int4(
                np.zeros(18, np.uint8), GGML_Q4_0, (2, 32), 2, torch.empty(0), torch.empty(0)
            ),
            "36 bytes",
        ),
        (
            lambda: ggml_kernel.pack_int4(
                np.zeros(36, np.uint8),
                GGML_Q4_0,
                (2, 32),
                2,
                torch.empty((1, 32, 2)),
                torch.empty(0),
            ),
            "packed must be",
        ),
        (
            lambda: ggml_kernel.pack_int4(
                np.zeros(40, np.uint8),
                GGML_Q4_1,
                (2, 32),
                2,
                torch.empty((1, 32, 1), dtype=torch.uint8),
                torch.empty(2, 1, 4)[:, :, ::2],
            ),
            "scales must be",
        ),
        (lambda: ggml_kernel._ggml.q6_k_bfloat16(1, 1, 1, 0), "threads must be in"),
        (lambda: ggml_kernel._ggml.pack_int4(1, GGML_Q4_K, 64, 100, 64, 1, 1, 64, 1), "cols"),
    ],
    ids=[
        "q6 raw",
        "q6 out size",
        "q6 out dtype",
        "pack type",
        "pack rows",
        "pack raw",
        "pack packed",
        "pack scales",
        "threads",
        "c cols",
    ],
)
def test_bad_arguments_are_refused_naming_them(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_a_switch_turned_off_in_one_thread_stays_on_in_another():
    switch = native.ThreadSwitch()
    seen = []
    with switch.disabled():
        with switch.disabled():
            assert switch.off
        assert switch.off  # the inner block gives back the outer one's state
        other = threading.Thread(target=lambda: seen.append(switch.off))
        other.start()
        other.join()
    assert seen == [False] and not switch.off
