"""One llama block and its parts: the architecture numbers, the linear map over float32,
bfloat16 or int4 weights, RMSNorm, and the block (grouped-query attention with RoPE through
``attend``, then a SwiGLU MLP). :class:`attention_core.pretrained.llama.Decoder` stacks the
blocks; the module docstring there gives the conventions and the shape letters.

The block's steps are written once, here, and are public: :meth:`DecoderLayer.project_qkv`,
:meth:`DecoderLayer.norm_and_rotate` (through
:meth:`~attention_core.pretrained.rope.Rope.rotate`, the one place RoPE is applied),
:meth:`DecoderLayer.attend_heads`, :meth:`DecoderLayer.attention_write` and
:meth:`DecoderLayer.mlp`. :meth:`DecoderLayer.forward_intermediates` runs them in order and
keeps every step's result; the decoder's forward, the score parts' recorded run and the
query–key map all read the block through it, so a change to a step reaches all of them.

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
from attention_core.pretrained.rope import Rope, half_split_order
from attention_core.registry import attend
from attention_core.types import AttentionResult
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
        architecture: the family, for display (``"llama"``, ``"qwen2"``, ``"qwen3"``,
            ``"mistral"``).
        sliding_window: W, the keys each query sees (itself and the W − 1 before it; Mistral),
            or 0 for all earlier keys.
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
    sliding_window: int = 0

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
        check_int("sliding_window", self.sliding_window, low=0)
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


@dataclass(frozen=True)
class BlockSteps:
    """Every step's result of one block on L new tokens (:meth:`DecoderLayer.
    forward_intermediates`). The RMSNorm scales are computed only when read, so that the
    decoder's forward pays nothing for them.

    Attributes:
        x: (B, L, D) the stream entering the block.
        q_before_norm: (B, H, L, E) the projected queries the per-head norm reads (Qwen3), or
            None for a family without it. k_before_norm: (B, K, L, E) the keys', or None.
        q: (B, H, L, E) the queries after their norm and RoPE.
        k: (B, K, S, E) the keys after their norm and RoPE, cached ones first.
        v: (B, K, S, E) the values, cached ones first.
        weights: (B, H, L, S) the attention weights, or None when not requested.
        head_outputs: (B, H, L, E) each head's output (scaled, when asked) before the output
            projection.
        attended: (B, L, D) the stream after attention: x + the output projection.
        mlp_write: (B, L, D) what the MLP adds to ``attended``.
        eps: the RMSNorm epsilon.
    """

    x: torch.Tensor
    q_before_norm: torch.Tensor | None
    k_before_norm: torch.Tensor | None
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    weights: torch.Tensor | None
    head_outputs: torch.Tensor
    attended: torch.Tensor
    mlp_write: torch.Tensor
    eps: float

    @property
    def attn_scale(self) -> torch.Tensor:
        """(B, L) the attention RMSNorm's 1/sqrt(mean(x²) + eps) per position."""
        return rms_scale(self.x, self.eps)

    @property
    def q_scale(self) -> torch.Tensor | None:
        """(B, H, L) the per-head query norm's scales (Qwen3), or None."""
        return None if self.q_before_norm is None else rms_scale(self.q_before_norm, self.eps)

    @property
    def k_scale(self) -> torch.Tensor | None:
        """(B, K, L) the per-head key norm's scales (Qwen3), or None."""
        return None if self.k_before_norm is None else rms_scale(self.k_before_norm, self.eps)

    @property
    def mlp_scale(self) -> torch.Tensor:
        """(B, L) the MLP RMSNorm's scale per position."""
        return rms_scale(self.attended, self.eps)


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


def rms_scale(x: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm's scale 1/sqrt(mean(x²) + eps) over the last axis.

    Args:
        x: (..., D). eps: added to the mean square.

    Returns:
        (...) tensor.
    """
    return torch.rsqrt(x.pow(2).mean(dim=-1) + eps)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm: x / sqrt(mean(x²) + eps) · weight over the last axis (x · :func:`rms_scale` ·
    weight).

    Args:
        x: (..., D). weight: (D,). eps: added to the mean square.

    Returns:
        (..., D) tensor.
    """
    return x * rms_scale(x, eps)[..., None] * weight  # (..., D)


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

    def project_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The attention RMSNorm, then the q, k and v projections (plus the bias, Qwen2),
        split into heads; no norm of the heads, no RoPE yet.

        Args:
            x: (B, L, D) the stream entering the block.

        Returns:
            (q (B, H, L, E), k (B, K, L, E), v (B, K, L, E)).
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
        return q, k, v

    def norm_and_rotate(
        self, q: torch.Tensor, k: torch.Tensor, rope: Rope
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The q and k that are scored: each head's RMSNorm (Qwen3), then RoPE.

        Args:
            q: (B, H, L, E). k: (B, K, L, E), from :meth:`project_qkv`. rope: the positions'
                rotation.

        Returns:
            (q (B, H, L, E), k (B, K, L, E)).
        """
        cfg = self.config
        if cfg.qk_norm:
            q = rms_norm(q, self.q_norm, cfg.rms_eps)  # (B, H, L, E)
            k = rms_norm(k, self.k_norm, cfg.rms_eps)  # (B, K, L, E)
        return rope.rotate(q), rope.rotate(k)

    def attend_heads(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        run: LayerRun,
        *,
        mask: torch.Tensor | None = None,
        scaling: tuple[torch.Tensor, bool] | None = None,
    ) -> AttentionResult:
        """Grouped-query attention through ``attend``: query head h reads key/value head
        h // G.

        Args:
            q: (B, H, L, E). k, v: (B, K, S, E) each. run: the variant, its parameters and
                whether to return the weights. mask: (L, S) bool, True = may attend, or None.
            scaling: (multipliers (B or 1, H), mean) applied to each head's output
                (:func:`scale_heads`), or None.

        Returns:
            AttentionResult(output (B, H, L, E) per head, weights (B, H, L, S) or None).
        """
        q_scored, k_scored = q, k
        if run.rope.style == "interleaved":  # the same scores, summed in the half-split order
            order = half_split_order(q.shape[-1]).clone()  # (E,), never the cached tensor
            q_scored, k_scored = q[..., order], k[..., order]  # (B, H, L, E), (B, K, S, E)
        group = self.config.group_size
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
        return AttentionResult(out, result.weights if run.need_weights else None)

    def attention_write(self, head_outputs: torch.Tensor) -> torch.Tensor:
        """The heads merged and projected back: what attention adds to the stream.

        Args:
            head_outputs: (B, H, L, E).

        Returns:
            (B, L, D).
        """
        batch, heads, length, size = head_outputs.shape
        merged = head_outputs.transpose(1, 2).reshape(batch, length, heads * size)  # (B, L, H·E)
        return linear(merged, self.out)  # (B, L, D)

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        """The SwiGLU MLP on the RMSNormed stream: down(silu(gate(h)) · up(h)).

        Args:
            x: (B, L, D) the stream after attention.

        Returns:
            (B, L, D) what the MLP adds to the stream.
        """
        h = rms_norm(x, self.mlp_norm, self.config.rms_eps)  # (B, L, D)
        gate, up = linear(h, self.gate_up).chunk(2, dim=-1)  # (B, L, F) each
        return linear(F.silu(gate) * up, self.down)  # (B, L, D)

    def forward_intermediates(
        self,
        x: torch.Tensor,
        run: LayerRun,
        *,
        past: tuple[torch.Tensor, torch.Tensor] | None = None,
        mask: torch.Tensor | None = None,
        scaling: tuple[torch.Tensor, bool] | None = None,
    ) -> BlockSteps:
        """Run the block's steps on L new tokens and keep each one's result.

        Args:
            x: (B, L, D) hidden states.
            run: the rotation, the attention variant and whether to return the weights (the
                same for every layer of one forward pass).
            past: cached (keys, values), each (B, K, P, E), or None.
            mask: (L, S) bool, True = may attend, or None for no mask.
            scaling: (multipliers (B or 1, H), mean) applied to each head's output before the
                output projection (:func:`scale_heads`), or None.

        Returns:
            :class:`BlockSteps`; the stream after the block is ``attended + mlp_write``.
        """
        projected_q, projected_k, v = self.project_qkv(x)  # (B, H|K, L, E) each
        q, k = self.norm_and_rotate(projected_q, projected_k, run.rope)
        if past is not None:
            k = torch.cat((past[0], k), dim=2)  # (B, K, S, E)
            v = torch.cat((past[1], v), dim=2)  # (B, K, S, E)
        result = self.attend_heads(q, k, v, run, mask=mask, scaling=scaling)
        attended = x + self.attention_write(result.output)  # (B, L, D)
        normed_qk = self.config.qk_norm
        return BlockSteps(
            x=x,
            q_before_norm=projected_q if normed_qk else None,
            k_before_norm=projected_k if normed_qk else None,
            q=q,
            k=k,
            v=v,
            weights=result.weights,
            head_outputs=result.output,
            attended=attended,
            mlp_write=self.mlp(attended),
            eps=self.config.rms_eps,
        )

    def forward(
        self, x: torch.Tensor, run: LayerRun, **options
    ) -> tuple[torch.Tensor, torch.Tensor | None, tuple[torch.Tensor, torch.Tensor]]:
        """Run the block on L new tokens (:meth:`forward_intermediates`, keeping what the
        next block and the cache need).

        Args:
            x, run: as :meth:`forward_intermediates`.
            **options: ``past``, ``mask``, ``scaling``, as :meth:`forward_intermediates`.

        Returns:
            (x (B, L, D), weights (B, H, L, S) or None, (keys, values) each (B, K, S, E)).
        """
        steps = self.forward_intermediates(x, run, **options)
        return steps.attended + steps.mlp_write, steps.weights, (steps.k, steps.v)
