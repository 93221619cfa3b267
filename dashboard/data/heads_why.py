"""Heads at work, "Why this head looks there": one cell of a head's map on the copy test's
sequence, its pre-softmax score split into the parts of the model that made it
(:mod:`attention_core.experiments.score_parts`), and the row again with the top key-side part
turned off, predicted by the direct path and measured (:mod:`~attention_core.experiments.
score_without`).

The split needs float matrices: SmolLM2 runs on its bfloat16 twin
(:func:`~dashboard.data.heads.smollm2_float_decoder`), an own model as loaded; an own model
with 4-bit codes is refused (``ValueError``). The census that names the parts (and picks the
default head) is the page's own, :func:`~dashboard.data.heads.copy_census`. Layer, head and
positions are 0-based, as in the library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attention_core.experiments import head_ablation
from attention_core.experiments.score_parts import BIAS, key_contrast, score_parts
from attention_core.experiments.score_run import score_run
from attention_core.experiments.score_without import AttentionWithout, predicted_attention_without
from dashboard.data.decoder import SMOLLM2
from dashboard.data.heads import _float_decoder, _one_key, copy_census
from dashboard.data.tables import readonly
from dashboard.data.token_text import shown_token

WHY_TOP_TERMS = 8
"""Query part × key part terms the section lists, largest |value| first."""
WHY_TOP_PARTS = 10
"""Key-side parts the ranked bar shows, largest |contribution| first."""
WHY_TOP_REPAIR = 6
"""Parts whose share changed most (self-repair) shown after a part is turned off."""
_HEAD_PART = re.compile(r"L(\d+)H(\d+)")
_MLP_PART = re.compile(r"MLP(\d+)")


@dataclass(frozen=True)
class WhyCell:
    """One cell of a head's map, split into parts.

    Attributes:
        layer, head, query, key: the cell (0-based).
        score: the model's pre-softmax score q·k/√E of the cell.
        weight: the model's attention weight on ``key`` (from the same run).
        names: the n part names of the key-side contrast, largest contribution first.
        contributions: read-only (n,) what each key part adds to score(key) minus the mean
            score of the query's other keys, in the order of ``names``.
        difference: the model's score(key) − mean score of the other keys.
        others: how many other keys the query sees (``query``).
        terms: the :data:`WHY_TOP_TERMS` largest query part × key part terms, columns
            ``query_part``, ``key_part``, ``value``.
        parts: every part, columns ``part``, ``contrast``, ``key_side``, ``query_side``
            (the CSV export), in the order of ``names``.
    """

    layer: int
    head: int
    query: int
    key: int
    score: float
    weight: float
    names: tuple[str, ...]
    contributions: np.ndarray
    difference: float
    others: int
    terms: pd.DataFrame
    parts: pd.DataFrame

    @property
    def shares(self) -> np.ndarray:
        """(n,) each contribution as a share of their sum (the contrast the model computes)."""
        return self.contributions / self.contributions.sum()

    @property
    def top_part(self) -> str:
        """The key part that does most for this key and can be turned off (never the bias)."""
        return next(name for name in self.names if name != BIAS)


def part_head(name: str) -> tuple[int, int] | None:
    """``"L16H0"`` -> (16, 0); None for a part that is not a head."""
    found = _HEAD_PART.fullmatch(name)
    return None if found is None else (int(found[1]), int(found[2]))


def part_mlp(name: str) -> int | None:
    """``"MLP16"`` -> 16; None for a part that is not an MLP."""
    found = _MLP_PART.fullmatch(name)
    return None if found is None else int(found[1])


def strongest_induction_head(length: int, seed: int, model: str = SMOLLM2) -> tuple[int, int]:
    """The head with the highest induction score in the census of the copy sequence.

    Args:
        length, seed: the copy test's sequence. model: the model's listed name.

    Returns:
        (layer, head), 0-based.

    Raises:
        ValueError: for a length or seed out of range, or a model not listed.
    """
    scores = copy_census(length, seed, model).scores["induction"]
    return head_ablation.ranked_heads(scores, 1)[0]


def copy_ids(length: int, seed: int, model: str = SMOLLM2) -> tuple[int, ...]:
    """The copy test's token ids (BOS, ``length`` random tokens, the same again), as the
    page's census ran on them: 1 + 2 · length ids.

    Raises:
        ValueError: as :func:`strongest_induction_head`.
    """
    return tuple(int(i) for i in copy_census(length, seed, model).input_ids)


def default_query(length: int) -> int:
    """The "why" query a copy sequence of ``length`` starts at: the middle of the second copy
    (position ``length + ceil(length / 2)``)."""
    return length + (length + 1) // 2


def induction_key(query: int, length: int) -> int:
    """Where an induction head should look from ``query`` on the copy sequence: the position
    after the earlier occurrence of the query's token (``query - length + 1``), or the query
    itself in the first copy (its token has not occurred before)."""
    return query - length + 1 if query > length else query


@_one_key
@st.cache_resource(max_entries=16, show_spinner=False)
def copy_tokens(length: int, seed: int, model: str = SMOLLM2) -> tuple[str, ...]:
    """The copy sequence's tokens as text (a space as ␣), one per position.

    Raises:
        ValueError: as :func:`strongest_induction_head`.
    """
    decoder = _float_decoder(model)
    ids = copy_ids(length, seed, model)
    return tuple(shown_token(decoder.tokenizer.id_to_token(i), decoder.token_spelling) for i in ids)


def _terms(names: tuple[str, ...], matrix: np.ndarray) -> pd.DataFrame:
    """The :data:`WHY_TOP_TERMS` largest |terms| of an (n, n) query × key matrix."""
    order = np.argsort(-np.abs(matrix), axis=None, kind="stable")[:WHY_TOP_TERMS]
    rows, cols = np.unravel_index(order, matrix.shape)
    return pd.DataFrame(
        {
            "query_part": [names[i] for i in rows],
            "key_part": [names[j] for j in cols],
            "value": matrix[rows, cols],
        }
    )


@_one_key
@st.cache_resource(max_entries=64, show_spinner=False)
def why_cell(
    ids: tuple[int, ...], layer: int, head: int, query: int, key: int, model: str = SMOLLM2
) -> WhyCell:
    """Split the score of (layer, head) from ``query`` to ``key`` on ``ids`` into parts: the
    (query part × key part) terms and the key-side contrast (what makes this key win over
    the query's other keys).

    Args:
        ids: the L token ids. layer, head: 0-based. query: 1 .. L − 1. key: 0 .. query.
        model: the model's listed name (SmolLM2 runs on its bfloat16 twin).

    Returns:
        :class:`WhyCell` (one cached forward pass per ids, then this cell only).

    Raises:
        ValueError: for an own model with 4-bit weights, a cell out of range, a key after
            the query or query 0 (no other key).
    """
    decoder = _float_decoder(model)
    cell = {"layer": layer, "head": head, "query": query, "key": key}
    split = score_parts(decoder, ids, **cell)
    contrast = key_contrast(decoder, ids, **cell)
    with torch.inference_mode():
        weight = float(score_run(decoder, ids).weights[layer, head, query, key])
    position = {name: i for i, name in enumerate(split.names)}
    at = [position[name] for name in contrast.names]
    parts = pd.DataFrame(
        {
            "part": contrast.names,
            "contrast": contrast.contributions,
            "key_side": split.key_sums[at],
            "query_side": split.query_sums[at],
        }
    )
    return WhyCell(
        **{name: getattr(split, name) for name in cell},  # the cell as score_parts checked it
        score=split.score,
        weight=weight,
        names=contrast.names,
        contributions=readonly(np.array(contrast.contributions)),
        difference=contrast.difference,
        others=split.query,
        terms=_terms(split.names, split.matrix),
        parts=parts,
    )


@_one_key
@st.cache_resource(max_entries=16, show_spinner=False)
def why_without(
    ids: tuple[int, ...], layer: int, head: int, query: int, part: str, model: str = SMOLLM2
) -> AttentionWithout:
    """The attention row of (layer, head) at ``query`` with ``part`` turned off: predicted
    by the direct path and measured by one more forward pass, and the parts that changed
    (:func:`~attention_core.experiments.score_without.predicted_attention_without`).

    Args:
        ids, layer, head, query, model: as :func:`why_cell`. part: a part of the cell other
            than the bias (``"L16H0"``, ``"MLP3"``, ``"emb"``).

    Returns:
        The library's :class:`AttentionWithout` (read-only rows over keys 0 .. query).

    Raises:
        ValueError: as :func:`why_cell`, and for a part not in the cell.
    """
    return predicted_attention_without(
        _float_decoder(model), ids, layer=layer, head=head, query=query, part=part
    )


def repair_table(without: AttentionWithout) -> pd.DataFrame:
    """The :data:`WHY_TOP_REPAIR` parts whose share of the row's scores changed most when
    the part was turned off: columns ``part``, ``change`` (signed, largest |change| first)."""
    top = without.repair[:WHY_TOP_REPAIR]
    return pd.DataFrame({"part": [n for n, _ in top], "change": [c for _, c in top]})
