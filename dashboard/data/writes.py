"""What a head writes, on SmolLM2 or a float GGUF model of the server's own: the logit lens
and the answer's logit difference split into every part's direct share (cached calls of
:mod:`attention_core.experiments.logit_lens`); one head's write and the copying scores are
:mod:`~dashboard.data.writes_heads`'.

The lens and the attributions read the stream unrounded, so they run on the model that
attribution differentiates (:func:`~dashboard.data.heads.smollm2_float_decoder`, SmolLM2's
bfloat16 twin, or an own model with float weights: one with 4-bit codes is refused). Layer
and head indices are 0-based.

Shapes: N layers, H query heads, L prompt tokens, P positions shown, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attention_core import pretrained
from attention_core.experiments import logit_lens as lens
from attention_core.validation import check_int
from dashboard.data import own_models
from dashboard.data.decoder import (
    DECODER_PRESETS,
    SMOLLM2,
    prompt_ids,
    shown_token,
    token_labels,
)
from dashboard.data.heads import HEADS_PRESETS, _one_key, smollm2_float_decoder
from dashboard.data.tables import readonly

WRITES_PRESETS = {
    "repeat": HEADS_PRESETS["repeat"],
    "capital": DECODER_PRESETS["capital"],
    "zh_repeat": HEADS_PRESETS["zh_repeat"],
}
LENS_POSITIONS_MAX, LENS_POSITIONS_DEFAULT = 16, 6
"""The lens grid's columns: the prompt's last positions (6 MB of log-probabilities each;
six by default: the grid in 0.28 s on 2 cores, ``python -m bench.logit_lens``)."""
LENS_TOP = 5
"""Tokens named in each cell's hover."""
ECHO_SHARE = 0.5
"""A lens row whose top token is the input token itself at more than this share of the
positions shown is labelled an echo (a tied embedding read back: row 0 of SmolLM2)."""
ANSWER_CHOICES = 10
"""The model's most likely next tokens offered as the answer and the alternative."""
PARTS_SHOWN = 12
"""Parts in the bar of the largest shares."""
EMBED = lens.EMBED
MLP = "MLP"


def _float_decoder(model: str) -> pretrained.Decoder:
    """The model the lens reads: SmolLM2's bfloat16 twin, or the own model as loaded (the
    library refuses one with 4-bit codes, naming its weights)."""
    if model == SMOLLM2:
        return smollm2_float_decoder()
    return own_models.loaded_model(model).decoder


def _token_text(decoder: pretrained.Decoder, token: int) -> str:
    """One vocabulary entry as the pages write tokens (␣ for a space, hex for part of a
    character)."""
    return shown_token(decoder.tokenizer.id_to_token(int(token)), decoder.token_spelling)


def _ids(text: str, model: str) -> tuple[tuple[str, ...], tuple[int, ...], bool]:
    """The prompt's tokens and ids (cut at the decoder page's limit) and whether it was cut.

    Raises:
        ValueError: for a bad or blank text, a model not listed, or a prompt with no tokens.
    """
    tokens, ids, cut = prompt_ids(text, model)
    if not ids:
        raise ValueError(f"the prompt {text!r} has no tokens")
    return tokens, ids, cut


@dataclass(frozen=True)
class LensGrid:
    """The logit lens of a prompt's last positions, reduced to what the grid draws.

    Attributes:
        labels: the P shown positions' axis labels (``"<index> <token>"``).
        truncated: True when the prompt was cut at the decoder page's token limit.
        length: L, the prompt's tokens (the run reads them all).
        top_ids: (N + 1, P, k) int64 the k most likely next tokens of each row and position.
        top_probs: (N + 1, P, k) float64 their probabilities.
        top_text: (N + 1, P, k) their text, as an object array.
        echo: (N + 1,) bool, rows labelled an echo of the input (:data:`ECHO_SHARE`).
        frozen: the final norm's scale frozen at the last layer's.
    """

    labels: tuple[str, ...]
    truncated: bool
    length: int
    top_ids: np.ndarray
    top_probs: np.ndarray
    top_text: np.ndarray
    echo: np.ndarray
    frozen: bool


@_one_key
@st.cache_resource(max_entries=8, show_spinner=False)
def lens_grid(
    text: str, frozen: bool, positions: int = LENS_POSITIONS_DEFAULT, model: str = SMOLLM2
) -> LensGrid:
    """The lens of ``text``'s last ``positions`` positions
    (:func:`attention_core.experiments.logit_lens.logit_lens`), every row's top
    :data:`LENS_TOP` tokens kept and the full log-probabilities let go.

    Raises:
        ValueError: for a bad text or positions, or a model that is not listed, not loadable
            or holds 4-bit weights.
    """
    positions = check_int("positions", positions, low=1, high=LENS_POSITIONS_MAX)
    decoder = _float_decoder(model)
    tokens, ids, cut = _ids(text, model)
    kept = min(positions, len(ids))
    log_probs = lens.logit_lens(decoder, ids, frozen_scale=frozen, positions=kept)  # (N+1, P, V)
    top = torch.topk(log_probs, LENS_TOP, dim=-1)  # (N + 1, P, k)
    del log_probs
    top_ids = top.indices.numpy()
    inputs = np.asarray(ids[-kept:])  # (P,) the token each position reads
    names = {int(i): _token_text(decoder, i) for i in np.unique(top_ids)}
    top_text = np.vectorize(names.__getitem__, otypes=[object])(top_ids)
    return LensGrid(
        labels=tuple(token_labels(tokens, spelling=decoder.token_spelling)[-kept:]),
        truncated=cut,
        length=len(ids),
        top_ids=readonly(top_ids.copy()),
        top_probs=readonly(top.values.double().exp().numpy()),
        top_text=readonly(top_text),
        echo=readonly((top_ids[..., 0] == inputs).mean(axis=1) > ECHO_SHARE),
        frozen=frozen,
    )


def lens_table(grid: LensGrid) -> pd.DataFrame:
    """One row per (row, position) of the lens: ``layer`` (0 the embedding, l after layer l),
    ``position`` (its label), ``token`` (the top token), ``prob``, ``top`` (the
    :data:`LENS_TOP` tokens with their probabilities, for the hover) and ``echo``."""
    rows, count, _ = grid.top_ids.shape
    tops = [
        " · ".join(f"{text} {prob:.2f}" for text, prob in zip(texts, probs, strict=True))
        for texts, probs in zip(
            grid.top_text.reshape(-1, LENS_TOP), grid.top_probs.reshape(-1, LENS_TOP), strict=True
        )
    ]
    return pd.DataFrame(
        {
            "layer": np.repeat(np.arange(rows), count),
            "position": np.tile(np.asarray(grid.labels, dtype=object), rows),
            "token": grid.top_text[..., 0].ravel(),
            "prob": grid.top_probs[..., 0].ravel(),
            "top": tops,
            "echo": np.repeat(grid.echo, count),
        }
    )


def settled_layer(grid: LensGrid) -> int:
    """The lowest layer from which the model's own next token at the prompt's last position
    is the top token of every row above (-1: from the embedding on; N − 1: the output only).
    """
    column = grid.top_ids[:, -1, 0]  # (N + 1,) each row's top token at the last position
    rows = len(column)
    settled = rows - 1
    while settled > 0 and column[settled - 1] == column[-1]:
        settled -= 1
    return settled - 1  # row r is the stream after layer r − 1


def early_rows(layers: int) -> slice:
    """The lens rows called "early" on the page: after layers 1 to N/3 (row 0, the embedding,
    left out: it is an echo with either scale)."""
    return slice(1, max(2, layers // 3 + 1))


@dataclass(frozen=True)
class NextTokens:
    """The model's most likely next tokens after the prompt (its own output).

    Attributes:
        ids: (k,) int64 token ids, most likely first. texts: their text. probs: (k,) float64.
    """

    ids: tuple[int, ...]
    texts: tuple[str, ...]
    probs: np.ndarray


@_one_key
@st.cache_resource(max_entries=16, show_spinner=False)
def next_tokens(text: str, model: str = SMOLLM2) -> NextTokens:
    """The :data:`ANSWER_CHOICES` most likely next tokens of ``text``.

    Raises:
        ValueError: as :func:`lens_grid`.
    """
    decoder = _float_decoder(model)
    _, ids, _ = _ids(text, model)
    logits = lens.lens_run(decoder, ids).logits[-1].double()  # (V,) the model's own
    top = torch.topk(torch.softmax(logits, dim=-1), ANSWER_CHOICES)
    chosen = tuple(int(i) for i in top.indices)
    return NextTokens(
        ids=chosen,
        texts=tuple(_token_text(decoder, i) for i in chosen),
        probs=readonly(top.values.numpy().copy()),
    )


@dataclass(frozen=True)
class Attribution:
    """The last position's logit difference of two tokens, split into every part.

    Attributes:
        names: the P parts (``"embed"``, ``"L{l}H{h}"``, ``"L{l}MLP"``), in stream order.
        values: (P,) float64 each part's direct share.
        total: their sum.
        own: the model's own logits[answer] − logits[alternative], as it computes them.
        rounding: the step of the model's logits at those two values (bfloat16's with
            bfloat16 weights, float32's otherwise): ``total`` and ``own`` differ by about that.
        layers, heads: N and H.
    """

    names: tuple[str, ...]
    values: np.ndarray
    total: float
    own: float
    rounding: float
    layers: int
    heads: int


def _logit_step(value: float, dtype: torch.dtype) -> float:
    """The rounding step of ``dtype`` at ``value``: machine epsilon times its power of two."""
    exponent = math.floor(math.log2(abs(value))) if value else 0
    return torch.finfo(dtype).eps * 2.0**exponent


@_one_key
@st.cache_resource(max_entries=32, show_spinner=False)
def attribution(text: str, answer: int, alternative: int, model: str = SMOLLM2) -> Attribution:
    """Every part's direct share of logits[answer] − logits[alternative] at the prompt's last
    position (:func:`attention_core.experiments.logit_lens.direct_logit_attribution`).

    Raises:
        ValueError: as :func:`lens_grid`, and naming an answer or alternative that is not a
            token id, or the two the same.
    """
    decoder = _float_decoder(model)
    _, ids, _ = _ids(text, model)
    shares = lens.direct_logit_attribution(decoder, ids, answer, alternative)
    logits = lens.lens_run(decoder, ids).logits[-1]  # (V,) the model's own
    values = np.fromiter(shares.values(), dtype=np.float64, count=len(shares))
    pair = (float(logits[answer]), float(logits[alternative]))
    cfg = decoder.config
    return Attribution(
        names=tuple(shares),
        values=readonly(values),
        total=float(values.sum()),
        own=pair[0] - pair[1],
        rounding=max(_logit_step(v, lens.unembedding(decoder).dtype) for v in pair),
        layers=cfg.num_layers,
        heads=cfg.num_heads,
    )


def _part_kind(name: str) -> str:
    """``"embed"``, ``"head"`` or ``"mlp"``."""
    if name == EMBED:
        return "embed"
    return "mlp" if name.endswith(MLP) else "head"


def parts_table(shares: Attribution, count: int = PARTS_SHOWN) -> pd.DataFrame:
    """The ``count`` parts of largest share in size, largest first: ``part``, ``value``,
    ``kind``."""
    order = np.argsort(-np.abs(shares.values), kind="stable")[:count]
    names = [shares.names[i] for i in order]
    return pd.DataFrame(
        {
            "part": names,
            "value": shares.values[order],
            "kind": [_part_kind(name) for name in names],
        }
    )


def head_shares(shares: Attribution) -> np.ndarray:
    """(N, H) every head's share, from the stream-ordered values (each layer: H heads, then
    its MLP)."""
    per_layer = shares.values[1:].reshape(shares.layers, shares.heads + 1)  # (N, H + 1)
    return per_layer[:, : shares.heads]


def mlp_shares(shares: Attribution) -> np.ndarray:
    """(N,) every MLP's share."""
    return shares.values[1:].reshape(shares.layers, shares.heads + 1)[:, -1]
