"""A shared cache bounded by the bytes of the arrays it holds, for results that grow with L².

``st.cache_resource`` bounds a cache by entry count and age only. One run of the Playground
at 1,024 tokens and 16 heads holds 128 MiB (its weights and scores), so 32 such entries —
a room of learners each trying their own seed — would hold 4 GiB. :func:`bounded_cache`
keeps, like ``st.cache_resource``, one shared result per argument tuple (the same read-only
object for every session, computed once even when several sessions ask at once), and
evicts the least recently used entries while the arrays held pass ``max_bytes`` (the
newest entry always stays), the entries pass ``max_entries``, or an entry is older than
``ttl_s``. Exceptions are not cached.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

_MISS = object()


def held_bytes(value: Any) -> int:
    """Bytes of the numpy arrays a result holds: the array itself, or the array fields of a
    dataclass (anything else counts as 0)."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(held_bytes(getattr(value, f.name)) for f in dataclasses.fields(value))
    return 0


@dataclasses.dataclass
class _Entry:
    value: Any
    nbytes: int
    stored_at: float


class BoundedCache:
    """The cache behind :func:`bounded_cache` (see the module docstring).

    Args:
        fn: the function to cache; its arguments must be hashable.
        max_bytes: the most array bytes held (the newest entry is kept even when larger).
        max_entries: the most entries held.
        ttl_s: seconds an entry stays valid.
        clock: the time source (seconds), for tests.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        max_bytes: int,
        max_entries: int,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._fn = fn
        self.max_bytes, self.max_entries, self.ttl_s = max_bytes, max_entries, ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._computing: dict[Hashable, threading.Lock] = {}
        functools.update_wrapper(self, fn)

    @staticmethod
    def _key(args: tuple, kwargs: dict) -> Hashable:
        return args, tuple(sorted(kwargs.items()))

    def _fresh(self, key: Hashable) -> Any:
        """The valid cached value for ``key`` (marked most recently used), else ``_MISS``.
        Called with the lock held."""
        entry = self._entries.get(key)
        if entry is None:
            return _MISS
        if self._clock() - entry.stored_at > self.ttl_s:
            del self._entries[key]
            return _MISS
        self._entries.move_to_end(key)
        return entry.value

    def _store(self, key: Hashable, value: Any) -> None:
        """Add an entry and evict the least recently used ones over the bounds. Called with
        the lock held."""
        self._entries[key] = _Entry(value, held_bytes(value), self._clock())
        self._entries.move_to_end(key)
        while len(self._entries) > 1 and (
            len(self._entries) > self.max_entries or self.nbytes > self.max_bytes
        ):
            self._entries.popitem(last=False)

    @property
    def nbytes(self) -> int:
        """Array bytes held now."""
        return sum(entry.nbytes for entry in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def cached(self, *args: Any, **kwargs: Any) -> Any:
        """The cached result for these arguments, or ``None`` (computes nothing)."""
        with self._lock:
            value = self._fresh(self._key(args, kwargs))
        return None if value is _MISS else value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        key = self._key(args, kwargs)
        with self._lock:
            value = self._fresh(key)
            if value is not _MISS:
                return value
            key_lock = self._computing.setdefault(key, threading.Lock())
        with key_lock:  # one computation per key; the others wait for it
            with self._lock:
                value = self._fresh(key)
            if value is not _MISS:
                return value
            try:
                value = self._fn(*args, **kwargs)
                with self._lock:
                    self._store(key, value)
            finally:
                with self._lock:
                    self._computing.pop(key, None)
        return value

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()


def bounded_cache(
    *, max_bytes: int, max_entries: int, ttl_s: float
) -> Callable[[Callable[..., Any]], BoundedCache]:
    """Decorator: cache a function in a :class:`BoundedCache` with these bounds."""

    def wrap(fn: Callable[..., Any]) -> BoundedCache:
        return BoundedCache(fn, max_bytes=max_bytes, max_entries=max_entries, ttl_s=ttl_s)

    return wrap
