"""Finding local GGUF model files and Hugging Face folders in folders a server's owner
configured (pure path logic).

Two layouts are understood, and Hugging Face folders in a plain one
(:mod:`~attention_core.pretrained.hf_folders`):

* a plain folder (llama.cpp's, LM Studio's, a Hugging Face download): every ``*.gguf`` file
  under it, at most :data:`MAX_DEPTH` folders down, named by its path relative to the folder
  (``bartowski/Llama-3.2-1B-Q4_K_M.gguf``);
* an Ollama models folder (it holds ``manifests/`` and ``blobs/``): each model its manifests
  name, as Ollama names it (``llama3.2:1b``; :mod:`~attention_core.pretrained.ollama_files`).

A file is listed only when it is a regular, non-empty file that starts with GGUF's magic
(``GGUF``), whose header does not name an architecture other than
:data:`~attention_core.pretrained.gguf_config.ARCHITECTURES`, and whose resolved path
(symlinks followed) lies inside one of the configured folders: a symlink that points outside
them is never listed, one that points inside is. Every other ``*.gguf`` file of a plain
folder, and every manifest of an Ollama folder, is *left out* with its reason
(:class:`LeftOut`, :data:`LEFT_OUT_REASONS`: an empty file, a link that leads out of the
folders, a blob the manifest names but the folder lacks, an architecture not supported, …),
so that a user can see why a file is missing from the list; other files (``notes.txt``,
Ollama's config blobs) are not models and are not mentioned. An unreadable folder is
skipped, never an exception. Folders are searched in the order given, each one's files
sorted by name; when several folders are configured and two give the same name, those
names get their folder's name in front (``models/a.gguf``).

:func:`resolve_model` maps a name back to its file by comparing it with the list only: a
name from a link (a path, ``..``, an absolute path, a NUL) is never looked up on disk.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path

from attention_core.pretrained import hf_folders, ollama_files
from attention_core.pretrained.gguf_config import ARCHITECTURE_KEY, ARCHITECTURES
from attention_core.pretrained.gguf_file import header_value

GGUF_MAGIC = b"GGUF"
GGUF_SUFFIX = ".gguf"
MAX_DEPTH = 5
"""Folders below a configured folder that are searched (LM Studio keeps files two down,
Hugging Face's cache four: ``models--org--repo/snapshots/<hash>/file.gguf``)."""
MAX_MODELS = 1000
"""At most this many files are listed or left out per configured folder: a folder of a whole
disk stays a bounded walk."""
HEAD_BYTES = 64 * 1024
"""Bytes of a file read to find its magic and architecture (the first metadata entries)."""
LEFT_OUT_REASONS = (
    "empty",  # a file of 0 bytes
    "outside",  # a link whose target lies outside every configured folder
    "broken_link",  # a link to nothing, or a loop of links
    "missing_blob",  # an Ollama manifest names a blob the blobs folder lacks
    "architecture",  # a GGUF file of an architecture not supported
    "not_gguf",  # a file that does not start with GGUF's magic
    "not_a_file",  # a folder, a device or a pipe
    "unreadable",  # the system refuses to open it (no permission, an I/O error)
    "bad_manifest",  # an Ollama manifest that is not JSON naming a model layer
    "bad_config",  # a Hugging Face folder whose config.json is not JSON naming a model_type
    "no_safetensors",  # a Hugging Face folder without model.safetensors or its index
    "no_tokenizer",  # a Hugging Face folder without tokenizer.json
)
"""Why a file is left out of the list (:class:`LeftOut`)."""
KINDS = ("gguf", "ollama", "hf")


@dataclass(frozen=True)
class ModelFile:
    """One model file found in a configured folder.

    Attributes:
        name: the name users see and links carry (unique in one :func:`find_models` list).
        path: the file's resolved path (symlinks followed), inside a configured folder.
        size: its size in bytes.
        kind: ``"gguf"`` (a ``*.gguf`` file of a plain folder), ``"ollama"`` (a blob named
            by an Ollama manifest) or ``"hf"`` (a Hugging Face folder,
            :mod:`~attention_core.pretrained.hf_folders`; ``path`` is the folder, ``size``
            its safetensors' bytes).
    """

    name: str
    path: Path
    size: int
    kind: str


@dataclass(frozen=True)
class LeftOut:
    """A file of a configured folder that is not listed, and why.

    Attributes:
        name: the name it would have been listed under.
        reason: one of :data:`LEFT_OUT_REASONS`.
        detail: the values its reason names, as ``(name, value)`` pairs of text:
            ``architecture`` and ``supported`` for ``"architecture"``, ``blob`` for
            ``"missing_blob"``, ``error`` (the system's words) for ``"unreadable"``.
    """

    name: str
    reason: str
    detail: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ModelScan:
    """What :func:`scan_models` found: the listed models and the files left out, each in
    folder order, all names unique."""

    models: tuple[ModelFile, ...]
    left_out: tuple[LeftOut, ...]


class ModelFileError(ValueError):
    """A listed model file that cannot be read (truncated, malformed, gone since it was
    listed).

    Args and attributes:
        name: its listed name.
        cause: why: a :class:`~attention_core.pretrained.binary.TruncatedFileError` (what
            the file claims and what it has), an ``OSError`` or another ``ValueError``.
    """

    def __init__(self, name: str, cause: Exception) -> None:
        words = cause.strerror if isinstance(cause, OSError) and cause.strerror else cause
        super().__init__(f"the model file {name!r} cannot be read: {words}")
        self.name, self.cause = name, cause


class _Refused(Exception):
    """Why :func:`_examine` does not list a file (a reason of :data:`LEFT_OUT_REASONS`)."""

    def __init__(self, reason: str, **detail: str) -> None:
        super().__init__(reason)
        self.reason, self.detail = reason, tuple(detail.items())


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


def _os_words(err: OSError) -> str:
    """The system's words for an error (``"Permission denied"``), never a path."""
    return err.strerror or type(err).__name__


def _examine(path: Path, roots: tuple[Path, ...]) -> tuple[Path, int]:
    """``path`` resolved and its size, when it is a file the list may hold.

    Args:
        path: a ``*.gguf`` file or an Ollama blob. roots: the resolved configured folders.

    Returns:
        The resolved path and the size in bytes of a regular, non-empty GGUF file inside
        ``roots`` whose header names no unsupported architecture.

    Raises:
        _Refused: naming the reason of :data:`LEFT_OUT_REASONS` (a pipe or a device is
            never opened: it may block).
    """
    try:
        real = path.resolve(strict=True)
    except (FileNotFoundError, RuntimeError) as err:  # a link to nothing, or a loop
        raise _Refused("broken_link") from err
    except OSError as err:
        raise _Refused("unreadable", error=_os_words(err)) from err
    if not _inside(real, roots):
        raise _Refused("outside")
    try:
        info = real.stat()
        if not stat.S_ISREG(info.st_mode):
            raise _Refused("not_a_file")
        if info.st_size == 0:
            raise _Refused("empty")
        with real.open("rb") as handle:
            head = handle.read(HEAD_BYTES)
    except OSError as err:
        raise _Refused("unreadable", error=_os_words(err)) from err
    if head[: len(GGUF_MAGIC)] != GGUF_MAGIC:
        raise _Refused("not_gguf")
    architecture = header_value(head, ARCHITECTURE_KEY)
    if isinstance(architecture, str) and architecture not in ARCHITECTURES:
        supported = ", ".join(ARCHITECTURES)
        raise _Refused("architecture", architecture=architecture, supported=supported)
    return real, info.st_size


def _entry(name: str, path: Path, roots: tuple[Path, ...], kind: str) -> ModelFile | LeftOut:
    """The file at ``path`` listed as ``name``, or left out with its reason."""
    try:
        real, size = _examine(path, roots)
    except _Refused as refused:
        return LeftOut(name, refused.reason, refused.detail)
    return ModelFile(name, real, size, kind)


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


def _plain_entries(root: Path, roots: tuple[Path, ...]) -> Iterator[ModelFile | LeftOut]:
    """Every ``*.gguf`` file of a plain folder, named by its path relative to the folder."""
    for path in _walk(root):
        yield _entry(path.relative_to(root).as_posix(), path, roots, "gguf")


def _hf_entries(root: Path, roots: tuple[Path, ...]) -> Iterator[ModelFile | LeftOut]:
    """Every Hugging Face model folder of a plain folder (:mod:`hf_folders`)."""
    for name, path in hf_folders.candidates(root, MAX_DEPTH):
        try:
            real = path.resolve(strict=True)
        except (OSError, RuntimeError) as err:
            yield LeftOut(name, "unreadable", (("error", type(err).__name__),))
            continue
        if not _inside(real, roots):
            yield LeftOut(name, "outside")
        elif (why := hf_folders.refusal(real)) is not None:
            yield LeftOut(name, why[0], tuple(why[1].items()))
        else:
            yield ModelFile(name, real, hf_folders.weights_size(real), "hf")


def _folder_entries(root: Path, roots: tuple[Path, ...]) -> list[ModelFile | LeftOut]:
    """A plain folder's GGUF files and Hugging Face folders, by name."""
    found = [*_plain_entries(root, roots), *_hf_entries(root, roots)]
    return sorted(found, key=lambda entry: entry.name)


def _ollama_entries(root: Path, roots: tuple[Path, ...]) -> Iterator[ModelFile | LeftOut]:
    """Every model an Ollama folder's manifests name, as ``model:tag``
    (:func:`~attention_core.pretrained.ollama_files.ollama_models`)."""
    for model in ollama_files.ollama_models(root, lambda path: _inside(path, roots)):
        if model.blob is None:
            yield LeftOut(model.name, model.reason, model.detail)
        else:
            yield _entry(model.name, model.blob, roots, "ollama")


def _folder_labels(roots: list[Path]) -> list[str]:
    """Each folder's name, numbered where two folders share one (``models``, ``models (2)``)."""
    labels, seen = [], Counter()
    for root in roots:
        seen[root.name] += 1
        labels.append(root.name if seen[root.name] == 1 else f"{root.name} ({seen[root.name]})")
    return labels


def scan_models(folders: Iterable[str | os.PathLike]) -> ModelScan:
    """List the GGUF models in ``folders`` and the files left out, with why (see the module
    docstring for the layouts and the rules).

    Args:
        folders: the configured folders, in order. One that is missing, unreadable or not a
            folder is skipped; a folder given twice is searched once.

    Returns:
        :class:`ModelScan`: each folder's files in name order, folders in the order given,
        at most :data:`MAX_MODELS` files per folder; names unique across both lists (a name
        two folders give gets its folder's name in front). Never lists a file whose
        resolved path lies outside every configured folder, nor one without GGUF's magic.

    Raises:
        ValueError: when ``folders`` is a single string or path rather than a collection.
    """
    if isinstance(folders, str | bytes | os.PathLike):
        raise ValueError(f"folders must be a collection of folders, got {folders!r}")
    roots = list(dict.fromkeys(r for r in (_root(f) for f in folders) if r is not None))
    inside = tuple(roots)
    per_folder = [
        list(islice(_ollama_entries(root, inside), MAX_MODELS))
        if ollama_files.is_ollama_folder(root)
        else _folder_entries(root, inside)[:MAX_MODELS]
        for root in roots
    ]
    counts = Counter(entry.name for entries in per_folder for entry in entries)
    named: dict[str, ModelFile | LeftOut] = {}
    for label, entries in zip(_folder_labels(roots), per_folder, strict=True):
        for entry in entries:
            if counts[entry.name] > 1:
                entry = replace(entry, name=f"{label}/{entry.name}")
            named.setdefault(entry.name, entry)  # a prefixed name met again: the first stays
    found = named.values()
    return ModelScan(
        tuple(e for e in found if isinstance(e, ModelFile)),
        tuple(e for e in found if isinstance(e, LeftOut)),
    )


def find_models(folders: Iterable[str | os.PathLike]) -> tuple[ModelFile, ...]:
    """The listed models of :func:`scan_models` (the files left out are not returned).

    Raises:
        ValueError: when ``folders`` is a single string or path rather than a collection.
    """
    return scan_models(folders).models


def left_out_reason(name: object, left_out: Iterable[LeftOut]) -> LeftOut | None:
    """The entry of the file left out under ``name``, compared with the list only (a name
    from a link is never looked up on disk).

    Args:
        name: a value from a link or a select box.
        left_out: :attr:`ModelScan.left_out`.

    Returns:
        The :class:`LeftOut` with that name, or None.
    """
    return next((e for e in left_out if isinstance(name, str) and e.name == name), None)


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
