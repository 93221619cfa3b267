"""Heads at work: what each head of a real model does.

* :func:`pattern_scores`: per head, scores of the patterns the tutorial names, from the
  attention weights of one forward pass.
* :func:`census`: those scores and a label per head from the rule in :func:`head_labels`.

What the model loses without a head (the copy test, ablations, attribution) is
:mod:`~attention_core.experiments.head_ablation`'s.

Layer and head indices are 0-based everywhere (layer 18 head 6 is the 19th layer's 7th
head). Scores are averaged over the query rows i >= 1 (row 0 of a causal map can only look
at itself), except entropy and mean distance, which are
:mod:`~attention_core.experiments.head_stats`'s (all rows).

Shapes: N layers, H heads, L tokens, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import torch

from attention_core.experiments.head_stats import head_entropy, mean_distance
from attention_core.pretrained.llama import Decoder
from attention_core.pretrained.probe import link_weights
from attention_core.validation import check_int

LOCAL_RADIUS = 3
"""``local`` counts the weight on keys within this many positions of the query."""
# The labelling rule (head_labels): the first test that passes names the head.
INDUCTION_THRESHOLD = 0.4
PREVIOUS_THRESHOLD = 0.5
SELF_THRESHOLD = 0.5
SINK_THRESHOLD = 0.5
LOCAL_THRESHOLD = 0.7
BROAD_THRESHOLD = 0.7
"""A head is ``broad`` when its entropy is at least this share of a uniform row's."""
LABELS = ("induction", "previous-token", "self", "first-token", "local", "broad", "mixed")
SCORE_NAMES = (
    "previous_token",
    "sink",
    "induction",
    "self",
    "local",
    "entropy",
    "mean_distance",
)


@dataclass(frozen=True)
class HeadCensus:
    """Every head's scores and label.

    Attributes:
        scores: name (see :data:`SCORE_NAMES`, plus ``"link"`` when asked) -> read-only
            float64 (N, H) array; ``induction`` is NaN everywhere when no token repeats.
        labels: read-only (N, H) array of strings from :data:`LABELS`.
        input_ids: the L token ids the census ran on.
    """

    scores: Mapping[str, np.ndarray]
    labels: np.ndarray
    input_ids: tuple[int, ...]


def readonly(array: np.ndarray) -> np.ndarray:
    """``array`` itself, made read-only (results handed to cached callers must not change).

    Args:
        array: any NumPy array.

    Returns:
        The same array, no longer writeable.
    """
    array.setflags(write=False)
    return array


def label_by_rules(rules: Sequence[tuple[str, np.ndarray]], default: str) -> np.ndarray:
    """A label per head: the first rule whose (N, H) mask holds, else ``default``.

    Args:
        rules: ``(label, mask)`` pairs in order of precedence, every mask (N, H) of bools.
        default: the label where no rule holds.

    Returns:
        (N, H) array of strings.
    """
    labels = np.full(rules[0][1].shape, default, dtype=object)  # (N, H)
    for name, holds in reversed(rules):  # earlier rules overwrite later ones
        labels[holds] = name
    return labels


def as_ids(input_ids) -> torch.Tensor:
    """Token ids as the (1, L) int64 tensor the models take.

    Args:
        input_ids: a sequence of ints, a 1-D array or tensor, or a (1, L) tensor.

    Returns:
        (1, L) int64 tensor.

    Raises:
        ValueError: for an empty input, a batch of more than one, or non-integers.
    """
    ids = torch.as_tensor(np.array(input_ids))  # a copy: the input may be read-only
    if ids.dim() == 2 and ids.shape[0] == 1:
        ids = ids[0]
    if ids.dim() != 1 or ids.numel() == 0 or ids.is_floating_point() or ids.dtype == torch.bool:
        raise ValueError(
            f"input_ids must be a non-empty sequence of token ids, got shape "
            f"{tuple(ids.shape)} of {ids.dtype}"
        )
    return ids.long()[None]  # (1, L)


def _maps(model, ids: torch.Tensor) -> torch.Tensor:
    """(N, H, L, L) float32 weights of one forward pass (decoder or encoder)."""
    with torch.inference_mode():
        attentions = model(ids, need_weights=True).attentions  # N × (1, H, L, L)
    return torch.cat(attentions, dim=0).float()  # (N, H, L, L)


def _induction(weights: torch.Tensor, ids: Sequence[int]) -> torch.Tensor:
    """(N, H) mean weight of each repeated token's query on the key after its most recent
    earlier occurrence; NaN when no token repeats."""
    last: dict[int, int] = {}
    queries, keys = [], []
    for i, token in enumerate(ids):
        if token in last:
            queries.append(i)
            keys.append(last[token] + 1)
        last[token] = i
    if not queries:
        return torch.full(weights.shape[:2], float("nan"))  # (N, H)
    return weights[:, :, queries, keys].mean(dim=-1)  # (N, H, q) -> (N, H)


def pattern_scores(weights: torch.Tensor, ids: Sequence[int]) -> dict[str, np.ndarray]:
    """The census scores of (N, H, L, L) maps (see :func:`census` for the definitions).

    Args:
        weights: (N, H, L, L) attention weights of one sequence. ids: its L token ids.

    Returns:
        dict from each name in :data:`SCORE_NAMES` to a float64 (N, H) array.

    Raises:
        ValueError: when the maps are not (N, H, L, L) with L = len(ids).
    """
    if weights.dim() != 4 or weights.shape[-2:] != (len(ids), len(ids)):
        raise ValueError(f"weights {tuple(weights.shape)} do not match {len(ids)} token ids")
    length = weights.shape[-1]
    nan = torch.full(weights.shape[:2], float("nan"))  # (N, H), for L = 1
    rows = weights[:, :, 1:]  # (N, H, L-1, L): the queries i >= 1
    offsets = torch.arange(length)[:, None] - torch.arange(length)[None, :]  # (L, L): i - j
    near = (offsets.abs() <= LOCAL_RADIUS)[1:].float()  # (L-1, L)
    has_rows = length > 1
    scores = {
        "previous_token": weights.diagonal(-1, -2, -1).mean(-1) if has_rows else nan,
        "sink": rows[..., 0].mean(-1) if has_rows else nan,
        "induction": _induction(weights, ids),
        "self": weights.diagonal(0, -2, -1)[..., 1:].mean(-1) if has_rows else nan,
        "local": (rows * near).sum(-1).mean(-1) if has_rows else nan,
    }
    result = {name: value.double().numpy() for name, value in scores.items()}
    result["entropy"] = head_entropy(weights.numpy())  # (N, H)
    result["mean_distance"] = mean_distance(weights.numpy())  # (N, H)
    return result


def uniform_entropy(length: int, causal: bool) -> float:
    """Mean row entropy (nats) of uniform attention: ln(i + 1) averaged over the queries of
    a causal map, ln L for a full one."""
    check_int("length", length, low=1)
    if not causal:
        return float(np.log(length))
    return float(np.log(np.arange(1, length + 1)).mean())


def pattern_rules(
    scores: Mapping[str, np.ndarray], length: int, causal: bool
) -> tuple[tuple[str, np.ndarray], ...]:
    """The ``(label, (N, H) mask)`` rules a decoder's and an encoder's heads share, in order
    of precedence: ``self``, ``first-token``, ``local``, ``broad`` (rules 3 to 6 of
    :func:`head_labels`); ``scores``, ``length`` and ``causal`` as there."""
    return (
        ("self", scores["self"] >= SELF_THRESHOLD),
        ("first-token", scores["sink"] >= SINK_THRESHOLD),
        ("local", scores["local"] >= LOCAL_THRESHOLD),
        ("broad", scores["entropy"] >= BROAD_THRESHOLD * uniform_entropy(length, causal)),
    )


def head_labels(scores: Mapping[str, np.ndarray], length: int, causal: bool) -> np.ndarray:
    """One label per head from its census scores; the first rule that holds names it.

    1. ``induction``: induction >= :data:`INDUCTION_THRESHOLD` (when some token repeats);
    2. ``previous-token``: previous_token >= :data:`PREVIOUS_THRESHOLD`;
    3. ``self``: self >= :data:`SELF_THRESHOLD`;
    4. ``first-token`` (the gallery's global pattern as an attention sink): sink >=
       :data:`SINK_THRESHOLD`;
    5. ``local``: local >= :data:`LOCAL_THRESHOLD`;
    6. ``broad``: entropy >= :data:`BROAD_THRESHOLD` × :func:`uniform_entropy`;
    7. ``mixed``: none of these.

    Args:
        scores: the census scores (at least :data:`SCORE_NAMES`), (N, H) each.
        length: L, the tokens the maps had. causal: whether the maps were causal.

    Returns:
        (N, H) array of strings from :data:`LABELS`.
    """
    rules = (
        ("induction", np.nan_to_num(scores["induction"], nan=0.0) >= INDUCTION_THRESHOLD),
        ("previous-token", scores["previous_token"] >= PREVIOUS_THRESHOLD),
        *pattern_rules(scores, length, causal),
    )
    return label_by_rules(rules, LABELS[-1])


def census(
    model, input_ids, *, link: tuple[Sequence[int], Sequence[int]] | None = None
) -> HeadCensus:
    """Score and label every head from one forward pass with weights.

    Scores, over query rows i >= 1 of each (L, L) map w:
    ``previous_token`` mean w[i, i−1]; ``sink`` mean w[i, 0]; ``self`` mean w[i, i];
    ``local`` mean Σ_{|i−j| <= 3} w[i, j]; ``induction``: for each query i whose token
    occurred earlier, w[i, j+1] with j its most recent earlier occurrence, averaged over those
    queries (NaN when no token repeats); ``entropy`` and ``mean_distance`` as
    :mod:`~attention_core.experiments.head_stats` (all rows); with ``link``, ``link``: the
    weight the query tokens put on the key tokens (the Real model page's pronoun →
    antecedent score, :func:`~attention_core.pretrained.probe.link_weights`).

    Args:
        model: a :class:`~attention_core.pretrained.llama.Decoder` or an encoder.
        input_ids: the L token ids (see :func:`as_ids`), within the model's context.
        link: optional (query token indices, key token indices).

    Returns:
        :class:`HeadCensus` with labels from :func:`head_labels`.

    Raises:
        ValueError: for bad ids or ``link`` indices, or a sequence the model cannot take.
    """
    ids = as_ids(input_ids)  # (1, L)
    weights = _maps(model, ids)  # (N, H, L, L)
    id_list = ids[0].tolist()
    scores = pattern_scores(weights, id_list)
    if link is not None:
        scores["link"] = link_weights(weights, *link).double().numpy()  # (N, H)
    labels = head_labels(scores, len(id_list), isinstance(model, Decoder))
    frozen = {name: readonly(value) for name, value in scores.items()}
    return HeadCensus(MappingProxyType(frozen), readonly(labels), tuple(id_list))
