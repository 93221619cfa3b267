"""What a head writes: the residual stream read as next-token predictions after every layer
(the logit lens), the last position's logit difference split into every part's direct
contribution, and one head's write read as tokens (every head's OV copying score, a summary
of the same write over the whole vocabulary, is :mod:`~attention_core.experiments.ov_copying`).

A llama decoder's logits are W_U · N_f(h), h the stream after the last layer, N_f(x) =
g_f ⊙ x / s(x) its final RMSNorm with s(x) = sqrt(mean(x²) + eps), and W_U the (V, D) output
matrix (the token embedding itself when tied, as in SmolLM2; the decoder scales its logits
no further). The stream is a sum of parts (as in
:mod:`~attention_core.experiments.score_run`): the embedding, every head's write (its (E,)
output times its slice W_O[:, h·E:(h+1)·E] of the layer's output projection; under
grouped-query attention every query head keeps its own slice) and every MLP's write. The
output projection has no bias in the llama, Qwen2 and Qwen3 families (Qwen2's value bias
reaches the stream through the heads' outputs, so it is part of each head's write).

* :func:`logit_lens`: log_softmax(W_U · N_f(h_l)) for the stream h_l after each layer l (row 0
  after the embedding), with s recomputed from h_l itself, or frozen at the last layer's
  s(h_N) (``frozen_scale=True``: the lens that makes the early layers look uniform, since an
  early stream is much smaller than the last one).
* :func:`direct_logit_attribution`: ⟨g_f ⊙ part / s(h_N), W_U[answer] − W_U[alternative]⟩ for
  every part at the last position; the parts sum to the model's own logit difference.
* :func:`head_write_tokens`: W_U · (g_f ⊙ one head's write / s(h_N)) at the last position,
  its top and bottom k tokens.

All three read one cached forward pass on the decoder's own path (:func:`lens_run`:
the same numbers as :meth:`Decoder.forward`); none changes the decoder. The lens's rows are
one float32 product with W_U whatever the weights (:func:`float_logits`); its last row is the
model's own logits. With bfloat16 weights the attribution sums to the logit difference only
to bfloat16's rounding (the parts are projected unrounded).

Shapes: N layers, H query heads, K key/value heads, G = H / K, L tokens, D width, E head size,
V vocabulary, P parts = 1 + N·(H + 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

from attention_core.experiments.heads import readonly
from attention_core.experiments.score_run import (
    DecoderRuns,
    check_decoder,
    parts_before,
)
from attention_core.pretrained.llama import Decoder
from attention_core.pretrained.llama_block import LayerRun, linear, rms_norm, rms_scale
from attention_core.pretrained.rope import rope_at
from attention_core.validation import check_bool, check_int

EMBED = "embed"
"""The name of the token embedding's part in :func:`direct_logit_attribution`."""
DEFAULT_TOP_TOKENS = 10
RUN_CACHE_SIZE = 2
"""Runs :func:`lens_run` keeps, least recently used first out."""
LENS_CHUNK = 8192
"""Rows of W_U turned to float32 at a time by :func:`float_logits` (9 MB for SmolLM2)."""
LENS_PURPOSE = "the logit lens and its attributions"
"""What :func:`check_decoder` names when it refuses a decoder here."""


@dataclass(frozen=True)
class HeadTokens:
    """The tokens one head's write at the last position pushes up and down most.

    Attributes:
        top: read-only (k,) int64 token ids, largest logit first.
        top_values: read-only (k,) float64 their logits, W_U · (g_f ⊙ write / s(h_N)).
        bottom: read-only (k,) int64 token ids, smallest logit first.
        bottom_values: read-only (k,) float64 their logits.
        layer, head: the head, 0-based.
    """

    top: np.ndarray
    top_values: np.ndarray
    bottom: np.ndarray
    bottom_values: np.ndarray
    layer: int
    head: int


@dataclass(frozen=True)
class LensRun:
    """One forward pass on the decoder's own path (its blocks, no attention weights kept: the
    same numbers as :meth:`Decoder.forward`), with the stream kept after every layer and
    every part's write at the last position T.

    Attributes:
        input_ids: the L token ids.
        streams: (N + 1, L, D) float32, after the embedding and after each layer.
        final_scales: (L,) the final norm's 1/s(h_N) at every position.
        last_writes: (P, D) float32 every part's write at T, in :func:`attribution_names`
            order (summed, ``streams[-1, -1]``).
        logits: (L, V) the model's next-token logits.
    """

    input_ids: tuple[int, ...]
    streams: torch.Tensor
    final_scales: torch.Tensor
    last_writes: torch.Tensor
    logits: torch.Tensor


def attribution_names(layers: int, heads: int) -> tuple[str, ...]:
    """The P part names of :func:`direct_logit_attribution` in stream order: ``"embed"``, then
    per layer l its heads ``"L{l}H{h}"`` and its MLP ``"L{l}MLP"`` (0-based)."""
    names = [EMBED]
    for layer in range(layers):
        names.extend(f"L{layer}H{head}" for head in range(heads))
        names.append(f"L{layer}MLP")
    return tuple(names)


def unembedding(decoder: Decoder) -> torch.Tensor:
    """W_U, the (V, D) matrix the decoder's logits are computed with: its ``output`` matrix,
    or the token embedding when tied (as :meth:`Decoder.forward` chooses it)."""
    return decoder.embedding if decoder.output is None else decoder.output


def final_norm_logits(decoder: Decoder, x: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """W_U · (g_f ⊙ x · scales): vectors of the stream read through the final norm with the
    given scales (1/s), computed as the decoder computes its logits (:func:`linear`).

    Args:
        decoder: a llama :class:`Decoder`. x: (..., D) float32. scales: the final norm's 1/s,
            of x's leading shape or broadcastable to it.

    Returns:
        (..., V) float32 logits.
    """
    normed = x * scales[..., None] * decoder.final_norm  # (..., D), as rms_norm computes it
    return linear(normed, unembedding(decoder))  # (..., D) @ (D, V) -> (..., V)


def float_logits(decoder: Decoder, normed: torch.Tensor) -> torch.Tensor:
    """W_U · normed as one float32 product, W_U turned to float32 :data:`LENS_CHUNK` rows at a
    time (never a whole float32 copy).

    Why not the decoder's own :func:`linear`: with bfloat16 weights that is a bfloat16
    product, which a CPU without AVX512-BF16 or AMX computes far slower than float32 (AMD
    EPYC, 2 threads, (589, 576) × (576, 49152): 3.88 s in bfloat16, 0.59 s in float32). Each
    chunk's product fills whole rows of a (V, R) result, returned transposed: writing column
    blocks of an (R, V) result instead took 0.37 s against 0.34 s for SmolLM2's 31 × 8 rows.

    Args:
        decoder: a llama :class:`Decoder`. normed: (R, D) float32, the final norm's output.

    Returns:
        (R, V) float32, a transposed view (its rows are strided; ``.view`` may split R).
    """
    output = unembedding(decoder)  # (V, D)
    logits = normed.new_empty(output.shape[0], normed.shape[0])  # (V, R)
    for start in range(0, output.shape[0], LENS_CHUNK):
        rows = output[start : start + LENS_CHUNK].float()  # (C, D)
        torch.matmul(rows, normed.T, out=logits[start : start + rows.shape[0]])  # (C, R)
    return logits.T


def head_writes(decoder: Decoder, layer: int, outputs: torch.Tensor) -> torch.Tensor:
    """Each head's write: its (E,) output times its slice W_O[:, h·E:(h+1)·E] (rounded to the
    weights' dtype first, as :func:`linear` rounds the merged outputs).

    Args:
        outputs: (H, E) one layer's head outputs at one position.

    Returns:
        (H, D) float32; their sum over the heads is the layer's attention write.
    """
    cfg = decoder.config
    out = decoder.layers[layer].out  # (D, H·E)
    slices = out.float().view(-1, cfg.num_heads, cfg.head_dim)  # (D, H, E)
    rounded = outputs.to(out.dtype).float()  # (H, E)
    return torch.einsum("he,dhe->hd", rounded, slices)  # (H, D)


def record_lens_run(decoder: Decoder, ids: torch.Tensor) -> LensRun:
    """Run the decoder's blocks on (1, L) checked ids as :meth:`Decoder.forward` does, keeping
    the stream after every layer and every part's write at the last position."""
    cfg = decoder.config
    length = ids.shape[1]
    run = LayerRun(
        rope_at(cfg, decoder.rope_style, 0, length),
        decoder.variant,
        decoder.variant_params,
        need_weights=False,
    )
    causal = decoder.causal_mask(length, length)  # (L, L), within a sliding window
    mask = None if bool(causal.all()) else causal
    with torch.inference_mode():
        x = F.embedding(ids, decoder.embedding).float()  # (1, L, D)
        streams, writes = [x[0]], [x[0, -1][None]]
        for index, block in enumerate(decoder.layers):
            steps = block.forward_intermediates(x, run, mask=mask)
            x = steps.attended + steps.mlp_write  # (1, L, D), as the block's forward
            streams.append(x[0])
            writes.extend(
                (
                    head_writes(decoder, index, steps.head_outputs[0, :, -1]),
                    steps.mlp_write[0, -1][None],
                )
            )
        normed = rms_norm(x, decoder.final_norm, cfg.rms_eps)  # (1, L, D)
        return LensRun(
            input_ids=tuple(ids[0].tolist()),
            streams=torch.stack(streams),  # (N + 1, L, D)
            final_scales=rms_scale(x, cfg.rms_eps)[0],  # (L,)
            last_writes=torch.cat(writes),  # (P, D)
            logits=linear(normed, unembedding(decoder))[0],  # (L, V)
        )


_RUNS = DecoderRuns(record_lens_run, RUN_CACHE_SIZE)


def lens_run(decoder: Decoder, input_ids) -> LensRun:
    """:func:`record_lens_run` behind a :class:`DecoderRuns` of :data:`RUN_CACHE_SIZE` runs.

    Args:
        decoder: a llama :class:`Decoder` with float32 or bfloat16 weights and exact dense
            attention. input_ids: L token ids (a sequence, or a (1, L) tensor), at most 256.

    Returns:
        :class:`LensRun` (the same object for a repeated call).

    Raises:
        ValueError: for int4 weights, another variant, or empty, too long or
            out-of-vocabulary ids.
    """
    return _RUNS.get(decoder, input_ids)


def logit_lens(
    decoder: Decoder, input_ids, *, frozen_scale: bool = False, positions: int | None = None
) -> torch.Tensor:
    """Read the residual stream after every layer as next-token log-probabilities.

    Row l is log_softmax(W_U · N_f(h_l)) at every position, h_0 the embedding and h_l the
    stream after layer l (0-based layer l − 1). With the final norm's scale recomputed from
    each h_l (the default) the last row is the model's own next-token log-probabilities
    (taken from the run's logits: a float32 product of the rows rounds otherwise, by up to
    about 1e-5 of SmolLM2's float32 logits, and by bfloat16's step with bfloat16 weights).
    With ``frozen_scale=True`` every row uses the last layer's s(h_N) at its position instead:
    the last row is unchanged, the early rows are much flatter.

    Args:
        decoder: a llama :class:`Decoder` with float32 or bfloat16 weights and exact dense
            attention.
        input_ids: L token ids (a sequence, or a (1, L) tensor), at most 256.
        frozen_scale: freeze the final norm's scale at the last layer's.
        positions: keep only the last ``positions`` positions (1 to L; all when None): the
            run still reads the whole prompt, the product is made for those only.

    Returns:
        (N + 1, P, V) float32 tensor, P = ``positions`` or L (31 × P × 49152 for SmolLM2:
        6 MB per position).

    Raises:
        ValueError: for int4 weights, another variant, empty, too long or out-of-vocabulary
            ids, a ``frozen_scale`` that is not a bool, or ``positions`` outside [1, L].
    """
    check_decoder(decoder, LENS_PURPOSE)
    frozen_scale = check_bool("frozen_scale", frozen_scale)
    run = lens_run(decoder, input_ids)
    length = len(run.input_ids)
    kept = length if positions is None else check_int("positions", positions, low=1, high=length)
    with torch.no_grad():
        streams = run.streams[:, length - kept :]  # (N + 1, P, D)
        if frozen_scale:
            scales = run.final_scales[None, length - kept :]  # (1, P)
        else:
            scales = rms_scale(streams, decoder.config.rms_eps)  # (N + 1, P)
        normed = streams * scales[..., None] * decoder.final_norm  # (N + 1, P, D), as rms_norm
        rows = normed.reshape(-1, normed.shape[-1])  # ((N + 1)·P, D)
        logits = float_logits(decoder, rows).view(*normed.shape[:2], -1)  # (N + 1, P, V)
        logits[-1] = run.logits[length - kept :]  # the model's own (see above)
        return logits.sub_(torch.logsumexp(logits, dim=-1, keepdim=True))  # log-softmax


def check_token(name: str, token, vocab: int) -> int:
    """A token id checked to lie in the vocabulary.

    Raises:
        ValueError: naming ``name`` and the value, for a non-integer or an id outside [0, V).
    """
    return check_int(name, token, low=0, high=vocab - 1)


def direct_logit_attribution(decoder: Decoder, input_ids, answer, alternative) -> dict[str, float]:
    """Split the last position's logit[answer] − logit[alternative] into every part's direct
    contribution.

    DLA(part) = ⟨g_f ⊙ part / s(h_N), W_U[answer] − W_U[alternative]⟩ at the last position
    T, with s(h_N) the final norm's scale of the whole stream there (frozen: the parts then
    add up). The parts are the embedding, every head's own write (its output row times its
    slice of W_O) and every MLP's write.

    Args:
        decoder: as :func:`logit_lens`. input_ids: L token ids.
        answer, alternative: two different token ids.

    Returns:
        ``dict[str, float]`` over :func:`attribution_names` (``"embed"``, ``"L{l}H{h}"``,
        ``"L{l}MLP"``) in stream order; the values sum to the model's
        logits[T, answer] − logits[T, alternative] (to float32 rounding with float32
        weights).

    Raises:
        ValueError: as :func:`logit_lens` for the decoder and the ids; naming ``answer`` or
            ``alternative`` when it is not a token id of the vocabulary, or when they are the
            same.
    """
    check_decoder(decoder, LENS_PURPOSE)
    vocab = decoder.config.vocab_size
    answer = check_token("answer", answer, vocab)
    alternative = check_token("alternative", alternative, vocab)
    if answer == alternative:
        raise ValueError(f"answer and alternative must differ, got {answer} twice")
    run = lens_run(decoder, input_ids)
    with torch.no_grad():
        output = unembedding(decoder)  # (V, D)
        direction = output[answer].double() - output[alternative].double()  # (D,)
        direction = direction * decoder.final_norm.double() * run.final_scales[-1].double()
        values = run.last_writes.double() @ direction  # (P, D) @ (D,) -> (P,)
    names = attribution_names(decoder.config.num_layers, decoder.config.num_heads)
    return dict(zip(names, values.tolist(), strict=True))


def head_write_tokens(decoder: Decoder, input_ids, layer, head, k=DEFAULT_TOP_TOKENS) -> HeadTokens:
    """The tokens one head's write at the last position promotes and suppresses most.

    The logits are W_U · (g_f ⊙ w / s(h_N)), w the head's (D,) write at the last position
    (its output row times its slice of W_O) and s(h_N) the final norm's scale of the whole
    stream there: the head's direct share of every logit (:func:`direct_logit_attribution`
    of one part against every token). They are computed as the decoder computes its logits
    (a bfloat16 product with bfloat16 weights).

    Args:
        decoder: as :func:`logit_lens`. input_ids: L token ids.
        layer, head: 0-based (a query head). k: tokens on each side, in [1, V].

    Returns:
        :class:`HeadTokens`.

    Raises:
        ValueError: as :func:`logit_lens`, and naming a layer, head or k out of range.
    """
    check_decoder(decoder, LENS_PURPOSE)
    cfg = decoder.config
    layer = check_int("layer", layer, low=0, high=cfg.num_layers - 1)
    head = check_int("head", head, low=0, high=cfg.num_heads - 1)
    k = check_int("k", k, low=1, high=cfg.vocab_size)
    run = lens_run(decoder, input_ids)
    with torch.no_grad():
        write = run.last_writes[parts_before(cfg, layer) + head]  # (D,) the head's write at T
        scale = run.final_scales[-1]  # () the whole stream's 1/s at T
        logits = final_norm_logits(decoder, write, scale).double()  # (V,)
        top = torch.topk(logits, k)  # (k,) largest first
        bottom = torch.topk(logits, k, largest=False)  # (k,) smallest first
    return HeadTokens(
        top=readonly(top.indices.numpy().copy()),
        top_values=readonly(top.values.numpy().copy()),
        bottom=readonly(bottom.indices.numpy().copy()),
        bottom_values=readonly(bottom.values.numpy().copy()),
        layer=layer,
        head=head,
    )
