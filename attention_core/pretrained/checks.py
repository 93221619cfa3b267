"""Checks shared by the checkpoint loaders: a file's SHA-256, read once and verified, pages
handed back after a load, and a float64 cosine similarity."""

from __future__ import annotations

import hashlib
import math
import mmap
from pathlib import Path

import torch

HASH_BLOCK_BYTES = 1 << 20
SHA256_HEX_DIGITS = 64
HEX_DIGITS = "0123456789abcdef"


def sha256_hex(data: bytes) -> str:
    """Return the SHA-256 hex digest of ``data``."""
    digest = hashlib.sha256()
    view = memoryview(data)
    for start in range(0, len(view), HASH_BLOCK_BYTES):
        digest.update(view[start : start + HASH_BLOCK_BYTES])
    return digest.hexdigest()


def _check_expected(expected_sha256: str | None) -> str | None:
    """Validate a pinned digest argument; return it lower-cased (or None)."""
    if expected_sha256 is None:
        return None
    expected = str(expected_sha256).lower()
    if len(expected) != SHA256_HEX_DIGITS or any(c not in HEX_DIGITS for c in expected):
        raise ValueError(f"expected_sha256 must be 64 hex digits, got {expected_sha256!r}")
    return expected


def _verify(path: Path, data, expected: str | None) -> None:
    """Raise ValueError when ``data``'s SHA-256 is not ``expected`` (None skips the check)."""
    if expected is None:
        return
    actual = sha256_hex(data)
    if actual != expected:
        raise ValueError(
            f"refusing {path}: SHA-256 {actual} does not match the pinned {expected}; "
            "the file is corrupted, truncated or not the expected checkpoint "
            "(pass expected_sha256=None only for a file you trust)"
        )


def read_verified(path: Path, expected_sha256: str | None) -> bytes:
    """Read ``path`` and check its SHA-256; the bytes checked are the bytes returned.

    Args:
        path: the file.
        expected_sha256: 64 hex digits, or ``None`` to skip the check.

    Returns:
        The file's bytes.

    Raises:
        FileNotFoundError: when the file does not exist.
        ValueError: when the digest differs (naming the file and both digests), or when
            ``expected_sha256`` is not 64 hex digits.
    """
    expected = _check_expected(expected_sha256)
    if not path.is_file():
        raise FileNotFoundError(f"weights file not found: {path}")
    data = path.read_bytes()
    _verify(path, data, expected)
    return data


def map_verified(path: Path, expected_sha256: str | None) -> mmap.mmap:
    """Map ``path`` into memory (copy-on-write) and check the SHA-256 of the mapped bytes.

    Unlike :func:`read_verified`, the file is not copied: pages are read from the page cache
    when touched, and :func:`release_pages` hands them back after the check, so a large
    table of which a text uses a few rows costs little resident memory. The digest is of
    the mapping itself; a file rewritten on disk while mapped could still change pages read
    later (installed package files are not expected to change).

    Args:
        path: the file.
        expected_sha256: 64 hex digits, or ``None`` to skip the check.

    Returns:
        A writable private mapping (``mmap.ACCESS_COPY``) of the whole file.

    Raises:
        FileNotFoundError: when the file does not exist.
        ValueError: when the file is empty, the digest differs, or ``expected_sha256`` is
            not 64 hex digits.
    """
    expected = _check_expected(expected_sha256)
    if not path.is_file():
        raise FileNotFoundError(f"weights file not found: {path}")
    if path.stat().st_size == 0:
        raise ValueError(f"refusing {path}: the file is empty")
    with path.open("rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
    _verify(path, mapped, expected)
    release_pages(mapped)
    return mapped


def release_pages(mapped: mmap.mmap) -> None:
    """Drop a mapping's resident pages (they are read again from the file when touched)."""
    if hasattr(mapped, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
        mapped.madvise(mmap.MADV_DONTNEED)


def release_range(data, start: int, length: int) -> None:
    """Drop the resident pages of a mapping that lie wholly inside [start, start + length),
    e.g. a tensor's bytes once decoded, so a load never holds a large tensor's file pages
    beside its decoded copy. Does nothing for bytes that are not a memory map.

    Args:
        data: the file's memory map (or bytes: nothing to drop).
        start, length: the byte range, in the file.
    """
    if not isinstance(data, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return
    page = mmap.PAGESIZE
    first = -(-start // page) * page  # the first page boundary at or after start
    last = (start + length) // page * page  # the last boundary at or before the end
    if last > first:
        data.madvise(mmap.MADV_DONTNEED, first, last - first)


def cosine_similarity(a: torch.Tensor, b: torch.Tensor) -> float:
    """Cosine similarity of two (D,) vectors, computed in float64.

    Raises:
        ValueError: when the shapes differ or either vector is zero.
    """
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}")
    a64, b64 = a.double().flatten(), b.double().flatten()
    norms = float(a64.norm() * b64.norm())
    if norms == 0.0 or math.isnan(norms):
        raise ValueError(f"cosine similarity of a zero or NaN vector (norm product {norms})")
    return float(a64 @ b64) / norms
