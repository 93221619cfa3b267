"""Finding Hugging Face model folders in the folders a server's owner configured, beside the
GGUF files of :mod:`~attention_core.pretrained.model_files` (pure path logic, headers only).

A folder is a candidate when it holds ``config.json`` and any of the weights or the tokenizer
(``*.safetensors``, ``model.safetensors.index.json``, ``tokenizer.json``): a lone
``config.json`` belongs to something else and is not mentioned. A candidate is listed
(kind ``"hf"``) when its config names a supported family
(:data:`~attention_core.pretrained.hf_config.HF_ARCHITECTURES`), it has
``model.safetensors`` or an index, and ``tokenizer.json``; otherwise it is left out with its
reason (``architecture``, ``no_safetensors``, ``no_tokenizer``, ``bad_config``, or the GGUF
files' ``outside`` and ``unreadable``), as a GGUF file is.

Names are the folder's path relative to the configured folder (the configured folder itself:
its own name). A folder of Hugging Face's cache, ``models--<owner>--<name>/snapshots/<commit>``,
is named as the Hub names it, ``<owner>/<name>@<first 7 digits of the commit>``. The search
goes at most :data:`~attention_core.pretrained.model_files.MAX_DEPTH` folders down and stops
at a candidate (a model's own subfolders are not searched).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

CONFIG = "config.json"
WEIGHTS = ("model.safetensors", "model.safetensors.index.json")
TOKENIZER = "tokenizer.json"
MAX_CONFIG_BYTES = 1 << 20
"""A model's config is a few KiB; a larger ``config.json`` is not read."""
HUB_CACHE_FOLDER = re.compile(r"(?:^|/)models--([^/]+?)--([^/]+)/snapshots/([0-9a-f]{40})$")
HUB_COMMIT_SHOWN = 7


def is_candidate(folder: Path, files: list[str]) -> bool:
    """Whether a folder holding ``files`` (names) looks like a Hugging Face model."""
    return CONFIG in files and any(
        f.endswith(".safetensors") or f in (*WEIGHTS, TOKENIZER) for f in files
    )


def hub_cache_name(path: str) -> str | None:
    """``<owner>/<name>@<commit, 7 digits>`` for a posix path ending in a Hub cache snapshot
    (``…models--<owner>--<name>/snapshots/<commit>``), else None."""
    cached = HUB_CACHE_FOLDER.search(path)
    if cached is None:
        return None
    owner, name, commit = cached.groups()
    return f"{owner}/{name}@{commit[:HUB_COMMIT_SHOWN]}"


def folder_name(relative: str, root: Path) -> str:
    """The name a candidate at ``relative`` (posix, from the configured ``root``) is listed
    under (see the module docstring)."""
    if relative in ("", "."):
        return root.name
    return hub_cache_name(relative) or relative


def candidates(root: Path, max_depth: int) -> Iterator[tuple[str, Path]]:
    """``(name, path)`` of every candidate under ``root`` (not following folder symlinks, at
    most ``max_depth`` folders down, none inside another), sorted by relative path."""
    found = []
    for folder, subfolders, files in os.walk(root, onerror=lambda _err: None):
        relative = Path(folder).relative_to(root).as_posix()
        if is_candidate(Path(folder), files):
            subfolders.clear()
            found.append((relative, Path(folder)))
            continue
        if len(Path(relative).parts) >= max_depth:
            subfolders.clear()
        subfolders.sort()
    return iter((folder_name(rel, root), path) for rel, path in sorted(found))


def refusal(folder: Path) -> tuple[str, dict[str, str]] | None:
    """Why a candidate cannot be listed, as (reason, detail), or None when it can.

    The config is read (at most :data:`MAX_CONFIG_BYTES`) and its family checked by
    ``model_type`` as :func:`~attention_core.pretrained.hf_config.hf_config` names it; the
    weights and the tokenizer are checked by name only (their headers are read on load).
    """
    from attention_core.pretrained.hf_config import HF_ARCHITECTURES

    try:
        config_path = folder / CONFIG
        if config_path.stat().st_size > MAX_CONFIG_BYTES:
            return "bad_config", {}
        settings = json.loads(config_path.read_bytes())
    except OSError as err:
        return "unreadable", {"error": err.strerror or type(err).__name__}
    except (ValueError, RecursionError):
        return "bad_config", {}
    model_type = settings.get("model_type") if isinstance(settings, dict) else None
    if not isinstance(model_type, str):
        return "bad_config", {}
    if model_type not in HF_ARCHITECTURES:
        return "architecture", {
            "architecture": model_type,
            "supported": ", ".join(HF_ARCHITECTURES),
        }
    if not any((folder / name).is_file() for name in WEIGHTS):
        return "no_safetensors", {}
    if not (folder / TOKENIZER).is_file():
        return "no_tokenizer", {}
    return None


def weights_size(folder: Path) -> int:
    """Bytes of the folder's ``*.safetensors`` files (0 for any that cannot be read)."""
    total = 0
    for path in folder.glob("*.safetensors"):
        try:
            total += path.stat().st_size
        except OSError:
            continue
    return total
