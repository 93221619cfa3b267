"""The byte-bounded cache of the layer runs (dashboard/data/memo.py)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
import pytest

from dashboard.data.memo import BoundedCache, bounded_cache, held_bytes

KIB = 1024


@dataclass(frozen=True)
class _Result:
    values: np.ndarray
    note: str = ""
    extra: np.ndarray | None = None


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _sized(calls: list):
    """A function returning a result that holds ``kib`` KiB, recording each call."""

    def make(kib: int) -> _Result:
        calls.append(kib)
        return _Result(np.zeros(kib * KIB // 4, dtype=np.float32))

    return make


def test_held_bytes_counts_the_arrays_of_a_result():
    result = _Result(np.zeros((4, 8), np.float32), "x", np.zeros(3, np.float64))
    assert held_bytes(result) == 4 * 8 * 4 + 3 * 8
    assert held_bytes(np.zeros(5, np.int16)) == 10
    assert held_bytes("text") == 0 and held_bytes(_Result) == 0


def test_a_cached_call_returns_the_same_object_without_recomputing():
    calls = []
    cache = BoundedCache(_sized(calls), max_bytes=100 * KIB, max_entries=8, ttl_s=60)
    first = cache(4)
    assert cache(4) is first and calls == [4]
    assert cache.cached(4) is first and cache.cached(5) is None and calls == [4]


def test_least_recently_used_entries_go_when_the_bytes_pass_the_bound():
    calls = []
    cache = BoundedCache(_sized(calls), max_bytes=10 * KIB, max_entries=8, ttl_s=60)
    cache(4)
    cache(3)  # 7 KiB held
    cache(4)  # touch 4: now 3 is the least recently used
    cache(5)  # 12 KiB > 10: 3 goes (4 + 5 = 9 KiB)
    assert cache.cached(3) is None and cache.cached(4) is not None
    assert cache.nbytes == 9 * KIB and len(cache) == 2


def test_the_newest_entry_stays_even_when_larger_than_the_bound():
    calls = []
    cache = BoundedCache(_sized(calls), max_bytes=10 * KIB, max_entries=8, ttl_s=60)
    cache(2)
    big = cache(64)
    assert len(cache) == 1 and cache.cached(64) is big and cache.nbytes == 64 * KIB


def test_entries_past_the_count_bound_go():
    calls = []
    cache = BoundedCache(_sized(calls), max_bytes=1 << 30, max_entries=3, ttl_s=60)
    for kib in (1, 2, 3, 4):
        cache(kib)
    assert len(cache) == 3 and cache.cached(1) is None


def test_an_entry_older_than_the_ttl_is_computed_again():
    calls, clock = [], _Clock()
    cache = BoundedCache(_sized(calls), max_bytes=1 << 20, max_entries=8, ttl_s=10, clock=clock)
    first = cache(1)
    clock.now = 9.0
    assert cache(1) is first
    clock.now = 10.5
    assert cache.cached(1) is None
    assert cache(1) is not first and calls == [1, 1]


def test_exceptions_are_not_cached():
    calls = []

    @bounded_cache(max_bytes=1 << 20, max_entries=8, ttl_s=60)
    def fragile(n: int) -> int:
        calls.append(n)
        if len(calls) == 1:
            raise ValueError(f"bad n {n}")
        return n * 2

    with pytest.raises(ValueError, match="bad n 3"):
        fragile(3)
    assert fragile(3) == 6 and fragile(3) == 6 and calls == [3, 3]
    assert fragile.__name__ == "fragile"


def test_keyword_arguments_are_part_of_the_key():
    cache = BoundedCache(lambda a, *, b=0: (a, b), max_bytes=1, max_entries=8, ttl_s=60)
    assert cache(1, b=2) == (1, 2) and cache(1) == (1, 0) and len(cache) == 2


def test_sessions_asking_at_once_share_one_computation():
    started, release = threading.Event(), threading.Event()
    calls = []

    def slow(n: int) -> _Result:
        calls.append(n)
        started.set()
        release.wait(timeout=30)
        return _Result(np.full(4, n, np.float32))

    cache = BoundedCache(slow, max_bytes=1 << 20, max_entries=8, ttl_s=60)
    results = []
    first = threading.Thread(target=lambda: results.append(cache(7)))
    first.start()
    assert started.wait(timeout=30)
    others = [threading.Thread(target=lambda: results.append(cache(7))) for _ in range(3)]
    for thread in others:
        thread.start()
    time.sleep(0.2)  # let them reach the cache while the first still computes (no timing test)
    release.set()
    for thread in [first, *others]:
        thread.join(timeout=30)
    assert calls == [7] and len(results) == 4
    assert all(result is results[0] for result in results)


def test_a_runs_head_statistics_equal_the_librarys_over_all_heads_at_once():
    """The run computes entropy and distance one head at a time (to bound its float64
    temporaries); the figures are exactly those of one call over every head."""
    from attention_core.experiments import head_entropy, mean_distance
    from dashboard import data
    from dashboard.config import LayerConfig

    run = data.attention_run(LayerConfig(seq_len=48, d_model=32, heads=4, seed=77, device="cpu"))
    assert run.entropy.shape == (4,) and run.distance.shape == (4,)
    np.testing.assert_array_equal(run.entropy, head_entropy(run.weights))
    np.testing.assert_array_equal(run.distance, mean_distance(run.weights))
    assert held_bytes(run) >= run.weights.nbytes + run.scores.nbytes
