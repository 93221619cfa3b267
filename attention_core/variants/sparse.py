"""Sparse patterns: ``strided``, ``random`` and ``combined`` (local + strided).

``strided`` splits the positions into ``stride`` residue classes that attend only among
themselves, so it gathers each class and runs ``stride`` independent attentions
(``groups.py``): O(L·S/stride) memory. ``random`` and ``combined`` have no such structure and
stay dense: full attention with the pattern intersected with the user's mask, exact and
O(L·S) like full attention. (``local`` and ``block`` run block by block: see ``local.py``.)
"""

from __future__ import annotations

import math

from attention_core import masks
from attention_core.types import AttentionResult, Param, VariantSpec
from attention_core.variants.common import masked_dense_result
from attention_core.variants.full import dense_memory
from attention_core.variants.groups import grouped_attention, grouped_memory, strided_groups
from attention_core.variants.local import WINDOW_PARAM


def _pattern_attention(q, k, v, build_pattern, pattern_params: dict, **common):
    """Full attention restricted to the (L, S) pattern ``build_pattern(L, S, **params)``."""
    L, S = q.shape[-2], k.shape[-2]
    return masked_dense_result(
        q, k, v, build_pattern=lambda: build_pattern(L, S, **pattern_params), **common
    )


def _strided_pattern(L, S=None, *, stride, **_):
    return masks.strided(L, stride, S)


def _random_pattern(L, S=None, *, density, seed, **_):
    return masks.random(L, density, seed, S)


def _combined_pattern(L, S=None, *, window_size, stride, **_):
    return masks.combine(masks.local(L, window_size, S), masks.strided(L, stride, S))


def strided_attention(q, k, v, *, stride: int, **common) -> AttentionResult:
    """Strided attention: query i sees keys j with (i − j) divisible by ``stride``.

    Exact: equals full scaled attention under ``masks.strided(L, stride, S)`` (and the
    user's mask). The pattern is ``stride`` independent attentions, one per residue class
    (positions r, r + stride, …): each class is gathered and attends within itself, in
    O(L·S/stride·E) time and O(L·S/stride) memory, with PyTorch's fused SDPA when no
    weights or dropout are asked for.

    Args:
        q: (..., L, E). k: (..., S, E). v: (..., S, Ev). stride: >= 1.
        **common: mask, scale, need_weights, dropout_p, generator, memory_budget (the
            shared variant signature, see ``attend``).

    Returns:
        AttentionResult(output (..., L, Ev), weights (..., L, S) and scores (..., L, S), or
        None without ``need_weights``).

    Raises:
        MemoryBudgetError: when the class scores, or the requested dense weights and
            scores, exceed the budget.
    """
    groups = strided_groups(q.shape[-2], k.shape[-2], stride, q.device)
    return grouped_attention(q, k, v, groups, **common)


def random_attention(q, k, v, *, density: float, seed: int, **common) -> AttentionResult:
    """Random sparse attention: each (i, j) kept with probability ``density`` (seeded; the
    diagonal is always kept). It stays dense on purpose: a random pattern has no groups to
    gather, so it runs as full attention under the pattern, O(L·S) time and memory.

    Args/Returns/Raises as :func:`strided_attention` (the budget guards the L×S scores).
    """
    params = {"density": density, "seed": seed}
    return _pattern_attention(q, k, v, _random_pattern, params, **common)


def combined_attention(q, k, v, *, window_size: int, stride: int, **common) -> AttentionResult:
    """Local window united with a strided pattern (the Sparse Transformer's mix): query i sees
    |i − j| <= window_size // 2 or (i − j) divisible by ``stride``. Dense (masked), O(L·S):
    a query's keys are a band plus a residue class, which share no group layout.
    Args/Returns/Raises as :func:`strided_attention` (the budget guards the L×S scores)."""
    params = {"window_size": window_size, "stride": stride}
    return _pattern_attention(q, k, v, _combined_pattern, params, **common)


def _strided_memory(lead, L, S, E, Ev, *, itemsize, need_weights, stride=4, **_):
    """Peak bytes of ``strided``: min(stride, L) classes of ceil(L/stride) queries and
    ceil(S/stride) keys each."""
    cells = min(stride, L) * math.ceil(L / stride) * math.ceil(S / stride)
    return grouped_memory(
        lead, L, S, E, Ev, itemsize=itemsize, need_weights=need_weights, cells=cells
    )


STRIDE_PARAM = Param("stride", "int", 4, 1, 4096, 1, "attend to every stride-th token")

SPECS = (
    VariantSpec(
        name="strided",
        label="Strided",
        explanation="Each token attends to tokens a multiple of the stride away.",
        time_complexity="O(L·S/stride·E)",
        memory_complexity="O(L·S/stride)",
        exact=True,
        fn=strided_attention,
        params=(STRIDE_PARAM,),
        pattern=_strided_pattern,
        memory_model=_strided_memory,
    ),
    VariantSpec(
        name="random",
        label="Random sparse",
        explanation="Each token attends to a seeded random subset of keys (and itself).",
        time_complexity="O(L·S·E) (dense, masked)",
        memory_complexity="O(L·S)",
        exact=True,
        fn=random_attention,
        params=(
            Param("density", "float", 0.3, 0.01, 1.0, 0.01, "fraction of pairs kept"),
            Param("seed", "int", 0, 0, 2**31 - 1, 1, "seed of the random pattern"),
        ),
        pattern=_random_pattern,
        memory_model=dense_memory,
    ),
    VariantSpec(
        name="combined",
        label="Local + strided",
        explanation="Local window OR strided pattern: near detail plus far reach.",
        time_complexity="O(L·S·E) (dense, masked)",
        memory_complexity="O(L·S)",
        exact=True,
        fn=combined_attention,
        params=(WINDOW_PARAM, STRIDE_PARAM),
        pattern=_combined_pattern,
        memory_model=dense_memory,
    ),
)
