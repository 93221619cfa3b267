"""One llama block and its parts: the architecture numbers, the linear map over float32,
bfloat16 or int4 weights, RMSNorm, and the block (grouped-query attention with RoPE through
``attend``, then a SwiGLU MLP). :class:`attention_core.pretrained.llama.Decoder` stacks the
blocks; the module docstring there gives the conventions and the shape letters.

Shapes: B batch, L new tokens, P cached tokens, S = P + L keys, D width, H query heads, K
key/value heads, G = H / K heads per group, E head size, F MLP width.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from attention_core.pretrained.ablation import scale_heads
from attention_core.pretrained.int4 import Int4Matrix
from attention_core.pretrained.rope import apply_rope, half_split_order
from attention_core.registry import attend
from attention_core.validation import check_int

FLOAT32_BYTES = 4
KEYS_AND_VALUES = 2
LAYER_TENSORS = ("attn_norm", "qkv", "out", "mlp_norm", "gate_up", "down")
"""Every block's tensors, under the decoder's names."""
OPTIONAL_LAYER_TENSORS = ("qkv_bias", "q_norm", "k_norm")
"""A block's tensors of some families: the q/k/v bias (Qwen2), the per-head q and k norms
(Qwen3)."""


@dataclass(frozen=True)
class LlamaConfig:
    """The architecture numbers a llama-family decoder needs.

    Attributes:
        vocab_size (V), hidden_size (D), num_layers (N), num_heads (H), num_kv_heads (K),
        intermediate_size (F), context_length (most positions), rope_base (θ of RoPE),
        rms_eps (RMSNorm epsilon).
        key_length: E, the size of one head, when it is not D / H (Qwen3: 128 with D = 1024
            and 16 heads); 0 means D / H.
        qkv_bias: the q, k and v projections add a bias (Qwen2).
        qk_norm: each head's query and key pass an RMSNorm of size E before RoPE (Qwen3).
        rope_linear: linear RoPE scaling: positions are divided by this factor (1: none).
        rope_factors: Llama 3's per-frequency RoPE factors (E/2 of them: frequency i is
            divided by factor i), or ``()`` for none.
        architecture: the family, for display (``"llama"``, ``"qwen2"``, ``"qwen3"``).
    """

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    context_length: int
    rope_base: float
    rms_eps: float
    key_length: int = 0
    qkv_bias: bool = False
    qk_norm: bool = False
    rope_linear: float = 1.0
    rope_factors: tuple[float, ...] = ()
    architecture: str = "llama"

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "hidden_size",
            "num_layers",
            "num_heads",
            "num_kv_heads",
            "intermediate_size",
            "context_length",
        ):
            check_int(name, getattr(self, name), low=1)
        check_int("key_length", self.key_length, low=0)
        if not self.key_length and self.hidden_size % self.num_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} must split into {self.num_heads} heads "
                "(or give key_length)"
            )
        if self.head_dim % 2:
            raise ValueError(f"the head size must be even for RoPE, got {self.head_dim}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads {self.num_heads} must be a multiple of num_kv_heads {self.num_kv_heads}"
            )
        if not self.rope_base > 1 or not 0 < self.rms_eps < 1:
            raise ValueError(
                f"rope_base must exceed 1 and rms_eps lie in (0, 1), got {self.rope_base!r} "
                f"and {self.rms_eps!r}"
            )
        if not self.rope_linear > 0:
            raise ValueError(f"rope_linear must be positive, got {self.rope_linear!r}")
        if self.rope_factors and (
            len(self.rope_factors) != self.head_dim // 2
            or not all(factor > 0 for factor in self.rope_factors)
        ):
            raise ValueError(
                f"rope_factors must be {self.head_dim // 2} positive numbers, got "
                f"{len(self.rope_factors)}"
            )

    @property
    def head_dim(self) -> int:
        """E, the size of one head."""
        return self.key_length or self.hidden_size // self.num_heads

    @property
    def group_size(self) -> int:
        """G, the query heads that share one key/value head."""
        return self.num_heads // self.num_kv_heads

    @property
    def cache_bytes_per_token(self) -> int:
        """Bytes the float32 KV cache grows by per token: N · 2 · K · E · 4."""
        return self.num_layers * KEYS_AND_VALUES * self.num_kv_heads * self.head_dim * FLOAT32_BYTES


@dataclass(frozen=True)
class Rope:
    """The rotation of one forward pass's new positions.

    Attributes:
        cos, sin: (L, E/2) each, the angles of positions start .. start + L - 1
            (:func:`attention_core.pretrained.rope.rope_angles`).
        style: ``"interleaved"`` or ``"half"``, which features rotate together.
    """

    cos: torch.Tensor
    sin: torch.Tensor
    style: str


@dataclass(frozen=True)
class LayerRun:
    """What every block of one forward pass shares.

    Attributes:
        rope: the new positions' rotation.
        variant: the registered attention variant every layer calls.
        params: its resolved parameters.
        need_weights: whether each block returns its (B, H, L, S) attention weights.
    """

    rope: Rope
    variant: str
    params: Mapping[str, object]
    need_weights: bool


def linear(x: torch.Tensor, weight: torch.Tensor | Int4Matrix) -> torch.Tensor:
    """x · weightᵀ, computed in the weight's dtype and returned in ``x``'s.

    With a bfloat16 weight the float32 input is rounded to bfloat16, the product is
    accumulated by the bfloat16 kernel and rounded to bfloat16, then widened back: faster on
    CPUs with bfloat16 instructions than widening the weight, and no float32 copy is made.
    An :class:`~attention_core.pretrained.int4.Int4Matrix` (the file's 4-bit codes) goes
    through torch's int4 kernel the same way (bfloat16 input and scales, float32 result).

    Args:
        x: (..., in) float32. weight: (out, in) float32 or bfloat16, or an ``Int4Matrix``.

    Returns:
        (..., out) tensor of ``x``'s dtype.
    """
    if isinstance(weight, Int4Matrix):
        return weight(x).to(x.dtype)  # (..., out)
    if weight.dtype == x.dtype:
        return F.linear(x, weight)  # (..., out)
    return F.linear(x.to(weight.dtype), weight).to(x.dtype)  # (..., out)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm: x / sqrt(mean(x²) + eps) · weight over the last axis.

    Args:
        x: (..., D). weight: (D,). eps: added to the mean square.

    Returns:
        (..., D) tensor.
    """
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


class DecoderLayer(nn.Module):
    """One llama block: grouped-query attention with RoPE, then a SwiGLU MLP.

    The parameters are the checkpoint's tensors, used as they are (no copy, no init):
    ``attn_norm`` (D,), ``qkv`` ((H + 2K)·E, D) with rows [q | k | v], ``out`` (D, H·E),
    ``mlp_norm`` (D,), ``gate_up`` (2F, D) with rows [gate | up], ``down`` (D, F). The
    norms are float32; the matrices float32, bfloat16 or int4 (an ``Int4Matrix``, see
    :func:`linear`). Some families add ``qkv_bias`` ((H + 2K)·E,) float32 (Qwen2) or
    ``q_norm`` and ``k_norm`` (E,) float32, an RMSNorm of every head's query and key before
    RoPE (Qwen3).
    """

    def __init__(self, config: LlamaConfig, tensors: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.config = config
        for name in (*LAYER_TENSORS, *(n for n in OPTIONAL_LAYER_TENSORS if n in tensors)):
            tensor = tensors[name]
            if isinstance(tensor, Int4Matrix):
                self.add_module(name, tensor)  # buffers: packed codes and scales
            else:
                self.register_parameter(name, nn.Parameter(tensor, requires_grad=False))

    def forward(
        self,
        x: torch.Tensor,
        run: LayerRun,
        *,
        past: tuple[torch.Tensor, torch.Tensor] | None = None,
        mask: torch.Tensor | None = None,
        scaling: tuple[torch.Tensor, bool] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None, tuple[torch.Tensor, torch.Tensor]]:
        """Run the block on L new tokens.

        Args:
            x: (B, L, D) hidden states.
            run: the rotation, the attention variant and whether to return the weights (the
                same for every layer of one forward pass).
            past: cached (keys, values), each (B, K, P, E), or None.
            mask: (L, S) bool, True = may attend, or None for no mask.
            scaling: (multipliers (B or 1, H), mean) applied to each head's output before the
                output projection (:func:`scale_heads`), or None.

        Returns:
            (x (B, L, D), weights (B, H, L, S) or None, (keys, values) each (B, K, S, E)).
        """
        cfg = self.config
        batch, length, _ = x.shape
        heads, kv_heads, size = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        h = rms_norm(x, self.attn_norm, cfg.rms_eps)  # (B, L, D)
        qkv = linear(h, self.qkv)  # (B, L, (H + 2K)·E)
        if cfg.qkv_bias:
            qkv = qkv + self.qkv_bias  # (B, L, (H + 2K)·E)
        q, k, v = qkv.split([heads * size, kv_heads * size, kv_heads * size], dim=-1)
        q = q.view(batch, length, heads, size).transpose(1, 2)  # (B, H, L, E)
        k = k.view(batch, length, kv_heads, size).transpose(1, 2)  # (B, K, L, E)
        v = v.view(batch, length, kv_heads, size).transpose(1, 2)  # (B, K, L, E)
        if cfg.qk_norm:
            q = rms_norm(q, self.q_norm, cfg.rms_eps)  # (B, H, L, E)
            k = rms_norm(k, self.k_norm, cfg.rms_eps)  # (B, K, L, E)
        rope = run.rope
        q, k = (
            apply_rope(q, rope.cos, rope.sin, rope.style),
            apply_rope(k, rope.cos, rope.sin, rope.style),
        )
        if past is not None:
            k = torch.cat((past[0], k), dim=2)  # (B, K, S, E)
            v = torch.cat((past[1], v), dim=2)  # (B, K, S, E)
        group = cfg.group_size
        q_scored, k_scored = q, k
        if rope.style == "interleaved":  # the same scores, summed in the half-split order
            order = half_split_order(size).clone()  # (E,), never the cached inference tensor
            q_scored, k_scored = q[..., order], k[..., order]  # (B, H, L, E), (B, K, S, E)
        # each key/value head serves G query heads: head h reads key head h // G
        result = attend(
            q_scored,
            k_scored.repeat_interleave(group, dim=1),  # (B, H, S, E)
            v.repeat_interleave(group, dim=1),  # (B, H, S, E)
            run.variant,
            mask=mask,
            need_weights=run.need_weights,
            **run.params,
        )
        out = result.output if scaling is None else scale_heads(result.output, *scaling)
        out = out.transpose(1, 2).reshape(batch, length, heads * size)  # (B, L, H·E)
        x = x + linear(out, self.out)  # (B, L, D)
        h = rms_norm(x, self.mlp_norm, cfg.rms_eps)  # (B, L, D)
        gate, up = linear(h, self.gate_up).chunk(2, dim=-1)  # (B, L, F) each
        x = x + linear(F.silu(gate) * up, self.down)  # (B, L, D)
        weights = None
        if run.need_weights:
            weights = result.weights  # (B, H, L, S)
        return x, weights, (k, v)
