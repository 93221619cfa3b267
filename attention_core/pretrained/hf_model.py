"""Load a local Hugging Face folder (llama, Qwen2, Qwen3, Mistral) as a :class:`Decoder`.

The folder holds ``config.json`` (:mod:`~attention_core.pretrained.hf_config`), the weights
as ``model.safetensors`` or as shards listed by ``model.safetensors.index.json``, and the
tokenizer as ``tokenizer.json`` with ``tokenizer_config.json``. :func:`load_hf` maps every
shard (copy-on-write, :mod:`~attention_core.pretrained.safetensors_file`: only headers are
read), checks every tensor's name, shape and dtype (F32, F16 or BF16), and **before any
large allocation** checks the bytes the chosen weights will hold against the budget
(:func:`~attention_core.pretrained.gguf_model.check_weights_budget`, the GGUF loader's
:class:`~attention_core.device.MemoryBudgetError`). Then each layer's tensors are copied
into the decoder's stacked form (q, k, v by rows; gate and up by rows), the mapped pages
handed back after each layer.

``weights_dtype``: ``"auto"`` (default) and ``"bfloat16"`` hold every matrix and the
embedding in bfloat16, as the GGUF loader's ``"auto"`` does for a file without 4-bit
matrices; ``"float32"`` holds them in float32 (exact for F32, F16 and BF16 files). Norms and
biases are float32 either way. q/k rows stay in Hugging Face's order: the decoder rotates
halves (``rope_style="half"``), the same model as a GGUF file's permuted rows.

The tokenizer is ``tokenizer.json`` as it is, except that an ``add_bos_token`` or
``add_eos_token`` in ``tokenizer_config.json`` decides what ``encode`` adds around a text (BOS
first, EOS last, each when its token is named), as llama.cpp's converter reads them into a
GGUF file, whose loader adds BOS the same way: a folder and its GGUF file tokenise alike.
(transformers 5 follows ``tokenizer.json`` alone; in real folders the two files agree.)

A Hub id (``owner/name``) is fetched into the Hub cache first
(:mod:`~attention_core.pretrained.hf_hub`: only the files read here, a pinned commit read from
the cache without a request).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import tokenizers
import torch
from tokenizers import processors

from attention_core.pretrained.checks import map_verified, release_pages
from attention_core.pretrained.gguf_config import GGUFCard, model_card
from attention_core.pretrained.gguf_model import WeightsPlan, check_weights_budget
from attention_core.pretrained.hf_config import (
    EMBEDDING,
    FINAL_NORM,
    OUTPUT,
    check_tensors,
    hf_config,
    is_tied,
)
from attention_core.pretrained.hf_folders import hub_cache_name
from attention_core.pretrained.hf_hub import Progress, fetch_hub_model, is_hub_id
from attention_core.pretrained.llama import Decoder
from attention_core.pretrained.llama_block import LlamaConfig
from attention_core.pretrained.safetensors_file import read_safetensors
from attention_core.validation import check_choice

HF_LOAD_DTYPES = ("auto", "float32", "bfloat16")
"""The ways to hold the weights (see the module docstring)."""
FORMS = {"auto": torch.bfloat16, "bfloat16": torch.bfloat16, "float32": torch.float32}
STORED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
LAYER_SOURCES = {
    "attn_norm": ("input_layernorm.weight",),
    "qkv": ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"),
    "qkv_bias": ("self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"),
    "q_norm": ("self_attn.q_norm.weight",),
    "k_norm": ("self_attn.k_norm.weight",),
    "out": ("self_attn.o_proj.weight",),
    "mlp_norm": ("post_attention_layernorm.weight",),
    "gate_up": ("mlp.gate_proj.weight", "mlp.up_proj.weight"),
    "down": ("mlp.down_proj.weight",),
}
"""The decoder's name of each block tensor -> the checkpoint tensors (under
``model.layers.{i}.``) stacked into it, by rows."""
UNUSED_TOKEN = "<|unused_{}|>"
"""The name of an embedding row past the tokenizer's last id."""
SPELLING_MARKS = {"ByteLevel": "byte_level", "Metaspace": "sentencepiece", "▁": "sentencepiece"}


@dataclass(frozen=True)
class Stack:
    """One tensor the decoder will hold: its parts (views of the mapped files) and dtype."""

    parts: tuple[torch.Tensor, ...]
    dtype: torch.dtype

    @property
    def nbytes(self) -> int:
        """Bytes it will hold once copied."""
        return sum(part.numel() for part in self.parts) * self.dtype.itemsize

    @property
    def transient_bytes(self) -> int:
        """The mapped file pages of its parts, resident while it is copied."""
        return sum(part.numel() * part.element_size() for part in self.parts)

    def materialise(self) -> torch.Tensor:
        """The parts copied by rows into one new tensor of :attr:`dtype` (no other copy)."""
        rows = sum(part.shape[0] for part in self.parts)
        target = torch.empty((rows, *self.parts[0].shape[1:]), dtype=self.dtype)
        first = 0
        for part in self.parts:
            target[first : first + part.shape[0]].copy_(part)  # converts the dtype
            first += part.shape[0]
        return target


def _read_json(path: Path) -> dict:
    """A JSON object from ``path``."""
    if not path.is_file():
        raise FileNotFoundError(f"{path.name} not found in {path.parent}")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is not JSON: {err}") from err
    if not isinstance(value, dict):
        raise ValueError(f"{path} must hold a JSON object, got {type(value).__name__}")
    return value


def weight_files(folder: Path) -> list[Path]:
    """The safetensors files: ``model.safetensors``, else the shards of the index.

    Raises:
        FileNotFoundError: when neither exists, or a listed shard is missing.
        ValueError: for an index without a ``weight_map`` of file names in the folder.
    """
    if (folder / WEIGHTS_FILE).is_file():
        return [folder / WEIGHTS_FILE]
    if not (folder / INDEX_FILE).is_file():
        raise FileNotFoundError(f"{folder} holds neither {WEIGHTS_FILE} nor {INDEX_FILE}")
    weight_map = _read_json(folder / INDEX_FILE).get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ValueError(f"{INDEX_FILE} in {folder} has no weight_map")
    names = sorted(set(weight_map.values()))
    bad = [n for n in names if not isinstance(n, str) or Path(n).name != n or n.startswith(".")]
    if bad:
        raise ValueError(f"{INDEX_FILE} weight_map names {bad[0]!r}, not a file in the folder")
    return [folder / name for name in names]


def read_tensors(files: list[Path]) -> tuple[dict[str, torch.Tensor], list]:
    """Every tensor of the shards as views of their copy-on-write maps (headers read only).

    Returns:
        (name -> tensor, the maps).

    Raises:
        FileNotFoundError: for a missing shard. ValueError: for a malformed file, a tensor
            in two shards, or one stored in another dtype than F32, F16 or BF16.
    """
    tensors, maps = {}, []
    for path in files:
        mapped = map_verified(path, None)
        maps.append(mapped)
        for name, tensor in read_safetensors(mapped).items():
            if name in tensors:
                raise ValueError(f"safetensors tensor {name!r} is stored twice (in {path.name})")
            if tensor.dtype not in STORED_DTYPES:
                raise ValueError(
                    f"safetensors tensor {name!r} is {tensor.dtype}; F32, F16 or BF16 supported"
                )
            tensors[name] = tensor
    return tensors, maps


def plan_weights(
    tensors: dict, config: LlamaConfig, *, tied: bool, dtype: torch.dtype
) -> WeightsPlan:
    """How every tensor will be held: matrices in ``dtype``, vectors in float32."""

    def stack(*names: str) -> Stack:
        parts = tuple(tensors[name] for name in names)
        return Stack(parts, dtype if parts[0].dim() == 2 else torch.float32)

    layers = []
    for index in range(config.num_layers):
        prefix = f"model.layers.{index}."
        layers.append(
            {
                target: stack(*(prefix + source for source in sources))
                for target, sources in LAYER_SOURCES.items()
                if prefix + sources[0] in tensors
            }
        )
    output = None if tied else stack(OUTPUT)
    return WeightsPlan(tuple(layers), stack(EMBEDDING), output, stack(FINAL_NORM))


def _token_text(value: object) -> str | None:
    """A special token from ``tokenizer_config.json``: a string, or an ``AddedToken``
    object's ``content``."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _flag(settings: dict, key: str) -> bool:
    """A true/false setting of ``tokenizer_config.json``."""
    value = settings[key]
    if not isinstance(value, bool):
        raise ValueError(f"{TOKENIZER_CONFIG_FILE} {key} must be true or false, got {value!r}")
    return value


def _bos_eos(tokenizer: tokenizers.Tokenizer, settings: dict) -> processors.TemplateProcessing:
    """What ``encode`` adds, rebuilt from ``add_bos_token`` / ``add_eos_token`` (llama.cpp's
    converter reads them so; a flag whose token is not named adds nothing)."""
    added = {}
    for kind in ("bos", "eos"):
        key, text = f"add_{kind}_token", _token_text(settings.get(f"{kind}_token"))
        if key in settings and _flag(settings, key) and text is not None:
            if tokenizer.token_to_id(text) is None:
                raise ValueError(f"{TOKENIZER_CONFIG_FILE} {kind}_token {text!r} is not a token")
            added[kind] = (text, tokenizer.token_to_id(text))
    bos = [f"{added['bos'][0]}:0"] if "bos" in added else []
    eos = [f"{added['eos'][0]}:0"] if "eos" in added else []
    bos_b = [f"{added['bos'][0]}:1"] if "bos" in added else []
    eos_b = [f"{added['eos'][0]}:1"] if "eos" in added else []
    return processors.TemplateProcessing(
        single=" ".join([*bos, "$A:0", *eos]),
        pair=" ".join([*bos, "$A:0", *eos, *bos_b, "$B:1", *eos_b]),
        special_tokens=list(dict(added.values()).items()),
    )


def token_spelling(raw: dict) -> str:
    """How the vocabulary spells bytes, from ``tokenizer.json``'s pre-tokenizer and decoder:
    ``"byte_level"`` (``Ġ``) or ``"sentencepiece"`` (``▁``, ``<0x..>``).

    Raises:
        ValueError: when neither is recognised.
    """
    text = json.dumps([raw.get("pre_tokenizer"), raw.get("decoder"), raw.get("normalizer")])
    for mark, spelling in SPELLING_MARKS.items():
        if mark in text:
            return spelling
    decoder = (raw.get("decoder") or {}).get("type")
    raise ValueError(
        f"{TOKENIZER_FILE} decoder {decoder!r}: neither byte-level nor SentencePiece spelling"
    )


def load_hf_tokenizer(
    folder: Path, max_length: int, vocab_size: int = 0
) -> tuple[tokenizers.Tokenizer, str]:
    """The folder's tokenizer, as the decoder's ``tokenize`` uses it.

    Args:
        folder: holds ``tokenizer.json`` (and ``tokenizer_config.json``, optional).
        max_length: texts are cut at this many tokens, BOS/EOS included.
        vocab_size: the model's embedding rows. Rows past the tokenizer's last id (Qwen pads
            its 151,665 tokens to 151,936 rows) get special tokens named
            :data:`UNUSED_TOKEN` (``<|unused_151665|>``, …), so that every id the model can
            score has a name; they match no ordinary text.

    Returns:
        (the ``tokenizers.Tokenizer``, with no padding; its spelling).

    Raises:
        FileNotFoundError: without ``tokenizer.json``. ValueError: for a file that cannot be
            parsed, a flag that is not a bool, a BOS/EOS token not in the vocabulary.
    """
    raw = _read_json(folder / TOKENIZER_FILE)
    try:
        tokenizer = tokenizers.Tokenizer.from_str(json.dumps(raw))
    except Exception as err:  # the Rust side raises a plain Exception
        raise ValueError(f"cannot parse {folder / TOKENIZER_FILE}: {err}") from err
    config_path = folder / TOKENIZER_CONFIG_FILE
    settings = _read_json(config_path) if config_path.is_file() else {}
    if "add_bos_token" in settings or "add_eos_token" in settings:
        tokenizer.post_processor = _bos_eos(tokenizer, settings)
    first_unused = tokenizer.get_vocab_size(with_added_tokens=True)
    unused = [UNUSED_TOKEN.format(i) for i in range(first_unused, vocab_size)]
    tokenizer.add_special_tokens(unused)
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    return tokenizer, token_spelling(raw)


def _folder(path: str | Path, revision: str | None, progress: Progress | None) -> Path:
    """The local folder ``path`` names, or the Hub cache's copy of the Hub id it names
    (:func:`~attention_core.pretrained.hf_hub.fetch_hub_model`)."""
    if not isinstance(path, str | Path):
        raise ValueError(f"path must be a folder path or a Hub id, got {type(path).__name__}")
    if is_hub_id(path):
        return fetch_hub_model(path, revision, progress)
    if revision is not None:
        raise ValueError(f"revision is for Hub ids; {path} is a folder (got {revision!r})")
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"no Hugging Face model folder at {path}, and not a Hub id")
    return folder


def load_hf(
    path: str | Path,
    *,
    revision: str | None = None,
    progress: Progress | None = None,
    weights_dtype: str = "auto",
    memory_budget: int | None = None,
    variant: str = "scaled",
    after_layer: Callable[[], object] | None = None,
    **variant_params,
) -> Decoder:
    """Load a Hugging Face llama, Qwen2, Qwen3 or Mistral model, from a local folder or a
    Hub id, as a :class:`Decoder`.

    Args:
        path: the folder (``config.json``, ``model.safetensors`` or its index and shards,
            ``tokenizer.json``, ``tokenizer_config.json``), or a Hub id ``owner/name``
            (:mod:`~attention_core.pretrained.hf_hub`; an existing folder of that name wins).
        revision: a Hub id's commit hash, branch or tag (None: ``"main"``); None for a folder.
        progress: called with (bytes so far, bytes in all) while a Hub id's files download.
        weights_dtype: one of :data:`HF_LOAD_DTYPES` (module docstring); default ``"auto"``.
        memory_budget: bytes the weights may take, as for
            :func:`~attention_core.pretrained.gguf_model.load_gguf`; None: half the memory
            available.
        variant: the attention variant of every layer (default exact ``"scaled"``).
        after_layer: called with no arguments after each layer and after the embedding is
            copied; the library never touches the process itself.
        **variant_params: the variant's parameters.

    Returns:
        The :class:`Decoder` in eval mode, on the CPU, rotating halves (``"half"``).

    Raises:
        FileNotFoundError: when the folder, ``config.json``, the weights or
            ``tokenizer.json`` is missing.
        MemoryBudgetError: when the weights exceed the budget (nothing large was allocated).
        ValueError: one line naming the key and its value for an unsupported model
            (:func:`~attention_core.pretrained.hf_config.hf_config`); naming the tensor for
            a missing, unknown or mis-shaped one or another dtype; an unknown
            ``weights_dtype``, a ``revision`` for a folder, or a bad variant; for a Hub id,
            each refusal of :func:`~attention_core.pretrained.hf_hub.fetch_hub_model`.
    """
    folder = _folder(path, revision, progress)
    weights_dtype = check_choice("weights_dtype", weights_dtype, HF_LOAD_DTYPES)
    settings = _read_json(folder / CONFIG_FILE)
    config, tied = hf_config(settings), is_tied(settings)
    tensors, maps = read_tensors(weight_files(folder))
    check_tensors(tensors, config, tied=tied)
    plan = plan_weights(tensors, config, tied=tied, dtype=FORMS[weights_dtype])
    check_weights_budget(plan, memory_budget, str(folder))
    tokenizer, spelling = load_hf_tokenizer(folder, config.context_length, config.vocab_size)

    def copied(stack: Stack | None) -> torch.Tensor | None:
        return None if stack is None else stack.materialise()

    def handed_back() -> None:
        for mapped in maps:
            release_pages(mapped)
        if after_layer is not None:
            after_layer()

    layers = []
    for layer_plan in plan.layers:
        layers.append({name: stack.materialise() for name, stack in layer_plan.items()})
        handed_back()
    embedding, output, final_norm = map(copied, (plan.embedding, plan.output, plan.final_norm))
    handed_back()
    return Decoder(
        config,
        embedding,
        final_norm,
        layers,
        tokenizer,
        source=str(folder),
        rope_style="half",
        output=output,
        token_spelling=spelling,
        variant=variant,
        **variant_params,
    )


STORAGE_NAMES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
"""The safetensors names of the dtypes a folder may store."""


def read_hf_card(path: str | Path) -> GGUFCard:
    """The card of a local Hugging Face folder (architecture, sizes, storage types,
    parameters, bytes of the weight files), read from ``config.json`` and the safetensors
    headers alone: the same :class:`~attention_core.pretrained.gguf_config.GGUFCard` a GGUF
    file gives, ``name`` from the config's ``_name_or_path``, else ``owner/name@commit`` for
    a Hub cache snapshot, else the folder's name.

    Raises:
        FileNotFoundError, ValueError: as :func:`load_hf` for the same folder.
    """
    folder = _folder(path, None, None)
    settings = _read_json(folder / CONFIG_FILE)
    config, tied = hf_config(settings), is_tied(settings)
    files = weight_files(folder)
    tensors, maps = read_tensors(files)
    check_tensors(tensors, config, tied=tied)
    for mapped in maps:
        release_pages(mapped)
    named = settings.get("_name_or_path")
    named = named if isinstance(named, str) else ""
    return model_card(
        named or hub_cache_name(folder.as_posix()) or folder.name,
        config,
        [STORAGE_NAMES[tensor.dtype] for tensor in tensors.values()],
        sum(tensor.numel() for tensor in tensors.values()),
        sum(file.stat().st_size for file in files),
        tied=tied,
        rope_style="half",
    )
