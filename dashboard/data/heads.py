"""Heads at work on SmolLM2-135M: the head census of a prompt, the copy test with heads
turned off, attribution against true effects, attention against explanation, and the mask
composer's cost (cached calls of :mod:`attention_core.experiments.heads`, ``.explain`` and
``.mask_effects``).

The census, the copy test and the mask composer run on the decoder page's own model
(:func:`~dashboard.data.decoder.smollm2_decoder`, 4-bit weights): one model in memory for
both pages. Attribution and saliency need a backward pass, which torch's int4 kernel cannot
give; they run on a bfloat16 twin loaded on first use (:func:`smollm2_float_decoder`), and
the true effects they are compared with run on that same twin. Layer and head indices are
0-based, as in the library.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attention_core import pretrained
from attention_core.experiments import explain, heads, mask_effects
from attention_core.validation import check_choice, check_int
from dashboard.data.decoder import (
    SINK_PARAGRAPH,
    prompt_ids,
    shown_token,
    smollm2_decoder,
    token_labels,
)
from dashboard.data.tables import readonly
from dashboard.runtime import memory
from dashboard.runtime import prefetch as fillers

HEADS_SCORES = heads.SCORE_NAMES
HEADS_LABELS = heads.LABELS
HEADS_FLOAT_DTYPE = "bfloat16"
"""The weights of the twin that attribution and saliency run on (a backward pass)."""
HEADS_COPY_MIN, HEADS_COPY_MAX, HEADS_COPY_DEFAULT = 4, 64, 24
HEADS_MAX_SEED = 999
HEADS_MAX_OFF = 30
"""The most heads the copy test turns off, and the most true effects measured at once (one
forward pass each)."""
HEADS_SOURCES = ("copy", "prompt")
HEADS_PRESETS = {
    "repeat": "The cat sat on the mat because the mat was warm. The cat sat on the mat because",
    "zh_repeat": "小猫坐在垫子上，因为垫子很暖和。小猫坐在垫子上，因为",
    "capital": "The capital of France is",
}
MASK_TEXT = SINK_PARAGRAPH
"""The paragraph whose perplexity the mask composer measures (the decoder page's)."""


@st.cache_resource(show_spinner=False)
def smollm2_float_decoder() -> pretrained.Decoder:
    """SmolLM2-135M with bfloat16 weights (:data:`HEADS_FLOAT_DTYPE`), loaded once per
    process on first use: the model attribution and saliency differentiate.

    Raises:
        ModelNotInstalledError: when the package is missing (the message has the pip line).
        ValueError: when the file's SHA-256 differs from the pinned one.
    """
    return pretrained.load_smollm2(weights_dtype=HEADS_FLOAT_DTYPE, after_layer=memory.trim_heap)


def head_name(pair: tuple[int, int]) -> str:
    """A head as the page writes it, ``"L.H"`` with 0-based indices (``"18.6"``)."""
    return f"{pair[0]}.{pair[1]}"


def head_names(layers: int, count: int) -> list[str]:
    """Every head as ``"L.H"``, layer by layer."""
    return [head_name((layer, head)) for layer in range(layers) for head in range(count)]


def parse_head(name: str) -> tuple[int, int]:
    """``"18.6"`` -> (18, 6).

    Raises:
        ValueError: for a text that is not two whole numbers joined by a dot.
    """
    layer, dot, head = str(name).partition(".")
    if not dot or not layer.isdigit() or not head.isdigit():
        raise ValueError(f"a head is written layer.head, e.g. 18.6; got {name!r}")
    return int(layer), int(head)


@dataclass(frozen=True)
class PromptCensus:
    """The census of a prompt and its maps (read-only arrays).

    Attributes:
        tokens, labels: the prompt's tokens and axis labels (characters grouped).
        truncated: True when the prompt was cut at the decoder page's token limit.
        scores: score name -> (N, H) float64 (``induction`` NaN when no token repeats).
        head_labels: (N, H) labels from the library's rule.
        maps: (N, H, L, L) the causal maps the scores come from.
    """

    tokens: tuple[str, ...]
    labels: tuple[str, ...]
    truncated: bool
    scores: dict[str, np.ndarray]
    head_labels: np.ndarray
    maps: np.ndarray


@st.cache_resource(max_entries=16, show_spinner=False)
def prompt_census(text: str) -> PromptCensus:
    """The head census of ``text`` from one forward pass with weights (the scores of
    :func:`attention_core.experiments.heads.census`, from the maps it keeps).

    Raises:
        ValueError: for a bad or blank text.
    """
    tokens, ids, cut = prompt_ids(text)
    if not ids:
        raise ValueError(f"the prompt {text!r} has no tokens")
    out = smollm2_decoder()(heads.as_ids(ids), need_weights=True)
    maps = torch.cat(out.attentions, dim=0).float()  # N × (1, H, L, L) -> (N, H, L, L)
    scores = heads.pattern_scores(maps, list(ids))
    labels = heads.head_labels(scores, len(ids), causal=True)
    return PromptCensus(
        tokens=tokens,
        labels=tuple(token_labels(tokens)),
        truncated=cut,
        scores={name: readonly(value) for name, value in scores.items()},
        head_labels=readonly(labels),
        maps=readonly(maps.numpy()),
    )


def census_table(census: PromptCensus, score: str) -> pd.DataFrame:
    """One row per head: ``layer``, ``head``, ``score`` (the chosen one), ``label``.

    Raises:
        ValueError: for an unknown score.
    """
    values = census.scores[check_choice("score", score, HEADS_SCORES)]
    layers, count = values.shape
    return pd.DataFrame(
        {
            "layer": np.repeat(np.arange(layers), count),
            "head": np.tile(np.arange(count), layers),
            "score": values.ravel(),
            "label": census.head_labels.ravel(),
        }
    )


@st.cache_resource(max_entries=64, show_spinner=False)
def copy_run(length: int, seed: int, ablate: tuple[tuple[int, int], ...] = ()) -> heads.CopyTest:
    """The copy test (:func:`~attention_core.experiments.heads.copy_test`) with the heads
    of ``ablate`` zero-ablated.

    Raises:
        ValueError: for a length, seed or head out of range, or too many heads.
    """
    check_int("length", length, low=HEADS_COPY_MIN, high=HEADS_COPY_MAX)
    check_int("seed", seed, low=0, high=HEADS_MAX_SEED)
    if len(ablate) > HEADS_MAX_OFF:
        raise ValueError(f"at most {HEADS_MAX_OFF} heads can be off, got {len(ablate)}")
    return heads.copy_test(smollm2_decoder(), length, seed, ablate=ablate)


@st.cache_resource(max_entries=64, show_spinner=False)
def copy_pair(
    length: int,
    seed: int,
    off: tuple[tuple[int, int], ...],
    weakest: tuple[tuple[int, int], ...],
) -> tuple[heads.CopyTest, heads.CopyTest]:
    """The copy test with the heads of ``off`` turned off and with those of ``weakest``
    turned off (the control), in one batched forward pass
    (:func:`~attention_core.experiments.heads.copy_tests`).

    Raises:
        ValueError: for a length, seed or head out of range, or too many heads.
    """
    check_int("length", length, low=HEADS_COPY_MIN, high=HEADS_COPY_MAX)
    check_int("seed", seed, low=0, high=HEADS_MAX_SEED)
    if max(len(off), len(weakest)) > HEADS_MAX_OFF:
        raise ValueError(f"at most {HEADS_MAX_OFF} heads can be off, got {len(off)}")
    first, second = heads.copy_tests(smollm2_decoder(), length, seed, (off, weakest))
    return first, second


@st.cache_resource(max_entries=16, show_spinner=False)
def copy_census(length: int, seed: int) -> heads.HeadCensus:
    """The census of the copy test's sequence (its induction scores rank the heads).

    Raises:
        ValueError: for a length or seed out of range.
    """
    check_int("length", length, low=HEADS_COPY_MIN, high=HEADS_COPY_MAX)
    ids = heads.repeated_tokens(smollm2_decoder(), length, seed)
    return heads.census(smollm2_decoder(), ids)


def top_heads(length: int, seed: int, score: str, count: int) -> tuple[tuple[int, int], ...]:
    """The ``count`` heads with the highest ``score`` on the copy sequence (none for 0).

    Raises:
        ValueError: for an unknown score or a bad count.
    """
    if count == 0:
        return ()
    scores = copy_census(length, seed).scores[check_choice("score", score, HEADS_SCORES)]
    return heads.ranked_heads(scores, count)


def weakest_heads(
    length: int, seed: int, score: str, chosen: tuple[tuple[int, int], ...]
) -> tuple[tuple[int, int], ...]:
    """As many heads as ``chosen``, the lowest by ``score`` in the same layers and not among
    them, the rest from the nearest layers where those have too few: the control of the
    copy test (:func:`~attention_core.experiments.heads.control_heads`).

    Raises:
        ValueError: for an unknown score.
    """
    if not chosen:
        return ()
    scores = copy_census(length, seed).scores[check_choice("score", score, HEADS_SCORES)]
    return heads.control_heads(scores, chosen)


def copy_heads(
    length: int, seed: int, score: str, top_k: int, picked: tuple[tuple[int, int], ...]
) -> tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]:
    """The heads the copy test turns off (the ``top_k`` by ``score``, then the ``picked``
    ones) and its control (as many of the weakest in the same layers).

    Raises:
        ValueError: for an unknown score or a bad count.
    """
    off = tuple(dict.fromkeys((*top_heads(length, seed, score, top_k), *picked)))
    return off, weakest_heads(length, seed, score, off)


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
    length: int, seed: int, score: str, top_k: int, picked: tuple, top_ks: range
) -> bool:
    """Start filling the copy test for every top k of ``top_ks`` (nearest the current first).

    Returns:
        True when a thread was started.
    """
    calls = []
    for k in nearest_first(top_ks, top_k):
        off, weakest = copy_heads(length, seed, score, k, picked)
        calls.append((copy_pair, (length, seed, off, weakest)))
    return prefetch(("copy", length, seed, score, picked), tuple(calls))


def window_neighbours(window: int, step: int, high: int, reach: int = 2) -> tuple[int, ...]:
    """The window slider's values within ``reach`` steps of ``window`` (0 = off, or 2 to
    ``high``), itself excluded."""
    near = (window + k * step for k in range(-reach, reach + 1) if k)
    return tuple(w for w in near if w == 0 or 2 <= w <= high)


def measured_heads(
    pick: str, estimates: np.ndarray, layers: range, count: int
) -> tuple[tuple[int, int], ...]:
    """The heads whose true effects are measured: every head of ``layers`` (pick
    ``"layers"``), or the ``count`` largest |estimates| (pick ``"top"``)."""
    heads_per_layer = estimates.shape[1]
    if pick == "layers":
        return tuple((layer, head) for layer in layers for head in range(heads_per_layer))
    order = np.abs(estimates).ravel().argsort()[::-1][:count]
    return tuple((int(i) // heads_per_layer, int(i) % heads_per_layer) for i in order)


def prefetch_masks(parts: mask_effects.MaskParts, sinks: range, windows: tuple) -> bool:
    """Start filling the mask composer's cost for every sink count of ``sinks``, then each
    window of ``windows``, the other parts as in ``parts`` (all layers only).

    Returns:
        True when a thread was started.
    """
    calls = [
        (mask_effect, (mask_parts(parts.window, s, parts.prefix, parts.stride), False))
        for s in nearest_first(sinks, parts.sinks)
    ]
    calls += [
        (mask_effect, (mask_parts(w, parts.sinks, parts.prefix, parts.stride), False))
        for w in nearest_first(windows, parts.window)
    ]
    return prefetch(("mask", parts), tuple(calls))


ATTRIBUTION_MIN_TOKENS = 2  # a token's loss is predicted from the tokens before it


class TooFewTokens(ValueError):
    """A prompt too short for a figure the sidebar allows: the page says so as an info, in
    its language, instead of an error.

    Attributes:
        need: the fewest tokens the figure needs. got: the prompt's tokens.
    """

    def __init__(self, need: int, got: int) -> None:
        super().__init__(f"attribution needs a prompt of at least {need} tokens, got {got}")
        self.need, self.got = need, got


def attribution_ids(
    source: str, text: str, length: int, seed: int
) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """The token ids attribution runs on, and the positions whose loss counts: the copy
    sequence's second copy, or every position of the prompt (None).

    Raises:
        TooFewTokens: for a prompt of one token.
        ValueError: for an unknown source, a bad text, length or seed.
    """
    if check_choice("source", source, HEADS_SOURCES) == "copy":
        ids = heads.repeated_tokens(smollm2_decoder(), length, seed)
        return tuple(int(i) for i in ids), tuple(range(length, 2 * length))
    _, ids, _ = prompt_ids(text)
    if len(ids) < ATTRIBUTION_MIN_TOKENS:
        raise TooFewTokens(ATTRIBUTION_MIN_TOKENS, len(ids))
    return ids, None


@st.cache_resource(max_entries=16, show_spinner=False)
def head_attribution(ids: tuple[int, ...], positions: tuple[int, ...] | None) -> np.ndarray:
    """(N, H) first-order estimates of each head's zero-ablation effect (nats), one backward
    pass on the bfloat16 twin.

    Raises:
        ValueError: as :func:`~attention_core.experiments.heads.attribution`.
    """
    return heads.attribution(smollm2_float_decoder(), ids, positions=positions)


@st.cache_resource(max_entries=32, show_spinner=False)
def head_effects(
    ids: tuple[int, ...],
    positions: tuple[int, ...] | None,
    pairs: tuple[tuple[int, int], ...],
    _on_pass=None,
) -> np.ndarray:
    """The true effects of turning each head of ``pairs`` off alone, on the bfloat16 twin
    (``_on_pass(done, total)`` after each pass of a computed, not cached, result).

    Raises:
        ValueError: for more than :data:`HEADS_MAX_OFF` heads or a bad pair.
    """
    if not pairs or len(pairs) > HEADS_MAX_OFF:
        raise ValueError(f"between 1 and {HEADS_MAX_OFF} heads, got {len(pairs)}")
    return heads.ablation_effects(
        smollm2_float_decoder(), ids, pairs, positions=positions, on_pass=_on_pass
    )


def effect_table(
    estimates: np.ndarray, pairs: tuple[tuple[int, int], ...], effects: np.ndarray
) -> tuple[pd.DataFrame, float]:
    """Rows ``head`` ("L.H"), ``estimate``, ``effect`` and the Spearman rank correlation of
    the two columns (NaN for fewer than 2 heads or a constant column)."""
    table = pd.DataFrame(
        {
            "head": [head_name(p) for p in pairs],
            "estimate": [float(estimates[p]) for p in pairs],
            "effect": [float(e) for e in effects],
        }
    )
    if len(table) < 2:
        return table, float("nan")
    return table, explain.spearman(table["estimate"], table["effect"])


@st.cache_resource(max_entries=16, show_spinner=False)
def explanation(text: str) -> tuple[tuple[str, ...], explain.Explanation, str]:
    """Saliency, last-layer attention and rollout of the prompt's next token (bfloat16
    twin): the prompt's axis labels, the explanation and the explained token as text.

    Raises:
        ValueError: for a bad text.
    """
    tokens, ids, _ = prompt_ids(text)
    model = smollm2_float_decoder()
    result = explain.explain_next_token(model, ids)
    target = shown_token(model.tokenizer.id_to_token(result.target))
    return tuple(token_labels(tokens)), result, target


def explanation_table(labels: tuple[str, ...], result: explain.Explanation) -> pd.DataFrame:
    """Long table ``token``, ``kind`` (saliency, attention, rollout), ``share``: each
    importance as a share of its total (|saliency| for the gradient)."""
    rows = []
    for kind, values in (
        ("saliency", np.abs(result.saliency)),
        ("attention", result.attention),
        ("rollout", result.rollout),
    ):
        shares = values / (values.sum() or 1.0)
        rows += [(label, kind, float(v)) for label, v in zip(labels, shares, strict=True)]
    return pd.DataFrame(rows, columns=["token", "kind", "share"])


@st.cache_resource(max_entries=32, show_spinner=False)
def mask_effect(
    parts: mask_effects.MaskParts, per_layer: bool, _on_pass=None
) -> mask_effects.MaskEffect:
    """What the composed mask costs on :data:`MASK_TEXT`: in every layer, and (with
    ``per_layer``) in each layer alone (30 forward passes more). ``_on_pass(done, total)``
    is called after each pass of a computed (not cached) result.

    Raises:
        ValueError: for bad parts.
    """
    model = smollm2_decoder()
    ids = model.tokenize(MASK_TEXT).input_ids
    layers = None if per_layer else ()
    return mask_effects.mask_effects(model, ids, parts, layers=layers, on_pass=_on_pass)


@st.cache_resource(max_entries=64, show_spinner=False)
def mask_kept(parts: mask_effects.MaskParts) -> float:
    """The share of :data:`MASK_TEXT`'s causal cells the composed mask keeps (1.0: the parts
    cut nothing, so there is nothing to measure)."""
    return mask_effects.kept_share(parts, len(smollm2_decoder().tokenize(MASK_TEXT).input_ids))


def mask_parts(window: int, sinks: int, prefix: int, stride: int) -> mask_effects.MaskParts:
    """The composer's parts (0 = off).

    Raises:
        ValueError: for a negative value or a window or stride of 1.
    """
    return mask_effects.MaskParts(window=window, sinks=sinks, prefix=prefix, stride=stride)
