"""What a head writes, head by head: one head's attention row from the last position beside
its write read as tokens, and every head's OV copying score beside Heads at work's census
labels (cached calls of :mod:`attention_core.experiments.logit_lens`, on the model
:mod:`dashboard.data.writes` reads). Layer and head indices are 0-based.

Shapes: N layers, H query heads, L prompt tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attention_core.experiments import logit_lens as lens
from attention_core.experiments import ov_copying
from dashboard.data.decoder import SMOLLM2, token_labels
from dashboard.data.heads import HEADS_COPY_DEFAULT, _one_key, copy_census
from dashboard.data.tables import readonly
from dashboard.data.writes import _float_decoder, _ids, _token_text

WRITE_TOKENS = 8
"""Tokens on each side of a head's write."""
COPY_SEED = 0
"""The seed of the copy test whose census labels the copying grid (Heads at work's default)."""


@dataclass(frozen=True)
class HeadWrite:
    """One head at the prompt's last position: where it looks and what it writes.

    Attributes:
        layer, head: the head. labels: the L tokens' axis labels. texts: the L tokens as
            the page writes a token.
        row: (L,) float64 its attention weights from the last position (sums to 1).
        top, bottom: the :data:`WRITE_TOKENS` tokens its write pushes up most and down most.
        top_values, bottom_values: (k,) float64 their logits from the write alone.
    """

    layer: int
    head: int
    labels: tuple[str, ...]
    texts: tuple[str, ...]
    row: np.ndarray
    top: tuple[str, ...]
    top_values: np.ndarray
    bottom: tuple[str, ...]
    bottom_values: np.ndarray


@_one_key
@st.cache_resource(max_entries=4, show_spinner=False)
def _last_rows(text: str, model: str = SMOLLM2) -> np.ndarray:
    """(N, H, L) every head's attention row at the last position, from one forward pass."""
    decoder = _float_decoder(model)
    _, ids, _ = _ids(text, model)
    with torch.inference_mode():
        out = decoder(torch.tensor([ids]), need_weights=True)
    rows = torch.stack([a[0, :, -1] for a in out.attentions])  # N × (H, L) -> (N, H, L)
    return readonly(rows.double().numpy())


@_one_key
@st.cache_resource(max_entries=32, show_spinner=False)
def head_write(text: str, layer: int, head: int, model: str = SMOLLM2) -> HeadWrite:
    """The head's attention row and the tokens of its write
    (:func:`attention_core.experiments.logit_lens.head_write_tokens`) at the last position.

    Raises:
        ValueError: as :func:`lens_grid`, and naming a layer or head out of range.
    """
    decoder = _float_decoder(model)
    tokens, ids, _ = _ids(text, model)
    written = lens.head_write_tokens(decoder, ids, layer, head, k=WRITE_TOKENS)
    return HeadWrite(
        layer=written.layer,
        head=written.head,
        labels=tuple(token_labels(tokens, spelling=decoder.token_spelling)),
        texts=tuple(_token_text(decoder, i) for i in ids),
        row=readonly(_last_rows(text, model)[written.layer, written.head].copy()),
        top=tuple(_token_text(decoder, i) for i in written.top),
        top_values=written.top_values,
        bottom=tuple(_token_text(decoder, i) for i in written.bottom),
        bottom_values=written.bottom_values,
    )


def write_table(written: HeadWrite) -> pd.DataFrame:
    """The write's tokens, pushed up then down: ``token``, ``value``, ``side`` ("up"/"down")."""
    return pd.DataFrame(
        {
            "token": [*written.top, *written.bottom[::-1]],
            "value": np.concatenate([written.top_values, written.bottom_values[::-1]]),
            "side": ["up"] * len(written.top) + ["down"] * len(written.bottom),
        }
    )


def attention_row_table(written: HeadWrite) -> pd.DataFrame:
    """The head's attention row: ``token`` (label), ``weight``."""
    return pd.DataFrame({"token": list(written.labels), "weight": written.row})


@st.cache_resource(max_entries=4, show_spinner=False)
def copying_scores(model: str = SMOLLM2) -> np.ndarray:
    """(N, H) float64 every head's OV copying score
    (:func:`attention_core.experiments.ov_copying.ov_copying_scores`), once per model.

    Raises:
        ValueError: for a model not listed, not loadable or with 4-bit weights.
    """
    return readonly(ov_copying.ov_copying_scores(_float_decoder(model)).numpy())


def census_labels(model: str = SMOLLM2) -> np.ndarray:
    """(N, H) Heads at work's census labels on its default copy test."""
    return np.asarray(copy_census(HEADS_COPY_DEFAULT, COPY_SEED, model).labels)


def head_table(values: np.ndarray, labels: np.ndarray) -> pd.DataFrame:
    """One row per head, as the layers × heads grid reads it: ``layer``, ``head``, ``score``
    (``values``, NaN as 0), ``label``."""
    layers, count = values.shape
    return pd.DataFrame(
        {
            "layer": np.repeat(np.arange(layers), count),
            "head": np.tile(np.arange(count), layers),
            "score": np.nan_to_num(values.ravel()),
            "label": labels.ravel(),
        }
    )


def copying_by_label(scores: np.ndarray, labels: np.ndarray) -> pd.DataFrame:
    """The copying score's mean and the share of heads above 0 per census label, and over
    every head (label ``"all"``): ``label``, ``heads``, ``mean``, ``copying`` (share > 0)."""
    rows = []
    for name in [*dict.fromkeys(labels.ravel().tolist()), "all"]:
        picked = scores if name == "all" else scores[labels == name]
        picked = picked[np.isfinite(picked)]
        rows.append((name, picked.size, float(picked.mean()), float((picked > 0).mean())))
    return pd.DataFrame(rows, columns=["label", "heads", "mean", "copying"])
