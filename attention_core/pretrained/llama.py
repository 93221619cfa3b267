"""A llama-family decoder (SmolLM2-135M, Llama, Qwen2, Qwen3) whose attention runs through
``attend``.

Per layer: x + attention(RMSNorm(x)), then + SwiGLU MLP(RMSNorm(x)); a final RMSNorm and
logits against the output matrix (the token embedding itself when tied, as in SmolLM2).
Qwen2 adds a bias to q, k and v; Qwen3 normalises every head's query and key before RoPE
(:mod:`~attention_core.pretrained.llama_block`). Attention is causal and grouped: H query heads
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
from attention_core.pretrained.ablation import head_multipliers, layer_scaling
from attention_core.pretrained.int4 import Int4Matrix
from attention_core.pretrained.llama_block import (
    DecoderLayer,
    LayerRun,
    LlamaConfig,
    linear,
    rms_norm,
)
from attention_core.pretrained.rope import ROPE_STYLES, rope_at, rows_to_half, rows_to_interleaved
from attention_core.pretrained.tokenizer import Tokenized, tokenize
from attention_core.registry import get_variant
from attention_core.validation import check_bool, check_choice, check_int


def _reorder_layer(layer: nn.Module, convert, rows: tuple[int, int], cfg: LlamaConfig) -> None:
    """Put one block's query/key rows (and their bias and per-head norm features) into the
    other RoPE order with ``convert`` (:func:`rows_to_half` or :func:`rows_to_interleaved`)."""
    q_rows, k_rows = rows

    def reorder(tensor: torch.Tensor, heads: int) -> torch.Tensor:
        flat = tensor if tensor.dim() == 2 else tensor[:, None]  # (rows, D) or (rows, 1)
        return convert(flat, heads).reshape(tensor.shape)

    q, k, v = layer.qkv.split([q_rows, k_rows, k_rows], dim=0)
    stacked = (reorder(q, cfg.num_heads), reorder(k, cfg.num_kv_heads), v)
    layer.qkv = nn.Parameter(torch.cat(stacked, dim=0), requires_grad=False)
    if cfg.qkv_bias:
        q, k, v = layer.qkv_bias.split([q_rows, k_rows, k_rows], dim=0)
        stacked = (reorder(q, cfg.num_heads), reorder(k, cfg.num_kv_heads), v)
        layer.qkv_bias = nn.Parameter(torch.cat(stacked), requires_grad=False)
    if cfg.qk_norm:  # one (E,) weight shared by every head: reordered as one head
        layer.q_norm = nn.Parameter(reorder(layer.q_norm, 1), requires_grad=False)
        layer.k_norm = nn.Parameter(reorder(layer.k_norm, 1), requires_grad=False)


def _window(length: int, total: int, window: int) -> torch.Tensor:
    """(L, S) bool: query i (at key position i + S − L) may see key j when j > i + S − L − W,
    the last W keys up to itself (transformers' sliding window)."""
    query = torch.arange(total - length, total)[:, None]  # (L, 1)
    return torch.arange(total)[None, :] > query - window  # (L, S)


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


class Decoder(nn.Module):
    """A llama decoder plus its tokenizer, with swappable attention in every layer.

    Build it with :func:`attention_core.pretrained.load_gguf` (any llama, Qwen2 or Qwen3
    GGUF file) or :func:`attention_core.pretrained.load_smollm2`.

    Attributes:
        config: the :class:`LlamaConfig`.
        tokenizer: a ``tokenizers.Tokenizer`` (byte-level or SentencePiece BPE), or an object
            that stands for one (:func:`load_gguf` gives a
            :class:`~attention_core.pretrained.gguf_tokenizer.LazyTokenizer`, built on first use).
        token_spelling: how its tokens spell bytes: ``"byte_level"`` (``Ġ`` is a space) or
            ``"sentencepiece"`` (``▁`` is a space, ``<0xE7>`` a byte).
        output: the (V, D) output matrix when it is not the embedding (untied), else None.
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
        output: torch.Tensor | Int4Matrix | None = None,
        token_spelling: str = "byte_level",
        variant: str = "scaled",
        **variant_params,
    ) -> None:
        super().__init__()
        self.config = config
        self.tokenizer = tokenizer
        self.token_spelling = token_spelling
        self.source = source
        self.rope_style = check_choice("rope_style", rope_style, ROPE_STYLES)
        self.variant = variant
        self.variant_params = get_variant(variant).resolve_params(variant_params)
        self.embedding = nn.Parameter(embedding, requires_grad=False)  # (V, D), tied output
        self.final_norm = nn.Parameter(final_norm, requires_grad=False)  # (D,)
        if isinstance(output, Int4Matrix):
            self.output = output  # (V, D) as packed 4-bit codes
        elif output is not None:
            self.output = nn.Parameter(output, requires_grad=False)  # (V, D)
        else:
            self.output = None  # tied: the embedding is the output matrix
        self.layers = nn.ModuleList(DecoderLayer(config, tensors) for tensors in layers)
        self.eval()

    @property
    def weights_dtype(self) -> str:
        """How the layers' weight matrices are stored: ``"float32"``, ``"bfloat16"`` or
        ``"int4"`` (any matrix kept as 4-bit codes; the others and the embedding are then
        bfloat16)."""
        if any(isinstance(module, Int4Matrix) for module in self.modules()):
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
                _reorder_layer(layer, convert, (q_rows, k_rows), cfg)
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

    def causal_mask(self, length: int, total: int) -> torch.Tensor:
        """Which keys each new query may see: causal (lower right: the L queries are the last
        of S positions), within the config's sliding window when it has one (Mistral).

        Returns:
            (L, S) bool.
        """
        causal = masks.causal_lower_right(length, total)  # (L, S)
        if self.config.sliding_window:
            causal = causal & _window(length, total, self.config.sliding_window)  # (L, S)
        return causal

    def _attention_masks(
        self, length: int, total: int, cached: bool, mask: torch.Tensor | None
    ) -> list[torch.Tensor | None]:
        """Each layer's (L, S) mask: causal (lower right, within the config's sliding window)
        AND the caller's mask (one for all layers, or one per layer); ``None`` where every
        entry is True."""
        spec = get_variant(self.variant)
        if cached and spec.pattern is not None:
            raise ValueError(
                f"variant {self.variant!r} builds its pattern from query index 0, so it cannot "
                "continue from a cache; run the whole sequence without a cache"
            )
        causal = self.causal_mask(length, total)  # (L, S)
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
                start=start,
                cache=cache,
                layer_masks=layer_masks,
                scaling=scaling,
                need_weights=need_weights,
                last_only=last_logits_only,
                grad=grad,
            )

    def _run(
        self,
        input_ids: torch.Tensor,
        *,
        start: int,
        cache: DecoderCache | None,
        layer_masks: list[torch.Tensor | None],
        scaling: tuple,
        need_weights: bool,
        last_only: bool,
        grad: bool,
    ) -> DecoderOutput:
        """The checked forward pass (see :meth:`forward`): embedding, layers, logits."""
        length = input_ids.shape[1]
        rope = rope_at(self.config, self.rope_style, start, length)  # (L, E/2) angles
        run = LayerRun(rope, self.variant, self.variant_params, need_weights)
        x = F.embedding(input_ids.long(), self.embedding).float()  # (B, L, D) float32
        embeddings = x.requires_grad_() if grad else None
        attentions, keys, values = [], [], []
        for index, layer in enumerate(self.layers):
            past = (cache.keys[index], cache.values[index]) if cache is not None else None
            x, weights, (k, v) = layer(
                x, run, past=past, mask=layer_masks[index], scaling=layer_scaling(*scaling, index)
            )
            keys.append(k)
            values.append(v)
            if need_weights:
                attentions.append(weights)  # (B, H, L, S)
        x = rms_norm(x, self.final_norm, self.config.rms_eps)  # (B, L, D)
        if last_only:
            x = x[:, -1:]  # (B, 1, D)
        output = self.embedding if self.output is None else self.output  # (V, D)
        logits = linear(x, output)  # (B, L or 1, V)
        new_cache = DecoderCache(tuple(keys), tuple(values), next_position=start + length)
        return DecoderOutput(
            logits=logits,
            attentions=tuple(attentions) if need_weights else None,
            cache=new_cache,
            embeddings=embeddings,
        )
