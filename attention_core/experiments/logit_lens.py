"""What a head writes: the residual stream read as next-token predictions after every layer
(the logit lens), the last position's logit difference split into every part's direct
contribution, one head's write read as tokens, and every head's OV copying score.

A llama decoder's logits are W_U · N_f(h): the stream after the last layer h, its final
RMSNorm N_f(x) = g_f ⊙ x / s(x) with s(x) = sqrt(mean(x²) + eps), and the (V, D) output
matrix W_U (the token embedding itself when tied, as in SmolLM2; the decoder applies no other
scaling to its logits). The stream is a sum of parts (:mod:`~attention_core.experiments.
score_run`): the embedding, every head's write (its (E,) output times its slice
W_O[:, h·E:(h+1)·E] of the layer's output projection; under grouped-query attention every
query head keeps its own slice) and every MLP's write. The output projection has no bias in
the llama, Qwen2 and Qwen3 families (Qwen2's value bias reaches the stream through the heads'
outputs, so it is part of each head's write).

* :func:`logit_lens`: log_softmax(W_U · N_f(h_l)) for the stream h_l after each layer l (row 0
  after the embedding), with s recomputed from h_l itself, or frozen at the last layer's
  s(h_N) (``frozen_scale=True``: the lens that makes the early layers look uniform, since an
  early stream is much smaller than the last one).
* :func:`direct_logit_attribution`: ⟨g_f ⊙ part / s(h_N), W_U[answer] − W_U[alternative]⟩ for
  every part at the last position; the parts sum to the model's own logit difference.
* :func:`head_write_tokens`: W_U · (g_f ⊙ one head's write / s(h_N)) at the last position,
  its top and bottom k tokens.
* :func:`ov_copying_scores`: Σλ / Σ|λ| over the eigenvalues of every head's OV circuit on
  tokens, from an E × E matrix (never the V × V one).

The first three read the cached run of :func:`~attention_core.experiments.score_run.
score_run` (one forward pass per input, shared with the score parts); none changes the
decoder. With bfloat16 weights the lens is the model's own logit computation (a bfloat16
product, as :meth:`Decoder.forward` does it), and the attribution sums to the logit
difference only to bfloat16's rounding (the parts are projected unrounded).

Shapes: N layers, H query heads, K key/value heads, G = H / K, L tokens, D width, E head size,
V vocabulary, P parts = 1 + N·(H + 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

from attention_core.experiments.heads import readonly
from attention_core.experiments.score_parts import logit_parts
from attention_core.experiments.score_run import (
    WEIGHT_DTYPES,
    check_decoder,
    parts_before,
    score_run,
)
from attention_core.pretrained.llama import Decoder
from attention_core.pretrained.llama_block import linear, rms_scale
from attention_core.validation import check_bool, check_int

EMBED = "embed"
"""The name of the token embedding's part in :func:`direct_logit_attribution`."""
DEFAULT_TOP_TOKENS = 10


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


def logit_lens(decoder: Decoder, input_ids, *, frozen_scale: bool = False) -> torch.Tensor:
    """Read the residual stream after every layer as next-token log-probabilities.

    Row l is log_softmax(W_U · N_f(h_l)) at every position, h_0 the embedding and h_l the
    stream after layer l (0-based layer l − 1). With the final norm's scale recomputed from
    each h_l (the default) the last row is the model's own next-token log-probabilities.
    With ``frozen_scale=True`` every row uses the last layer's s(h_N) at its position
    instead: the last row is unchanged, the early rows are much flatter.

    Args:
        decoder: a llama :class:`Decoder` with float32 or bfloat16 weights and exact dense
            attention.
        input_ids: L token ids (a sequence, or a (1, L) tensor), at most 256.
        frozen_scale: freeze the final norm's scale at the last layer's.

    Returns:
        (N + 1, L, V) float32 tensor (31 × L × 49152 for SmolLM2: 6 MB per token).

    Raises:
        ValueError: for int4 weights, another variant, empty, too long or out-of-vocabulary
            ids, or a ``frozen_scale`` that is not a bool.
    """
    check_decoder(decoder)
    frozen_scale = check_bool("frozen_scale", frozen_scale)
    run = score_run(decoder, input_ids)
    with torch.no_grad():
        streams = run.residual  # (N + 1, L, D)
        if frozen_scale:
            scales = run.final_scales[None]  # (1, L)
        else:
            scales = rms_scale(streams, decoder.config.rms_eps)  # (N + 1, L)
        logits = final_norm_logits(decoder, streams, scales)  # (N + 1, L, V)
        return F.log_softmax(logits, dim=-1)  # (N + 1, L, V)


def check_token(name: str, token, vocab: int) -> int:
    """A token id checked to lie in the vocabulary.

    Raises:
        ValueError: naming ``name`` and the value, for a non-integer or an id outside [0, V).
    """
    return check_int(name, token, low=0, high=vocab - 1)


def direct_logit_attribution(decoder: Decoder, input_ids, answer, alternative) -> dict:
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
    check_decoder(decoder)
    vocab = decoder.config.vocab_size
    answer = check_token("answer", answer, vocab)
    alternative = check_token("alternative", alternative, vocab)
    if answer == alternative:
        raise ValueError(f"answer and alternative must differ, got {answer} twice")
    run = score_run(decoder, input_ids)
    parts = logit_parts(
        decoder, input_ids, position=run.length - 1, target=answer, alternative=alternative
    )
    names = attribution_names(decoder.config.num_layers, decoder.config.num_heads)
    return dict(zip(names, parts.contributions.tolist(), strict=True))


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
    check_decoder(decoder)
    cfg = decoder.config
    layer = check_int("layer", layer, low=0, high=cfg.num_layers - 1)
    head = check_int("head", head, low=0, high=cfg.num_heads - 1)
    k = check_int("k", k, low=1, high=cfg.vocab_size)
    run = score_run(decoder, input_ids)
    with torch.no_grad():
        write = run.writes[parts_before(cfg, layer) + head, -1]  # (D,) the head's write at T
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


def check_float_weights(decoder: Decoder) -> Decoder:
    """The decoder, if its weight matrices are float (the copying scores read them as
    matrices; the attention variant does not matter).

    Raises:
        ValueError: for something that is not a :class:`Decoder`, or int4 weights.
    """
    if not isinstance(decoder, Decoder):
        raise ValueError(f"decoder must be a llama Decoder, got {type(decoder).__name__}")
    if decoder.weights_dtype not in WEIGHT_DTYPES:
        raise ValueError(
            f"the OV circuits need float weights, got weights_dtype={decoder.weights_dtype!r}: "
            "load the decoder with weights_dtype='float32' or 'bfloat16'"
        )
    return decoder


def token_gram(decoder: Decoder) -> torch.Tensor:
    """W_Eᵀ · W_U · diag(g_f): the (D, D) product over the vocabulary that every head's OV
    circuit on tokens shares, accumulated in float32 (the weights' own precision) and
    returned in float64.

    Returns:
        (D, D) float64.
    """
    embedding = decoder.embedding.float()  # (V, D)
    output = embedding if decoder.output is None else decoder.output.float()  # (V, D)
    gram = embedding.T @ output  # (D, V) @ (V, D) -> (D, D)
    return gram.double() * decoder.final_norm.double()  # (D, D), g_f on the output side


def ov_circuits(decoder: Decoder, layer: int, gram: torch.Tensor) -> torch.Tensor:
    """Every query head's small OV matrix W_V,h · diag(g_a) · gram · W_O,h of one layer.

    Args:
        decoder: a llama :class:`Decoder` with float weights. layer: 0-based.
        gram: (D, D) float64 from :func:`token_gram`.

    Returns:
        (H, E, E) float64; head h uses key/value head h // G's rows of W_V.
    """
    cfg = decoder.config
    block = decoder.layers[layer]
    heads, size, group = cfg.num_heads, cfg.head_dim, cfg.group_size
    first_v = (heads + cfg.num_kv_heads) * size
    values = block.qkv[first_v:].double() * block.attn_norm.double()  # (K·E, D), g_a folded in
    read = (values @ gram).view(cfg.num_kv_heads, size, -1)  # (K·E, D) @ (D, D) -> (K, E, D)
    read = read.repeat_interleave(group, dim=0)  # (H, E, D), query head h -> K head h // G
    out = block.out.double().view(-1, heads, size).permute(1, 0, 2)  # (D, H·E) -> (H, D, E)
    return read @ out  # (H, E, D) @ (H, D, E) -> (H, E, E)


def ov_copying_scores(decoder: Decoder) -> torch.Tensor:
    """Every head's OV copying score: Σλ / Σ|λ| over the eigenvalues λ of its OV circuit on
    tokens, from 1 (the head writes back the token it reads: copying) to −1.

    The circuit of head h in layer l is the (V, V) map from the token a head attends to to
    the logits its write adds, M = W_U · diag(g_f) · W_O,h · W_V,h · diag(g_a) · W_Eᵀ: W_E
    the (V, D) token embedding, W_V,h (E, D) the value rows of h's key/value head h // G,
    g_a the layer's attention-norm weight (the values read the normed stream), W_O,h (D, E)
    h's slice of the output projection, g_f the final norm's weight and W_U (V, D) the output
    matrix. The RMSNorm scales 1/s are positive numbers: they scale every λ alike and leave the
    ratio unchanged, so they are left out; Qwen2's value bias adds the same vector whatever
    the token, so it is not part of the (linear) map.

    M has rank at most E and is never formed: with A = W_U · diag(g_f) · W_O,h (V, E) and
    B = W_V,h · diag(g_a) · W_Eᵀ (E, V), M = A · B, and A · B and B · A have the same nonzero
    eigenvalues (A·B·x = λx with λ ≠ 0 gives B·A·(Bx) = λ(Bx), Bx ≠ 0, and the other way
    round), so M's are those of the (E, E) matrix
    B · A = W_V,h · diag(g_a) · (W_Eᵀ · W_U · diag(g_f)) · W_O,h plus V − E zeros, which add
    nothing to either sum. The (D, D) product in the middle is shared by every head
    (:func:`token_gram`, float32 over the vocabulary); the rest and the eigenvalues are
    float64. Σλ is the trace (real); a head whose circuit is zero scores NaN (0 / 0).

    Args:
        decoder: a llama :class:`Decoder` with float32 or bfloat16 weights (any variant).

    Returns:
        (N, H) float64 tensor.

    Raises:
        ValueError: for something that is not a :class:`Decoder`, or int4 weights.
    """
    check_float_weights(decoder)
    cfg = decoder.config
    with torch.no_grad():
        gram = token_gram(decoder)  # (D, D)
        circuits = torch.stack(
            [ov_circuits(decoder, layer, gram) for layer in range(cfg.num_layers)]
        )
        eigenvalues = torch.linalg.eigvals(circuits)  # (N, H, E, E) -> (N, H, E) complex128
        return eigenvalues.real.sum(dim=-1) / eigenvalues.abs().sum(dim=-1)  # (N, H)
