"""estimate_memory: the registered variants' analytic models, and variants registered at run
time with and without a memory model."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from attention_core import VARIANTS, estimate_memory
from attention_core.types import AttentionResult


def _plain(q, k, v, *, mask=None, scale=None, need_weights=False, **_):
    """Softmax attention written out (the variant body does not matter to the estimate)."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    weights = torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1)  # (…, L, S)
    return AttentionResult(weights @ v, weights if need_weights else None)


def _spec(name, memory_model=None):
    """A variant registered at run time: ``scaled``'s entry under ``name``, with the written-out
    body and ``memory_model`` (None: none)."""
    return dataclasses.replace(
        VARIANTS["scaled"], name=name, label=name, fn=_plain, memory_model=memory_model
    )


def test_a_variant_without_a_memory_model_is_refused_by_name(monkeypatch):
    monkeypatch.setitem(VARIANTS, "runtime_plain", _spec("runtime_plain"))
    with pytest.raises(ValueError, match="'runtime_plain' has no memory model"):
        estimate_memory("runtime_plain", batch=1, heads=1, L=4, E=2)


def test_a_runtime_memory_model_gets_every_size(monkeypatch):
    seen = {}

    def scores_only(lead, L, S, E, Ev, itemsize, need_weights, **params):
        seen.update(lead=lead, L=L, S=S, E=E, Ev=Ev, itemsize=itemsize, weights=need_weights)
        return lead * L * S * itemsize  # one (lead, L, S) matrix

    monkeypatch.setitem(VARIANTS, "runtime_scores", _spec("runtime_scores", scores_only))
    got = estimate_memory(
        "runtime_scores", batch=2, heads=3, L=5, S=7, E=4, Ev=6, dtype="float64", need_weights=True
    )
    assert got == 2 * 3 * 5 * 7 * 8
    assert seen == dict(lead=6, L=5, S=7, E=4, Ev=6, itemsize=8, weights=True)


def test_the_dense_estimate_grows_with_l_times_s():
    small = estimate_memory("stable", batch=1, heads=1, L=64, E=8, need_weights=True)
    large = estimate_memory("stable", batch=1, heads=1, L=128, E=8, need_weights=True)
    # at least the extra (L, S) float32 weights: 128² - 64² cells
    assert large - small >= (128 * 128 - 64 * 64) * 4
