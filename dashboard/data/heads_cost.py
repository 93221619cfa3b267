"""How long the Heads page's long computations take before they start: the per-layer mask
(one forward pass per layer, and two more) and the true effects of up to 30 heads, on the
model the page runs (its listed name, ``model``). Each estimate is the library's count of
forward calls times the cost of one such call, timed on this server (as the Watch page times
a training step; the true effects' call at two lengths, once per model, any other length
read off the line through them), and a computation already done in this process is known
as done (its result is cached), so a page says "about 5 s" only for work it will really do.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import streamlit as st
import torch

from attention_core import masks
from attention_core.experiments import head_ablation, mask_effects
from dashboard.data.decoder import SMOLLM2
from dashboard.data.heads import (
    _decoder,
    _float_decoder,
    _mask_ids,
    head_effects,
    mask_effect,
)

LONG_RUN_S = 10.0
"""A computation estimated over this many seconds waits for a button press (cost shown first)."""
PACE_TTL_S = 600
"""How long a timed forward call stands for this server's pace (the load may change)."""
DONE_RECORD = 256
"""How many finished computations this process remembers as done."""


@dataclass(frozen=True)
class RunEstimate:
    """What a computation will cost before it starts.

    Attributes:
        calls: forward calls it makes (0 when it is done already).
        seconds: the estimate, from the calls timed on this server.
    """

    calls: int
    seconds: float

    @property
    def long(self) -> bool:
        """Over :data:`LONG_RUN_S`: the page asks before it starts."""
        return self.seconds > LONG_RUN_S


class _DoneRecord:
    """The keys of computations finished in this process, the newest :data:`DONE_RECORD`."""

    def __init__(self, size: int) -> None:
        self._keys: OrderedDict[Hashable, None] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def add(self, key: Hashable) -> None:
        with self._lock:
            self._keys[key] = None
            self._keys.move_to_end(key)
            while len(self._keys) > self._size:
                self._keys.popitem(last=False)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._keys


_DONE = _DoneRecord(DONE_RECORD)


TIMED_CALLS = 2
"""Calls timed per estimate; the fastest stands (the first may pay a warm-up)."""


def _timed_call(run: Callable[[], object]) -> float:
    """Seconds one call of ``run`` takes: the fastest of :data:`TIMED_CALLS` (wall clock,
    under inference mode)."""
    times = []
    with torch.inference_mode():
        for _ in range(TIMED_CALLS):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
    return min(times)


@st.cache_data(ttl=PACE_TTL_S, show_spinner=False)
def _mask_call_seconds(model: str) -> float:
    """One forward pass of the page's decoder (4-bit for SmolLM2) over the mask composer's
    paragraph with a mask, timed here."""
    decoder = _decoder(model)
    ids = torch.tensor([_mask_ids(model)])  # (1, L)
    mask = masks.causal(ids.shape[1])  # (L, L)
    return _timed_call(lambda: decoder(ids, mask=mask))


PACE_LENGTHS = (16, 64)
"""The token counts a forward call of the attribution model is timed at; any other length's
cost is read off the line through the two (the cost is close to linear in the tokens at
these lengths: the matrix products dominate the L² scores), so moving the copy test's
length times nothing new."""


@dataclass(frozen=True)
class LinearPace:
    """Seconds of one forward call on ``length`` tokens: ``fixed + per_token · length``."""

    fixed: float
    per_token: float

    def seconds(self, length: int) -> float:
        """The call's cost on ``length`` tokens (never below the fixed part or 0)."""
        return max(0.0, self.fixed + self.per_token * length)


def line_through(short: tuple[int, float], long: tuple[int, float]) -> LinearPace:
    """The pace through two timed calls ``(tokens, seconds)`` (a slope below 0, from noise,
    counts as 0: the longer call then stands for every length).

    Raises:
        ValueError: when the two token counts are not increasing.
    """
    (l0, s0), (l1, s1) = short, long
    if not 0 < l0 < l1:
        raise ValueError(f"pace lengths must increase, got {l0} and {l1}")
    slope = (s1 - s0) / (l1 - l0)
    if slope <= 0:
        return LinearPace(max(s0, s1), 0.0)
    return LinearPace(s0 - slope * l0, slope)


@st.cache_data(ttl=PACE_TTL_S, max_entries=8, show_spinner=False)
def _effect_paces(model: str) -> tuple[LinearPace, LinearPace]:
    """The forward call of the model attribution runs on (SmolLM2's bfloat16 twin), timed
    here at :data:`PACE_LENGTHS` tokens: the pace of batch 1 (the intact pass) and of batch
    :data:`~attention_core.experiments.head_ablation.ATTRIBUTION_BATCH` (heads off)."""
    decoder = _float_decoder(model)
    paces = []
    for batch in (1, head_ablation.ATTRIBUTION_BATCH):
        timed = []
        for length in PACE_LENGTHS:
            ids = torch.zeros(batch, length, dtype=torch.long)  # (B, L): cost depends on B, L
            timed.append((length, _timed_call(lambda ids=ids: decoder(ids))))
        paces.append(line_through(*timed))
    return paces[0], paces[1]


def mask_estimate(
    parts: mask_effects.MaskParts, per_layer: bool, model: str = SMOLLM2
) -> RunEstimate:
    """What :func:`measured_mask_effect` will cost for these parts (0 calls when done).

    Raises:
        ValueError: for a model not listed or not loadable.
    """
    if ("mask", model, parts, per_layer) in _DONE:
        return RunEstimate(0, 0.0)
    layers = _decoder(model).config.num_layers if per_layer else 0
    calls = mask_effects.forward_passes(layers)
    return RunEstimate(calls, calls * _mask_call_seconds(model))


def effects_estimate(
    ids: tuple[int, ...],
    positions: tuple[int, ...] | None,
    pairs: tuple[tuple[int, int], ...],
    model: str = SMOLLM2,
) -> RunEstimate:
    """What :func:`measured_head_effects` will cost (0 calls when done).

    Raises:
        ValueError: for a model not listed, not loadable, or with 4-bit weights (own).
    """
    if ("effects", model, ids, positions, pairs) in _DONE:
        return RunEstimate(0, 0.0)
    calls = head_ablation.ablation_forward_calls(len(pairs))
    single, batched = _effect_paces(model)
    seconds = single.seconds(len(ids)) + (calls - 1) * batched.seconds(len(ids))
    return RunEstimate(calls, seconds)


def measured_mask_effect(
    parts: mask_effects.MaskParts, per_layer: bool, on_pass=None, *, model: str = SMOLLM2
) -> mask_effects.MaskEffect:
    """:func:`~dashboard.data.heads.mask_effect`, remembered as done for its estimate."""
    effect = mask_effect(parts, per_layer, model, on_pass)
    _DONE.add(("mask", model, parts, per_layer))
    return effect


def measured_head_effects(
    ids: tuple[int, ...],
    positions: tuple[int, ...] | None,
    pairs: tuple[tuple[int, int], ...],
    on_pass=None,
    *,
    model: str = SMOLLM2,
):
    """:func:`~dashboard.data.heads.head_effects`, remembered as done for its estimate."""
    effects = head_effects(ids, positions, pairs, model, on_pass)
    _DONE.add(("effects", model, ids, positions, pairs))
    return effects
