"""A llama-architecture decoder (SmolLM2-135M) whose attention runs through ``attend``.

Per layer: x + attention(RMSNorm(x)), then + SwiGLU MLP(RMSNorm(x)); a final RMSNorm and
logits against the (tied) token embedding. Attention is causal and grouped: H query heads
share H_kv key/value heads (SmolLM2: 9 query heads in 3 groups of 3, head size 64), with
rotary position embeddings (RoPE, base 100000) on queries and keys. Every layer calls
:func:`attention_core.attend`, so another registered variant can replace exact attention.

RoPE conventions: llama.cpp's GGUF converter reorders the query/key rows of every head so
that the two halves of each rotated pair are adjacent, and rotates adjacent pairs
(``"interleaved"``); HuggingFace keeps the original rows and rotates element e with element
e + E/2 (``"half"``). Both give the same model when the rows are in the matching order
(:func:`rows_to_half`, :func:`rows_to_interleaved`); the half-split rotation on rows stored
for the interleaved one is a plausible-looking but wrong model. Scores are summed in the
half-split feature order either way (:func:`half_split_order`), so the two layouts give the
same float32 numbers, and round like transformers' float32 run.

The KV cache holds each layer's keys (after RoPE) and values; a forward call with a cache
continues at the next positions, and returns a new cache (the old one is not modified).

The weight matrices may be stored in bfloat16 (half the memory of float32): each linear map
then casts its float32 input to bfloat16 and its output back to float32
(:func:`linear`), and the embedding rows are looked up in bfloat16 and widened; the
residual stream, RMSNorm, RoPE, attention and softmax are float32 in either case.

Shapes: B batch, L new tokens, P cached tokens, S = P + L keys, D width (576), H query heads
(9), K key/value heads (3), G = H / K heads per group (3), E head size (64), F MLP width
(1536), V vocabulary (49152), N layers (30).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from attention_core import masks
from attention_core.pretrained.ablation import head_multipliers, layer_scaling, scale_heads
from attention_core.pretrained.int4 import Int4Matrix
from attention_core.pretrained.rope import (
    ROPE_STYLES,
    apply_rope,
    half_split_order,
    rope_angles,
    rows_to_half,
    rows_to_interleaved,
)
from attention_core.pretrained.tokenizer import Tokenized, tokenize
from attention_core.registry import attend, get_variant
from attention_core.validation import check_bool, check_choice, check_int

FLOAT32_BYTES = 4
KEYS_AND_VALUES = 2


@dataclass(frozen=True)
class LlamaConfig:
    """The architecture numbers a llama decoder needs.

    Attributes:
        vocab_size (V), hidden_size (D), num_layers (N), num_heads (H), num_kv_heads (K),
        intermediate_size (F), context_length (most positions), rope_base (θ of RoPE),
        rms_eps (RMSNorm epsilon).
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
        if self.hidden_size % self.num_heads or (self.hidden_size // self.num_heads) % 2:
            raise ValueError(
                f"hidden_size {self.hidden_size} must split into {self.num_heads} heads of an "
                "even size"
            )
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads {self.num_heads} must be a multiple of num_kv_heads {self.num_kv_heads}"
            )
        if not self.rope_base > 1 or not 0 < self.rms_eps < 1:
            raise ValueError(
                f"rope_base must exceed 1 and rms_eps lie in (0, 1), got {self.rope_base!r} "
                f"and {self.rms_eps!r}"
            )

    @property
    def head_dim(self) -> int:
        """E, the size of one head."""
        return self.hidden_size // self.num_heads

    @property
    def group_size(self) -> int:
        """G, the query heads that share one key/value head."""
        return self.num_heads // self.num_kv_heads

    @property
    def cache_bytes_per_token(self) -> int:
        """Bytes the float32 KV cache grows by per token: N · 2 · K · E · 4."""
        return self.num_layers * KEYS_AND_VALUES * self.num_kv_heads * self.head_dim * FLOAT32_BYTES


@dataclass(frozen=True)
class DecoderCache:
    """Keys and values of every layer for the tokens seen so far.

    Attributes:
        keys: one (B, K, P, E) tensor per layer, after RoPE.
        values: one (B, K, P, E) tensor per layer.
        next_position: the position the next token will take (P plus the first offset).
    """

    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]
    next_position: int

    @property
    def length(self) -> int:
        """P, the number of cached tokens."""
        return int(self.keys[0].shape[-2])

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached keys and values."""
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))


@dataclass(frozen=True)
class DecoderOutput:
    """What :meth:`Decoder.forward` returns.

    Attributes:
        logits: (B, L, V) next-token logits at every new position.
        attentions: one (B, H, L, S) weight tensor per layer, or ``None`` when not requested.
        cache: the KV cache including these L tokens; pass it to the next call.
        embeddings: with ``grad=True``, the (B, L, D) input embeddings as an autograd leaf
            (a backward pass fills its ``.grad``); otherwise ``None``.
    """

    logits: torch.Tensor
    attentions: tuple[torch.Tensor, ...] | None
    cache: DecoderCache
    embeddings: torch.Tensor | None = None


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
    :func:`linear`).
    """

    def __init__(self, config: LlamaConfig, tensors: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.config = config
        for name in ("attn_norm", "qkv", "out", "mlp_norm", "gate_up", "down"):
            tensor = tensors[name]
            if isinstance(tensor, Int4Matrix):
                self.add_module(name, tensor)  # buffers: packed codes and scales
            else:
                self.register_parameter(name, nn.Parameter(tensor, requires_grad=False))

    def forward(
        self,
        x: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor, str],
        past: tuple[torch.Tensor, torch.Tensor] | None,
        attention: tuple[str, dict],
        mask: torch.Tensor | None,
        need_weights: bool,
        *,
        scaling: tuple[torch.Tensor, bool] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None, tuple[torch.Tensor, torch.Tensor]]:
        """Run the block on L new tokens.

        Args:
            x: (B, L, D) hidden states.
            rope: (cos (L, E/2), sin (L, E/2), style) for the new positions.
            past: cached (keys, values), each (B, K, P, E), or None.
            attention: (variant name, its resolved parameters).
            mask: (L, S) bool, True = may attend, or None for no mask.
            need_weights: also return the attention weights.
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
        q, k, v = qkv.split([heads * size, kv_heads * size, kv_heads * size], dim=-1)
        q = q.view(batch, length, heads, size).transpose(1, 2)  # (B, H, L, E)
        k = k.view(batch, length, kv_heads, size).transpose(1, 2)  # (B, K, L, E)
        v = v.view(batch, length, kv_heads, size).transpose(1, 2)  # (B, K, L, E)
        cos, sin, style = rope
        q, k = apply_rope(q, cos, sin, style), apply_rope(k, cos, sin, style)
        if past is not None:
            k = torch.cat((past[0], k), dim=2)  # (B, K, S, E)
            v = torch.cat((past[1], v), dim=2)  # (B, K, S, E)
        group = cfg.group_size
        variant, params = attention
        q_scored, k_scored = q, k
        if style == "interleaved":  # the same scores, summed in the half-split order
            order = half_split_order(size).clone()  # (E,), never the cached inference tensor
            q_scored, k_scored = q[..., order], k[..., order]  # (B, H, L, E), (B, K, S, E)
        # each key/value head serves G query heads: head h reads key head h // G
        result = attend(
            q_scored,
            k_scored.repeat_interleave(group, dim=1),  # (B, H, S, E)
            v.repeat_interleave(group, dim=1),  # (B, H, S, E)
            variant,
            mask=mask,
            need_weights=need_weights,
            **params,
        )
        out = result.output if scaling is None else scale_heads(result.output, *scaling)
        out = out.transpose(1, 2).reshape(batch, length, heads * size)  # (B, L, H·E)
        x = x + linear(out, self.out)  # (B, L, D)
        h = rms_norm(x, self.mlp_norm, cfg.rms_eps)  # (B, L, D)
        gate, up = linear(h, self.gate_up).chunk(2, dim=-1)  # (B, L, F) each
        x = x + linear(F.silu(gate) * up, self.down)  # (B, L, D)
        weights = None
        if need_weights:
            weights = result.weights  # (B, H, L, S)
        return x, weights, (k, v)


class Decoder(nn.Module):
    """A llama decoder plus its tokenizer, with swappable attention in every layer.

    Build it with :func:`attention_core.pretrained.load_smollm2`.

    Attributes:
        config: the :class:`LlamaConfig`.
        tokenizer: a byte-level BPE ``tokenizers.Tokenizer``.
        source: where the weights came from (a path), for display.
        variant, variant_params: the attention variant used in every layer.
        rope_style: ``"interleaved"`` or ``"half"``, the rotation applied to q and k.
    """

    def __init__(
        self,
        config: LlamaConfig,
        embedding: torch.Tensor,
        final_norm: torch.Tensor,
        layers: list[dict[str, torch.Tensor]],
        tokenizer,
        *,
        source: str = "",
        rope_style: str = "interleaved",
        variant: str = "scaled",
        **variant_params,
    ) -> None:
        super().__init__()
        self.config = config
        self.tokenizer = tokenizer
        self.source = source
        self.rope_style = check_choice("rope_style", rope_style, ROPE_STYLES)
        self.variant = variant
        self.variant_params = get_variant(variant).resolve_params(variant_params)
        self.embedding = nn.Parameter(embedding, requires_grad=False)  # (V, D), tied output
        self.final_norm = nn.Parameter(final_norm, requires_grad=False)  # (D,)
        self.layers = nn.ModuleList(DecoderLayer(config, tensors) for tensors in layers)
        self.eval()

    @property
    def weights_dtype(self) -> str:
        """How the layers' weight matrices are stored: ``"float32"``, ``"bfloat16"`` or
        ``"int4"`` (then the tied embedding is bfloat16)."""
        if isinstance(self.layers[0].qkv, Int4Matrix):
            return "int4"
        return str(self.embedding.dtype).removeprefix("torch.")

    def _twin(self) -> Decoder:
        """A shallow twin sharing every parameter and buffer tensor and the tokenizer."""
        shared = {id(t): t for t in (*self.parameters(), *self.buffers())}
        shared[id(self.tokenizer)] = self.tokenizer
        return copy.deepcopy(self, memo=shared)

    def with_variant(self, name: str, **params) -> Decoder:
        """Return a twin that shares this decoder's weights but uses another variant.

        Args:
            name: a registered variant name (see ``attention_core.VARIANTS``).
            **params: that variant's parameters; missing ones take their defaults.

        Returns:
            A new :class:`Decoder`; this one is unchanged.

        Raises:
            ValueError: for an unknown variant, an unknown parameter or a value out of range.
        """
        resolved = get_variant(name).resolve_params(params)
        twin = self._twin()
        twin.variant, twin.variant_params = name, resolved
        return twin

    def with_rope_style(self, style: str, *, reorder_rows: bool = True) -> Decoder:
        """Return a twin that applies the other RoPE rotation.

        Args:
            style: ``"interleaved"`` or ``"half"``.
            reorder_rows: reorder the query/key rows to match ``style`` (the same model,
                to float precision). ``False`` keeps the rows as they are: with ``"half"``
                on GGUF rows this is the classic conversion bug, a model that still writes
                fluent text but attends differently.

        Returns:
            A new :class:`Decoder`; only the reordered q/k rows are new tensors.

        Raises:
            ValueError: for an unknown style or a non-bool ``reorder_rows``, or reordered
                rows of int4 weights (their packing spans rows: load float weights).
        """
        style = check_choice("style", style, ROPE_STYLES)
        reorder_rows = check_bool("reorder_rows", reorder_rows)
        if reorder_rows and style != self.rope_style and self.weights_dtype == "int4":
            raise ValueError(
                "with_rope_style cannot reorder the rows of int4 weights; load the decoder "
                "with weights_dtype='float32' or 'bfloat16'"
            )
        twin = self._twin()
        twin.rope_style = style
        if reorder_rows and style != self.rope_style:
            cfg = self.config
            convert = rows_to_half if style == "half" else rows_to_interleaved
            q_rows, k_rows = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
            for layer in twin.layers:
                q, k, v = layer.qkv.split([q_rows, k_rows, k_rows], dim=0)
                rows = (convert(q, cfg.num_heads), convert(k, cfg.num_kv_heads), v)
                layer.qkv = nn.Parameter(torch.cat(rows, dim=0), requires_grad=False)
        return twin

    def tokenize(self, text: str) -> Tokenized:
        """Tokenise ``text`` with the byte-level BPE vocabulary (no BOS is added).

        Args:
            text: a non-blank string; ``<|endoftext|>`` and the other control tokens are
                matched whole.

        Returns:
            :class:`~attention_core.pretrained.tokenizer.Tokenized`: byte-level token strings
            (``Ġ`` is a space) and their ids.

        Raises:
            ValueError: when ``text`` is not a string or is blank.
        """
        return tokenize(self.tokenizer, text)

    def decode(self, ids) -> str:
        """Turn token ids back into text (control tokens are left out).

        Args:
            ids: a sequence of ints or a 1-D integer tensor.

        Returns:
            The decoded string.

        Raises:
            ValueError: for ids outside the vocabulary.
        """
        ids = [int(i) for i in (ids.tolist() if isinstance(ids, torch.Tensor) else ids)]
        bad = [i for i in ids if not 0 <= i < self.config.vocab_size]
        if bad:
            raise ValueError(f"token ids must lie in [0, {self.config.vocab_size}), got {bad[:5]}")
        return self.tokenizer.decode(ids)

    def _check_ids(self, input_ids: torch.Tensor, cache: DecoderCache | None) -> None:
        if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
            shape = tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else input_ids
            raise ValueError(f"input_ids must be a (B, L) tensor, got {shape!r}")
        if input_ids.dtype not in (torch.int64, torch.int32) or input_ids.numel() == 0:
            raise ValueError(
                f"input_ids must be a non-empty int64 or int32 tensor, got {input_ids.dtype} "
                f"of shape {tuple(input_ids.shape)}"
            )
        low, high = int(input_ids.min()), int(input_ids.max())
        if low < 0 or high >= self.config.vocab_size:
            raise ValueError(
                f"input_ids must lie in [0, {self.config.vocab_size}), got range [{low}, {high}]"
            )
        if cache is not None:
            if not isinstance(cache, DecoderCache) or len(cache.keys) != len(self.layers):
                raise ValueError(f"cache must be a DecoderCache from this decoder, got {cache!r}")
            if cache.keys[0].shape[0] != input_ids.shape[0]:
                raise ValueError(
                    f"cache holds batch {cache.keys[0].shape[0]}, input_ids batch "
                    f"{input_ids.shape[0]}"
                )

    def _attention_masks(
        self, length: int, total: int, cached: bool, mask: torch.Tensor | None
    ) -> list[torch.Tensor | None]:
        """Each layer's (L, S) mask: causal (lower right) AND the caller's mask (one for all
        layers, or one per layer); ``None`` where every entry is True."""
        spec = get_variant(self.variant)
        if cached and spec.pattern is not None:
            raise ValueError(
                f"variant {self.variant!r} builds its pattern from query index 0, so it cannot "
                "continue from a cache; run the whole sequence without a cache"
            )
        causal = masks.causal_lower_right(length, total)  # (L, S)
        count = len(self.layers)
        if mask is None:
            return [None if bool(causal.all()) else causal] * count
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            raise ValueError(f"mask must be a bool tensor, got {type(mask).__name__}")
        if tuple(mask.shape) not in ((length, total), (count, length, total)):
            raise ValueError(
                f"mask must have shape (L, S) = {(length, total)} or (N, L, S) = "
                f"{(count, length, total)}, got {tuple(mask.shape)}"
            )
        combined = causal & mask  # (L, S) or (N, L, S)
        per_layer = combined if combined.dim() == 3 else combined.expand(count, -1, -1)
        return [None if bool(m.all()) else m for m in per_layer]

    def forward(
        self,
        input_ids: torch.Tensor,
        *,
        need_weights: bool = False,
        cache: DecoderCache | None = None,
        position_offset: int = 0,
        mask: torch.Tensor | None = None,
        last_logits_only: bool = False,
        ablate=(),
        ablation: str = "zero",
        head_scale: torch.Tensor | None = None,
        grad: bool = False,
    ) -> DecoderOutput:
        """Run the decoder on L new tokens per sequence.

        Args:
            input_ids: (B, L) int64 token ids.
            need_weights: return every layer's (B, H, L, S) attention weights.
            cache: the previous call's ``DecoderOutput.cache``; the new tokens continue at
                its ``next_position``, and they see the cached keys.
            position_offset: without a cache, the position of the first token (the same
                text, shifted by k positions: RoPE makes the attention maps unchanged).
                Must be 0 with a cache.
            mask: extra bool mask, True = may attend, ANDed with the causal mask: (L, S) for
                every layer (e.g. a sliding window OR sink tokens, built with
                ``attention_core.masks``) or (N, L, S), one per layer.
            last_logits_only: project only the last position onto the vocabulary: logits
                (B, 1, V) (what the next token needs; the (L, V) projection is most of a
                long prompt's memory and a good part of its time).
            ablate: (layer, head) pairs, 0-based, whose attention output (before the output
                projection) is turned off (:mod:`~attention_core.pretrained.ablation`).
            ablation: ``"zero"`` (default: the output is 0) or ``"mean"`` (the head's mean
                output over these L positions).
            head_scale: optional float (N, H) or (B, N, H) multipliers of every head's
                output (1 = unchanged); with ``grad`` a backward pass fills its ``.grad``.
            grad: run with autograd instead of ``torch.inference_mode``; the output then
                carries the input embeddings as a leaf (``embeddings``). Needs float32 or
                bfloat16 weights: torch's int4 kernel has no derivative.

        Returns:
            :class:`DecoderOutput` with logits (B, L, V) (or (B, 1, V)), the weights, and the
            new cache. Without ``grad`` it runs under ``torch.inference_mode``: its tensors
            need no autograd bookkeeping, and must be cloned before any in-place change.

        Raises:
            ValueError: for ids that are not (B, L) integers in the vocabulary, a cache from
                elsewhere or of another batch, a negative offset or one with a cache,
                positions beyond the context length, a mask of the wrong shape or dtype, a
                positional variant (local, block, …) with a cache, a bad ablation pair or
                ``head_scale``, or ``grad`` with int4 weights.
        """
        self._check_ids(input_ids, cache)
        need_weights = check_bool("need_weights", need_weights)
        last_logits_only = check_bool("last_logits_only", last_logits_only)
        position_offset = check_int("position_offset", position_offset, low=0)
        if check_bool("grad", grad) and self.weights_dtype == "int4":
            raise ValueError(
                "grad=True needs float weights (torch's int4 kernel has no derivative): load "
                "the decoder with weights_dtype='float32' or 'bfloat16'"
            )
        if cache is not None and position_offset:
            raise ValueError(
                f"position_offset must be 0 with a cache (it continues at position "
                f"{cache.next_position}), got {position_offset}"
            )
        length = input_ids.shape[1]
        cached = cache.length if cache is not None else 0
        start = cache.next_position if cache is not None else position_offset
        if start + length > self.config.context_length:
            raise ValueError(
                f"positions {start}..{start + length - 1} exceed the context length "
                f"{self.config.context_length}"
            )
        shape = (self.config.num_layers, self.config.num_heads)
        scaling = head_multipliers(shape, ablate, ablation, head_scale)
        layer_masks = self._attention_masks(length, cached + length, cache is not None, mask)
        with torch.inference_mode(not grad):
            return self._run(
                input_ids,
                (start, cache),
                layer_masks,
                scaling,
                need_weights=need_weights,
                last_only=last_logits_only,
                grad=grad,
            )

    def _run(self, input_ids, start_cache, layer_masks, scaling, *, need_weights, last_only, grad):
        """The checked forward pass (see :meth:`forward`): embedding, layers, logits."""
        start, cache = start_cache
        length = input_ids.shape[1]
        cos, sin = rope_angles(
            torch.arange(start, start + length), self.config.head_dim, self.config.rope_base
        )  # (L, E/2) each
        x = F.embedding(input_ids.long(), self.embedding).float()  # (B, L, D) float32
        embeddings = x.requires_grad_() if grad else None
        attentions, keys, values = [], [], []
        for index, layer in enumerate(self.layers):
            past = (cache.keys[index], cache.values[index]) if cache is not None else None
            x, weights, (k, v) = layer(
                x,
                (cos, sin, self.rope_style),
                past,
                (self.variant, self.variant_params),
                layer_masks[index],
                need_weights,
                scaling=layer_scaling(*scaling, index),
            )
            keys.append(k)
            values.append(v)
            if need_weights:
                attentions.append(weights)  # (B, H, L, S)
        x = rms_norm(x, self.final_norm, self.config.rms_eps)  # (B, L, D)
        if last_only:
            x = x[:, -1:]  # (B, 1, D)
        logits = linear(x, self.embedding)  # (B, L or 1, V): tied input/output embedding
        new_cache = DecoderCache(tuple(keys), tuple(values), next_position=start + length)
        return DecoderOutput(
            logits=logits,
            attentions=tuple(attentions) if need_weights else None,
            cache=new_cache,
            embeddings=embeddings,
        )
