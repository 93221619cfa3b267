"""Cached calls behind Heads at work's query–key map: one head's queries and keys
of the preset sentences (English and Chinese on e5, English on SmolLM2) plus the learner's
own, normalised as AttentionViz does, projected with PCA (live) or t-SNE (on request), the
trust figure of each picture, and on e5 the translation pairs' distances
(:mod:`attention_core.experiments.qk_map`).

The models are the pages' own loaded copies (:func:`~dashboard.data.model.e5_encoder`,
:func:`~dashboard.data.decoder.smollm2_decoder`): nothing is loaded twice. e5 reads each
sentence as it is (no ``"passage: "`` prefix), so that the translation pairs are found by
their character spans.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from attention_core.experiments import qk_map, qk_projection

QK_MODELS = ("e5", "smollm2")
"""The models the map runs on."""
QK_METHODS = qk_map.METHODS
QK_COLOURS = ("kind", "position", "language")
OWN_MAX_CHARS = 200
"""The learner's own sentence is cut to this many characters."""
QK_SHAPES = {"e5": (12, 12), "smollm2": (30, 9)}
"""(layers, heads) of each model, for the controls (checked against the model on use)."""


@dataclass(frozen=True)
class QKMapData:
    """One head's map, ready to draw.

    Attributes:
        model, layer, head, method: what was asked.
        sentences: the texts, presets first, then the learner's own (if any).
        coords: (P, 2) float64 points of the projection; P = 2·T, queries then keys.
        is_key, sentence, position: (P,) per point. tokens, languages: (P,) strings.
        weights: per sentence, the model's (L_i, L_i) attention weights of the head.
        explained: PCA's variance share per axis (NaN for t-SNE).
        spearman: the trust figure of this picture (2-D distance against −q·k).
        pairs: the (query, key) pairs it was computed over.
        row_change: the normalisation's largest attention-row change (≤ 1e-6).
        translation: on e5, the translation pairs' distances in this picture, else None.
    """

    model: str
    layer: int
    head: int
    method: str
    sentences: tuple[str, ...]
    coords: np.ndarray
    is_key: np.ndarray
    sentence: np.ndarray
    position: np.ndarray
    tokens: tuple[str, ...]
    languages: tuple[str, ...]
    weights: tuple[np.ndarray, ...]
    explained: tuple[float, float]
    spearman: float
    pairs: int
    row_change: float
    translation: qk_projection.TranslationDistances | None


def _frozen(array: np.ndarray) -> np.ndarray:
    array = np.array(array)
    array.setflags(write=False)
    return array


def qk_sentences(model: str, own: str = "") -> tuple[str, ...]:
    """The preset sentences of ``model``, then ``own`` (cut to :data:`OWN_MAX_CHARS`) when it
    is not blank.

    Raises:
        ValueError: for an unknown model.
    """
    if model not in QK_MODELS:
        raise ValueError(f"model must be one of {list(QK_MODELS)}, got {model!r}")
    presets = qk_map.E5_SENTENCES if model == "e5" else qk_map.DECODER_SENTENCES
    own = (own or "").strip()[:OWN_MAX_CHARS]
    return (*presets, own) if own else tuple(presets)


def _shown_tokens(model: str, tokens: tuple[str, ...]) -> tuple[str, ...]:
    if model == "e5":
        return tuple(tok.replace("▁", " ").strip() or tok for tok in tokens)
    from dashboard.data.token_text import token_labels

    return tuple(token_labels(tokens))


@st.cache_resource(max_entries=16, show_spinner=False)
def qk_head(model: str, sentences: tuple[str, ...], layer: int, head: int):
    """One head's (HeadQK, NormalizedQK, QKPoints) on the model's loaded copy.

    Raises:
        ValueError: for an unknown model, a blank sentence, a head out of range or too many
            tokens. ModelNotInstalledError: when the model's package is missing.
    """
    if model == "e5":
        from dashboard.data.model import e5_encoder

        qk = qk_map.encoder_head_qk(e5_encoder(), sentences, layer, head)
    elif model == "smollm2":
        from dashboard.data.decoder import smollm2_decoder

        qk = qk_map.decoder_head_qk(smollm2_decoder(), sentences, layer, head)
    else:
        raise ValueError(f"model must be one of {list(QK_MODELS)}, got {model!r}")
    normalized = qk_map.normalize_qk(qk)
    return qk, normalized, qk_map.joint_points(qk, normalized)


@st.cache_resource(max_entries=32, show_spinner=False)
def qk_map_data(
    model: str, sentences: tuple[str, ...], layer: int, head: int, method: str
) -> QKMapData:
    """The map of one head by one method, its trust figure and (e5) the translation pairs.

    Args:
        model: one of :data:`QK_MODELS`. sentences: from :func:`qk_sentences`.
        layer, head: 0-based. method: ``"pca"`` or ``"tsne"``.

    Returns:
        A :class:`QKMapData`.

    Raises:
        ValueError: for an unknown method, or as :func:`qk_head`.
    """
    if method not in QK_METHODS:
        raise ValueError(f"method must be one of {list(QK_METHODS)}, got {method!r}")
    import torch

    qk, normalized, points = qk_head(model, sentences, layer, head)
    if method == "pca":
        projection = qk_projection.project_pca(points.points)
    else:
        projection = qk_projection.project_tsne(points.points, threads=torch.get_num_threads())
    trust = qk_projection.map_trust(qk, projection.coords)
    translation = None
    if model == "e5":
        translation = qk_projection.translation_distances(qk, projection.coords)
    return QKMapData(
        model=model,
        layer=layer,
        head=head,
        method=method,
        sentences=sentences,
        coords=_frozen(projection.coords),
        is_key=_frozen(points.is_key),
        sentence=_frozen(points.sentence),
        position=_frozen(points.position),
        tokens=_shown_tokens(model, points.tokens),
        languages=points.languages,
        weights=tuple(_frozen(w) for w in qk.weights),
        explained=projection.explained,
        spearman=trust.spearman,
        pairs=trust.pairs,
        row_change=normalized.row_change,
        translation=translation,
    )


def qk_map_table(found: QKMapData, kind_names: tuple[str, str]) -> pd.DataFrame:
    """One row per point for :func:`dashboard.charts.qk_map.qk_map_chart`.

    Args:
        found: a :class:`QKMapData`. kind_names: the translated ("query", "key").

    Returns:
        Columns ``index``, ``x``, ``y``, ``kind``, ``position``, ``language``, ``token``,
        ``sentence``.
    """
    return pd.DataFrame(
        {
            "index": np.arange(len(found.tokens)),
            "x": found.coords[:, 0],
            "y": found.coords[:, 1],
            "kind": np.where(found.is_key, kind_names[1], kind_names[0]),
            "position": found.position,
            "language": list(found.languages),
            "token": list(found.tokens),
            "sentence": [found.sentences[i] for i in found.sentence],
        }
    )


def attention_row(found: QKMapData, index: int) -> pd.DataFrame:
    """The attention row of a clicked point: for a query, the weights it gives the keys of its
    sentence; for a key, the weights every query of its sentence gives it (a column).

    Args:
        found: a :class:`QKMapData`. index: the point's row.

    Returns:
        Columns ``position``, ``token``, ``weight``.

    Raises:
        ValueError: for an index out of range.
    """
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
        raise ValueError(f"index must be a whole number, got {index!r}")
    if not 0 <= index < len(found.tokens):
        raise ValueError(f"index must lie in [0, {len(found.tokens)}), got {index}")
    sent, pos = int(found.sentence[index]), int(found.position[index])
    weights = found.weights[sent]  # (L, L)
    values = weights[:, pos] if found.is_key[index] else weights[pos]  # (L,)
    rows = np.flatnonzero((found.sentence == sent) & ~found.is_key)  # its sentence's queries
    return pd.DataFrame(
        {
            "position": np.arange(len(values)),
            "token": [found.tokens[i] for i in rows],
            "weight": values,
        }
    )
