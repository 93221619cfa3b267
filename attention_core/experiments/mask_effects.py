"""The mask composer on real weights: what a decoder loses when its attention is cut.

A mask is composed from parts with the builders of :mod:`attention_core.masks`:

    causal ∧ (window ∨ sinks ∨ prefix ∨ strided)

* window w: ``masks.local`` (|i − j| <= w // 2; with causal, the w // 2 tokens before);
* sinks s: ``masks.sinks``, the first s keys stay visible to every query;
* prefix p: the first p *queries* keep full causal attention (``masks.sinks`` transposed:
  the prompt is read whole, later tokens through the sparse parts);
* strided k: ``masks.strided``, keys j with i − j divisible by k.

With no part on, the mask is plain causal attention. :func:`mask_effects` applies the mask
in every layer and in one layer at a time and reports, against full causal attention, the
perplexity of the text and the mean KL divergence of the next-token distributions.
:data:`WINDOW_WITH_SINKS` is the Real decoder page's window-with-sinks setting.

Shapes: N layers, L tokens, V vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

from attention_core import masks
from attention_core.experiments.decoding import NLL_ROWS, next_token_nll
from attention_core.experiments.heads import as_ids
from attention_core.pretrained.llama import Decoder
from attention_core.validation import check_int

PassCallback = Callable[[int, int], None]
"""A progress hook: ``(passes done, passes in all)``."""


@dataclass(frozen=True)
class MaskParts:
    """Which parts the composed mask ORs together (0 = the part is off).

    Attributes:
        window: the local window size w (>= 2), or 0.
        sinks: first keys every query sees, or 0.
        prefix: first queries with full causal attention, or 0.
        stride: keys every k positions back (k >= 2), or 0.

    Raises:
        ValueError: for a negative or non-integer value, or a window or stride of 1.
    """

    window: int = 0
    sinks: int = 0
    prefix: int = 0
    stride: int = 0

    def __post_init__(self) -> None:
        for name in ("window", "sinks", "prefix", "stride"):
            check_int(name, getattr(self, name), low=0)
        for name in ("window", "stride"):
            if getattr(self, name) == 1:
                raise ValueError(f"{name} must be 0 (off) or at least 2, got 1")

    @property
    def any_on(self) -> bool:
        """True when some part restricts attention."""
        return any((self.window, self.sinks, self.prefix, self.stride))


WINDOW_WITH_SINKS = MaskParts(window=16, sinks=4)
"""The Real decoder page's window-with-sinks setting, as composer parts."""


def compose_mask(parts: MaskParts, length: int) -> torch.Tensor:
    """The (L, L) bool mask causal ∧ (window ∨ sinks ∨ prefix ∨ strided); causal alone when
    no part is on.

    Args:
        parts: :class:`MaskParts`. length: L >= 1.

    Returns:
        (L, L) bool tensor, True = may attend.

    Raises:
        ValueError: for a bad length.
    """
    length = check_int("length", length, low=1)
    causal = masks.causal(length)  # (L, L)
    pieces = []
    if parts.window:
        pieces.append(masks.local(length, parts.window))
    if parts.sinks:
        pieces.append(masks.sinks(length, min(parts.sinks, length)))
    if parts.prefix:
        pieces.append(masks.sinks(length, min(parts.prefix, length)).T)  # rows i < p
    if parts.stride:
        pieces.append(masks.strided(length, parts.stride))
    if not pieces:
        return causal
    return masks.combine(causal, masks.combine(*pieces, how="or"), how="and")  # (L, L)


def kept_share(parts: MaskParts, length: int) -> float:
    """The share of the causal (query, key) cells of an L-token text that the composed mask
    keeps: 1.0 when the parts cut nothing (no part on, or a window as long as the text).

    Args:
        parts: :class:`MaskParts`. length: L >= 1.

    Raises:
        ValueError: for a bad length.
    """
    mask = compose_mask(parts, length)  # (L, L)
    return float(mask.sum()) / float(masks.causal(length).sum())


@dataclass(frozen=True)
class MaskEffect:
    """What a composed mask costs a decoder on one text, against full causal attention.

    Attributes:
        kept: share of the causal (query, key) cells the mask keeps.
        full_perplexity: exp(mean next-token loss) with full causal attention.
        all_layers_perplexity, all_layers_kl: with the mask in every layer; the KL is
            KL(P_full ‖ P_masked) of the next-token distributions, averaged over positions.
        layer_perplexity, layer_kl: read-only (N,) arrays, the mask in that layer alone
            (NaN for a layer that was not asked for).
    """

    kept: float
    full_perplexity: float
    all_layers_perplexity: float
    all_layers_kl: float
    layer_perplexity: np.ndarray
    layer_kl: np.ndarray


def mean_kl(reference: torch.Tensor, other: torch.Tensor) -> float:
    """Mean over positions of KL(softmax(reference) ‖ softmax(other)), in float64.

    Args:
        reference, other: (L, V) logits.

    Returns:
        Nats (>= 0).
    """
    total = 0.0
    for start in range(0, reference.shape[0], NLL_ROWS):
        p_log = F.log_softmax(reference[start : start + NLL_ROWS].double(), dim=-1)  # (n, V)
        q_log = F.log_softmax(other[start : start + NLL_ROWS].double(), dim=-1)  # (n, V)
        total += float((p_log.exp() * (p_log - q_log)).sum())
    return total / reference.shape[0]


def forward_passes(layers_alone: int) -> int:
    """The forward passes :func:`mask_effects` runs: the full text, the mask in every
    layer, and one per layer measured alone (its ``on_pass`` total).

    Raises:
        ValueError: for a negative or non-integer count.
    """
    check_int("layers_alone", layers_alone, low=0)
    return 2 + layers_alone


def mask_effects(
    model, input_ids, parts: MaskParts, *, layers=None, on_pass: PassCallback | None = None
) -> MaskEffect:
    """Perplexity and next-token KL with the composed mask in all layers and in each alone.

    2 + len(layers) forward passes of the text (full, all layers, one per layer asked for).

    Args:
        model: a Decoder (any weights). input_ids: L >= 2 token ids.
        parts: the :class:`MaskParts` to compose.
        layers: 0-based layers to measure alone; default every layer, ``()`` none.
        on_pass: called as ``on_pass(done, total)`` after each forward pass (a progress
            bar's hook; it must not raise).

    Returns:
        :class:`MaskEffect`.

    Raises:
        ValueError: for an encoder, fewer than 2 tokens, bad parts or a layer out of range.
    """
    if not isinstance(model, Decoder):
        raise ValueError(f"mask_effects needs a Decoder, got {type(model).__name__}")
    if not isinstance(parts, MaskParts):
        raise ValueError(f"parts must be MaskParts, got {type(parts).__name__}")
    ids = as_ids(input_ids)  # (1, L)
    length, count = ids.shape[1], model.config.num_layers
    if length < 2:
        raise ValueError(f"mask_effects needs at least 2 tokens, got {length}")
    chosen = list(range(count)) if layers is None else list(layers)
    if any(not isinstance(i, int) or not 0 <= i < count for i in chosen):
        raise ValueError(f"layers must be 0-based indices in [0, {count}), got {layers!r}")
    mask = compose_mask(parts, length)  # (L, L)
    causal = masks.causal(length)
    kept = kept_share(parts, length)
    passes = [0, forward_passes(len(chosen))]  # done, total

    def run(layer_masks: torch.Tensor | None) -> tuple[float, torch.Tensor]:
        logits = model(ids, mask=layer_masks).logits  # (1, L, V)
        passes[0] += 1
        if on_pass is not None:
            on_pass(*passes)
        return math.exp(float(next_token_nll(logits, ids).mean())), logits[0]

    full_ppl, full_logits = run(None)
    all_ppl, all_logits = run(mask)
    layer_ppl, layer_kl = np.full(count, np.nan), np.full(count, np.nan)
    for index in chosen:
        per_layer = causal.expand(count, -1, -1).clone()  # (N, L, L)
        per_layer[index] = mask
        layer_ppl[index], logits = run(per_layer)
        layer_kl[index] = mean_kl(full_logits, logits)
    layer_ppl.setflags(write=False)
    layer_kl.setflags(write=False)
    return MaskEffect(
        kept, full_ppl, all_ppl, mean_kl(full_logits, all_logits), layer_ppl, layer_kl
    )
