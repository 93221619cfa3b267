"""Which file, if any, backs a tensor's memory: read from the kernel's own map of this process
(/proc/self/maps), independently of how the loader built the tensor."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

PROC_MAPS = Path("/proc/self/maps")
PATH_FIELD = 5  # start-end perms offset dev inode path


def _map_lines() -> list[str]:
    """The lines of /proc/self/maps; skips the calling test where it does not exist."""
    if not PROC_MAPS.exists():
        pytest.skip("no /proc/self/maps on this system")
    return PROC_MAPS.read_text().splitlines()


def mapped_files() -> set[Path]:
    """Every file this process has mapped now."""
    fields = (line.split(maxsplit=PATH_FIELD) for line in _map_lines())
    return {Path(f[PATH_FIELD]) for f in fields if len(f) > PATH_FIELD and f[PATH_FIELD][:1] == "/"}


def mapped_file(tensor: torch.Tensor) -> Path | None:
    """The file mapped at the tensor's first and last byte (the same mapping), else None.

    Skips the calling test where /proc/self/maps does not exist (not Linux).
    """
    first = tensor.data_ptr()
    last = first + tensor.numel() * tensor.element_size() - 1
    for line in _map_lines():
        fields = line.split(maxsplit=PATH_FIELD)
        start, end = (int(part, 16) for part in fields[0].split("-"))
        if start <= first and last < end:
            path = fields[PATH_FIELD] if len(fields) > PATH_FIELD else ""
            return Path(path) if path.startswith("/") else None
    return None
