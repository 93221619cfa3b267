"""Heads at work's background prefetch: the likely next moves of the copy test and the mask
composer, computed into the page's caches while no script run is going.

*What* to prefetch lives here (the copy test one length away, every top k nearest the
current first, the sink counts, the nearby windows); *how* (one worker thread at the lowest
priority, the newest job first, paused during script runs, one torch thread) is
:mod:`dashboard.runtime.prefetch`'s. Prefetching runs for SmolLM2, the model whose moves a
room makes together; an own model computes on demand.
"""

from __future__ import annotations

from dataclasses import dataclass

from attention_core.experiments import mask_effects
from dashboard.data.decoder import SMOLLM2
from dashboard.data.heads import (
    HEADS_COPY_MAX,
    HEADS_COPY_MIN,
    attribution_ids,
    copy_census,
    copy_heads,
    copy_pair,
    copy_run,
    head_attribution,
    mask_effect,
    mask_parts,
)
from dashboard.data.heads_why import (
    copy_ids,
    copy_tokens,
    default_query,
    induction_key,
    strongest_induction_head,
    why_cell,
)
from dashboard.runtime import prefetch as fillers
from dashboard.runtime.prefetch import Calls

Job = tuple[tuple, Calls]
"""A job: its name (hashable; once per name) and its calls."""


def prefetch_all(jobs: tuple[Job, ...]) -> bool:
    """Fill the caches of a page's likely next moves in the background: ``jobs`` as one unit
    (:func:`dashboard.runtime.prefetch.start_group`), in their order, before what earlier
    runs queued.

    Returns:
        True when at least one job was new.
    """
    return fillers.start_group(tuple((("heads", *name), calls) for name, calls in jobs))


def prefetch(name: tuple, calls: Calls) -> bool:
    """Fill the caches of likely next moves in the background, once per ``name``
    (:func:`dashboard.runtime.prefetch.start_filling`: a worker thread at the lowest
    priority, the newest job first, only while no script run is going, each call on one
    torch thread).

    The page never waits for it: a value the worker has not reached is computed by the run
    that asks for it (one still being computed is waited for, as any cache entry).

    Args:
        name: what is being prefetched (hashable); a second call with it does nothing.
        calls: (cached function, arguments) pairs, most likely first.

    Returns:
        True when the job was queued.
    """
    return prefetch_all(((name, calls),))


def prefetch_wait(timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for every prefetch queued; True when none is left
    (the bench times moves after the page's head start)."""
    return fillers.wait_for_fillers(timeout)


def nearest_first(values, current) -> list:
    """``values`` ordered by distance from ``current`` (the smaller first on a tie)."""
    return sorted(values, key=lambda v: (abs(v - current), v))


def copy_job(
    length: int,
    seed: int,
    score: str,
    top_k: int,
    picked: tuple,
    top_ks: range,
    *,
    model: str = SMOLLM2,
) -> Job:
    """The job filling the copy test for every top k of ``top_ks`` (nearest the current
    first); the heads each turns off are ranked by the worker, not the page's run."""
    calls = tuple(
        (fill_top_k, (length, seed, score, k, picked, model)) for k in nearest_first(top_ks, top_k)
    )
    return ("copy", model, length, seed, score, picked), calls


def fill_top_k(
    length: int, seed: int, score: str, top_k: int, picked: tuple, model: str = SMOLLM2
) -> None:
    """Fill the copy test with the ``top_k`` heads by ``score`` (then ``picked``) off, and
    its control."""
    copy_pair(length, seed, *copy_heads(length, seed, score, top_k, picked, model), model)


@dataclass(frozen=True)
class CopyView:
    """What the page draws from the copy test's sequence besides its length: the seed, the
    heads off (``top_k`` by ``score``, then ``picked``), attribution on the copy sequence or
    not, the "why" cell ``(layer, head, query, key)`` or ``None`` (no float model to split
    with), and the model's listed name."""

    seed: int
    score: str
    top_k: int
    picked: tuple[tuple[int, int], ...]
    attribution: bool
    why: tuple[int, int, int, int] | None
    model: str = SMOLLM2


def length_neighbours(length: int, reach: int = 1) -> tuple[int, ...]:
    """The copy test's lengths within ``reach`` steps of ``length`` (itself excluded), nearest
    first, within the slider's range."""
    near = nearest_first(range(length - reach, length + reach + 1), length)
    return tuple(n for n in near if n != length and HEADS_COPY_MIN <= n <= HEADS_COPY_MAX)


def fill_copy(length: int, view: CopyView) -> None:
    """Fill the copy test section at ``length``: the census ranking the heads, the intact
    run, and the heads off with their control."""
    copy_census(length, view.seed, view.model)
    copy_run(length, view.seed, (), view.model)
    fill_top_k(length, view.seed, view.score, view.top_k, view.picked, view.model)


def fill_attribution(length: int, view: CopyView) -> None:
    """Fill attribution's one backward pass on the copy sequence at ``length`` (nothing when
    the section runs on the prompt)."""
    if view.attribution:
        ids, positions = attribution_ids("copy", "", length, view.seed, view.model)
        head_attribution(ids, positions, view.model)


def why_candidates(length: int, view: CopyView) -> tuple[tuple[int, int, int, int], ...]:
    """The "why" cells the page may ask for after a move to ``length``: the head chosen now
    and the strongest induction head there (the select's default), each at the query and key
    sliders' defaults there, at the query kept (within the sequence) with its key kept, and
    with the induction key there. Which the sliders show after their range changed depends
    on what the learner moved before; each extra cell costs a few hundredths of a second
    once the sequence's forward pass is cached, so the likely ones are all filled."""
    if view.why is None:
        return ()
    layer, head, query, key = view.why
    query = min(query, 2 * length)  # the copy sequence has 1 + 2 · length tokens
    start = default_query(length)
    cells = (
        (start, induction_key(start, length)),
        (query, min(key, query)),
        (query, induction_key(query, length)),
    )
    strongest = strongest_induction_head(length, view.seed, view.model)
    chosen = dict.fromkeys((strongest, (layer, head)))
    return tuple(dict.fromkeys((*pair, *cell) for pair in chosen for cell in cells))


def fill_why(length: int, view: CopyView) -> None:
    """Fill the "why" cells of :func:`why_candidates` at ``length`` and the tokens shown."""
    ids = copy_ids(length, view.seed, view.model)
    for cell in why_candidates(length, view):
        why_cell(ids, *cell, view.model)
    copy_tokens(length, view.seed, view.model)


def length_job(length: int, view: CopyView, reach: int = 1) -> Job:
    """The job filling what the page draws for the copy test's lengths ``reach`` steps from
    ``length`` (:func:`length_neighbours`): the copy test, attribution and the "why" cells,
    one call each so that a learner's run goes between them."""
    calls = tuple(
        (fill, (near, view))
        for near in length_neighbours(length, reach)
        for fill in (fill_copy, fill_attribution, fill_why)
    )
    return ("length", length, reach, view), calls


def window_neighbours(window: int, step: int, high: int, reach: int = 2) -> tuple[int, ...]:
    """The window slider's values within ``reach`` steps of ``window`` (0 = off, or 2 to
    ``high``), itself excluded."""
    near = (window + k * step for k in range(-reach, reach + 1) if k)
    return tuple(w for w in near if w == 0 or 2 <= w <= high)


def mask_job(
    parts: mask_effects.MaskParts, sinks: range, windows: tuple, model: str = SMOLLM2
) -> Job:
    """The job filling the mask composer's cost for every sink count of ``sinks``, then each
    window of ``windows``, the other parts as in ``parts`` (all layers only)."""
    calls = [
        (mask_effect, (mask_parts(parts.window, s, parts.prefix, parts.stride), False, model))
        for s in nearest_first(sinks, parts.sinks)
    ]
    calls += [
        (mask_effect, (mask_parts(w, parts.sinks, parts.prefix, parts.stride), False, model))
        for w in nearest_first(windows, parts.window)
    ]
    return ("mask", model, parts), tuple(calls)
