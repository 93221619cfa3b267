"""Ollama's models folder (pure path logic): which models its manifests name and the GGUF
blob of each, for :mod:`~attention_core.pretrained.model_files`' listing.

The folder holds ``manifests/`` and ``blobs/``. Each manifest
``manifests/<host>/<namespace>/<model>/<tag>`` is JSON whose layer with media type
:data:`OLLAMA_MODEL_MEDIA_TYPE` names the GGUF blob by digest ``sha256:<hex>``, stored as
``blobs/sha256-<hex>``; the model is named ``<model>:<tag>`` as Ollama names it, with the
host ``registry.ollama.ai`` and the namespace ``library`` left out (``llama3.2:1b``,
``someone/model:tag``, ``hf.co/org/repo:Q4_K_M``). A digest can never name a path: only
``sha256:`` and 64 hex digits are accepted.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

OLLAMA_MANIFESTS, OLLAMA_BLOBS = "manifests", "blobs"
OLLAMA_MODEL_MEDIA_TYPE = "application/vnd.ollama.image.model"
OLLAMA_DEFAULT_HOST = "registry.ollama.ai"
OLLAMA_DEFAULT_NAMESPACE = "library"
OLLAMA_MANIFEST_DEPTH = 4  # host / namespace / model / tag
MAX_MANIFEST_BYTES = 1 << 20
"""A manifest is a few hundred bytes; a larger file is not one and is skipped unread."""
_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")

BLOB_SHOWN_HEX = 12
"""Hex digits of a missing blob's digest that its reason shows."""


@dataclass(frozen=True)
class OllamaModel:
    """One manifest's model: its blob, or why it is left out.

    Attributes:
        name: as Ollama names it (:func:`ollama_name`).
        blob: the blob's path in ``blobs/`` (not yet checked to be a GGUF file), or None.
        reason: when ``blob`` is None, ``"bad_manifest"`` or ``"missing_blob"``.
        detail: the reason's values (the missing blob's shortened name).
    """

    name: str
    blob: Path | None
    reason: str = ""
    detail: tuple[tuple[str, str], ...] = ()


def is_ollama_folder(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` has Ollama's layout (a ``manifests/`` and a ``blobs/`` folder).

    Args:
        folder: a folder path.

    Returns:
        True for an Ollama models folder; False otherwise, and for an unreadable path.
    """
    try:
        base = Path(folder)
        return (base / OLLAMA_MANIFESTS).is_dir() and (base / OLLAMA_BLOBS).is_dir()
    except (OSError, ValueError):
        return False


def ollama_name(parts: tuple[str, ...]) -> str:
    """The name Ollama shows for a manifest at ``manifests/<host>/<namespace>/<model>/<tag>``.

    Args:
        parts: ``(host, namespace, model, tag)``.

    Returns:
        ``"<model>:<tag>"`` for the default host and namespace, ``"<namespace>/<model>:<tag>"``
        for another namespace, ``"<host>/<namespace>/<model>:<tag>"`` for another host.

    Raises:
        ValueError: unless ``parts`` has exactly four non-empty parts.
    """
    if len(parts) != OLLAMA_MANIFEST_DEPTH or not all(parts):
        raise ValueError(f"an Ollama manifest path has host/namespace/model/tag, got {parts!r}")
    host, namespace, model, tag = parts
    prefix = [] if host == OLLAMA_DEFAULT_HOST else [host]
    if prefix or namespace != OLLAMA_DEFAULT_NAMESPACE:
        prefix.append(namespace)
    return "/".join([*prefix, model]) + ":" + tag


def model_digest(manifest: object) -> str | None:
    """The hex SHA-256 of the model layer an Ollama manifest names.

    Args:
        manifest: the manifest's parsed JSON.

    Returns:
        The 64 lower-case hex digits of the first layer whose ``mediaType`` is
        :data:`OLLAMA_MODEL_MEDIA_TYPE`, or None when there is none or its digest is not
        ``sha256:`` and 64 hex digits (so a digest can never name a path).
    """
    layers = manifest.get("layers") if isinstance(manifest, dict) else None
    for layer in layers if isinstance(layers, list) else ():
        if isinstance(layer, dict) and layer.get("mediaType") == OLLAMA_MODEL_MEDIA_TYPE:
            digest = layer.get("digest")
            match = _DIGEST.fullmatch(digest) if isinstance(digest, str) else None
            return match.group(1) if match else None
    return None


def _read_manifest(path: Path, inside: Callable[[Path], bool]) -> object | None:
    """A manifest's JSON, or None when it is not a small regular readable JSON file whose
    resolved path is ``inside`` the configured folders."""
    try:
        real = path.resolve(strict=True)
        info = real.stat()
        if not inside(real) or not stat.S_ISREG(info.st_mode):
            return None
        if info.st_size > MAX_MANIFEST_BYTES:
            return None
        return json.loads(real.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None


def _manifests(base: Path) -> Iterator[tuple[tuple[str, ...], Path]]:
    """``(host, namespace, model, tag)`` and path of every manifest, sorted by path."""
    found = []
    for folder, subfolders, files in os.walk(base, onerror=lambda _err: None):
        parts = Path(folder).relative_to(base).parts  # (host, namespace, model) at the tags
        if len(parts) >= OLLAMA_MANIFEST_DEPTH - 1:
            subfolders.clear()
            found += [((*parts, tag), Path(folder) / tag) for tag in files]
    return iter(sorted(found))


def ollama_models(root: Path, inside: Callable[[Path], bool]) -> Iterator[OllamaModel]:
    """Every model an Ollama folder's manifests name, sorted by manifest path.

    Args:
        root: the resolved Ollama folder.
        inside: whether a resolved path lies inside the configured folders (a manifest
            outside them is not read).
    """
    for parts, path in _manifests(root / OLLAMA_MANIFESTS):
        name = ollama_name(parts)
        digest = model_digest(_read_manifest(path, inside))
        if digest is None:
            yield OllamaModel(name, None, "bad_manifest")
            continue
        blob = root / OLLAMA_BLOBS / f"sha256-{digest}"
        if os.path.lexists(blob):
            yield OllamaModel(name, blob)
        else:
            shown = (("blob", f"sha256-{digest[:BLOB_SHOWN_HEX]}…"),)
            yield OllamaModel(name, None, "missing_blob", shown)
