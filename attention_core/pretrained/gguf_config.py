"""What a llama-family GGUF file says about its model, read from the metadata alone.

Three families are read: ``llama`` (Llama 2 and 3.x, SmolLM, TinyLlama, Mistral-style files),
``qwen2`` (biases on q, k and v) and ``qwen3`` (RMSNorm on every head's q and k). Every number
comes from the metadata, under the architecture's prefix (``llama.block_count``, …): layers,
width, query and KV heads, head size (``attention.key_length`` where given), MLP width, RoPE
base and scaling (``rope.scaling.type`` ``linear`` with ``rope.scaling.factor``; Llama 3's
frequency scaling arrives as the tensor ``rope_freqs.weight``), norm epsilon and context
length. Anything else (another architecture, experts, partial or YaRN RoPE, per-layer head
counts) is refused with a ``ValueError`` naming the key and its value and listing what is
supported, before a weight is read.

RoPE's row order: llama.cpp's converter permutes the q/k rows of ``llama`` files so that each
rotated pair is adjacent (its "normal" RoPE: ``"interleaved"`` here), and keeps the rows of
the Qwen families, which rotate feature i with feature i + E/2 (its "neox" RoPE: ``"half"``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from attention_core.pretrained.gguf_file import GGUFFile
from attention_core.pretrained.llama_block import LlamaConfig

ARCHITECTURE_KEY = "general.architecture"
ROPE_STYLE_OF = {"llama": "interleaved", "qwen2": "half", "qwen3": "half"}
"""The supported architectures and the RoPE row order of their GGUF files."""
ARCHITECTURES = tuple(ROPE_STYLE_OF)
ROPE_SCALING_TYPES = ("none", "linear")
DEFAULT_ROPE_BASE = 10000.0  # llama.cpp's default when a file names none
DEFAULT_RMS_EPS = 1e-5
ROPE_FACTORS_TENSOR = "rope_freqs.weight"
EMBEDDING_TENSOR = "token_embd.weight"
OUTPUT_TENSOR = "output.weight"
FINAL_NORM_TENSOR = "output_norm.weight"
TOKENS_KEY = "tokenizer.ggml.tokens"
REFUSED_WHEN_POSITIVE = ("expert_count",)  # mixtures of experts run another MLP
_REQUIRED = {
    "hidden_size": "embedding_length",
    "num_layers": "block_count",
    "num_heads": "attention.head_count",
    "intermediate_size": "feed_forward_length",
    "context_length": "context_length",
}


def _whole(metadata: dict[str, object], key: str, default: int | None = None) -> int:
    """A positive whole number under ``key`` (``default`` when absent, if given)."""
    if key not in metadata:
        if default is None:
            raise ValueError(f"GGUF metadata lacks {key!r}, which a llama-family model needs")
        return default
    value = metadata[key]
    if isinstance(value, np.ndarray):
        raise ValueError(
            f"GGUF metadata {key!r} is a per-layer array {value.tolist()[:4]}…; only one "
            "value for every layer is supported"
        )
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"GGUF metadata {key!r} must be a positive whole number, got {value!r}")
    return value


def _real(metadata: dict[str, object], key: str, default: float) -> float:
    """A finite positive number under ``key`` (``default`` when absent)."""
    value = metadata.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"GGUF metadata {key!r} must be a number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"GGUF metadata {key!r} must be finite and positive, got {value!r}")
    return float(value)


def architecture_of(metadata: dict[str, object]) -> str:
    """The file's ``general.architecture``, refused unless supported.

    Raises:
        ValueError: naming the value and listing :data:`ARCHITECTURES`.
    """
    architecture = metadata.get(ARCHITECTURE_KEY)
    if architecture not in ROPE_STYLE_OF:
        raise ValueError(
            f"GGUF metadata {ARCHITECTURE_KEY!r} is {architecture!r}; supported: "
            f"{', '.join(ARCHITECTURES)}"
        )
    return str(architecture)


def _rope_linear(metadata: dict[str, object], prefix: str) -> float:
    """The linear RoPE factor (1.0 without scaling); other scalings refused."""
    key = f"{prefix}.rope.scaling.type"
    kind = metadata.get(key, "none")
    if kind not in ROPE_SCALING_TYPES:
        raise ValueError(
            f"GGUF metadata {key!r} is {kind!r}; supported: {', '.join(ROPE_SCALING_TYPES)}"
        )
    if kind == "none":
        return 1.0
    return _real(metadata, f"{prefix}.rope.scaling.factor", 1.0)


def _rope_factors(gguf: GGUFFile, head_dim: int) -> tuple[float, ...]:
    """Llama 3's per-frequency factors from ``rope_freqs.weight`` (``()`` when absent)."""
    info = gguf.tensors.get(ROPE_FACTORS_TENSOR)
    if info is None:
        return ()
    if info.shape != (head_dim // 2,):
        raise ValueError(
            f"GGUF tensor {ROPE_FACTORS_TENSOR!r} has shape {info.shape}, expected "
            f"({head_dim // 2},)"
        )
    factors = gguf.tensor(ROPE_FACTORS_TENSOR)  # (E/2,) float32
    if not bool(factors.isfinite().all()) or not bool((factors > 0).all()):
        raise ValueError(f"GGUF tensor {ROPE_FACTORS_TENSOR!r} must hold finite positive factors")
    return tuple(float(f) for f in factors)


def _check_refused(metadata: dict[str, object], prefix: str, head_dim: int) -> None:
    """Refuse what the decoder does not run: experts, partial RoPE, v heads of another size."""
    for name in REFUSED_WHEN_POSITIVE:
        value = metadata.get(f"{prefix}.{name}", 0)
        if value:
            raise ValueError(
                f"GGUF metadata {prefix}.{name!s} is {value!r}: mixtures of experts are not "
                "supported (dense llama, qwen2, qwen3 models are)"
            )
    for key in (f"{prefix}.rope.dimension_count", f"{prefix}.attention.value_length"):
        value = metadata.get(key, head_dim)
        if value != head_dim:
            raise ValueError(
                f"GGUF metadata {key!r} is {value!r}; only the whole head size {head_dim} is "
                "supported"
            )


def gguf_config(gguf: GGUFFile) -> LlamaConfig:
    """Read a llama, qwen2 or qwen3 decoder's architecture from a parsed GGUF file.

    Args:
        gguf: :func:`~attention_core.pretrained.gguf_file.parse_gguf`'s result (only its
            metadata and the small ``rope_freqs.weight`` tensor are read).

    Returns:
        The :class:`LlamaConfig`, with the family's extras (q/k/v bias, q/k norms, head
        size, RoPE scaling).

    Raises:
        ValueError: naming the key and its value, for another architecture, a missing or
            invalid number, per-layer head counts, experts, partial RoPE, or a RoPE scaling
            other than linear.
    """
    metadata = gguf.metadata
    prefix = architecture_of(metadata)
    values = {field: _whole(metadata, f"{prefix}.{key}") for field, key in _REQUIRED.items()}
    heads = values["num_heads"]
    kv_heads = _whole(metadata, f"{prefix}.attention.head_count_kv", heads)
    head_dim = _whole(metadata, f"{prefix}.attention.key_length", values["hidden_size"] // heads)
    _check_refused(metadata, prefix, head_dim)
    tokens = metadata.get(TOKENS_KEY)
    if not isinstance(tokens, list) or not tokens:
        raise ValueError(f"GGUF metadata lacks {TOKENS_KEY!r}, the tokenizer's vocabulary")
    return LlamaConfig(
        vocab_size=len(tokens),
        num_kv_heads=kv_heads,
        rope_base=_real(metadata, f"{prefix}.rope.freq_base", DEFAULT_ROPE_BASE),
        rms_eps=_real(metadata, f"{prefix}.attention.layer_norm_rms_epsilon", DEFAULT_RMS_EPS),
        key_length=head_dim,
        qkv_bias=prefix == "qwen2",
        qk_norm=prefix == "qwen3",
        rope_linear=_rope_linear(metadata, prefix),
        rope_factors=_rope_factors(gguf, head_dim),
        architecture=prefix,
        **values,
    )


def expected_shapes(config: LlamaConfig, *, tied: bool) -> dict[str, tuple[int, ...]]:
    """Row-major shape of every tensor a file of this config must hold.

    Args:
        config: from :func:`gguf_config`.
        tied: True when the file has no ``output.weight`` (the embedding is the output).

    Returns:
        GGUF tensor name -> shape (``rope_freqs.weight`` is checked by :func:`gguf_config`).
    """
    width, size, heads = config.hidden_size, config.head_dim, config.num_heads
    q_rows, kv_rows = heads * size, config.num_kv_heads * size
    per_layer = {
        "attn_norm.weight": (width,),
        "attn_q.weight": (q_rows, width),
        "attn_k.weight": (kv_rows, width),
        "attn_v.weight": (kv_rows, width),
        "attn_output.weight": (width, q_rows),
        "ffn_norm.weight": (width,),
        "ffn_gate.weight": (config.intermediate_size, width),
        "ffn_up.weight": (config.intermediate_size, width),
        "ffn_down.weight": (width, config.intermediate_size),
    }
    if config.qkv_bias:
        per_layer |= {
            "attn_q.bias": (q_rows,),
            "attn_k.bias": (kv_rows,),
            "attn_v.bias": (kv_rows,),
        }
    if config.qk_norm:
        per_layer |= {"attn_q_norm.weight": (size,), "attn_k_norm.weight": (size,)}
    shapes = {EMBEDDING_TENSOR: (config.vocab_size, width), FINAL_NORM_TENSOR: (width,)}
    if not tied:
        shapes[OUTPUT_TENSOR] = (config.vocab_size, width)
    for index in range(config.num_layers):
        for name, shape in per_layer.items():
            shapes[f"blk.{index}.{name}"] = shape
    return shapes


def check_tensor_table(gguf: GGUFFile, config: LlamaConfig) -> bool:
    """Check that the file holds exactly the tensors of ``config`` with their shapes.

    Args:
        gguf: the parsed file. config: from :func:`gguf_config`.

    Returns:
        True when the output is tied (no ``output.weight``).

    Raises:
        ValueError: naming the first missing tensor, an unknown one (a part of the model the
            decoder would not run), or a tensor of another shape.
    """
    tied = OUTPUT_TENSOR not in gguf.tensors
    expected = expected_shapes(config, tied=tied)
    missing = [name for name in expected if name not in gguf.tensors]
    if missing:
        raise ValueError(
            f"GGUF tensor {missing[0]!r} is missing ({len(missing)} missing in all) for a "
            f"{config.architecture} model of {config.num_layers} layers"
        )
    unknown = [n for n in gguf.tensors if n not in expected and n != ROPE_FACTORS_TENSOR]
    if unknown:
        raise ValueError(
            f"GGUF tensor {unknown[0]!r} is not part of a {config.architecture} decoder "
            f"({len(unknown)} unknown in all); this model has parts that are not supported"
        )
    for name, shape in expected.items():
        if gguf.tensors[name].shape != shape:
            raise ValueError(
                f"GGUF tensor {name!r} has shape {gguf.tensors[name].shape}, expected {shape}"
            )
    return tied


@dataclass(frozen=True)
class GGUFCard:
    """A model at a glance, read without loading its weights.

    Attributes:
        name: ``general.name`` (or ``""``).
        architecture: ``"llama"``, ``"qwen2"`` or ``"qwen3"``.
        layers, heads, kv_heads, head_dim, context_length, vocab_size: the sizes.
        storage_types: (type name, tensor count) pairs, most tensors first.
        parameters: every weight's value count.
        file_bytes: the file's size.
        tied: whether the embedding is the output matrix.
        rope_style: ``"interleaved"`` or ``"half"``.
    """

    name: str
    architecture: str
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    context_length: int
    vocab_size: int
    storage_types: tuple[tuple[str, int], ...]
    parameters: int
    file_bytes: int
    tied: bool
    rope_style: str


def gguf_card(gguf: GGUFFile, config: LlamaConfig, *, tied: bool) -> GGUFCard:
    """The :class:`GGUFCard` of a parsed, checked file.

    Args:
        gguf: the parsed file. config: :func:`gguf_config`'s. tied: from
            :func:`check_tensor_table`.

    Returns:
        The card.
    """
    name = gguf.metadata.get("general.name", "")
    return model_card(
        name if isinstance(name, str) else "",
        config,
        [info.type_name for info in gguf.tensors.values()],
        sum(info.numel for info in gguf.tensors.values()),
        len(gguf.data),
        tied=tied,
        rope_style=ROPE_STYLE_OF[config.architecture],
    )


def model_card(
    name: str,
    config: LlamaConfig,
    storage: list[str],
    parameters: int,
    file_bytes: int,
    *,
    tied: bool,
    rope_style: str,
) -> GGUFCard:
    """A :class:`GGUFCard` from a model's config and its stored tensors, whatever the files
    (a GGUF file's, a Hugging Face folder's).

    Args:
        name: the model's own name. config: its config. storage: every tensor's storage type
            name (``"Q4_K"``, ``"BF16"``). parameters: every weight's value count.
        file_bytes: the files' size. tied, rope_style: as :class:`GGUFCard`'s.
    """
    counts: dict[str, int] = {}
    for kind in storage:
        counts[kind] = counts.get(kind, 0) + 1
    return GGUFCard(
        name=name,
        architecture=config.architecture,
        layers=config.num_layers,
        heads=config.num_heads,
        kv_heads=config.num_kv_heads,
        head_dim=config.head_dim,
        context_length=config.context_length,
        vocab_size=config.vocab_size,
        storage_types=tuple(sorted(counts.items(), key=lambda item: (-item[1], item[0]))),
        parameters=parameters,
        file_bytes=file_bytes,
        tied=tied,
        rope_style=rope_style,
    )
