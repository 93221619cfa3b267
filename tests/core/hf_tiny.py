"""Tiny Hugging Face model folders for tests, built offline with transformers itself.

:func:`write_tiny_hf` makes a random llama, qwen2, qwen3 or mistral model with
``AutoModelForCausalLM.from_config`` (width 64, 2 layers, 4 query heads sharing 2 KV heads),
draws its weights larger than transformers' initialisation (so that attention is far from
uniform and the biases and norms matter), and saves it with ``save_pretrained``: float32 in
one ``model.safetensors``, or bfloat16 in shards listed by ``model.safetensors.index.json``.
Beside it go a byte-level BPE ``tokenizer.json`` trained here with the ``tokenizers``
library and a ``tokenizer_config.json`` naming BOS and EOS.

transformers is a test-only dependency (``requirements-dev.txt``): ``attention_core``
never imports it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tokenizers import (
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

SPECIALS = ("<|endoftext|>", "<s>", "</s>")
TOKENIZER_VOCAB = 300
SIZES = {
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 320,  # more rows than tokens, as Qwen pads its embedding
    "max_position_embeddings": 128,
    "rms_norm_eps": 1e-6,
}
MATRIX_STD = 0.12
NORM_SPREAD = 0.2
BIAS_STD = 0.5
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "the cat sat on the mat, and the dog sat on the log.",
    "Attention is all you need: queries, keys and values.",
    "Numbers like 12345 appear in text too, and so do tabs\tand newlines\n.",
    "那只猫坐在垫子上。 🍕",
] * 10
SHARD_SIZE = "40KB"
QWEN_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
"""Qwen's pre-tokeniser split (digits one by one), as its ``tokenizer.json`` holds it and
transformers' ``Qwen2Tokenizer`` rebuilds it for a ``qwen2`` or ``qwen3`` folder."""
QWEN_FAMILIES = ("qwen2", "qwen3")


@dataclass(frozen=True)
class TinySpec:
    """What a tiny folder holds.

    Attributes:
        model_type: ``"llama"``, ``"qwen2"``, ``"qwen3"`` or ``"mistral"``.
        tied: ``tie_word_embeddings``.
        sharded_bf16: bfloat16 shards with an index instead of one float32 file.
        add_bos: ``add_bos_token`` in ``tokenizer_config.json``.
        extra: more ``config.json`` settings (rope parameters, head_dim, sliding_window).
        legacy_rope: rewrite the saved ``rope_parameters`` as the older ``rope_theta`` plus
            ``rope_scaling`` (``"type"``), as checkpoints made before transformers 5 hold.
    """

    model_type: str
    tied: bool = True
    sharded_bf16: bool = False
    add_bos: bool = True
    extra: dict = field(default_factory=dict)
    legacy_rope: bool = False


def train_tokenizer(model_type: str = "llama") -> Tokenizer:
    """A byte-level BPE of :data:`TOKENIZER_VOCAB` tokens with :data:`SPECIALS`, split as
    SmolLM2's (GPT-2's regex) or, for the Qwen families, as Qwen's (NFC, then
    :data:`QWEN_SPLIT`)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    if model_type in QWEN_FAMILIES:
        tokenizer.normalizer = normalizers.NFC()
        split = pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated", invert=False)
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [split, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
        )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TOKENIZER_VOCAB,
        special_tokens=list(SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS, trainer=trainer)
    return tokenizer


def _write_tokenizer(folder: Path, add_bos: bool, model_type: str) -> None:
    """``tokenizer.json`` (adding BOS itself when ``add_bos``, as real folders' do) and
    ``tokenizer_config.json``."""
    tokenizer = train_tokenizer(model_type)
    if add_bos:
        bos = ("<s>", tokenizer.token_to_id("<s>"))
        tokenizer.post_processor = processors.TemplateProcessing(
            single="<s>:0 $A:0", pair="<s>:0 $A:0 <s>:1 $B:1", special_tokens=[bos]
        )
    tokenizer.save(str(folder / "tokenizer.json"))
    settings = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "add_bos_token": add_bos,
        "add_eos_token": False,
        "model_max_length": SIZES["max_position_embeddings"],
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(settings), encoding="utf-8")


def _redraw(model: torch.nn.Module, seed: int) -> None:
    """Weights large enough that every part of the block shows in the output."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            if "norm" in name:
                param.copy_(1 + NORM_SPREAD * noise)
            elif name.endswith("bias"):
                param.copy_(BIAS_STD * noise)
            else:
                param.copy_(MATRIX_STD * noise)


def hf_settings(spec: TinySpec) -> dict:
    """The config's settings: :data:`SIZES`, the tie, the special ids, ``spec.extra``."""
    return {**SIZES, "tie_word_embeddings": spec.tied, "bos_token_id": 1, **spec.extra}


def write_tiny_hf(folder: Path, spec: TinySpec, seed: int = 0) -> Path:
    """Build, draw and save a tiny model and its tokenizer into ``folder``.

    Returns:
        ``folder``.
    """
    from transformers import AutoConfig, AutoModelForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    config = AutoConfig.for_model(spec.model_type, **hf_settings(spec))
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    _redraw(model, seed)
    if spec.sharded_bf16:
        model = model.to(torch.bfloat16)
        model.save_pretrained(folder, safe_serialization=True, max_shard_size=SHARD_SIZE)
    else:
        model.save_pretrained(folder, safe_serialization=True)
    _write_tokenizer(folder, spec.add_bos, spec.model_type)
    if spec.legacy_rope:
        _legacy_rope(folder / "config.json")
    return folder


def _legacy_rope(path: Path) -> None:
    """``rope_parameters`` moved to ``rope_theta`` and ``rope_scaling`` (``"type"`` key)."""
    settings = json.loads(path.read_text(encoding="utf-8"))
    rope = settings.pop("rope_parameters")
    settings["rope_theta"] = rope.pop("rope_theta")
    kind = rope.pop("rope_type")
    settings["rope_scaling"] = None if kind == "default" else {"type": kind, **rope}
    path.write_text(json.dumps(settings), encoding="utf-8")


def reference(folder: Path):
    """transformers' float32 eager model and tokenizer of a folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.float32, attn_implementation="eager"
    )
    return model.eval(), AutoTokenizer.from_pretrained(folder)
