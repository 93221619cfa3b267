"""Heads at work's background prefetch: the likely next moves of the copy test and the mask
composer, computed into the page's caches while no script run is going.

*What* to prefetch lives here (every top k nearest the current first, the sink counts, the
nearby windows); *how* (a thread at the lowest priority, paused during script runs, one
torch thread) is :mod:`dashboard.runtime.prefetch`'s. Prefetching runs for SmolLM2, the
model whose moves a room makes together; an own model computes on demand.
"""

from __future__ import annotations

from collections.abc import Callable

from attention_core.experiments import mask_effects
from dashboard.data.decoder import SMOLLM2
from dashboard.data.heads import copy_heads, copy_pair, mask_effect, mask_parts
from dashboard.runtime import prefetch as fillers


def prefetch(name: tuple, calls: tuple[tuple[Callable, tuple], ...]) -> bool:
    """Fill the caches of likely next moves in the background, once per ``name``
    (:func:`dashboard.runtime.prefetch.start_filling`: a thread at the lowest priority, only
    while no script run is going, each call on one torch thread).

    The page never waits for it: a value the thread has not reached is computed by the run
    that asks for it (one still being computed is waited for, as any cache entry).

    Args:
        name: what is being prefetched (hashable); a second call with it does nothing.
        calls: (cached function, arguments) pairs, most likely first.

    Returns:
        True when a thread was started.
    """
    return fillers.start_filling(("heads", *name), calls, thread_name="heads-prefetch")


def prefetch_wait(timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for the prefetch threads; True when none is running
    (the bench times moves after the page's head start)."""
    return fillers.wait_for_fillers(timeout)


def nearest_first(values, current) -> list:
    """``values`` ordered by distance from ``current`` (the smaller first on a tie)."""
    return sorted(values, key=lambda v: (abs(v - current), v))


def prefetch_copy(
    length: int,
    seed: int,
    score: str,
    top_k: int,
    picked: tuple,
    top_ks: range,
    *,
    model: str = SMOLLM2,
) -> bool:
    """Start filling the copy test for every top k of ``top_ks`` (nearest the current first).

    Returns:
        True when a thread was started.
    """
    calls = []
    for k in nearest_first(top_ks, top_k):
        off, weakest = copy_heads(length, seed, score, k, picked, model)
        calls.append((copy_pair, (length, seed, off, weakest, model)))
    return prefetch(("copy", model, length, seed, score, picked), tuple(calls))


def window_neighbours(window: int, step: int, high: int, reach: int = 2) -> tuple[int, ...]:
    """The window slider's values within ``reach`` steps of ``window`` (0 = off, or 2 to
    ``high``), itself excluded."""
    near = (window + k * step for k in range(-reach, reach + 1) if k)
    return tuple(w for w in near if w == 0 or 2 <= w <= high)


def prefetch_masks(
    parts: mask_effects.MaskParts, sinks: range, windows: tuple, model: str = SMOLLM2
) -> bool:
    """Start filling the mask composer's cost for every sink count of ``sinks``, then each
    window of ``windows``, the other parts as in ``parts`` (all layers only).

    Returns:
        True when a thread was started.
    """
    calls = [
        (mask_effect, (mask_parts(parts.window, s, parts.prefix, parts.stride), False, model))
        for s in nearest_first(sinks, parts.sinks)
    ]
    calls += [
        (mask_effect, (mask_parts(w, parts.sinks, parts.prefix, parts.stride), False, model))
        for w in nearest_first(windows, parts.window)
    ]
    return prefetch(("mask", model, parts), tuple(calls))
