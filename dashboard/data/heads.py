"""Heads at work on SmolLM2-135M or a GGUF model of the server's own: the head census of a
prompt, the copy test with heads turned off, attribution against true effects, attention
against explanation, and the mask composer's cost (cached calls of
:mod:`attention_core.experiments.heads`, ``.explain`` and ``.mask_effects``).

Every cached call takes the model's listed name, ``model`` (a plain string, part of the cache
key; :data:`~dashboard.data.decoder.SMOLLM2` by default), looked up and loaded once per
server by :mod:`dashboard.data.own_models`. For SmolLM2, the census, the copy test and the
mask composer run on the decoder page's own model
(:func:`~dashboard.data.decoder.smollm2_decoder`, 4-bit weights): one model in memory for
both pages. Attribution and saliency need a backward pass, which torch's int4 kernel cannot
give; they run on a bfloat16 twin loaded on first use (:func:`smollm2_float_decoder`), and
the true effects they are compared with run on that same twin. An own model runs everything
on the one copy the Decoder page loads; with 4-bit codes it refuses the backward pass
(``ValueError``). Layer and head indices are 0-based, as in the library.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attention_core import pretrained
from attention_core.experiments import explain, head_ablation, heads, mask_effects
from attention_core.validation import check_choice, check_int
from dashboard.data import own_models
from dashboard.data.decoder import (
    SINK_PARAGRAPH,
    SMOLLM2,
    prompt_ids,
    shown_token,
    smollm2_decoder,
    token_labels,
)
from dashboard.data.tables import readonly
from dashboard.runtime import memory

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
"""The paragraph whose perplexity the mask composer measures (the decoder page's), cut at
the model's context length."""
NO_GRADIENT_DTYPE = "int4"
"""Weights that refuse a backward pass (torch's int4 kernel has no derivative)."""


@st.cache_resource(show_spinner=False)
def smollm2_float_decoder() -> pretrained.Decoder:
    """SmolLM2-135M with bfloat16 weights (:data:`HEADS_FLOAT_DTYPE`), loaded once per
    process on first use: the model attribution and saliency differentiate.

    Raises:
        ModelNotInstalledError: when the package is missing (the message has the pip line).
        ValueError: when the file's SHA-256 differs from the pinned one.
    """
    return pretrained.load_smollm2(weights_dtype=HEADS_FLOAT_DTYPE, after_layer=memory.trim_heap)


def _one_key(cached: Callable) -> Callable:
    """Call the cached function with every argument bound, its defaults too: Streamlit keys a
    cache by the arguments as passed, so ``f(x)`` and ``f(x, SMOLLM2)`` (a prefetch) then
    share one entry."""
    signature = inspect.signature(cached)

    @functools.wraps(cached)
    def call(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return cached(*bound.args, **bound.kwargs)

    return call


def _decoder(model: str) -> pretrained.Decoder:
    """The model the census, the copy test and the masks run on: SmolLM2's 4-bit decoder
    (:func:`~dashboard.data.decoder.smollm2_decoder`), or the own model as loaded."""
    if model == SMOLLM2:
        return smollm2_decoder()
    return own_models.loaded_model(model).decoder


def _float_decoder(model: str) -> pretrained.Decoder:
    """The model attribution and saliency differentiate: SmolLM2's bfloat16 twin, or the own
    model as loaded.

    Raises:
        ValueError: for an own model whose weights are 4-bit codes (no backward pass).
    """
    if model == SMOLLM2:
        return smollm2_float_decoder()
    decoder = own_models.loaded_model(model).decoder
    if decoder.weights_dtype == NO_GRADIENT_DTYPE:
        raise ValueError(f"{model!r} holds 4-bit weights, which have no backward pass")
    return decoder


def _mask_ids(model: str) -> list[int]:
    """:data:`MASK_TEXT`'s ids for ``model``, cut at its context length."""
    decoder = _decoder(model)
    return decoder.tokenize(MASK_TEXT).input_ids[: decoder.config.context_length]


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


@_one_key
@st.cache_resource(max_entries=16, show_spinner=False)
def prompt_census(text: str, model: str = SMOLLM2) -> PromptCensus:
    """The head census of ``text`` from one forward pass with weights (the scores of
    :func:`attention_core.experiments.heads.census`, from the maps it keeps).

    Raises:
        ValueError: for a bad or blank text, or a model not listed or not loadable.
    """
    tokens, ids, cut = prompt_ids(text, model)
    if not ids:
        raise ValueError(f"the prompt {text!r} has no tokens")
    out = _decoder(model)(heads.as_ids(ids), need_weights=True)
    maps = torch.cat(out.attentions, dim=0).float()  # N × (1, H, L, L) -> (N, H, L, L)
    scores = heads.pattern_scores(maps, list(ids))
    labels = heads.head_labels(scores, len(ids), causal=True)
    return PromptCensus(
        tokens=tokens,
        labels=tuple(token_labels(tokens, spelling=_decoder(model).token_spelling)),
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


@_one_key
@st.cache_resource(max_entries=64, show_spinner=False)
def copy_run(
    length: int, seed: int, ablate: tuple[tuple[int, int], ...] = (), model: str = SMOLLM2
) -> head_ablation.CopyTest:
    """The copy test (:func:`~attention_core.experiments.head_ablation.copy_test`) with the heads
    of ``ablate`` zero-ablated.

    Raises:
        ValueError: for a length, seed or head out of range, or too many heads.
    """
    check_int("length", length, low=HEADS_COPY_MIN, high=HEADS_COPY_MAX)
    check_int("seed", seed, low=0, high=HEADS_MAX_SEED)
    if len(ablate) > HEADS_MAX_OFF:
        raise ValueError(f"at most {HEADS_MAX_OFF} heads can be off, got {len(ablate)}")
    return head_ablation.copy_test(_decoder(model), length, seed, ablate=ablate)


@_one_key
@st.cache_resource(max_entries=64, show_spinner=False)
def copy_pair(
    length: int,
    seed: int,
    off: tuple[tuple[int, int], ...],
    weakest: tuple[tuple[int, int], ...],
    model: str = SMOLLM2,
) -> tuple[head_ablation.CopyTest, head_ablation.CopyTest]:
    """The copy test with the heads of ``off`` turned off and with those of ``weakest``
    turned off (the control), in one batched forward pass
    (:func:`~attention_core.experiments.head_ablation.copy_tests`).

    Raises:
        ValueError: for a length, seed or head out of range, or too many heads.
    """
    check_int("length", length, low=HEADS_COPY_MIN, high=HEADS_COPY_MAX)
    check_int("seed", seed, low=0, high=HEADS_MAX_SEED)
    if max(len(off), len(weakest)) > HEADS_MAX_OFF:
        raise ValueError(f"at most {HEADS_MAX_OFF} heads can be off, got {len(off)}")
    first, second = head_ablation.copy_tests(_decoder(model), length, seed, (off, weakest))
    return first, second


@_one_key
@st.cache_resource(max_entries=16, show_spinner=False)
def copy_census(length: int, seed: int, model: str = SMOLLM2) -> heads.HeadCensus:
    """The census of the copy test's sequence (its induction scores rank the heads).

    Raises:
        ValueError: for a length or seed out of range.
    """
    check_int("length", length, low=HEADS_COPY_MIN, high=HEADS_COPY_MAX)
    ids = head_ablation.repeated_tokens(_decoder(model), length, seed)
    return heads.census(_decoder(model), ids)


def top_heads(
    length: int, seed: int, score: str, count: int, model: str = SMOLLM2
) -> tuple[tuple[int, int], ...]:
    """The ``count`` heads with the highest ``score`` on the copy sequence (none for 0).

    Raises:
        ValueError: for an unknown score or a bad count.
    """
    if count == 0:
        return ()
    scores = copy_census(length, seed, model).scores[check_choice("score", score, HEADS_SCORES)]
    return head_ablation.ranked_heads(scores, count)


def weakest_heads(
    length: int, seed: int, score: str, chosen: tuple[tuple[int, int], ...], model: str = SMOLLM2
) -> tuple[tuple[int, int], ...]:
    """As many heads as ``chosen``, the lowest by ``score`` in the same layers and not among
    them, the rest from the nearest layers where those have too few: the control of the
    copy test (:func:`~attention_core.experiments.head_ablation.control_heads`).

    Raises:
        ValueError: for an unknown score.
    """
    if not chosen:
        return ()
    scores = copy_census(length, seed, model).scores[check_choice("score", score, HEADS_SCORES)]
    return head_ablation.control_heads(scores, chosen)


def copy_heads(
    length: int,
    seed: int,
    score: str,
    top_k: int,
    picked: tuple[tuple[int, int], ...],
    model: str = SMOLLM2,
) -> tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]:
    """The heads the copy test turns off (the ``top_k`` by ``score``, then the ``picked``
    ones) and its control (as many of the weakest in the same layers).

    Raises:
        ValueError: for an unknown score or a bad count.
    """
    off = tuple(dict.fromkeys((*top_heads(length, seed, score, top_k, model), *picked)))
    return off, weakest_heads(length, seed, score, off, model)


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


@_one_key
@st.cache_resource(max_entries=64, show_spinner=False)
def attribution_ids(
    source: str, text: str, length: int, seed: int, model: str = SMOLLM2
) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """The token ids attribution runs on, and the positions whose loss counts: the copy
    sequence's second copy, or every position of the prompt (None). Cached: drawing the copy
    sequence sets the vocabulary apart from its control tokens, a tenth of the page's rerun.

    Raises:
        TooFewTokens: for a prompt of one token.
        ValueError: for an unknown source, a bad text, length, seed or model.
    """
    if check_choice("source", source, HEADS_SOURCES) == "copy":
        ids = head_ablation.repeated_tokens(_decoder(model), length, seed)
        return tuple(int(i) for i in ids), tuple(range(length, 2 * length))
    _, ids, _ = prompt_ids(text, model)
    if len(ids) < ATTRIBUTION_MIN_TOKENS:
        raise TooFewTokens(ATTRIBUTION_MIN_TOKENS, len(ids))
    return ids, None


@_one_key
@st.cache_resource(max_entries=16, show_spinner=False)
def head_attribution(
    ids: tuple[int, ...], positions: tuple[int, ...] | None, model: str = SMOLLM2
) -> np.ndarray:
    """(N, H) first-order estimates of each head's zero-ablation effect (nats), one backward
    pass on the bfloat16 twin (SmolLM2) or the own model.

    Raises:
        ValueError: as :func:`~attention_core.experiments.head_ablation.attribution`, or for an own
            model with 4-bit weights.
    """
    return head_ablation.attribution(_float_decoder(model), ids, positions=positions)


@_one_key
@st.cache_resource(max_entries=32, show_spinner=False)
def head_effects(
    ids: tuple[int, ...],
    positions: tuple[int, ...] | None,
    pairs: tuple[tuple[int, int], ...],
    model: str = SMOLLM2,
    _on_pass=None,
) -> np.ndarray:
    """The true effects of turning each head of ``pairs`` off alone, on the model attribution
    differentiates (``_on_pass(done, total)`` after each pass of a computed, not cached,
    result).

    Raises:
        ValueError: for more than :data:`HEADS_MAX_OFF` heads or a bad pair.
    """
    if not pairs or len(pairs) > HEADS_MAX_OFF:
        raise ValueError(f"between 1 and {HEADS_MAX_OFF} heads, got {len(pairs)}")
    return head_ablation.ablation_effects(
        _float_decoder(model), ids, pairs, positions=positions, on_pass=_on_pass
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


@_one_key
@st.cache_resource(max_entries=16, show_spinner=False)
def explanation(
    text: str, model: str = SMOLLM2
) -> tuple[tuple[str, ...], explain.Explanation, str]:
    """Saliency, last-layer attention and rollout of the prompt's next token (SmolLM2's
    bfloat16 twin, or the own model): the prompt's axis labels, the explanation and the
    explained token as text.

    Raises:
        ValueError: for a bad text, or an own model with 4-bit weights.
    """
    tokens, ids, _ = prompt_ids(text, model)
    decoder = _float_decoder(model)
    spelling = decoder.token_spelling
    result = explain.explain_next_token(decoder, ids)
    target = shown_token(decoder.tokenizer.id_to_token(result.target), spelling)
    return tuple(token_labels(tokens, spelling=spelling)), result, target


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


@_one_key
@st.cache_resource(max_entries=32, show_spinner=False)
def mask_effect(
    parts: mask_effects.MaskParts, per_layer: bool, model: str = SMOLLM2, _on_pass=None
) -> mask_effects.MaskEffect:
    """What the composed mask costs on :data:`MASK_TEXT`: in every layer, and (with
    ``per_layer``) in each layer alone (one forward pass more per layer).
    ``_on_pass(done, total)`` is called after each pass of a computed (not cached) result.

    Raises:
        ValueError: for bad parts, or a model not listed or not loadable.
    """
    layers = None if per_layer else ()
    return mask_effects.mask_effects(
        _decoder(model), _mask_ids(model), parts, layers=layers, on_pass=_on_pass
    )


@_one_key
@st.cache_resource(max_entries=64, show_spinner=False)
def mask_kept(parts: mask_effects.MaskParts, model: str = SMOLLM2) -> float:
    """The share of :data:`MASK_TEXT`'s causal cells the composed mask keeps (1.0: the parts
    cut nothing, so there is nothing to measure)."""
    return mask_effects.kept_share(parts, len(_mask_ids(model)))


def mask_parts(window: int, sinks: int, prefix: int, stride: int) -> mask_effects.MaskParts:
    """The composer's parts (0 = off).

    Raises:
        ValueError: for a negative value or a window or stride of 1.
    """
    return mask_effects.MaskParts(window=window, sinks=sinks, prefix=prefix, stride=stride)
