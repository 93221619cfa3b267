"""A 1B-shaped GGUF model: load time against reading the file, resident memory
against the weights' own size, and a 64-token forward with every map against the matmul bound.

Usage: ``python -m bench.gguf_model [--file PATH] [--vocab 128256] [--repeats 3]
[--forward-repeats 5] [--rss-runs 3] [--threads N]``

Four goals, measured side by side in one run (2 to 4 printed with PASS or MISS):

1. The file, written once with ``gguf.GGUFWriter`` (llama.cpp's own writer), one tensor in
   memory at a time: Llama 3.2 1B's shape (16 layers, width 2048, 32 query and 8 KV heads of
   64, MLP width 8192, a vocabulary of 128256 ending in 256 control tokens, tied embedding,
   ``llama-bpe`` tokenizer with one merge per merged token; no ``rope_freqs.weight``), stored
   as llama.cpp's Q4_K_M stores it: Q6_K for the embedding (the output matrix when tied) and
   for ``attn_v`` and ``ffn_down`` in the layers llama.cpp's ``use_more_bits`` picks (8 of
   16), Q4_K for every other matrix, float32 norms. The blocks are random bytes with f16
   scales in the smallest normal f16 binade (no subnormal, NaN or infinity). Without
   ``--file`` it goes to a temporary folder; with it, an existing file is reused (delete it
   after changing ``--vocab``).
2. ``load_gguf(path)`` (``"auto"``: Q4_K as int4 codes, the rest bfloat16), the same with
   the C kernels of ``attention_core._ggml`` off (the torch decoders) and
   ``weights_dtype="bfloat16"``, timed round-robin with reading the file's bytes from the page
   cache (``read_bytes``, and ``readinto`` one preallocated buffer), medians after a warm-up;
   goal: auto load ≤ 3× ``read_bytes``. One auto load under cProfile says where its time goes.
3. Fresh processes (``--rss-runs``) each load the file and report their peak RSS growth over
   their baseline (torch and the library imported, peak reset through
   ``/proc/self/clear_refs``) and their RSS growth after the load, against
   ``weights_bytes(path, "auto")``; goal: the median peak ≤ 1.3×.
4. ``torch.matmul`` rates of x (64, 2048) · W (2048, 8192) in float32 and bfloat16, W stored
   (K, N) and as the decoder stores it, (N, K) transposed (and, for reference, torch's int4
   kernel on the same shape); then ``decoder(ids, need_weights=True)`` on 64 tokens (median),
   for the auto decoder and, beside it, the bfloat16 one. The bound is 2 · parameters · 64
   FLOPs at bfloat16's faster rate: the auto decoder multiplies in bfloat16 (int4 codes and
   bfloat16 matrices both take bfloat16 inputs). Goal: auto forward ≤ 2× the bound.

The machine is shared: its CPU, torch's threads and the load average are printed first.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
import torch

from attention_core.pretrained import ggml_kernel, load_gguf, weights_bytes
from attention_core.pretrained.ggml_quants import HALF_SCALE_OFFSETS
from attention_core.pretrained.int4 import INT4_GROUP, Int4Parts, int4_linear, pack_int4
from bench import process
from bench.decoder import Timing, round_robin
from bench.gguf_writing import add_byte_level_tokenizer, add_decoder_keys, byte_tokens

MIB = 1 << 20
KIB_PER_MIB = 1024
LOAD_GOAL = 3.0  # auto load ≤ 3× reading the file's bytes
RSS_GOAL = 1.3  # peak RSS growth ≤ 1.3× the weights' own bytes
FORWARD_GOAL = 2.0  # 64-token forward with every map ≤ 2× the matmul bound
TOKENS = 64
MATMUL_SHAPE = (TOKENS, 2048, 8192)  # (M, K, N): x (M, K) · W (K, N)
MATMUL_REPEATS = 10
SEED = 0
NORM_SPREAD = 0.1  # norm weights 1 ± 0.1
PROBE_STD = 0.02  # the matmul probe's weights
PROBE_SCALE, PROBE_MINIMUM = 0.002, -0.016  # the int4 probe's groups: 0.002·q − 0.016
HALF_SCALE_RANGE = (2.0**-14, 2.0**-13)  # |f16 scale|: the smallest normal binade
Q6_K_SCALE_LIMIT = 16  # Q6_K's int8 sub-block scales drawn in ±16: weights' std about 0.02
Q6_K_SCALES = slice(192, 208)  # block_q6_K: ql[128], qh[64], scales[16] (int8), d (f16)
SPECIAL_TOKENS = 256  # Llama 3's <|begin_of_text|>, <|end_of_text|> and reserved ones
NORMAL_TYPE, CONTROL_TYPE = 1, 3
MIN_VOCAB = 1024
CONTEXT = 131072
ROPE_BASE = 500000.0
RMS_EPS = 1e-5
FILE_TYPE_Q4_K_M = 15  # llama.cpp's LLAMA_FTYPE_MOSTLY_Q4_K_M
PROC_STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")
RESET_PEAK = "5"  # written to clear_refs: VmHWM := VmRSS
PART = "  of which "  # a phase inside the one above it
PHASES = (  # (label, file in attention_core/pretrained, function): the load's parts
    ("map, parse header", "gguf_file.py", "parse_gguf"),
    ("tokenizer: check fields", "gguf_tokenizer.py", "read_gguf_tokenizer"),
    ("int4: packed from the nibbles", "int4_fast.py", "pack_stack"),
    (f"{PART}the C kernel", "ggml_kernel.py", "pack_int4"),
    ("int4: codes from blocks", "int4.py", "int4_parts"),
    ("int4: stack q/k/v, gate/up", "int4.py", "concat_parts"),
    ("int4: torch packing", "int4.py", "pack_int4"),
    ("bf16: decode + round", "gguf_model.py", "_decode_float"),
    (f"{PART}the C kernel", "ggml_kernel.py", "q6_k_to_bfloat16"),
    ("hand back mapped pages", "checks.py", "release_pages"),
    ("Decoder()", "llama.py", "__init__"),
)
_CHILD_FLAG = "--child-rss"


@dataclass(frozen=True)
class ModelShape:
    """The synthetic model's sizes (Llama 3.2 1B's unless ``vocab`` is shrunk)."""

    layers: int = 16
    width: int = 2048
    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 64
    ffn: int = 8192
    vocab: int = 128256


@dataclass(frozen=True)
class PlannedTensor:
    """One tensor of the file: its GGUF name, storage type and (rows, cols) or (length,)."""

    name: str
    type_name: str
    shape: tuple[int, ...]


def more_bits(index: int, count: int) -> bool:
    """llama.cpp's ``use_more_bits``: the layers Q4_K_M stores attn_v and ffn_down in Q6_K."""
    return index < count // 8 or index >= 7 * count // 8 or (index - count // 8) % 3 == 2


def tensor_plan(shape: ModelShape) -> list[PlannedTensor]:
    """Every tensor of the file in writing order, with the Q4_K_M storage types."""
    q_rows, kv_rows = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    plan = [PlannedTensor("token_embd.weight", "Q6_K", (shape.vocab, shape.width))]
    for index in range(shape.layers):
        wide = "Q6_K" if more_bits(index, shape.layers) else "Q4_K"
        prefix = f"blk.{index}."
        plan += [
            PlannedTensor(prefix + "attn_norm.weight", "F32", (shape.width,)),
            PlannedTensor(prefix + "attn_q.weight", "Q4_K", (q_rows, shape.width)),
            PlannedTensor(prefix + "attn_k.weight", "Q4_K", (kv_rows, shape.width)),
            PlannedTensor(prefix + "attn_v.weight", wide, (kv_rows, shape.width)),
            PlannedTensor(prefix + "attn_output.weight", "Q4_K", (shape.width, q_rows)),
            PlannedTensor(prefix + "ffn_norm.weight", "F32", (shape.width,)),
            PlannedTensor(prefix + "ffn_gate.weight", "Q4_K", (shape.ffn, shape.width)),
            PlannedTensor(prefix + "ffn_up.weight", "Q4_K", (shape.ffn, shape.width)),
            PlannedTensor(prefix + "ffn_down.weight", wide, (shape.width, shape.ffn)),
        ]
    plan.append(PlannedTensor("output_norm.weight", "F32", (shape.width,)))
    return plan


def parameter_count(shape: ModelShape) -> int:
    """Every weight of the model (the tied embedding once)."""
    return sum(int(np.prod(t.shape)) for t in tensor_plan(shape))


def random_blocks(rng: np.random.Generator, type_name: str, rows: int, cols: int) -> np.ndarray:
    """(rows, bytes per row) uint8: random K-quant blocks with f16 scales of magnitude in
    :data:`HALF_SCALE_RANGE` and random signs (Q6_K's int8 scales kept in ±16)."""
    values, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[type_name]]
    count = rows * cols // values
    words = -(-count * size // 8)
    raw = rng.bit_generator.random_raw(words).view(np.uint8)[: count * size].reshape(count, size)
    for offset in HALF_SCALE_OFFSETS[type_name]:
        magnitude = rng.uniform(*HALF_SCALE_RANGE, count)
        scale = np.copysign(magnitude, rng.standard_normal(count)).astype("<f2")
        raw[:, offset : offset + 2] = scale.view(np.uint8).reshape(count, 2)
    if type_name == "Q6_K":
        limit = Q6_K_SCALE_LIMIT
        scales = rng.integers(-limit, limit + 1, (count, 16), dtype=np.int8)
        raw[:, Q6_K_SCALES] = scales.view(np.uint8)
    return raw.reshape(rows, -1)


def vocabulary(size: int) -> tuple[list[str], list[str], list[int]]:
    """(tokens, merges, token types) of a byte-level BPE vocabulary of ``size`` tokens: the
    256 bytes, merged tokens (every token so far extended by one byte, shortest first, one
    merge each), then :data:`SPECIAL_TOKENS` control tokens, as Llama 3's are laid out."""
    alphabet = byte_tokens()
    tokens, merges = list(alphabet), []
    normal = size - SPECIAL_TOKENS
    left = 0
    while len(tokens) < normal:
        for right in alphabet[: normal - len(tokens)]:
            tokens.append(tokens[left] + right)
            merges.append(f"{tokens[left]} {right}")
        left += 1
    specials = ["<|begin_of_text|>", "<|end_of_text|>"]
    specials += [f"<|reserved_special_token_{i}|>" for i in range(SPECIAL_TOKENS - 2)]
    types = [NORMAL_TYPE] * normal + [CONTROL_TYPE] * SPECIAL_TOKENS
    return tokens + specials, merges, types


def _metadata(writer: gguf.GGUFWriter, shape: ModelShape) -> None:
    """Llama 3.2 1B's architecture and tokenizer keys."""
    tokens, merges, types = vocabulary(shape.vocab)
    writer.add_name("synthetic 1B Q4_K_M (bench.gguf_model)")
    writer.add_file_type(FILE_TYPE_Q4_K_M)
    add_decoder_keys(writer, shape, context=CONTEXT, rope_base=ROPE_BASE, rms_eps=RMS_EPS)
    writer.add_vocab_size(shape.vocab)
    bos = len(tokens) - SPECIAL_TOKENS  # <|begin_of_text|>, then <|end_of_text|>
    add_byte_level_tokenizer(
        writer, pre="llama-bpe", tokens=tokens, types=types, merges=merges, bos=bos, eos=bos + 1
    )


def _tensor_data(rng: np.random.Generator, tensor: PlannedTensor) -> np.ndarray:
    """A tensor's stored array: random blocks, or float32 norm weights near 1."""
    if tensor.type_name == "F32":
        return (1.0 + NORM_SPREAD * rng.standard_normal(tensor.shape)).astype(np.float32)
    return random_blocks(rng, tensor.type_name, *tensor.shape)


def write_model(path: Path, shape: ModelShape) -> None:
    """Write the synthetic Q4_K_M file, one tensor in memory at a time.

    Args:
        path: where to write it. shape: the model's sizes.
    """
    rng = np.random.default_rng(SEED)
    plan = tensor_plan(shape)
    writer = gguf.GGUFWriter(str(path), "llama")
    _metadata(writer, shape)
    for tensor in plan:
        if tensor.type_name == "F32":
            writer.add_tensor_info(tensor.name, tensor.shape, np.float32, 4 * tensor.shape[0])
            continue
        qtype = gguf.GGMLQuantizationType[tensor.type_name]
        values, size = gguf.GGML_QUANT_SIZES[qtype]
        rows, cols = tensor.shape
        byte_shape = (rows, cols // values * size)
        writer.add_tensor_info(tensor.name, byte_shape, np.uint8, rows * byte_shape[1], qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for tensor in plan:
        writer.write_tensor_data(_tensor_data(rng, tensor))
    writer.close()


def read_into(path: Path, buffer: bytearray) -> int:
    """Read the whole file into ``buffer`` (allocated once); return the bytes read."""
    view, done = memoryview(buffer), 0
    with path.open("rb", buffering=0) as handle:
        while done < len(buffer):
            count = handle.readinto(view[done:])
            if not count:
                break
            done += count
    return done


def machine_line() -> str:
    """The CPU model, cores, torch's threads and the 1-minute load average."""
    model = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return (
        f"{model}, {os.cpu_count()} CPUs, torch {torch.__version__} with "
        f"{torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.2f}"
    )


def _ratio_line(label: str, ratio: float, goal: float) -> str:
    verdict = "PASS" if ratio <= goal else "MISS"
    return f"{label}: {ratio:.2f}× {verdict} (goal ≤ {goal:g}×)"


def load_without_kernels(path: Path):
    """The auto load with the C kernels of ``attention_core._ggml`` off: the torch decoders."""
    with ggml_kernel.disabled():
        return load_gguf(path)


def measure_loads(path: Path, repeats: int) -> dict[str, Timing]:
    """Round-robin medians of the two loads and the two ways of reading the file."""
    buffer = bytearray(path.stat().st_size)
    calls = {
        "read_bytes": path.read_bytes,
        "readinto": lambda: read_into(path, buffer),
        "auto": lambda: load_gguf(path),
        "auto, torch": lambda: load_without_kernels(path),
        "bfloat16": lambda: load_gguf(path, weights_dtype="bfloat16"),
    }
    return round_robin(calls, repeats)


def profile_load(path: Path) -> tuple[float, list[tuple[str, float]]]:
    """One auto load under cProfile: its seconds and each phase's cumulative seconds."""
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.runcall(load_gguf, path)
    total = time.perf_counter() - start
    stats = pstats.Stats(profiler).stats
    phases = []
    for label, filename, function in PHASES:
        seconds = sum(
            entry[3]
            for (file, _, name), entry in stats.items()
            if name == function and file.endswith(os.path.join("pretrained", filename))
        )
        phases.append((label, seconds))
    return total, phases


def print_loads(path: Path, repeats: int) -> None:
    """Goal 2: the auto load against reading the bytes, and where the load's time goes."""
    size = path.stat().st_size
    times = measure_loads(path, repeats)
    print(f"\ngoal 2, load against reading the {size / MIB:.0f} MiB file (medians of {repeats}):")
    for name, timing in times.items():
        speed = f", {size / MIB / timing.wall:.0f} MiB/s" if name.startswith("read") else ""
        print(f"   {name:<11} {timing.wall:7.3f} s (cpu {timing.cpu:6.3f} s){speed}")
    read = times["read_bytes"].wall
    print("   " + _ratio_line("auto load / read_bytes", times["auto"].wall / read, LOAD_GOAL))
    print(f"   auto load / readinto: {times['auto'].wall / times['readinto'].wall:.2f}×")
    kernels = "on" if ggml_kernel.available() else "not built or switched off"
    torch_only = times["auto, torch"].wall
    print(
        f"   auto load with the torch decoders / read_bytes: {torch_only / read:.2f}× "
        f"(the C kernels {kernels}; auto / auto with torch {times['auto'].wall / torch_only:.2f}×)"
    )
    print(f"   bfloat16 load / read_bytes: {times['bfloat16'].wall / read:.2f}×")
    total, phases = profile_load(path)
    print(f"   one auto load under cProfile: {total:.3f} s, of which (cumulative):")
    for label, seconds in phases:
        print(f"     {label:<28} {seconds:7.3f} s {seconds / total:6.1%}")
    rest = total - sum(seconds for label, seconds in phases if not label.startswith(PART))
    print(f"     {'the rest':<28} {rest:7.3f} s {rest / total:6.1%}")


def _status_kib(field: str) -> int:
    """One ``/proc/self/status`` field (VmRSS, VmHWM) in KiB."""
    for line in PROC_STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise ValueError(f"{PROC_STATUS} has no {field}")


def measured_load(load):
    """``load()`` in this process (a fresh one: nothing else loaded yet), with its time and
    this process's RSS in MiB before it, at its peak and after it.

    Returns:
        (what ``load`` returned, {"baseline", "peak", "after", "load_s", "reset"}); ``reset``
        says whether the peak could be reset first (``/proc/self/clear_refs``), else the peak
        includes the imports.
    """
    gc.collect()
    try:
        CLEAR_REFS.write_text(RESET_PEAK)
        reset = True
    except OSError:
        reset = False
    baseline = _status_kib("VmRSS")
    start = time.perf_counter()
    loaded = load()
    seconds = time.perf_counter() - start
    peak = _status_kib("VmHWM")
    gc.collect()
    after = _status_kib("VmRSS")
    figures = {
        key: kib / KIB_PER_MIB
        for key, kib in (("baseline", baseline), ("peak", peak), ("after", after))
    }
    return loaded, figures | {"reset": reset, "load_s": seconds}


def _child_rss(path: Path, threads: int | None) -> None:
    """In a fresh process: load the file once, print baseline, peak and after-load RSS (MiB)."""
    process.set_torch_threads(threads)
    decoder, figures = measured_load(lambda: load_gguf(path))
    print(json.dumps(figures | {"layers": len(decoder.layers)}))


def child_load(path: Path, threads: int | None) -> dict:
    """One auto load in a fresh process: its baseline, peak and after-load RSS (MiB)."""
    command = [sys.executable, "-m", "bench.gguf_model", _CHILD_FLAG, "--file", str(path)]
    if threads:
        command += ["--threads", str(threads)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def print_memory(path: Path, threads: int | None, runs: int) -> None:
    """Goal 3: fresh processes' RSS growth against ``weights_bytes(path, "auto")`` (median)."""
    children = [child_load(path, threads) for _ in range(runs)]
    weights = weights_bytes(path, "auto") / MIB
    peaks = [child["peak"] - child["baseline"] for child in children]
    afters = [child["after"] - child["baseline"] for child in children]
    note = "" if all(c["reset"] for c in children) else " (peak not reset: imports included)"
    print(f"\ngoal 3, resident memory of an auto load, {runs} × in a fresh process:")
    print(
        f"   weights_bytes(auto) {weights:.0f} MiB; baseline RSS "
        f"{statistics.median(c['baseline'] for c in children):.0f} MiB; load "
        f"{statistics.median(c['load_s'] for c in children):.2f} s"
    )
    print(f"   peak growth {', '.join(f'{p:.0f}' for p in peaks)} MiB{note}")
    print(f"   growth after the load {', '.join(f'{a:.0f}' for a in afters)} MiB")
    peak, after = statistics.median(peaks), statistics.median(afters)
    print("   " + _ratio_line("median peak growth / weights", peak / weights, RSS_GOAL))
    print(f"   median growth after the load / weights: {after / weights:.2f}×")


def matmul_rates(shape: tuple[int, int, int] = MATMUL_SHAPE) -> dict[tuple[str, str], float]:
    """GFLOP/s of x (M, K) · W (K, N) by ``torch.matmul`` in float32 and bfloat16, W stored
    (K, N) and stored (N, K) as the decoder holds it (its transpose taken), and of torch's
    int4 kernel on the same shape (codes packed by the library); medians. ``shape``: (M, K,
    N). Keys: (dtype, layout)."""
    m, k, n = shape
    generator = torch.Generator().manual_seed(SEED)
    x = torch.randn(m, k, generator=generator)  # (M, K)
    w = torch.randn(k, n, generator=generator) * PROBE_STD  # (K, N)
    rows = w.t().contiguous()  # (N, K), the decoder's layout
    groups = k // INT4_GROUP
    parts = Int4Parts(
        codes=torch.randint(0, 16, (n, k), dtype=torch.uint8, generator=generator),  # (N, K)
        scale=torch.full((n, groups), PROBE_SCALE),
        minimum=torch.full((n, groups), PROBE_MINIMUM),
    )
    packed = pack_int4(parts)
    calls = {}
    for dtype in (torch.float32, torch.bfloat16):
        name = str(dtype).removeprefix("torch.")
        xd, wd, rd = x.to(dtype), w.to(dtype), rows.to(dtype)
        calls[name, "W (K, N)"] = lambda xd=xd, wd=wd: torch.matmul(xd, wd)  # (M, N)
        calls[name, "Wᵀ of (N, K)"] = lambda xd=xd, rd=rd: torch.matmul(xd, rd.t())  # (M, N)
    calls["int4 kernel", "(N, K) packed"] = lambda: int4_linear(x, packed)  # (M, N)
    times = round_robin(calls, MATMUL_REPEATS)
    flops = 2 * m * k * n
    return {key: flops / timing.wall / 1e9 for key, timing in times.items()}


def best_rate(rates: dict[tuple[str, str], float], dtype: str) -> float:
    """The faster layout's GFLOP/s of ``dtype``."""
    return max(rate for (name, _), rate in rates.items() if name == dtype)


def print_forward(path: Path, shape: ModelShape, repeats: int) -> None:
    """Goal 4: a 64-token forward with every map against 2 · parameters · tokens FLOPs, and
    the bfloat16 decoder's forward beside it."""
    rates = matmul_rates()
    m, k, n = MATMUL_SHAPE
    print(f"\ngoal 4, forward of {TOKENS} tokens with every attention map:")
    print(f"   matmul rates, x ({m}, {k}) · W ({k}, {n}):")
    for (name, layout), rate in rates.items():
        print(f"     {name:<12} {layout:<14} {rate:6.0f} GFLOP/s")
    decoders = {dtype: load_gguf(path, weights_dtype=dtype) for dtype in ("auto", "bfloat16")}
    generator = torch.Generator().manual_seed(SEED)
    ids = torch.randint(0, shape.vocab, (1, TOKENS), generator=generator)  # (1, 64)
    calls = {
        (dtype, maps): lambda d=decoder, w=maps: d(ids, need_weights=w)
        for dtype, decoder in decoders.items()
        for maps in (True, False)
    }
    times = round_robin(calls, repeats)
    parameters = parameter_count(shape)
    flops = 2 * parameters * TOKENS
    bf16_rate, fp32_rate = best_rate(rates, "bfloat16"), best_rate(rates, "float32")
    bound = flops / (bf16_rate * 1e9)
    print(
        f"   {parameters / 1e9:.3f} B parameters: {flops / 1e9:.0f} GFLOP; the bound at "
        f"bfloat16's faster rate ({bf16_rate:.0f} GFLOP/s) {bound * 1e3:.0f} ms, at "
        f"float32's ({fp32_rate:.0f}) {flops / (fp32_rate * 1e9) * 1e3:.0f} ms"
    )
    for dtype in decoders:
        maps, plain = times[dtype, True], times[dtype, False]
        print(
            f"   {dtype:<8} decoder(ids, need_weights=True) {maps.wall * 1e3:5.0f} ms "
            f"(cpu {maps.cpu * 1e3:.0f}), without maps {plain.wall * 1e3:.0f} ms: "
            f"{flops / maps.wall / 1e9:.0f} GFLOP/s, {maps.wall / bound:.2f}× the bound "
            f"(median of {repeats})"
        )
    ratio = times["auto", True].wall / bound
    print("   " + _ratio_line("auto forward / bound (bfloat16 rate)", ratio, FORWARD_GOAL))


def ensure_file(path: Path, shape: ModelShape) -> None:
    """Write the model to ``path`` unless a file is there; print what was done."""
    if path.exists():
        print(f"goal 1: reusing {path} ({path.stat().st_size / MIB:.0f} MiB)")
        return
    start = time.perf_counter()
    write_model(path, shape)
    seconds = time.perf_counter() - start
    size = path.stat().st_size / MIB
    print(f"goal 1: wrote {path} ({size:.0f} MiB) in {seconds:.1f} s with gguf's writer")


def run(path: Path, shape: ModelShape, args: argparse.Namespace) -> None:
    """Goal 1 (write or reuse the file), then goals 2 to 4."""
    ensure_file(path, shape)
    print(
        f"model: {shape.layers} layers, width {shape.width}, {shape.heads}/{shape.kv_heads} "
        f"heads of {shape.head_dim}, MLP {shape.ffn}, vocabulary {shape.vocab}, tied; "
        f"{parameter_count(shape) / 1e9:.3f} B parameters; Q4_K_M-like: token_embd Q6_K, "
        f"attn_v and ffn_down Q6_K in layers "
        f"{[i for i in range(shape.layers) if more_bits(i, shape.layers)]}, other matrices Q4_K"
    )
    print_loads(path, args.repeats)
    print_memory(path, args.threads, args.rss_runs)
    print_forward(path, shape, args.forward_repeats)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bench.gguf_model``. Returns 0 (a MISS is reported)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=None, help="write or reuse the file here")
    parser.add_argument("--vocab", type=int, default=ModelShape.vocab, help="vocabulary size")
    parser.add_argument("--repeats", type=int, default=3, help="round-robin loads")
    parser.add_argument("--forward-repeats", type=int, default=5, help="timed forwards")
    parser.add_argument("--rss-runs", type=int, default=3, help="fresh-process loads")
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument(_CHILD_FLAG, action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.vocab < MIN_VOCAB:
        parser.error(f"--vocab must be at least {MIN_VOCAB}, got {args.vocab}")
    if args.child_rss:
        _child_rss(args.file, args.threads)
        return 0
    process.set_torch_threads(args.threads)
    print(machine_line())
    shape = ModelShape(vocab=args.vocab)
    if args.file is not None:
        run(args.file, shape, args)
        return 0
    with tempfile.TemporaryDirectory() as folder:
        run(Path(folder) / "synthetic-1b-q4_k_m.gguf", shape, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
