"""The cached run behind :mod:`~attention_core.experiments.score_parts`: one forward pass of a
llama decoder that keeps every part of the residual stream apart.

The residual stream entering layer l is the token embedding plus every earlier head's write
(head h of layer j writes its output o_{j,h} (L, E) times its slice of the layer's output
projection, out_j[:, h·E:(h+1)·E]) plus every earlier MLP's write. :func:`record_run` runs
each of the decoder's blocks once through the block itself
(:meth:`~attention_core.pretrained.llama_block.DecoderLayer.forward_intermediates`), and
records each part's write, the stream entering each layer, every RMSNorm scale
1/sqrt(mean(x²) + eps) (one number per position, and per head for Qwen3's q/k norms), the
queries and keys after RoPE, the attention weights and each head's output. With the scales
frozen at these values, the normed input of every layer is linear in the parts, which is what
lets a score be split.

:func:`score_run` is the same run behind a small LRU keyed by the decoder's identity (and its
variant and RoPE style) and the token ids, so that the cells of one input cost one forward.

Shapes: N layers, H query heads, K key/value heads, G = H / K, L tokens, D width, E head
size, V vocabulary, P parts = 1 + N·(H + 1) (the embedding, then each layer's H heads and its
MLP).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.nn import functional as F

from attention_core.experiments.heads import as_ids
from attention_core.pretrained.llama import Decoder
from attention_core.pretrained.llama_block import (
    BlockSteps,
    LayerRun,
    LlamaConfig,
    linear,
    rms_norm,
    rms_scale,
)
from attention_core.pretrained.rope import Rope, rope_at
from attention_core.registry import get_variant

EMBEDDING = "emb"
"""The name of the token embedding's part."""
MAX_RUN_LENGTH = 256
"""Most tokens of one run: its writes take P · L · D float32 numbers (177 MB for SmolLM2)."""
RUN_CACHE_SIZE = 2
"""Runs :func:`score_run` keeps, least recently used first out."""
WEIGHT_DTYPES = ("float32", "bfloat16")
"""The weights a run splits: int4 codes have no float matrix to project the parts with."""


def head_name(layer: int, head: int) -> str:
    """``"L{layer}H{head}"``, 0-based: the part written by one head."""
    return f"L{layer}H{head}"


def mlp_name(layer: int) -> str:
    """``"MLP{layer}"``, 0-based: the part written by one layer's MLP."""
    return f"MLP{layer}"


def part_names(layers: int, heads: int) -> tuple[str, ...]:
    """Every part of the residual stream in order: the embedding, then per layer its heads and
    its MLP (P = 1 + layers · (heads + 1) names); the first 1 + l · (heads + 1) of them make
    the stream entering layer l."""
    names = [EMBEDDING]
    for layer in range(layers):
        names.extend(head_name(layer, head) for head in range(heads))
        names.append(mlp_name(layer))
    return tuple(names)


def parts_before(config: LlamaConfig, layer: int) -> int:
    """How many parts make the residual stream entering ``layer``: 1 + layer · (H + 1)."""
    return 1 + layer * (config.num_heads + 1)


@dataclass(frozen=True)
class ScoreRun:
    """One recorded forward pass, every part of the residual stream kept apart (float32 as
    the decoder computes it).

    Attributes:
        input_ids: the L token ids.
        names: the P part names (:func:`part_names`).
        removed: the part whose write was set to zero in this run (an ablation), or None.
        writes: (P, L, D) each part's write into the residual stream.
        residual: (N + 1, L, D) the stream entering each layer; the last is the stream after
            the last layer (what the final norm reads).
        attn_scales: (N, L) the attention RMSNorm's 1/sqrt(mean(x²) + eps) per position.
        mlp_scales: (N, L) the MLP RMSNorm's, per position.
        final_scales: (L,) the final RMSNorm's, per position.
        q_scales: (N, H, L) the per-head query norm's scales (Qwen3), or None.
        k_scales: (N, K, L) the per-head key norm's scales (Qwen3), or None.
        q: (N, H, L, E) queries after RoPE. k: (N, K, L, E) keys after RoPE.
        weights: (N, H, L, L) attention weights (causal).
        head_outputs: (N, H, L, E) each head's output before the output projection.
        logits: (L, V) next-token logits.
        rope: the rotation of positions 0 .. L − 1 (cos and sin (L, E/2)).
    """

    input_ids: tuple[int, ...]
    names: tuple[str, ...]
    removed: str | None
    writes: torch.Tensor
    residual: torch.Tensor
    attn_scales: torch.Tensor
    mlp_scales: torch.Tensor
    final_scales: torch.Tensor
    q_scales: torch.Tensor | None
    k_scales: torch.Tensor | None
    q: torch.Tensor
    k: torch.Tensor
    weights: torch.Tensor
    head_outputs: torch.Tensor
    logits: torch.Tensor
    rope: Rope

    @property
    def length(self) -> int:
        """L, the number of tokens."""
        return len(self.input_ids)


def check_float_weights(decoder: Decoder, purpose: str) -> Decoder:
    """The decoder, if it is a llama :class:`Decoder` whose weight matrices are float
    (``purpose`` names what reads them as matrices, in the refusal).

    Raises:
        ValueError: for something that is not a :class:`Decoder`, or int4 weights (naming
            the ``weights_dtype``).
    """
    if not isinstance(decoder, Decoder):
        raise ValueError(f"decoder must be a llama Decoder, got {type(decoder).__name__}")
    if decoder.weights_dtype not in WEIGHT_DTYPES:
        raise ValueError(
            f"{purpose} need float weights, got weights_dtype={decoder.weights_dtype!r}: "
            "load the decoder with weights_dtype='float32' or 'bfloat16'"
        )
    return decoder


def check_decoder(decoder: Decoder, purpose: str = "score parts") -> Decoder:
    """The decoder, if its parts can be split (``purpose`` names what needs them in the
    refusal: ``"score parts"``, ``"the logit lens and its attributions"``).

    Raises:
        ValueError: for something that is not a :class:`Decoder`, int4 weights (name the
            ``weights_dtype``) or an attention variant other than dense exact attention.
    """
    check_float_weights(decoder, purpose)
    spec = get_variant(decoder.variant)
    if not spec.exact or spec.pattern is not None:
        raise ValueError(
            f"score parts split softmax(q·k/√E) over every causal key; the decoder's variant "
            f"{decoder.variant!r} is not dense exact attention (use 'scaled')"
        )
    return decoder


def check_run_ids(decoder: Decoder, input_ids) -> torch.Tensor:
    """Token ids as a checked (1, L) int64 tensor.

    Raises:
        ValueError: for an empty input, a batch of more than one, ids outside the vocabulary
            or more than :data:`MAX_RUN_LENGTH` (or the context length) tokens.
    """
    if isinstance(input_ids, torch.Tensor):
        input_ids = input_ids.detach().cpu().numpy()  # NumPy's copy of a tensor warns
    ids = as_ids(input_ids)  # (1, L)
    vocab, length = decoder.config.vocab_size, ids.shape[1]
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= vocab:
        raise ValueError(f"input_ids must lie in [0, {vocab}), got range [{low}, {high}]")
    most = min(MAX_RUN_LENGTH, decoder.config.context_length)
    if length > most:
        raise ValueError(f"input_ids may hold at most {most} tokens, got {length}")
    return ids


def _head_writes(decoder: Decoder, index: int, head_outputs: torch.Tensor) -> torch.Tensor:
    """Each head's write into the stream: its output times its slice of the output projection
    (their sum over heads is the block's attention write).

    Args:
        head_outputs: (H, L, E) one layer's head outputs.

    Returns:
        (H, L, D) float32.
    """
    out = decoder.layers[index].out  # (D, H·E)
    slices = out.float().view(-1, decoder.config.num_heads, decoder.config.head_dim)  # (D, H, E)
    rounded = head_outputs.to(out.dtype).float()  # (H, L, E) as linear rounds its input
    return torch.einsum("hle,dhe->hld", rounded, slices)  # (H, L, D)


def _layer_steps(
    decoder: Decoder, index: int, x: torch.Tensor, run: LayerRun, removed: str | None
) -> BlockSteps:
    """One block of :func:`record_run`, run by the block itself, with ``removed`` (one of its
    heads) turned off; zeroing its MLP is the caller's.

    Args:
        x: (1, L, D) the stream entering the layer.

    Returns:
        :class:`BlockSteps` with batch 1.
    """
    heads = decoder.config.num_heads
    keep = torch.tensor([[0.0 if head_name(index, h) == removed else 1.0 for h in range(heads)]])
    scaling = (keep, False) if bool((keep == 0).any()) else None  # (1, H) multipliers
    length = x.shape[1]
    causal = decoder.causal_mask(length, length)  # (L, L), within a sliding window
    mask = None if bool(causal.all()) else causal
    return decoder.layers[index].forward_intermediates(x, run, mask=mask, scaling=scaling)


def record_run(decoder: Decoder, input_ids, *, removed: str | None = None) -> ScoreRun:
    """Run the decoder once on ``input_ids`` and record every part of its residual stream.

    The steps are the decoder's own blocks' (a test checks the stream and the logits against
    :meth:`Decoder.forward`); ``removed`` zeroes one part's write at every position: a head
    (the decoder's zero ablation, ``ablate=[(layer, head)]``), an MLP or the embedding.

    Args:
        decoder: a llama :class:`Decoder` with float32 or bfloat16 weights.
        input_ids: L token ids (a sequence, or a (1, L) tensor).
        removed: a part name from :func:`part_names` to zero, or None.

    Returns:
        :class:`ScoreRun`.

    Raises:
        ValueError: for a decoder :func:`check_decoder` refuses, ids :func:`check_run_ids`
            refuses, or an unknown ``removed`` name.
    """
    check_decoder(decoder)
    ids = check_run_ids(decoder, input_ids)  # (1, L)
    cfg = decoder.config
    names = part_names(cfg.num_layers, cfg.num_heads)
    if removed is not None and removed not in names:
        raise ValueError(f"removed must be one of the part names {names[:4]}…, got {removed!r}")
    length = ids.shape[1]
    rope = rope_at(cfg, decoder.rope_style, 0, length)  # (L, E/2) angles
    run = LayerRun(rope, decoder.variant, decoder.variant_params, need_weights=True)
    with torch.inference_mode():
        x = F.embedding(ids, decoder.embedding).float()  # (1, L, D)
        if removed == EMBEDDING:
            x = torch.zeros_like(x)  # (1, L, D)
        streams, writes, steps = [x[0]], [x[0][None]], []
        for index in range(cfg.num_layers):
            step = _layer_steps(decoder, index, x, run, removed)
            mlp = torch.zeros_like(step.mlp_write) if removed == mlp_name(index) else step.mlp_write
            x = step.attended + mlp  # (1, L, D)
            steps.append(step)
            streams.append(x[0])
            writes.extend((_head_writes(decoder, index, step.head_outputs[0]), mlp))
        normed = rms_norm(x, decoder.final_norm, cfg.rms_eps)  # (1, L, D)
        output = decoder.embedding if decoder.output is None else decoder.output  # (V, D)
        logits = linear(normed, output)[0]  # (L, V)

        def stacked(field: str) -> torch.Tensor | None:
            values = [getattr(step, field) for step in steps]  # each (1, …)
            return None if values[0] is None else torch.cat(values)  # (N, …)

        return ScoreRun(
            input_ids=tuple(ids[0].tolist()),
            names=names,
            removed=removed,
            writes=torch.cat(writes),  # (P, L, D)
            residual=torch.stack(streams),  # (N + 1, L, D)
            attn_scales=stacked("attn_scale"),
            mlp_scales=stacked("mlp_scale"),
            final_scales=rms_scale(x, cfg.rms_eps)[0],
            q_scales=stacked("q_scale"),
            k_scales=stacked("k_scale"),
            q=stacked("q"),
            k=stacked("k"),
            weights=stacked("weights"),
            head_outputs=stacked("head_outputs"),
            logits=logits,
            rope=rope,
        )


class DecoderRuns:
    """An LRU of ``size`` recorded runs keyed by the decoder's identity (a weak reference: a
    cached run never keeps a decoder alive, and a new decoder at a reused address is not
    mistaken for the old one), its variant and RoPE style, and the token ids (thread-safe).

    Args:
        record: ``record(decoder, ids)`` → the run, ``ids`` a checked (1, L) tensor.
        size: the runs kept, least recently used first out.
    """

    def __init__(self, record: Callable[[Decoder, torch.Tensor], Any], size: int):
        self._record, self._size = record, size
        self._runs: OrderedDict[tuple, tuple[weakref.ref, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, decoder: Decoder, input_ids) -> Any:
        """The run of ``input_ids`` on ``decoder``, recorded once (see the class).

        Raises:
            ValueError: for a decoder :func:`check_decoder` refuses, or ids
                :func:`check_run_ids` refuses.
        """
        check_decoder(decoder)
        ids = check_run_ids(decoder, input_ids)  # (1, L)
        key = (id(decoder), decoder.variant, decoder.rope_style, tuple(ids[0].tolist()))
        with self._lock:
            held = self._runs.get(key)
            if held is not None and held[0]() is decoder:
                self._runs.move_to_end(key)
                return held[1]
        run = self._record(decoder, ids)
        with self._lock:
            self._runs[key] = (weakref.ref(decoder), run)
            self._runs.move_to_end(key)
            while len(self._runs) > self._size:
                self._runs.popitem(last=False)
        return run


_RUNS = DecoderRuns(lambda decoder, ids: record_run(decoder, ids), RUN_CACHE_SIZE)
"""(``record_run`` looked up at each call: the module's function, as a test replaces it.)"""


def score_run(decoder: Decoder, input_ids) -> ScoreRun:
    """:func:`record_run` without ablation, through a :class:`DecoderRuns` of
    :data:`RUN_CACHE_SIZE` runs.

    Args:
        decoder: a llama :class:`Decoder` with float32 or bfloat16 weights.
        input_ids: L token ids.

    Returns:
        :class:`ScoreRun` (the same object for a repeated call).

    Raises:
        ValueError: as :func:`record_run`.
    """
    return _RUNS.get(decoder, input_ids)
