"""Turning heads off in the real models: per-head multipliers on the attention outputs.

A head's attention output (before the output projection) is multiplied by s: s = 1 leaves
the model as it is, s = 0 zero-ablates the head. With mean ablation the remaining 1 − s is
given to the head's mean output over the positions of the call (the prompt), so s = 0
replaces the head's output at every position by that mean. The decoder
(:meth:`~attention_core.pretrained.llama.Decoder.forward`) and the encoders
(:meth:`~attention_core.pretrained.bert.Encoder.forward`) take the same arguments:
``ablate=((layer, head), ...)`` (0-based indices), ``ablation="zero"`` or ``"mean"``, and
``head_scale``, a float tensor of multipliers (an autograd input for attribution).

Shapes: B batch, N layers, H heads, L positions, E head size.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from attention_core.validation import check_choice

ABLATIONS = ("zero", "mean")


def scale_heads(out: torch.Tensor, scale: torch.Tensor, mean: bool) -> torch.Tensor:
    """Each head's attention output times its multiplier s; with ``mean``, the rest (1 − s)
    goes to the head's mean output over the L positions (s = 0: mean-ablated).

    Args:
        out: (B, H, L, E) per-head outputs. scale: (B or 1, H) multipliers.
        mean: blend towards the mean output instead of towards zero.

    Returns:
        (B, H, L, E) tensor.
    """
    s = scale.to(out.dtype).view(scale.shape[0], -1, 1, 1)  # (B or 1, H, 1, 1)
    if not mean:
        return out * s  # (B, H, L, E)
    return out * s + (1 - s) * out.mean(dim=2, keepdim=True)  # (B, H, L, E)


def _checked_pairs(ablate: Iterable, layers: int, heads: int) -> list[tuple[int, int]]:
    """The (layer, head) pairs of ``ablate``; ValueError naming the first bad one."""
    if isinstance(ablate, str | bytes) or not isinstance(ablate, Iterable):
        raise ValueError(f"ablate must be a sequence of (layer, head) pairs, got {ablate!r}")
    pairs = []
    for pair in ablate:
        ok = isinstance(pair, tuple | list) and len(pair) == 2
        ok = ok and all(isinstance(i, int) and not isinstance(i, bool) for i in pair)
        if not ok or not (0 <= pair[0] < layers and 0 <= pair[1] < heads):
            raise ValueError(
                f"ablate pair {pair!r} is not a (layer, head) pair of 0-based indices with "
                f"layer in [0, {layers}) and head in [0, {heads})"
            )
        pairs.append((pair[0], pair[1]))
    return pairs


def head_multipliers(
    shape: tuple[int, int], ablate: Iterable, ablation: str, head_scale: torch.Tensor | None
) -> tuple[torch.Tensor | None, bool]:
    """The multipliers a forward pass applies, from its ablation arguments.

    Args:
        shape: (N layers, H heads) of the model.
        ablate: (layer, head) pairs, 0-based, whose multiplier becomes 0.
        ablation: ``"zero"`` or ``"mean"`` (see the module docstring).
        head_scale: None, or a float tensor (N, H) or (B, N, H) of multipliers (one set
            per batch item); the ablated heads' entries are set to 0 in a copy.

    Returns:
        (multipliers (1 or B, N, H) or None when nothing is scaled, mean ablation or not).

    Raises:
        ValueError: for a bad pair (naming it), an unknown ablation, or a ``head_scale``
            that is not a floating tensor of shape (N, H) or (B, N, H).
    """
    mean = check_choice("ablation", ablation, ABLATIONS) == "mean"
    pairs = _checked_pairs(ablate, *shape)
    if head_scale is not None:
        if not isinstance(head_scale, torch.Tensor) or not head_scale.is_floating_point():
            raise ValueError(f"head_scale must be a float tensor, got {type(head_scale).__name__}")
        if head_scale.dim() not in (2, 3) or tuple(head_scale.shape[-2:]) != tuple(shape):
            raise ValueError(
                f"head_scale must have shape (N, H) = {tuple(shape)} or (B, N, H), got "
                f"{tuple(head_scale.shape)}"
            )
    if head_scale is None and not pairs:
        return None, mean
    scale = torch.ones(1, *shape) if head_scale is None else head_scale.reshape(-1, *shape)
    if pairs:
        layer_index, head_index = (torch.tensor(axis) for axis in zip(*pairs, strict=True))
        keep = torch.ones(shape)  # (N, H)
        keep[layer_index, head_index] = 0.0
        scale = scale * keep  # (1 or B, N, H)
    return scale, mean


def layer_scaling(
    scale: torch.Tensor | None, mean: bool, layer: int
) -> tuple[torch.Tensor, bool] | None:
    """One layer's (multipliers (1 or B, H), mean) for :func:`scale_heads`, or None when the
    layer is left as it is (no multipliers, or all of this layer's are exactly 1 and no
    gradient is asked of them)."""
    if scale is None:
        return None
    column = scale[:, layer]  # (1 or B, H)
    if not column.requires_grad and bool((column == 1).all()):
        return None
    return column, mean
