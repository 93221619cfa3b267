"""Rotary position embeddings (RoPE) for the llama decoder, in its two row conventions.

RoPE rotates each pair of a query's (or key's) features by position · base^(−2i/E), so that a
score depends only on the distance between query and key. llama.cpp's GGUF converter
reorders the query/key rows of every head so that the two halves of each rotated pair are
adjacent, and rotates adjacent pairs (``"interleaved"``); HuggingFace keeps the original rows
and rotates feature e with feature e + E/2 (``"half"``). :func:`rows_to_half` and
:func:`rows_to_interleaved` move rows between the two; :func:`half_split_order` lists
interleaved features in half-split order, so that scores can be summed alike in both.
:class:`Rope` holds one forward pass's angles; its :meth:`Rope.rotate` is how every llama
block (and every reader of its queries and keys) applies RoPE.

Shapes: L positions, E head size.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from attention_core.pretrained.llama_block import LlamaConfig

ROPE_STYLES = ("interleaved", "half")


def rope_angles(
    positions: torch.Tensor,
    head_dim: int,
    base: float,
    *,
    linear: float = 1.0,
    factors: tuple[float, ...] = (),
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of RoPE's angles, (position / linear) · base^(−2i/E) / factors[i],
    computed in float64 (llama.cpp's ``freq_scale = 1 / linear`` and ``freq_factors``).

    Args:
        positions: (L,) integer positions.
        head_dim: E (even). base: θ, e.g. 100000.
        linear: linear scaling: positions divided by it (1: none).
        factors: Llama 3's per-frequency factors (E/2 numbers; frequency i divided by
            ``factors[i]``), or ``()`` for none.

    Returns:
        (cos, sin), each (L, E/2) float32.
    """
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim  # (E/2,)
    inv_freq = base**-exponents  # (E/2,)
    if factors:
        inv_freq = inv_freq / torch.tensor(factors, dtype=torch.float64)  # (E/2,)
    scaled = positions.to(torch.float64) / linear  # (L,)
    angles = scaled[:, None] * inv_freq[None, :]  # (L, E/2)
    return angles.cos().float(), angles.sin().float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, style: str) -> torch.Tensor:
    """Rotate each pair of features of ``x`` by its position's angle.

    Args:
        x: (B, heads, L, E) queries or keys.
        cos, sin: (L, E/2) from :func:`rope_angles`.
        style: ``"interleaved"`` rotates features (2i, 2i+1) (rows in GGUF order);
            ``"half"`` rotates features (i, i + E/2) (rows in HuggingFace order).

    Returns:
        (B, heads, L, E) rotated tensor.
    """
    half = x.shape[-1] // 2
    if style == "interleaved":
        # each pair (x[2i], x[2i+1]) is the complex number x[2i] + i·x[2i+1]: rotating it by
        # the angle is one complex multiplication, (a + ib)(cos + i sin)
        pairs = torch.view_as_complex(x.unflatten(-1, (half, 2)))  # (B, heads, L, E/2) complex
        rotated = pairs * torch.complex(cos, sin)  # (B, heads, L, E/2) complex
        return torch.view_as_real(rotated).flatten(-2)  # (B, heads, L, E)
    first, second = x[..., :half], x[..., half:]  # (B, heads, L, E/2) each
    return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)


@dataclass(frozen=True)
class Rope:
    """The rotation of one forward pass's new positions.

    Attributes:
        cos, sin: (L, E/2) each, the angles of positions start .. start + L - 1
            (:func:`rope_angles`).
        style: ``"interleaved"`` or ``"half"``, which features rotate together.
    """

    cos: torch.Tensor
    sin: torch.Tensor
    style: str

    def rotate(self, x: torch.Tensor) -> torch.Tensor:
        """RoPE as every llama block applies it: each pair of features of ``x`` turned by its
        position's angle (:func:`apply_rope`). The block, the score parts and the query–key
        map all rotate through this method.

        Args:
            x: (B, heads, L, E) queries or keys (or their parts), float32 or float64.

        Returns:
            (B, heads, L, E) rotated tensor.
        """
        return apply_rope(x, self.cos, self.sin, self.style)  # (B, heads, L, E)


def rope_at(config: LlamaConfig, style: str, start: int, length: int) -> Rope:
    """The rotation of positions start .. start + L − 1 under ``config``'s RoPE (its base,
    linear scaling and per-frequency factors).

    Args:
        config: the decoder's :class:`~attention_core.pretrained.llama_block.LlamaConfig`
            (its ``head_dim``, ``rope_base``, ``rope_linear``, ``rope_factors``).
        style: ``"interleaved"`` or ``"half"``.
        start: the first position. length: L.

    Returns:
        :class:`Rope` with cos and sin (L, E/2).
    """
    cos, sin = rope_angles(
        torch.arange(start, start + length),
        config.head_dim,
        config.rope_base,
        linear=config.rope_linear,
        factors=config.rope_factors,
    )  # (L, E/2) each
    return Rope(cos, sin, style)


@functools.cache
def half_split_order(head_dim: int) -> torch.Tensor:
    """The features of interleaved pairs listed in half-split order: [0, 2, …, E−2, 1, 3, …,
    E−1].

    Permuting the features of both q and k leaves every score q·k unchanged, but the float32
    sum then adds the terms in the order of the half-split (HuggingFace) layout, so that
    rotated keys stored interleaved score exactly like the reference implementation's (its
    logits within 1e-4 instead of 1.4e-4).

    Args:
        head_dim: E (even).

    Returns:
        (E,) int64 index tensor (shared: do not modify).
    """
    return torch.cat((torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)))  # (E,)


def rows_to_half(weight: torch.Tensor, heads: int) -> torch.Tensor:
    """Reorder query/key projection rows from GGUF's interleaved order to HuggingFace's.

    Args:
        weight: (heads · E, D) rows in interleaved order. heads: number of heads.

    Returns:
        (heads · E, D) rows in half-split order (a new tensor).
    """
    rows, width = weight.shape
    per_head = weight.reshape(heads, rows // heads // 2, 2, width)  # (heads, E/2, 2, D)
    return per_head.transpose(1, 2).reshape(rows, width)  # (heads · E, D)


def rows_to_interleaved(weight: torch.Tensor, heads: int) -> torch.Tensor:
    """Reorder query/key projection rows from HuggingFace's half-split order to GGUF's.

    Args:
        weight: (heads · E, D) rows in half-split order. heads: number of heads.

    Returns:
        (heads · E, D) rows in interleaved order (a new tensor), as llama.cpp's converter
        writes them.
    """
    rows, width = weight.shape
    per_head = weight.reshape(heads, 2, rows // heads // 2, width)  # (heads, 2, E/2, D)
    return per_head.transpose(1, 2).reshape(rows, width)  # (heads · E, D)
