"""Load any llama, Qwen2 or Qwen3 GGUF file from disk as a :class:`Decoder`, memory first.

:func:`load_gguf` maps the file (copy-on-write, never a bytes copy), parses its header
(:mod:`~attention_core.pretrained.gguf_file`), reads the architecture
(:mod:`~attention_core.pretrained.gguf_config`) and the tokenizer
(:mod:`~attention_core.pretrained.gguf_tokenizer`: every field checked now, the ``tokenizers``
object built on first use), checks the tensor table, and **before any
large allocation** computes the bytes the chosen weights will hold, refusing with a
:class:`~attention_core.device.MemoryBudgetError` over the budget. Only then are the
tensors decoded, one layer at a time, the mapped pages handed back after each.

How the weights are held (``weights_dtype``):

* ``"auto"`` (default): a matrix stored in 4 bits with 32-value groups (Q4_0, Q4_1, Q4_K)
  keeps its codes on torch's int4 kernel (:mod:`~attention_core.pretrained.int4`; packed
  straight from the file's nibbles by :mod:`~attention_core.pretrained.int4_fast` where
  torch's layout is the one it checks at run time, the same bytes); every
  other matrix, and the embedding, is decoded to bfloat16. q, k and v (and gate and up) are
  stacked into one matrix, so they share one form: int4 only when all parts are 4-bit.
* ``"int4"``: the same, refusing a file whose layer matrices are not all 4-bit (SmolLM2's
  4-bit load).
* ``"bfloat16"``: every matrix decoded to bfloat16; ``"float32"``: to float32 (exact).

Norm weights, biases and all activations between the matrices are float32.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from attention_core.device import MemoryBudgetError, format_bytes
from attention_core.pretrained.checks import map_verified, release_pages, release_range
from attention_core.pretrained.ggml_quants import scratch_bytes
from attention_core.pretrained.gguf_config import (
    EMBEDDING_TENSOR,
    FINAL_NORM_TENSOR,
    OUTPUT_TENSOR,
    ROPE_STYLE_OF,
    GGUFCard,
    check_tensor_table,
    gguf_card,
    gguf_config,
)
from attention_core.pretrained.gguf_file import GGUFFile, TensorInfo, dequantize, parse_gguf
from attention_core.pretrained.gguf_tokenizer import read_gguf_tokenizer
from attention_core.pretrained.int4 import (
    INT4_GROUP,
    INT4_ROW_MULTIPLE,
    INT4_TYPES,
    Int4Matrix,
    concat_parts,
    int4_available,
    int4_bytes,
    int4_parts,
    pack_int4,
)
from attention_core.pretrained.int4_fast import pack_stack
from attention_core.pretrained.llama import Decoder
from attention_core.pretrained.llama_block import LlamaConfig
from attention_core.validation import check_choice

LOAD_DTYPES = ("auto", "float32", "bfloat16", "int4")
"""The ways to hold the weights (see the module docstring)."""
FLOAT_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
DEFAULT_BUDGET_SHARE = 0.5
"""Without ``memory_budget``, the weights may take half of the memory the system reports
available (``MemAvailable``): a 7B file on a laptop is refused instead of taking the machine
down."""
CONVERT_ROWS = 1024  # rows decoded at a time into bfloat16, their file pages handed back after
INT4_TRANSIENT_BYTES = 6  # per value while packing: uint8 codes, int32 for the kernel, scales
MEMINFO = Path("/proc/meminfo")
MEMINFO_KEY = "MemAvailable:"
KIB = 1024
LAYER_SOURCES = {
    "attn_norm": ("attn_norm.weight",),
    "qkv": ("attn_q.weight", "attn_k.weight", "attn_v.weight"),
    "qkv_bias": ("attn_q.bias", "attn_k.bias", "attn_v.bias"),
    "q_norm": ("attn_q_norm.weight",),
    "k_norm": ("attn_k_norm.weight",),
    "out": ("attn_output.weight",),
    "mlp_norm": ("ffn_norm.weight",),
    "gate_up": ("ffn_gate.weight", "ffn_up.weight"),
    "down": ("ffn_down.weight",),
}
"""The decoder's name of each block tensor -> the GGUF tensors stacked into it, by rows."""


@dataclass(frozen=True)
class Stack:
    """One tensor the decoder will hold, and how.

    Attributes:
        parts: the GGUF tensors stacked by rows into it.
        form: ``"int4"``, ``"bfloat16"`` or ``"float32"`` (vectors are always float32).
        shape: its (rows, cols) or (length,) shape.
    """

    parts: tuple[TensorInfo, ...]
    form: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        """Bytes it will hold once loaded."""
        if self.form == "int4":
            return int4_bytes(*self.shape)
        count = 1
        for size in self.shape:
            count *= size
        return count * FLOAT_DTYPES[self.form].itemsize

    @property
    def transient_bytes(self) -> int:
        """Bytes of the temporaries made while it loads."""
        if self.form == "int4":
            return self.shape[0] * self.shape[1] * INT4_TRANSIENT_BYTES
        dtype = FLOAT_DTYPES[self.form]
        return max(scratch_bytes(part.ggml_type, dtype) for part in self.parts)


@dataclass(frozen=True)
class WeightsPlan:
    """Every tensor the decoder will hold, decided before anything is decoded or copied: a
    GGUF file's (its stacks are :class:`Stack`) or a Hugging Face folder's
    (:class:`~attention_core.pretrained.hf_model.Stack`); each stack has ``nbytes`` and
    ``transient_bytes``.

    Attributes:
        layers: per layer, decoder name -> stack.
        embedding: the (V, D) token embedding (bfloat16 unless float32 was asked for).
        output: the separate (V, D) output matrix, or None when tied.
        final_norm: the (D,) final norm.
    """

    layers: tuple[dict[str, Stack], ...]
    embedding: Stack
    output: Stack | None
    final_norm: Stack

    def stacks(self) -> list[Stack]:
        """Every stack of the plan."""
        rest = [self.embedding, self.final_norm, *([self.output] if self.output else [])]
        return [stack for layer in self.layers for stack in layer.values()] + rest

    @property
    def nbytes(self) -> int:
        """Bytes of the weights once loaded."""
        return sum(stack.nbytes for stack in self.stacks())

    @property
    def peak_bytes(self) -> int:
        """The weights plus the largest temporary made on the way."""
        return self.nbytes + max(stack.transient_bytes for stack in self.stacks())


def available_memory() -> int | None:
    """The memory the system reports available (Linux ``MemAvailable``), or None elsewhere.

    Returns:
        Bytes, or None when the system does not say.
    """
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith(MEMINFO_KEY):
                return int(line.split()[1]) * KIB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def default_weights_budget() -> int | None:
    """:data:`DEFAULT_BUDGET_SHARE` of :func:`available_memory` (None when unknown)."""
    available = available_memory()
    return None if available is None else int(available * DEFAULT_BUDGET_SHARE)


def _int4_able(parts: tuple[TensorInfo, ...]) -> bool:
    """Whether stacked parts can all keep their 4-bit codes on the int4 kernel (4-bit types,
    whole groups of 32 inputs, a row count the kernel's packing takes)."""
    rows = sum(p.shape[0] for p in parts)
    return rows % INT4_ROW_MULTIPLE == 0 and all(
        p.ggml_type in INT4_TYPES and p.shape[-1] % INT4_GROUP == 0 for p in parts
    )


def _stack(parts: tuple[TensorInfo, ...], weights_dtype: str) -> Stack:
    """Decide how one stacked tensor is held (see the module docstring).

    Raises:
        ValueError: with ``"int4"`` for a matrix that is not stored in 4 bits.
    """
    rows = sum(p.shape[0] for p in parts)
    shape = (rows, *parts[0].shape[1:])
    if len(shape) == 1:
        return Stack(parts, "float32", shape)
    if weights_dtype in ("auto", "int4") and _int4_able(parts) and int4_available():
        return Stack(parts, "int4", shape)
    if weights_dtype == "int4":
        bad = next((p for p in parts if p.ggml_type not in INT4_TYPES), parts[0])
        raise ValueError(
            f"weights_dtype='int4' needs 4-bit matrices (Q4_0, Q4_1, Q4_K) of whole groups, but "
            f"GGUF tensor {bad.name!r} is {bad.type_name} {bad.shape}; use weights_dtype='auto' "
            "to keep the others in bfloat16"
        )
    return Stack(parts, "float32" if weights_dtype == "float32" else "bfloat16", shape)


def plan_weights(
    gguf: GGUFFile, config: LlamaConfig, *, tied: bool, weights_dtype: str
) -> WeightsPlan:
    """Decide, for every tensor, how it will be held, and so how many bytes the load needs.

    Args:
        gguf: the parsed, checked file. config: its :class:`LlamaConfig`.
        tied: whether the embedding is the output. weights_dtype: one of :data:`LOAD_DTYPES`.

    Returns:
        The :class:`WeightsPlan` (nothing decoded yet).

    Raises:
        ValueError: for ``"int4"`` with a layer matrix not stored in 4 bits.
    """
    layers = []
    for index in range(config.num_layers):
        layer = {}
        for target, sources in LAYER_SOURCES.items():
            names = [f"blk.{index}.{source}" for source in sources]
            if names[0] in gguf.tensors:
                layer[target] = _stack(tuple(gguf.tensors[n] for n in names), weights_dtype)
        layers.append(layer)
    embedding_form = "float32" if weights_dtype == "float32" else "bfloat16"
    embedding_info = gguf.tensors[EMBEDDING_TENSOR]
    output = None
    if not tied:
        output_dtype = "auto" if weights_dtype == "int4" else weights_dtype
        output = _stack((gguf.tensors[OUTPUT_TENSOR],), output_dtype)
    return WeightsPlan(
        layers=tuple(layers),
        embedding=Stack((embedding_info,), embedding_form, embedding_info.shape),
        output=output,
        final_norm=_stack((gguf.tensors[FINAL_NORM_TENSOR],), weights_dtype),
    )


def check_weights_budget(plan: WeightsPlan, memory_budget: int | None, source: str) -> None:
    """Refuse a load whose weights (and largest temporary) exceed the budget.

    Args:
        plan: :func:`plan_weights`'s. memory_budget: bytes, or None for
            :func:`default_weights_budget` (no check when the system does not say).
        source: the file, for the message.

    Raises:
        MemoryBudgetError: naming the size, the budget and what to try.
        ValueError: for a budget that is not a positive whole number.
    """
    if memory_budget is not None and (
        isinstance(memory_budget, bool) or not isinstance(memory_budget, int) or memory_budget < 1
    ):
        raise ValueError(f"memory_budget must be a positive number of bytes, got {memory_budget!r}")
    budget = default_weights_budget() if memory_budget is None else memory_budget
    if budget is None or plan.peak_bytes <= budget:
        return
    where = (
        "the memory_budget given"
        if memory_budget is not None
        else f"{DEFAULT_BUDGET_SHARE:.0%} of the memory available"
    )
    raise MemoryBudgetError(
        f"loading {source} needs {format_bytes(plan.peak_bytes)} ({format_bytes(plan.nbytes)} of "
        f"weights), over the budget of {format_bytes(budget)} ({where}); choose a smaller or "
        "more quantised file, weights_dtype='auto', or a larger memory_budget"
    )


def _decode_float(gguf: GGUFFile, stack: Stack) -> torch.Tensor:
    """Decode a stack's parts straight into their rows of one float32 or bfloat16 tensor
    (bfloat16: rounded a decoding step at a time, no float32 copy of the matrix)."""
    dtype = FLOAT_DTYPES[stack.form]
    target = torch.empty(stack.shape, dtype=dtype)  # (rows, D) or (D,)
    first = 0
    for info in stack.parts:
        rows = info.shape[0]
        part = target[first : first + rows]
        if dtype == torch.float32:
            dequantize(gguf.data, info, out=part)
        else:  # a block of rows at a time, each block's file pages handed back after it
            for start in range(0, rows, CONVERT_ROWS):
                stop = min(start + CONVERT_ROWS, rows)
                rows_info = info.rows(start, stop)
                dequantize(gguf.data, rows_info, out=part[start:stop])
                release_range(gguf.data, rows_info.start, rows_info.nbytes)
        first += rows
    return target


def _materialise(gguf: GGUFFile, stack: Stack):
    """The decoder's tensor for one stack: an :class:`Int4Matrix` or a float tensor; the
    file pages it was read from are handed back at once (:func:`release_range`)."""
    if stack.form == "int4":
        packed = pack_stack(gguf.data, stack.parts)  # torch's layout from the nibbles at once
        if packed is None:  # the readable path: codes, then torch's own packing
            parts = concat_parts([int4_parts(gguf.data, info) for info in stack.parts])
            packed = pack_int4(parts)  # (rows, D)
        tensor = Int4Matrix(packed)
    else:
        tensor = _decode_float(gguf, stack)
    for info in stack.parts:
        release_range(gguf.data, info.start, info.nbytes)
    return tensor


@dataclass(frozen=True)
class OpenedFile:
    """A mapped, parsed and checked GGUF file, before any weight is decoded.

    Attributes:
        path: the file. mapped: its copy-on-write memory map. gguf: the parsed file.
        config: the architecture. tied: whether the embedding is the output matrix.
    """

    path: Path
    mapped: object
    gguf: GGUFFile
    config: LlamaConfig
    tied: bool


def open_gguf(path: str | Path, expected_sha256: str | None = None) -> OpenedFile:
    """Map, parse and check a llama-family GGUF file; no weight is decoded.

    Args:
        path: the ``.gguf`` file. expected_sha256: 64 hex digits checked before parsing, or
            None to skip (hashing a multi-GB file takes seconds).

    Returns:
        :class:`OpenedFile`.

    Raises:
        FileNotFoundError: when the file does not exist.
        ValueError: naming the field, for a digest mismatch, a truncated or malformed file,
            an unsupported architecture, type or tensor, or missing or mis-shaped tensors.
    """
    path = Path(path)
    mapped = map_verified(path, expected_sha256)
    gguf = parse_gguf(mapped)
    config = gguf_config(gguf)
    tied = check_tensor_table(gguf, config)
    return OpenedFile(path, mapped, gguf, config, tied)


def read_gguf_card(path: str | Path) -> GGUFCard:
    """The card of a GGUF model file (architecture, sizes, storage types, parameters, file
    size), read from its header alone.

    Args:
        path: the ``.gguf`` file.

    Returns:
        :class:`~attention_core.pretrained.gguf_config.GGUFCard`.

    Raises:
        FileNotFoundError, ValueError: as for :func:`open_gguf`.
    """
    opened = open_gguf(path)
    return gguf_card(opened.gguf, opened.config, tied=opened.tied)


def weights_bytes(path: str | Path, weights_dtype: str = "auto") -> int:
    """Bytes the weights of a GGUF file will hold when loaded with ``weights_dtype``.

    Raises:
        FileNotFoundError, ValueError: as for :func:`open_gguf`, or an unknown dtype.
    """
    weights_dtype = check_choice("weights_dtype", weights_dtype, LOAD_DTYPES)
    opened = open_gguf(path)
    return plan_weights(
        opened.gguf, opened.config, tied=opened.tied, weights_dtype=weights_dtype
    ).nbytes


def load_gguf(
    path: str | Path,
    *,
    weights_dtype: str = "auto",
    memory_budget: int | None = None,
    expected_sha256: str | None = None,
    variant: str = "scaled",
    after_layer: Callable[[], object] | None = None,
    **variant_params,
) -> Decoder:
    """Load a llama, Qwen2 or Qwen3 GGUF file as a :class:`Decoder`.

    Args:
        path: the ``.gguf`` file on disk.
        weights_dtype: one of :data:`LOAD_DTYPES` (module docstring); default ``"auto"``.
        memory_budget: bytes the weights may take (plus the load's largest temporary);
            None: :data:`DEFAULT_BUDGET_SHARE` of the memory available.
        expected_sha256: the file's pinned SHA-256, checked before parsing; None skips it.
        variant: the attention variant of every layer (default exact ``"scaled"``).
        after_layer: called with no arguments after each layer and after the embedding is
            decoded (e.g. a server's trim of the C heap); the library never touches the
            process itself.
        **variant_params: the variant's parameters.

    Returns:
        The :class:`Decoder` in eval mode, on the CPU, with the file's tokenizer and RoPE
        row order.

    Raises:
        FileNotFoundError: when the file does not exist.
        MemoryBudgetError: when the chosen weights exceed the budget (nothing large was
            allocated).
        ValueError: naming the field, for a malformed, truncated or unsupported file (see
            :func:`open_gguf`), an unknown ``weights_dtype``, ``"int4"`` with matrices that
            are not 4-bit, or a bad variant.
    """
    weights_dtype = check_choice("weights_dtype", weights_dtype, LOAD_DTYPES)
    opened = open_gguf(path, expected_sha256)
    gguf, config = opened.gguf, opened.config
    plan = plan_weights(gguf, config, tied=opened.tied, weights_dtype=weights_dtype)
    check_weights_budget(plan, memory_budget, str(opened.path))
    tokenizer = read_gguf_tokenizer(gguf.metadata, max_length=config.context_length)
    layers = []
    for layer_plan in plan.layers:
        layers.append({name: _materialise(gguf, s) for name, s in layer_plan.items()})
        release_pages(opened.mapped)
        if after_layer is not None:
            after_layer()  # the layer's temporaries are freed: before the next layer's
    embedding = _materialise(gguf, plan.embedding)
    output = _materialise(gguf, plan.output) if plan.output is not None else None
    final_norm = _materialise(gguf, plan.final_norm)
    release_pages(opened.mapped)
    if after_layer is not None:
        after_layer()
    return Decoder(
        config,
        embedding,
        final_norm,
        layers,
        tokenizer.tokenizer,
        source=str(opened.path),
        rope_style=ROPE_STYLE_OF[config.architecture],
        output=output,
        token_spelling=tokenizer.spelling,
        variant=variant,
        **variant_params,
    )
