"""What a Hugging Face folder's ``config.json`` says about its model, as a :class:`LlamaConfig`.

Four dense families are read, by ``model_type`` (and ``architectures``, when given):
``llama`` (SmolLM2, Llama 3.x), ``qwen2`` (biases on q, k and v), ``qwen3`` (RMSNorm on every
head's q and k) and ``mistral`` (a sliding window). The numbers: ``vocab_size``,
``hidden_size``, ``num_hidden_layers``, ``num_attention_heads``, ``num_key_value_heads``,
``head_dim``, ``intermediate_size``, ``max_position_embeddings``, ``rms_norm_eps``,
``tie_word_embeddings``, ``sliding_window`` (Mistral; ``use_sliding_window: false`` or
``null`` means none), and RoPE from ``rope_parameters`` or the older ``rope_theta`` +
``rope_scaling``: types ``default``, ``linear`` and ``llama3`` (its per-frequency factors
computed here, as llama.cpp's converter writes them into ``rope_freqs.weight``).

Anything else is refused with a ``ValueError`` of one line naming the key and its value,
before a weight is read: experts, latent attention, soft-capping, hybrid or per-layer blocks,
other activations, extra biases, quantised weights, partial RoPE, YaRN or other RoPE types,
an unknown ``model_type``. Hugging Face keeps q/k rows in their own order, so every family
rotates halves (``"half"``, :mod:`~attention_core.pretrained.rope`).

:func:`expected_shapes` and :func:`check_tensors` give the checkpoint's tensor table that the
config implies (``model.layers.{i}.self_attn.q_proj.weight``, …) and check a folder's tensors
against it.
"""

from __future__ import annotations

import math

import torch

from attention_core.pretrained.llama_block import LlamaConfig

ARCHITECTURE_OF = {
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "mistral": "MistralForCausalLM",
}
"""The supported ``model_type`` values and their ``architectures`` class."""
HF_ARCHITECTURES = tuple(ARCHITECTURE_OF)
SUPPORTED = "supported: dense llama, qwen2, qwen3, mistral"
REFUSED_KEYS = {
    "num_local_experts": "mixtures of experts are not supported",
    "num_experts": "mixtures of experts are not supported",
    "n_routed_experts": "mixtures of experts are not supported",
    "kv_lora_rank": "multi-head latent attention is not supported",
    "q_lora_rank": "multi-head latent attention is not supported",
    "attn_logit_softcapping": "soft-capped scores are not supported",
    "final_logit_softcapping": "soft-capped logits are not supported",
    "layers_block_type": "hybrid blocks are not supported",
    "hybrid_override_pattern": "hybrid blocks are not supported",
    "attn_layer_period": "hybrid blocks are not supported",
    "quantization_config": "quantised weights are not supported",
}
"""Keys whose presence (any value but null, 0, false or empty) means a model the decoder
does not run."""
FULL_ATTENTION = "full_attention"
ROPE_TYPES = ("default", "linear", "llama3")
DEFAULT_ROPE_BASE = 10000.0  # transformers' default_theta
DEFAULT_RMS_EPS = 1e-6
SILU = "silu"
HEAD_DIM_DEFAULT = {"qwen3": 128}  # transformers' Qwen3Config default; the others: D / H
LLAMA3_KEYS = ("factor", "low_freq_factor", "high_freq_factor")
EMBEDDING = "model.embed_tokens.weight"
FINAL_NORM = "model.norm.weight"
OUTPUT = "lm_head.weight"
IGNORED_SUFFIX = "rotary_emb.inv_freq"  # older checkpoints store RoPE's frequencies


def _line(key: str, value: object, why: str) -> ValueError:
    """The one-line refusal naming ``key`` and its value."""
    return ValueError(f"config.json {key} is {value!r}: {why}")


def _whole(config: dict, key: str, default: int | None = None) -> int:
    """A positive whole number under ``key`` (``default`` when absent or null, if given)."""
    value = config.get(key)
    if value is None:
        if default is None:
            raise ValueError(f"config.json lacks {key!r}, which a llama-family model needs")
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _line(key, value, "must be a positive whole number")
    return value


def _real(key: str, value: object) -> float:
    """``value`` (read under ``key``) as a finite positive number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _line(key, value, "must be a number")
    if not math.isfinite(value) or value <= 0:
        raise _line(key, value, "must be finite and positive")
    return float(value)


def check_refused(config: dict) -> None:
    """Refuse what the decoder does not run, each with one line naming the key.

    Raises:
        ValueError: for a key of :data:`REFUSED_KEYS`, a ``layer_types`` entry other than
            full attention, an activation other than SiLU, extra biases, or an unknown
            ``model_type`` or ``architectures``.
    """
    for key, why in REFUSED_KEYS.items():
        if config.get(key):
            raise _line(key, config[key], f"{why} ({SUPPORTED})")
    layer_types = config.get("layer_types") or []
    other = [kind for kind in layer_types if kind != FULL_ATTENTION]
    if other and config.get("model_type") != "mistral":  # mistral ignores it
        raise _line("layer_types", other[0], f"only {FULL_ATTENTION!r} layers are supported")
    model_type = config.get("model_type")
    if model_type not in ARCHITECTURE_OF:
        raise _line("model_type", model_type, SUPPORTED)
    architectures = config.get("architectures") or [ARCHITECTURE_OF[model_type]]
    if architectures != [ARCHITECTURE_OF[model_type]]:
        raise _line("architectures", architectures, f"expected [{ARCHITECTURE_OF[model_type]!r}]")
    activation = config.get("hidden_act", SILU)
    if activation != SILU:
        raise _line("hidden_act", activation, f"only {SILU!r} (SwiGLU) is supported")
    for key in ("mlp_bias", "attention_bias"):
        if config.get(key) and not (key == "attention_bias" and model_type == "qwen2"):
            raise _line(key, config[key], "biases are supported on q, k and v of qwen2 only")


def rope_settings(config: dict) -> tuple[str, dict]:
    """The RoPE parameters: from ``rope_parameters`` (transformers 5), else ``rope_scaling``
    plus ``rope_theta`` (older files).

    Returns:
        (the key read, for messages; the parameters with ``rope_type`` and ``rope_theta``).

    Raises:
        ValueError: for parameters that are not one object (e.g. one per layer type).
    """
    key = "rope_parameters" if config.get("rope_parameters") else "rope_scaling"
    params = config.get(key) or {}
    if not isinstance(params, dict) or any(isinstance(v, dict) for v in params.values()):
        raise _line(key, params, "only one RoPE for every layer is supported")
    params = dict(params)
    params.setdefault("rope_type", params.get("type", "default"))
    params.setdefault("rope_theta", config.get("rope_theta", DEFAULT_ROPE_BASE))
    return key, params


def llama3_factors(params: dict, head_dim: int, context: int) -> tuple[float, ...]:
    """Llama 3's per-frequency RoPE factors (frequency i is divided by factor i), computed in
    float64 from transformers' rule: long wavelengths divided by ``factor``, short ones kept,
    those between blended smoothly.

    Args:
        params: ``factor``, ``low_freq_factor``, ``high_freq_factor``,
            ``original_max_position_embeddings`` (default ``context``), ``rope_theta``.
        head_dim: E. context: ``max_position_embeddings``.

    Returns:
        E/2 positive factors.

    Raises:
        ValueError: naming a missing or non-positive parameter.
    """
    factor, low, high = (_real(f"rope {key}", params.get(key)) for key in LLAMA3_KEYS)
    if high <= low:
        raise _line("rope high_freq_factor", high, f"must exceed low_freq_factor {low}")
    old_key = "original_max_position_embeddings"
    old_context = _real(f"rope {old_key}", params.get(old_key, context))
    base = float(params["rope_theta"])
    factors = []
    for i in range(0, head_dim, 2):
        wavelength = 2 * math.pi * base ** (i / head_dim)  # 2π / inv_freq
        if wavelength < old_context / high:
            factors.append(1.0)
        elif wavelength > old_context / low:
            factors.append(factor)
        else:
            smooth = (old_context / wavelength - low) / (high - low)
            factors.append(1.0 / ((1 - smooth) / factor + smooth))
    return tuple(factors)


def _rope(config: dict, head_dim: int, context: int) -> dict:
    """The :class:`LlamaConfig` RoPE fields: ``rope_base``, ``rope_linear``,
    ``rope_factors``."""
    key, params = rope_settings(config)
    kind = params["rope_type"]
    if kind not in ROPE_TYPES:
        raise _line(f"{key}.rope_type", kind, f"supported: {', '.join(ROPE_TYPES)}")
    partial = params.get("partial_rotary_factor", config.get("partial_rotary_factor", 1.0))
    if partial not in (None, 1, 1.0):
        raise _line("partial_rotary_factor", partial, "only RoPE on the whole head is supported")
    base = _real(f"{key}.rope_theta", params["rope_theta"])
    fields = {"rope_base": base, "rope_linear": 1.0, "rope_factors": ()}
    if kind == "linear":
        fields["rope_linear"] = _real(f"{key}.factor", params.get("factor"))
    elif kind == "llama3":
        fields["rope_factors"] = llama3_factors(params, head_dim, context)
    return fields


def _sliding_window(config: dict) -> int:
    """W for Mistral (0 when ``null``); the Qwen families must not use theirs."""
    model_type = config["model_type"]
    if model_type in ("qwen2", "qwen3"):
        if config.get("use_sliding_window"):
            raise _line(
                "use_sliding_window",
                config["use_sliding_window"],
                "qwen's per-layer sliding window is not supported",
            )
        return 0
    if model_type != "mistral" or config.get("sliding_window") is None:
        return 0
    return _whole(config, "sliding_window")


def hf_config(config: dict) -> LlamaConfig:
    """Read a llama, qwen2, qwen3 or mistral decoder's architecture from ``config.json``.

    Args:
        config: the parsed ``config.json`` object.

    Returns:
        The :class:`LlamaConfig` (``architecture`` is the ``model_type``).

    Raises:
        ValueError: one line naming the key and its value, for what :func:`check_refused`
            refuses, a missing or invalid number, a RoPE type other than default, linear or
            llama3, partial RoPE, or qwen's sliding window.
    """
    check_refused(config)
    heads = _whole(config, "num_attention_heads")
    width = _whole(config, "hidden_size")
    head_dim = _whole(
        config, "head_dim", HEAD_DIM_DEFAULT.get(config["model_type"], width // heads)
    )
    context = _whole(config, "max_position_embeddings")
    eps = config.get("rms_norm_eps", DEFAULT_RMS_EPS)
    return LlamaConfig(
        vocab_size=_whole(config, "vocab_size"),
        hidden_size=width,
        num_layers=_whole(config, "num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=_whole(config, "num_key_value_heads", heads),
        intermediate_size=_whole(config, "intermediate_size"),
        context_length=context,
        rms_eps=_real("rms_norm_eps", eps),
        key_length=head_dim,
        qkv_bias=config["model_type"] == "qwen2",
        qk_norm=config["model_type"] == "qwen3",
        architecture=config["model_type"],
        sliding_window=_sliding_window(config),
        **_rope(config, head_dim, context),
    )


def is_tied(config: dict) -> bool:
    """``tie_word_embeddings`` (false when absent, transformers' default for these four)."""
    tied = config.get("tie_word_embeddings", False)
    if not isinstance(tied, bool):
        raise _line("tie_word_embeddings", tied, "must be true or false")
    return tied


def expected_shapes(config: LlamaConfig, *, tied: bool) -> dict[str, tuple[int, ...]]:
    """The checkpoint name and shape of every tensor a model of ``config`` holds."""
    width, size, ffn = config.hidden_size, config.head_dim, config.intermediate_size
    q_rows, kv_rows = config.num_heads * size, config.num_kv_heads * size
    per_layer = {
        "input_layernorm.weight": (width,),
        "self_attn.q_proj.weight": (q_rows, width),
        "self_attn.k_proj.weight": (kv_rows, width),
        "self_attn.v_proj.weight": (kv_rows, width),
        "self_attn.o_proj.weight": (width, q_rows),
        "post_attention_layernorm.weight": (width,),
        "mlp.gate_proj.weight": (ffn, width),
        "mlp.up_proj.weight": (ffn, width),
        "mlp.down_proj.weight": (width, ffn),
    }
    if config.qkv_bias:
        per_layer |= {
            "self_attn.q_proj.bias": (q_rows,),
            "self_attn.k_proj.bias": (kv_rows,),
            "self_attn.v_proj.bias": (kv_rows,),
        }
    if config.qk_norm:
        per_layer |= {"self_attn.q_norm.weight": (size,), "self_attn.k_norm.weight": (size,)}
    shapes = {EMBEDDING: (config.vocab_size, width), FINAL_NORM: (width,)}
    if not tied:
        shapes[OUTPUT] = (config.vocab_size, width)
    for index in range(config.num_layers):
        shapes |= {f"model.layers.{index}.{name}": shape for name, shape in per_layer.items()}
    return shapes


def check_tensors(tensors: dict[str, torch.Tensor], config: LlamaConfig, *, tied: bool) -> None:
    """Check that the checkpoint holds exactly the tensors of ``config`` with their shapes.

    Raises:
        ValueError: naming the first missing tensor, an unknown one (a part the decoder
            would not run), or one of another shape.
    """
    expected = expected_shapes(config, tied=tied)
    missing = [name for name in expected if name not in tensors]
    if missing:
        raise ValueError(
            f"safetensors tensor {missing[0]!r} is missing ({len(missing)} missing in all) for "
            f"a {config.architecture} model of {config.num_layers} layers"
        )
    extra = [n for n in tensors if n not in expected and not n.endswith(IGNORED_SUFFIX)]
    unknown = [n for n in extra if not (tied and n == OUTPUT)]  # a stored copy of the tie
    if unknown:
        raise ValueError(
            f"safetensors tensor {unknown[0]!r} is not part of a {config.architecture} decoder "
            f"({len(unknown)} unknown in all); this model has parts that are not supported"
        )
    for name, shape in expected.items():
        if tuple(tensors[name].shape) != shape:
            raise ValueError(
                f"safetensors tensor {name!r} has shape {tuple(tensors[name].shape)}, "
                f"expected {shape}"
            )
