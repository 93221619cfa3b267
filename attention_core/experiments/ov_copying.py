"""Every head's OV copying score (what a head writes, summarised over the whole vocabulary):
Σλ / Σ|λ| over the eigenvalues λ of its OV circuit on tokens, computed from an E × E matrix,
never the V × V one. The prompt's own writes are :mod:`~attention_core.experiments.logit_lens`.

Shapes: N layers, H query heads, K key/value heads, G = H / K, D width, E head size,
V vocabulary.
"""

from __future__ import annotations

import torch

from attention_core.experiments.score_run import check_float_weights
from attention_core.pretrained.llama import Decoder


def token_gram(decoder: Decoder) -> torch.Tensor:
    """W_Eᵀ · W_U · diag(g_f): the (D, D) product over the vocabulary that every head's OV
    circuit on tokens shares.

    Returns:
        (D, D) float32.
    """
    embedding = decoder.embedding.float()  # (V, D)
    output = embedding if decoder.output is None else decoder.output.float()  # (V, D)
    return (embedding.T @ output) * decoder.final_norm  # (D, V) @ (V, D) -> (D, D), g_f


def ov_circuits(decoder: Decoder, layer: int, gram: torch.Tensor) -> torch.Tensor:
    """Every query head's small OV matrix W_V,h · diag(g_a) · gram · W_O,h of one layer.

    Args:
        decoder: a llama :class:`Decoder` with float weights. layer: 0-based.
        gram: (D, D) float32 from :func:`token_gram`.

    Returns:
        (H, E, E) float32; head h uses key/value head h // G's rows of W_V.
    """
    cfg = decoder.config
    block = decoder.layers[layer]
    heads, size, group = cfg.num_heads, cfg.head_dim, cfg.group_size
    first_v = (heads + cfg.num_kv_heads) * size
    values = block.qkv[first_v:].float() * block.attn_norm  # (K·E, D), g_a folded in
    read = (values @ gram).view(cfg.num_kv_heads, size, -1)  # (K·E, D) @ (D, D) -> (K, E, D)
    read = read.repeat_interleave(group, dim=0)  # (H, E, D), query head h -> K head h // G
    out = block.out.float().view(-1, heads, size).permute(1, 0, 2)  # (D, H·E) -> (H, D, E)
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
    (:func:`token_gram`). The products are float32 (the weights' own precision), the
    eigenvalues float64. Σλ is the trace (real); a head whose circuit is zero scores NaN.

    Args:
        decoder: a llama :class:`Decoder` with float32 or bfloat16 weights (any variant).

    Returns:
        (N, H) float64 tensor.

    Raises:
        ValueError: for something that is not a :class:`Decoder`, or int4 weights.
    """
    check_float_weights(decoder, "the OV circuits")
    cfg = decoder.config
    with torch.no_grad():
        gram = token_gram(decoder)  # (D, D)
        circuits = torch.stack(
            [ov_circuits(decoder, layer, gram) for layer in range(cfg.num_layers)]
        )
        eigenvalues = torch.linalg.eigvals(circuits.double())  # (N, H, E) complex128
        return eigenvalues.real.sum(dim=-1) / eigenvalues.abs().sum(dim=-1)  # (N, H)
