"""Heads at work in an encoder (e5, MiniLM): a census whose scores make sense when every
token sees every other, and what turning heads off does to the sentence.

* :func:`encoder_census`: per head, from one forward pass with weights, the scores of
  :data:`ENCODER_SCORES` (:func:`~attention_core.experiments.heads.pattern_scores`' previous
  token, first token, self, local, entropy and mean distance, plus ``next_token`` and, with
  ``link``, the pronoun → antecedent weight of the Real model page,
  :func:`~attention_core.pretrained.probe.link_weights`), and a label per head
  (:func:`encoder_labels`).
* :func:`ablation_effect`: zero-ablate heads (the encoder's ``ablate=``) and measure the
  cosine similarity of the mean-pooled sentence embedding with and without them, and the
  link weight before and after.

An encoder predicts no next token, so there is no copy loss here: the embedding's cosine is
what a retrieval model would lose. Indices are 0-based. Shapes: N layers, H heads, L tokens,
D hidden size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import torch

from attention_core.experiments.heads import (
    PREVIOUS_THRESHOLD,
    HeadCensus,
    as_ids,
    label_by_rules,
    pattern_rules,
    pattern_scores,
    readonly,
)
from attention_core.pretrained.probe import link_weights

NEXT_THRESHOLD = PREVIOUS_THRESHOLD
ENCODER_SCORES = (
    "previous_token",
    "next_token",
    "sink",
    "self",
    "local",
    "entropy",
    "mean_distance",
)
"""The encoder census's scores (plus ``"link"`` when a link is given)."""
ENCODER_LABELS = (
    "previous-token",
    "next-token",
    "self",
    "first-token",
    "local",
    "broad",
    "mixed",
)


@dataclass(frozen=True)
class AblationEffect:
    """What turning heads off does to one sentence in an encoder.

    Attributes:
        cosine: cosine similarity of the mean-pooled sentence embeddings, heads on against
            heads off (1 = nothing lost).
        link_before, link_after: the link weight (query tokens → key tokens, averaged over
            the heads of ``link_heads``) with every head on and with the heads off; NaN
            without a link.
    """

    cosine: float
    link_before: float
    link_after: float


def next_token_score(weights: torch.Tensor) -> np.ndarray:
    """(N, H) mean over queries i <= L − 2 of w[i, i+1] (NaN for L = 1).

    Args:
        weights: (N, H, L, L) attention weights.

    Returns:
        float64 (N, H) array.
    """
    if weights.shape[-1] < 2:
        return np.full(weights.shape[:2], np.nan)
    return weights.diagonal(1, -2, -1).mean(-1).double().numpy()  # (N, H, L-1) -> (N, H)


def encoder_labels(scores: Mapping[str, np.ndarray], length: int) -> np.ndarray:
    """One label per head of an encoder; the first rule that holds names it.

    1. ``previous-token``: previous_token >= 0.5; 2. ``next-token``: next_token >= 0.5;
    3. ``self``: self >= 0.5; 4. ``first-token``: sink >= 0.5; 5. ``local``: local >= 0.7;
    6. ``broad``: entropy >= 0.7 × ln L (a uniform row over all L tokens); 7. ``mixed``.

    Args:
        scores: at least :data:`ENCODER_SCORES`, (N, H) each. length: L.

    Returns:
        (N, H) array of strings from :data:`ENCODER_LABELS`.
    """
    rules = (
        ("previous-token", scores["previous_token"] >= PREVIOUS_THRESHOLD),
        ("next-token", scores["next_token"] >= NEXT_THRESHOLD),
        *pattern_rules(scores, length, causal=False),
    )
    return label_by_rules(rules, ENCODER_LABELS[-1])


def encoder_maps(model, input_ids) -> torch.Tensor:
    """(N, H, L, L) float32 weights of one forward pass of an encoder."""
    ids = as_ids(input_ids)  # (1, L)
    with torch.no_grad():
        attentions = model(ids, need_weights=True).attentions  # N × (1, H, L, L)
    return torch.cat(attentions, dim=0).float()  # (N, H, L, L)


def encoder_census(
    model, input_ids, *, link: tuple[Sequence[int], Sequence[int]] | None = None
) -> HeadCensus:
    """Score and label every head of an encoder from one forward pass with weights.

    Scores, each (N, H): ``previous_token``, ``sink`` (weight on token 0, ``<s>`` or
    ``[CLS]``), ``self``, ``local`` (within 3 positions either side) — means over the
    queries i >= 1, as :func:`~attention_core.experiments.heads.pattern_scores`;
    ``next_token``: mean over i <= L − 2 of w[i, i+1]; ``entropy`` and ``mean_distance``
    over all rows; with ``link``, ``link``: the weight the query tokens put on the key tokens.

    Args:
        model: an :class:`~attention_core.pretrained.bert.Encoder` (e5 or MiniLM).
        input_ids: the L token ids (specials included), within the model's context.
        link: optional (query token indices, key token indices).

    Returns:
        :class:`~attention_core.experiments.heads.HeadCensus` with :func:`encoder_labels`.

    Raises:
        ValueError: for bad ids or ``link`` indices.
    """
    ids = as_ids(input_ids)  # (1, L)
    weights = encoder_maps(model, ids)  # (N, H, L, L)
    id_list = ids[0].tolist()
    found = pattern_scores(weights, id_list)
    scores = {name: found[name] for name in ENCODER_SCORES if name in found}
    scores["next_token"] = next_token_score(weights)
    if link is not None:
        scores["link"] = link_weights(weights, *link).double().numpy()  # (N, H)
    labels = encoder_labels(scores, len(id_list))
    frozen = {name: readonly(scores[name]) for name in (*ENCODER_SCORES, "link") if name in scores}
    return HeadCensus(MappingProxyType(frozen), readonly(labels), tuple(id_list))


def ablation_effect(
    model,
    input_ids,
    ablate,
    *,
    link: tuple[Sequence[int], Sequence[int]] | None = None,
    link_heads: Sequence[tuple[int, int]] = (),
) -> AblationEffect:
    """Zero-ablate ``ablate`` in an encoder; what the sentence keeps.

    Args:
        model: an Encoder. input_ids: the L token ids.
        ablate: 0-based (layer, head) pairs (may be empty: cosine 1).
        link: optional (query token indices, key token indices) of the link weight.
        link_heads: the heads whose link weights are averaged (default: every head).

    Returns:
        :class:`AblationEffect`: two forward passes with weights (on, off).

    Raises:
        ValueError: for a bad pair (named), bad ids or ``link`` indices.
    """
    ids = as_ids(input_ids)  # (1, L)
    with torch.no_grad():
        plain = model(ids, need_weights=link is not None)
        off = model(ids, need_weights=link is not None, ablate=ablate)
    first = plain.hidden_states[0].mean(0).double()  # (D,)
    second = off.hidden_states[0].mean(0).double()  # (D,)
    cosine = float(torch.nn.functional.cosine_similarity(first, second, dim=0))
    if link is None:
        return AblationEffect(cosine, float("nan"), float("nan"))

    def linked(out) -> float:
        weights = link_weights(torch.cat(out.attentions, dim=0).float(), *link)  # (N, H)
        if not link_heads:
            return float(weights.mean())
        return float(np.mean([float(weights[pair]) for pair in link_heads]))

    return AblationEffect(cosine, linked(plain), linked(off))
