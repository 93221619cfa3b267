"""Which decoder the Decoder page runs: SmolLM2 as shipped, or a GGUF file or Hugging Face
folder of the server's own.

The server's owner names folders of model files in the environment variable
:data:`MODELS_DIR_ENV` (several separated by ``os.pathsep``) or in Streamlit's secrets as
:data:`MODELS_DIR_SECRET` (a string, or a list of folders); the setting is read once per
server. The folders' files are listed by :func:`attention_core.pretrained.model_files.find_models`
(plain folders and Ollama's layout, nothing outside them), again at most every
:data:`MODEL_LIST_TTL_S` seconds so a newly copied file appears. With no folder configured
(Streamlit Community Cloud) the choice is SmolLM2 alone.

A model travels through the page as its listed name, a plain string; every function here
looks that name up in the list again (:func:`~attention_core.pretrained.model_files.resolve_model`),
so a name from a link is compared, never opened. Each model is loaded once per server
(``st.cache_resource`` keyed by name), timed, and its weights' bytes counted; a model that
cannot be read raises :class:`~attention_core.pretrained.model_files.ModelFileError` (a
``ValueError`` naming the file and why), one over the memory budget ``MemoryBudgetError``;
the page shows either in one line. The files the scan left out are kept with their reasons
(:func:`left_out_files`), for the page's "left out" lines and a link that names one.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from attention_core import pretrained
from attention_core.device import MemoryBudgetError
from attention_core.experiments import model_check
from attention_core.pretrained import hf_hub, model_files
from attention_core.pretrained.smollm2 import SMOLLM2_MODEL_NAME
from dashboard.runtime import memory

MODELS_DIR_ENV = "ATTENTION_LAB_MODELS_DIR"
MODELS_DIR_SECRET = "models_dir"
HUB_IDS_ENV = "ATTENTION_LAB_HUB_IDS"
HUB_IDS_SECRET = "hub_ids"
HUB_PREFIX = "hub:"
"""A Hub model's name: ``hub:<owner>/<name>@<revision>`` (never a file's: those end in
``.gguf``, Ollama's hold a colon after the model, folders have no ``hub:`` prefix)."""
MODEL_LIST_TTL_S = 15
"""Seconds a listing of the folders is kept: a file copied in shows up within this time."""
SMOLLM2_CHOICE = SMOLLM2_MODEL_NAME
"""The listed name of the shipped model (no file name ends like it: files end in ``.gguf``,
Ollama's names hold a colon)."""
HF_KIND = "hf"  # model_files' kind of a Hugging Face folder
SMOLLM2_WEIGHTS_DTYPE = "int4"  # the file's 4-bit codes: 123 MiB of weights, not 513 MiB
OWN_WEIGHTS_DTYPE = "auto"
"""Own files keep 4-bit matrices as codes, everything else in bfloat16 (``load_gguf``)."""
REFERENCE_DTYPE = "float32"
OWN_MODELS_KEPT = 2
"""Own models held in memory at once (each may be gigabytes); SmolLM2 is held besides."""
CHECKS_KEPT = 8


@dataclass(frozen=True)
class LoadedModel:
    """A decoder loaded once per server, and what its load cost.

    Attributes:
        name: its listed name. decoder: the model (never modified).
        load_seconds: wall time of the load. weights_bytes: bytes of its loaded tensors.
    """

    name: str
    decoder: pretrained.Decoder
    load_seconds: float
    weights_bytes: int


@dataclass(frozen=True)
class DecoderShape:
    """The numbers a page's sliders and grids need: N layers, H query heads, K KV heads and
    the context length (the most positions)."""

    layers: int
    heads: int
    kv_heads: int
    context_length: int


@dataclass(frozen=True)
class ModelCard:
    """A model at a glance, as plain values.

    Attributes:
        name: the listed name. card: the file's :class:`~attention_core.pretrained.GGUFCard`.
        weights_dtype: how the page holds the weights (``"int4"``, ``"bfloat16"``, …).
        weights_bytes: bytes of the loaded tensors. load_seconds: the load's wall time.
        source: where it comes from: ``"shipped"`` (SmolLM2's package), the listed kind
            (``"gguf"``, ``"ollama"``, ``"hf"``: a Hugging Face folder), or ``"hub"``.
        source_detail: the values its source names, as ``(name, value)`` pairs: a Hub
            model's ``repo``, ``revision`` and ``commit``.
    """

    name: str
    card: pretrained.GGUFCard
    weights_dtype: str
    weights_bytes: int
    load_seconds: float
    source: str
    source_detail: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class CheckOutcome:
    """The one-click check of a model.

    Attributes:
        check: the library's :class:`~attention_core.experiments.model_check.ModelCheck`
            (its ``weights`` is None when no float32 comparison ran).
        reference_refused: why the float32 load was refused (the budget's message), or "".
    """

    check: model_check.ModelCheck
    reference_refused: str = ""


def _split(value: object) -> tuple[str, ...]:
    """Folders from a setting: a string split at ``os.pathsep``, or a list of strings (any
    other value, or an item that is not a string, gives nothing)."""
    parts = value.split(os.pathsep) if isinstance(value, str) else value
    if not isinstance(parts, list | tuple):
        return ()
    return tuple(p.strip() for p in parts if isinstance(p, str) and p.strip())


def _secret_folders() -> tuple[str, ...]:
    """``st.secrets["models_dir"]`` as folders, or () (Streamlit raises without a file)."""
    try:
        value = st.secrets[MODELS_DIR_SECRET]
    except (KeyError, FileNotFoundError):
        return ()
    return _split(value)


@st.cache_resource(show_spinner=False)
def configured_folders() -> tuple[str, ...]:
    """The folders of the server's own models, read once per server.

    Returns:
        :data:`MODELS_DIR_ENV`'s folders when it is set and not blank, else the secret
        :data:`MODELS_DIR_SECRET`'s, else () (no folder: SmolLM2 alone).
    """
    return _split(os.environ.get(MODELS_DIR_ENV, "")) or _secret_folders()


@st.cache_resource(ttl=MODEL_LIST_TTL_S, show_spinner=False)
def own_model_scan() -> model_files.ModelScan:
    """The model files of :func:`configured_folders` and the files left out with why,
    scanned again every :data:`MODEL_LIST_TTL_S` seconds (unreadable folders skipped)."""
    return model_files.scan_models(configured_folders())


def own_model_files() -> tuple[model_files.ModelFile, ...]:
    """The listed model files of :func:`own_model_scan`."""
    return own_model_scan().models


def left_out_files() -> tuple[model_files.LeftOut, ...]:
    """The files of the configured folders left out of the list, each with its reason."""
    return own_model_scan().left_out


def left_out(name: object) -> model_files.LeftOut | None:
    """The file left out under ``name`` (a link's value, compared with the list only), or
    None."""
    return model_files.left_out_reason(name, left_out_files())


def _switched_on(value: object) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("1", "true"))


@st.cache_resource(show_spinner=False)
def hub_ids_allowed() -> bool:
    """Whether learners may type a Hub id (off unless the server's owner sets
    :data:`HUB_IDS_ENV` to ``1`` or the secret :data:`HUB_IDS_SECRET` to true: a typed id
    downloads onto the server's disk and into its memory). Read once per server."""
    if _switched_on(os.environ.get(HUB_IDS_ENV, "")):
        return True
    try:
        return _switched_on(st.secrets[HUB_IDS_SECRET])
    except (KeyError, FileNotFoundError):
        return False


def hub_name(typed: str) -> str:
    """The model name of a typed Hub id, ``owner/name`` or ``owner/name@revision``.

    Raises:
        ValueError: naming the text, when it is not an id (the Hub's own rule).
    """
    repo, _, revision = typed.strip().partition("@")
    if not hf_hub.REPO_ID.match(repo) or (revision and not revision.strip()):
        raise ValueError(f"{typed.strip()!r} is not a Hub id (owner/name or owner/name@revision)")
    return f"{HUB_PREFIX}{repo}@{revision or 'main'}"


def _hub_parts(name: str) -> tuple[str, str]:
    repo, _, revision = name.removeprefix(HUB_PREFIX).partition("@")
    return repo, revision


def fetch_hub(name: str, progress: hf_hub.Progress | None = None) -> Path:
    """The Hub model called ``name`` fetched into the Hub cache (nothing is fetched again;
    a pinned commit there asks the Hub nothing), ``progress(bytes so far, in all)``.

    Raises:
        ValueError: the Hub's refusal in one line, or Hub ids switched off here.
    """
    if not hub_ids_allowed():
        raise ValueError(f"this server does not fetch Hub models ({HUB_IDS_ENV} is off)")
    repo, _revision = _hub_parts(name)
    return hf_hub.fetch_hub_model(repo, hub_commit(name), progress)


HUB_COMMITS_KEPT = 32


@st.cache_resource(max_entries=HUB_COMMITS_KEPT, show_spinner=False)
def hub_commit(name: str) -> str:
    """The commit a Hub model's revision names, asked of the Hub once per model and server
    process (a branch is not asked again on every rerun of every page that shows it; with
    the commit, the cached files are read with no request). A refusal is not kept.

    Raises:
        ValueError: as :func:`~attention_core.pretrained.hf_hub.resolve_commit`.
    """
    repo, revision = _hub_parts(name)
    return hf_hub.resolve_commit(repo, revision)


def decoder_choices() -> tuple[str, ...]:
    """The page's model choice: :data:`SMOLLM2_CHOICE`, then every own file by listed name."""
    names = (m.name for m in own_model_files() if m.name != SMOLLM2_CHOICE)
    return (SMOLLM2_CHOICE, *names)


def models_configured() -> bool:
    """Whether the server names any folder of its own models (the page then omits the
    how-to line)."""
    return bool(configured_folders())


def _weights_bytes(decoder: pretrained.Decoder) -> int:
    """Bytes of every parameter and buffer, each storage counted once (tied embeddings)."""
    seen: dict[int, int] = {}
    for tensor in (*decoder.parameters(), *decoder.buffers()):
        storage = tensor.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def _timed(name: str, load) -> LoadedModel:
    start = time.perf_counter()
    decoder = load()
    seconds = time.perf_counter() - start
    return LoadedModel(name, decoder, seconds, _weights_bytes(decoder))


@st.cache_resource(show_spinner=False)
def _smollm2_loaded() -> LoadedModel:
    """SmolLM2 as the page has always loaded it (SHA-256 checked, 4-bit codes)."""
    # the C heap is trimmed between layers: the load's freed temporaries go back at once
    return _timed(
        SMOLLM2_CHOICE,
        lambda: pretrained.load_smollm2(
            weights_dtype=SMOLLM2_WEIGHTS_DTYPE, after_layer=memory.trim_heap
        ),
    )


def _own_file(name: str) -> model_files.ModelFile:
    """The listed file called ``name`` (ValueError naming it when it is not listed)."""
    return model_files.resolve_model(name, own_model_files())


def _reading(name: str, read):
    """``read()`` of the own file called ``name``; a file that cannot be read (truncated,
    malformed, gone or unreadable since it was listed) raises
    :class:`~attention_core.pretrained.model_files.ModelFileError` naming it, which the page
    shows as one line. Over the memory budget stays a ``MemoryBudgetError``."""
    try:
        return read()
    except MemoryBudgetError:
        raise
    except (OSError, ValueError) as err:
        raise model_files.ModelFileError(name, err) from err


def _load_own(name: str, weights_dtype: str) -> pretrained.Decoder:
    """The one call that loads an own file or Hugging Face folder (see :func:`_reading` for
    its errors)."""
    if name.startswith(HUB_PREFIX):
        folder, load = fetch_hub(name), pretrained.load_hf
    else:
        listed = _own_file(name)
        folder = listed.path
        load = pretrained.load_hf if listed.kind == HF_KIND else pretrained.load_gguf
    return _reading(
        name, lambda: load(folder, weights_dtype=weights_dtype, after_layer=memory.trim_heap)
    )


@st.cache_resource(max_entries=OWN_MODELS_KEPT, show_spinner=False)
def _own_loaded(name: str) -> LoadedModel:
    return _timed(name, lambda: _load_own(name, OWN_WEIGHTS_DTYPE))


def loaded_model(name: str) -> LoadedModel:
    """The model called ``name``, loaded once per server.

    Args:
        name: :data:`SMOLLM2_CHOICE` or a name of :func:`own_model_files`.

    Returns:
        :class:`LoadedModel`.

    Raises:
        ValueError: for a name that is not listed, or a file that cannot be read or loaded.
        MemoryBudgetError: when its weights would exceed the memory budget.
        ModelNotInstalledError: for SmolLM2 when its package is missing.
    """
    if name == SMOLLM2_CHOICE:
        return _smollm2_loaded()
    return _own_loaded(name)


def decoder_shape(name: str) -> DecoderShape:
    """Layers, query heads, KV heads and context of the model called ``name`` (loading it).

    Raises:
        ValueError, MemoryBudgetError, ModelNotInstalledError: as :func:`loaded_model`.
    """
    config = loaded_model(name).decoder.config
    return DecoderShape(
        config.num_layers, config.num_heads, config.num_kv_heads, config.context_length
    )


@st.cache_resource(max_entries=CHECKS_KEPT, show_spinner=False)
def model_card(name: str) -> ModelCard:
    """The card of the model called ``name``: the file's header, how the page holds the
    weights, their bytes and the load's time.

    Raises:
        ValueError, MemoryBudgetError, ModelNotInstalledError: as :func:`loaded_model`.
    """
    loaded = loaded_model(name)
    dtype = loaded.decoder.weights_dtype
    if name == SMOLLM2_CHOICE:
        card = pretrained.read_gguf_card(pretrained.default_gguf_path())
        return ModelCard(name, card, dtype, loaded.weights_bytes, loaded.load_seconds, "shipped")
    if name.startswith(HUB_PREFIX):
        folder = fetch_hub(name)  # in the cache since the load
        card = _reading(name, lambda: pretrained.read_hf_card(folder))
        repo, revision = _hub_parts(name)
        source = ("hub", (("repo", repo), ("revision", revision), ("commit", folder.name)))
        return ModelCard(name, card, dtype, loaded.weights_bytes, loaded.load_seconds, *source)
    listed = _own_file(name)
    read = pretrained.read_hf_card if listed.kind == HF_KIND else pretrained.read_gguf_card
    card = _reading(name, lambda: read(listed.path))
    return ModelCard(name, card, dtype, loaded.weights_bytes, loaded.load_seconds, listed.kind)


def _float32_reference(name: str) -> pretrained.Decoder:
    """The same file loaded in float32 for the check (not kept: it is dropped afterwards).

    Raises:
        MemoryBudgetError: when the float32 weights would exceed the budget.
    """
    if name == SMOLLM2_CHOICE:
        return pretrained.load_gguf(
            pretrained.default_gguf_path(),
            weights_dtype=REFERENCE_DTYPE,
            expected_sha256=pretrained.SMOLLM2_SHA256,
            after_layer=memory.trim_heap,
        )
    return _load_own(name, REFERENCE_DTYPE)


@st.cache_resource(max_entries=CHECKS_KEPT, show_spinner=False)
def run_model_check(name: str) -> CheckOutcome:
    """Run the library's one-click check on the model called ``name``: cached decoding
    against a full pass, its weights against a float32 load of the same file (loaded now,
    only when the budget allows, and dropped after), and the perplexity of a fixed paragraph.

    Returns:
        :class:`CheckOutcome` (the float32 comparison left out, with the budget's message,
        when the float32 weights do not fit; left out silently when the weights are float32).

    Raises:
        ValueError, MemoryBudgetError, ModelNotInstalledError: as :func:`loaded_model`.
    """
    decoder = loaded_model(name).decoder
    if decoder.weights_dtype == REFERENCE_DTYPE:
        return CheckOutcome(model_check.check_model(decoder))
    try:
        reference = _float32_reference(name)
    except MemoryBudgetError as err:
        return CheckOutcome(model_check.check_model(decoder), reference_refused=str(err))
    try:
        return CheckOutcome(model_check.check_model(decoder, reference))
    finally:
        del reference
        memory.trim_heap()
