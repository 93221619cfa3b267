"""GGUF tensor decoding: our torch decoders against ``gguf.quants.dequantize``
(llama.cpp's numpy reference) on the same bytes, in one run.

Usage: ``python -m bench.gguf_decode [--megabytes 64] [--repeats 3] [--threads N]
[--types Q4_K,Q6_K,Q8_0,Q4_0]``

For each type, a matrix of ``--megabytes`` MiB with rows of 2048 values (random codes, finite
small f16 scales), shaped as ``gguf.GGUFReader`` hands a tensor over, is decoded to float32
by both, timed round-robin (one call of each in turn after a warm-up, medians of wall clock):
gguf's numpy, ours into a new tensor (as gguf returns one), and ours into a tensor allocated
once (the loader's case, without the cost of the first touch of fresh pages). Printed: MiB/s
of file for each, our speed-up, and whether both gave the same bits.
Last, reading the same number of bytes from a file in the page cache is timed, and a file of
the first type is estimated to load in (read + decode) / read of its reading time (the
goal for a Q4_K_M file: ≤ 3×), with the fastest disk at which it would still meet it (2× its
reading time left for decoding). The machine is shared: the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import gguf.quants
import numpy as np
import torch

from attention_core.pretrained.ggml_quants import HALF_SCALE_OFFSETS, SUPPORTED_TYPES, decode
from bench import process
from bench.decoder import round_robin

MIB = 1 << 20
LOAD_GOAL = 3.0  # a Q4_K_M file loads in at most 3× the time of reading its bytes
DEFAULT_TYPES = ("Q4_K", "Q6_K", "Q8_0", "Q4_0")
SCALE_SPREAD = 0.05
ROW_VALUES = 2048  # a row of a 1B llama's matrices (its hidden size)


def random_rows(name: str, megabytes: float, seed: int = 0) -> np.ndarray:
    """(rows, row bytes) uint8: about ``megabytes`` MiB of a matrix of ``name`` with rows of
    :data:`ROW_VALUES` values, as ``gguf.GGUFReader`` hands a tensor over: random codes and
    finite f16 scales in ±0.05 (no NaN, infinity or subnormal slows either decoder)."""
    entry = next(e for e in SUPPORTED_TYPES.values() if e.name == name)
    row_blocks = ROW_VALUES // entry.block_values
    rows = max(1, int(megabytes * MIB) // (row_blocks * entry.block_bytes))
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, (rows * row_blocks, entry.block_bytes), dtype=np.uint8)
    for offset in HALF_SCALE_OFFSETS[name]:
        scale = rng.uniform(-SCALE_SPREAD, SCALE_SPREAD, len(raw)).astype("<f2")
        raw[:, offset : offset + 2] = scale.view(np.uint8).reshape(-1, 2)
    return raw.reshape(rows, -1)


def read_seconds(nbytes: int, repeats: int) -> float:
    """Median seconds to read ``nbytes`` from a file already in the page cache."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bytes.bin"
        path.write_bytes(os.urandom(nbytes))
        times = round_robin({"read": path.read_bytes}, repeats)
    return times["read"].wall


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=64.0, help="MiB of file per type")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument("--types", default=",".join(DEFAULT_TYPES))
    args = parser.parse_args(argv)
    names = args.types.split(",")
    unknown = sorted(set(names) - set(HALF_SCALE_OFFSETS))
    if unknown:
        parser.error(f"unknown types {unknown}; choose from {sorted(HALF_SCALE_OFFSETS)}")
    process.set_torch_threads(args.threads)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, numpy {np.__version__} "
        f"(one thread), {args.megabytes:g} MiB per type, load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'type':<6} {'gguf MiB/s':>11} {'ours new':>9} {'ours out':>9} "
        f"{'× (new)':>8} {'× (out)':>8}  same bits"
    )
    decode_seconds = {}
    for name in names:
        raw = random_rows(name, args.megabytes)
        qtype = gguf.GGMLQuantizationType[name]
        type_id, flat = int(qtype), raw.reshape(-1)
        count = raw.shape[0] * ROW_VALUES
        target = torch.empty(count)
        calls = {
            "gguf": lambda raw=raw, qtype=qtype: gguf.quants.dequantize(raw, qtype),
            "new": lambda t=type_id, f=flat, c=count: decode(t, f, c),
            "out": lambda t=type_id, f=flat, c=count, o=target: decode(t, f, c, out=o),
        }
        times = round_robin(calls, args.repeats)
        same = np.array_equal(
            gguf.quants.dequantize(raw, qtype).reshape(-1).view(np.uint32),
            decode(type_id, flat, count).numpy().view(np.uint32),
        )
        speed = {key: raw.nbytes / MIB / timing.wall for key, timing in times.items()}
        print(
            f"{name:<6} {speed['gguf']:11.0f} {speed['new']:9.0f} {speed['out']:9.0f} "
            f"{speed['new'] / speed['gguf']:7.1f}× {speed['out'] / speed['gguf']:7.1f}×  "
            f"{'yes' if same else 'NO'}"
        )
        decode_seconds[name] = times["new"].wall
    first = names[0]
    nbytes = random_rows(first, args.megabytes).nbytes
    read = read_seconds(nbytes, args.repeats)
    ratio = (read + decode_seconds[first]) / read
    verdict = "PASS" if ratio <= LOAD_GOAL else "MISS"
    print(
        f"reading {nbytes / MIB:.0f} MiB from the page cache: {nbytes / MIB / read:.0f} MiB/s; "
        f"a {first} file read from there would load in {ratio:.1f}× its reading time, "
        f"{verdict} (goal ≤ {LOAD_GOAL:g}×); from a disk reading at most "
        f"{(LOAD_GOAL - 1) * nbytes / MIB / decode_seconds[first]:.0f} MiB/s it would pass"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
