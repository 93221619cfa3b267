"""Who does a word look at: heads ranked by the attention from some tokens to others.

Works on any :class:`~attention_core.pretrained.bert.EncodeResult` whose tokens carry
character offsets, so a word of the text (垫子 is two e5 tokens; 因为它 is one) can be
mapped to the tokens that cover it. Weights are compared with the uniform level: a query row
spread evenly over L tokens gives k / L to any k of them.

Shapes: N layers, H heads, L tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from attention_core.validation import check_int


@dataclass(frozen=True)
class HeadLink:
    """One head's weight from the query tokens to the key tokens.

    Attributes:
        layer, head: 0-based indices (layer 9 head 9 counted from 1 is ``layer=8, head=8``).
        weight: mean over the query tokens of the summed weight on the key tokens.
        uniform: the same quantity for a uniform row, ``len(keys) / L``.
    """

    layer: int
    head: int
    weight: float
    uniform: float

    @property
    def ratio(self) -> float:
        """How many times the uniform level the weight is."""
        return self.weight / self.uniform


def find_span(text: str, word: str, occurrence: int = 0) -> tuple[int, int]:
    """The [start, end) character span of ``word``'s ``occurrence``-th appearance in ``text``.

    Args:
        text: the encoded text (prefix included).
        word: a non-empty substring.
        occurrence: which appearance, from 0.

    Returns:
        (start, end) with ``text[start:end] == word``.

    Raises:
        ValueError: when ``word`` is empty or does not appear that often.
    """
    check_int("occurrence", occurrence, low=0)
    if not isinstance(word, str) or not word:
        raise ValueError(f"word must be a non-empty string, got {word!r}")
    start = -1
    for _ in range(occurrence + 1):
        start = text.find(word, start + 1)
        if start < 0:
            raise ValueError(f"{word!r} does not appear {occurrence + 1} time(s) in {text!r}")
    return start, start + len(word)


def tokens_in_span(offsets: Sequence[tuple[int, int]], start: int, end: int) -> list[int]:
    """Indices of the tokens whose character span overlaps [start, end).

    Args:
        offsets: per token (start, end) in the text; special tokens have (0, 0).
        start, end: a character span, start < end.

    Returns:
        Token indices in order (a token such as 因为它 may cover more than the span).

    Raises:
        ValueError: for an empty span or when no token overlaps it.
    """
    if end <= start:
        raise ValueError(f"span [{start}, {end}) is empty")
    covering = [i for i, (a, b) in enumerate(offsets) if a < end and start < b]
    if not covering:
        raise ValueError(f"no token covers characters [{start}, {end})")
    return covering


def link_weights(
    attentions: torch.Tensor, queries: Sequence[int], keys: Sequence[int]
) -> torch.Tensor:
    """Per head, the weight that the query tokens put on the key tokens.

    Args:
        attentions: (N, H, L, L) weights, rows summing to 1.
        queries: query token indices (their rows are averaged).
        keys: key token indices (their columns are summed).

    Returns:
        (N, H) float32 tensor.

    Raises:
        ValueError: for a tensor that is not 4-D square, or empty or out-of-range indices.
    """
    if attentions.dim() != 4 or attentions.shape[-1] != attentions.shape[-2]:
        raise ValueError(f"attentions must be (N, H, L, L), got {tuple(attentions.shape)}")
    length = attentions.shape[-1]
    for name, indices in (("queries", queries), ("keys", keys)):
        if not indices or any(not 0 <= int(i) < length for i in indices):
            raise ValueError(f"{name} must be non-empty indices in [0, {length}), got {indices}")
    rows = attentions[:, :, list(queries), :]  # (N, H, q, L)
    return rows[..., list(keys)].sum(dim=-1).mean(dim=-1)  # (N, H)


def rank_heads(
    attentions: torch.Tensor, queries: Sequence[int], keys: Sequence[int]
) -> list[HeadLink]:
    """Every head, ranked by the weight the query tokens put on the key tokens.

    Args:
        attentions: (N, H, L, L) weights.
        queries, keys: token indices, as for :func:`link_weights`.

    Returns:
        N · H :class:`HeadLink` records, highest weight first.

    Raises:
        ValueError: as for :func:`link_weights`.
    """
    weights = link_weights(attentions, queries, keys)  # (N, H)
    uniform = len(keys) / attentions.shape[-1]
    heads = weights.shape[1]
    order = torch.argsort(weights.flatten(), descending=True, stable=True).tolist()
    flat = weights.flatten().tolist()
    return [HeadLink(k // heads, k % heads, flat[k], uniform) for k in order]


def special_share(
    attentions: torch.Tensor, tokens: Sequence[str], specials: Sequence[str]
) -> torch.Tensor:
    """Per head, the mean over rows of the weight on special tokens (attention sinks).

    Args:
        attentions: (N, H, L, L) weights.
        tokens: the L token strings.
        specials: which strings count as special (e.g. ``("<s>", "</s>")``).

    Returns:
        (N, H) float32 tensor; compare it with ``count / L``, the uniform level.

    Raises:
        ValueError: when ``tokens`` does not have L entries or none of them is special.
    """
    if len(tokens) != attentions.shape[-1]:
        raise ValueError(f"{len(tokens)} tokens for maps of length {attentions.shape[-1]}")
    keys = [i for i, token in enumerate(tokens) if token in specials]
    if not keys:
        raise ValueError(f"no token among {list(specials)} in {list(tokens)}")
    return attentions[..., keys].sum(dim=-1).mean(dim=-1)  # (N, H)
