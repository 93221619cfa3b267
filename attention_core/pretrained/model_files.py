"""Finding local GGUF model files in folders a server's owner configured (pure path logic).

Two layouts are understood:

* a plain folder (llama.cpp's, LM Studio's, a Hugging Face download): every ``*.gguf`` file
  under it, at most :data:`MAX_DEPTH` folders down, named by its path relative to the folder
  (``bartowski/Llama-3.2-1B-Q4_K_M.gguf``);
* an Ollama models folder (it holds ``manifests/`` and ``blobs/``): each manifest
  ``manifests/<host>/<namespace>/<model>/<tag>`` is JSON whose layer with media type
  :data:`OLLAMA_MODEL_MEDIA_TYPE` names the GGUF blob by digest ``sha256:<hex>``, stored as
  ``blobs/sha256-<hex>``; the model is named ``<model>:<tag>`` as Ollama names it, with the
  host ``registry.ollama.ai`` and the namespace ``library`` left out (``llama3.2:1b``,
  ``someone/model:tag``, ``hf.co/org/repo:Q4_K_M``).

A file is listed only when it is a regular file that starts with GGUF's magic (``GGUF``) and
whose resolved path (symlinks followed) lies inside one of the configured folders: a symlink
that points outside them is never listed, one that points inside is. An unreadable folder,
file or manifest is skipped, never an exception. Folders are searched in the order given,
each one's files sorted by name; when several folders are configured and two give the same
name, those names get their folder's name in front (``models/a.gguf``).

:func:`resolve_model` maps a name back to its file by comparing it with the list only: a
name from a link (a path, ``..``, an absolute path, a NUL) is never looked up on disk.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

GGUF_MAGIC = b"GGUF"
GGUF_SUFFIX = ".gguf"
MAX_DEPTH = 5
"""Folders below a configured folder that are searched (LM Studio keeps files two down,
Hugging Face's cache four: ``models--org--repo/snapshots/<hash>/file.gguf``)."""
MAX_MODELS = 1000
"""At most this many files are listed per configured folder: a folder of a whole disk stays
a bounded walk."""
KINDS = ("gguf", "ollama")
OLLAMA_MANIFESTS, OLLAMA_BLOBS = "manifests", "blobs"
OLLAMA_MODEL_MEDIA_TYPE = "application/vnd.ollama.image.model"
OLLAMA_DEFAULT_HOST = "registry.ollama.ai"
OLLAMA_DEFAULT_NAMESPACE = "library"
OLLAMA_MANIFEST_DEPTH = 4  # host / namespace / model / tag
MAX_MANIFEST_BYTES = 1 << 20
"""A manifest is a few hundred bytes; a larger file is not one and is skipped unread."""
_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")


@dataclass(frozen=True)
class ModelFile:
    """One model file found in a configured folder.

    Attributes:
        name: the name users see and links carry (unique in one :func:`find_models` list).
        path: the file's resolved path (symlinks followed), inside a configured folder.
        size: its size in bytes.
        kind: ``"gguf"`` (a ``*.gguf`` file of a plain folder) or ``"ollama"`` (a blob named
            by an Ollama manifest).
    """

    name: str
    path: Path
    size: int
    kind: str


def _root(folder: str | os.PathLike) -> Path | None:
    """A configured folder resolved (symlinks followed), or None when it is not a readable
    folder (missing, a file, a NUL in its name, no permission)."""
    try:
        root = Path(folder).expanduser().resolve()
        return root if root.is_dir() and os.access(root, os.R_OK | os.X_OK) else None
    except (OSError, ValueError, RuntimeError):
        return None


def _inside(path: Path, roots: tuple[Path, ...]) -> bool:
    """Whether the resolved ``path`` lies inside one of the resolved ``roots``."""
    return any(path.is_relative_to(root) for root in roots)


def _gguf_file(path: Path, roots: tuple[Path, ...]) -> tuple[Path, int] | None:
    """``path`` resolved and its size when it is a regular GGUF file inside ``roots``, else
    None (outside, a folder, a device or pipe, unreadable, or without the magic)."""
    try:
        real = path.resolve(strict=True)
        if not _inside(real, roots):
            return None
        info = real.stat()
        if not stat.S_ISREG(info.st_mode):  # never open a pipe or a device: it may block
            return None
        with real.open("rb") as handle:
            if handle.read(len(GGUF_MAGIC)) != GGUF_MAGIC:
                return None
        return real, info.st_size
    except (OSError, ValueError, RuntimeError):
        return None


def _walk(root: Path) -> Iterator[Path]:
    """``*.gguf`` paths under ``root`` (not following folder symlinks, at most
    :data:`MAX_DEPTH` folders down), sorted by their path relative to ``root``."""
    found = []
    for folder, subfolders, files in os.walk(root, onerror=lambda _err: None):
        depth = len(Path(folder).relative_to(root).parts)
        if depth >= MAX_DEPTH:
            subfolders.clear()
        subfolders.sort()
        found += [Path(folder) / f for f in files if f.lower().endswith(GGUF_SUFFIX)]
    return iter(sorted(found, key=lambda p: p.relative_to(root).as_posix()))


def _plain_models(root: Path, roots: tuple[Path, ...]) -> list[ModelFile]:
    """Every GGUF file of a plain folder, named by its path relative to the folder."""
    models = []
    for path in _walk(root):
        checked = _gguf_file(path, roots)
        if checked is not None:
            name = path.relative_to(root).as_posix()
            models.append(ModelFile(name, checked[0], checked[1], "gguf"))
        if len(models) >= MAX_MODELS:
            break
    return models


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


def _read_manifest(path: Path, roots: tuple[Path, ...]) -> object | None:
    """A manifest's JSON, or None when it is not a small regular readable JSON file inside
    ``roots``."""
    try:
        real = path.resolve(strict=True)
        info = real.stat()
        if not _inside(real, roots) or not stat.S_ISREG(info.st_mode):
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


def _ollama_models(root: Path, roots: tuple[Path, ...]) -> list[ModelFile]:
    """Every model an Ollama folder's manifests name, as ``model:tag``."""
    models = []
    for parts, path in _manifests(root / OLLAMA_MANIFESTS):
        digest = model_digest(_read_manifest(path, roots))
        if digest is None:
            continue
        checked = _gguf_file(root / OLLAMA_BLOBS / f"sha256-{digest}", roots)
        if checked is not None:
            models.append(ModelFile(ollama_name(parts), checked[0], checked[1], "ollama"))
        if len(models) >= MAX_MODELS:
            break
    return models


def _folder_labels(roots: list[Path]) -> list[str]:
    """Each folder's name, numbered where two folders share one (``models``, ``models (2)``)."""
    labels, seen = [], Counter()
    for root in roots:
        seen[root.name] += 1
        labels.append(root.name if seen[root.name] == 1 else f"{root.name} ({seen[root.name]})")
    return labels


def find_models(folders: Iterable[str | os.PathLike]) -> tuple[ModelFile, ...]:
    """List the GGUF models in ``folders`` (see the module docstring for the layouts).

    Args:
        folders: the configured folders, in order. One that is missing, unreadable or not a
            folder is skipped; a folder given twice is searched once.

    Returns:
        :class:`ModelFile` entries with unique names: each folder's files in name order,
        folders in the order given. Never a file whose resolved path lies outside every
        configured folder, never a file without GGUF's magic.

    Raises:
        ValueError: when ``folders`` is a single string or path rather than a collection.
    """
    if isinstance(folders, str | bytes | os.PathLike):
        raise ValueError(f"folders must be a collection of folders, got {folders!r}")
    roots = list(dict.fromkeys(r for r in (_root(f) for f in folders) if r is not None))
    inside = tuple(roots)
    per_folder = [
        _ollama_models(root, inside) if is_ollama_folder(root) else _plain_models(root, inside)
        for root in roots
    ]
    counts = Counter(model.name for models in per_folder for model in models)
    listed: dict[str, ModelFile] = {}
    for label, models in zip(_folder_labels(roots), per_folder, strict=True):
        for model in models:
            if counts[model.name] > 1:
                model = ModelFile(f"{label}/{model.name}", model.path, model.size, model.kind)
            listed.setdefault(model.name, model)  # a prefixed name met again: the first stays
    return tuple(listed.values())


def resolve_model(name: object, models: Iterable[ModelFile]) -> ModelFile:
    """The model called ``name`` in a list from :func:`find_models`.

    Only the list is consulted: ``name`` is compared with the listed names and never used as
    a path, so a path, ``..``, an absolute path or a name with a NUL opens nothing.

    Args:
        name: a listed name (from a link or a select box).
        models: the list :func:`find_models` returned.

    Returns:
        The :class:`ModelFile` with that name.

    Raises:
        ValueError: naming the value, when it is not a string or no listed model has it.
    """
    if isinstance(name, str):
        for model in models:
            if model.name == name:
                return model
    raise ValueError(f"no model is listed under the name {name!r}")
