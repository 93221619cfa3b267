"""The float64 references of tests/core/test_logit_lens.py and test_logit_lens_smollm2.py,
written from the model's definition with plain torch ops, never from
``attention_core.experiments``.

:func:`reference_run` reads only a tiny GGUF file's tensors as ``gguf`` decodes them
(tests/tiny_gguf.py) and runs the model in float64, keeping the stream after every layer and
every head's write; :func:`reference_copying` forms each head's full V × V OV circuit and takes
its eigenvalues. :func:`captured_run` takes the streams and the heads' outputs from a plain
forward of any decoder (hooks), for SmolLM2, where no file-level reference is at hand.
"""

from __future__ import annotations

import threading

import torch
from torch.nn import functional as F

from attention_core.experiments.heads import as_ids
from attention_core.pretrained import llama_block
from tests.tiny_gguf import RMS_EPS, TinyModel, file_tensors
from tests.tiny_gguf import reference_run as tiny_reference_run


def unembedding(w: dict[str, torch.Tensor]) -> torch.Tensor:
    """(V, D) the output matrix, the embedding when tied."""
    return w.get("output.weight", w["token_embd.weight"])


def norm_scale(x: torch.Tensor) -> torch.Tensor:
    """(...,) s(x) = sqrt(mean(x²) + eps) over the last axis."""
    return torch.sqrt(x.pow(2).mean(-1) + RMS_EPS)


def reference_run(model: TinyModel, ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """The float64 forward of :func:`tests.tiny_gguf.reference_run`, its parts kept apart.

    Returns:
        (streams (N + 1, L, D): after the embedding and after each layer; parts (P, L, D):
        the embedding, then per layer each head's write and the MLP's write).
    """
    run = tiny_reference_run(model, ids)
    return run.streams, run.parts


def reference_lens(model: TinyModel, streams: torch.Tensor, frozen: bool) -> torch.Tensor:
    """(N + 1, L, V) float64 log_softmax(W_U · (g_f ⊙ h / s)), s of h or of the last stream."""
    w = file_tensors(model)
    scale = norm_scale(streams[-1])[None] if frozen else norm_scale(streams)  # (1 or N + 1, L)
    normed = streams / scale[..., None] * w["output_norm.weight"]  # (N + 1, L, D)
    return F.log_softmax(normed @ unembedding(w).T, dim=-1)


def reference_dla(model: TinyModel, streams, parts, answer: int, alternative: int):
    """(P,) float64 ⟨g_f ⊙ part / s(h_N), W_U[answer] − W_U[alternative]⟩ at the last token."""
    w = file_tensors(model)
    u = unembedding(w)
    direction = (u[answer] - u[alternative]) * w["output_norm.weight"] / norm_scale(streams[-1, -1])
    return parts[:, -1] @ direction  # (P, D) @ (D,) -> (P,)


def decoder_tensors(decoder) -> dict[str, torch.Tensor]:
    """The tensors :func:`reference_copying` reads, taken from a decoder's parameters (widened
    to float64) under their GGUF names: the embedding, the output norm, and per layer the
    attention norm, the value rows of ``qkv`` and the output projection."""
    cfg = decoder.config
    first_v = (cfg.num_heads + cfg.num_kv_heads) * cfg.head_dim
    held = {
        "token_embd.weight": decoder.embedding.double(),
        "output_norm.weight": decoder.final_norm.double(),
    }
    if decoder.output is not None:
        held["output.weight"] = decoder.output.double()
    for index, block in enumerate(decoder.layers):
        held[f"blk.{index}.attn_norm.weight"] = block.attn_norm.double()
        held[f"blk.{index}.attn_v.weight"] = block.qkv[first_v:].double()
        held[f"blk.{index}.attn_output.weight"] = block.out.double()
    return held


def reference_copying(model: TinyModel, w: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
    """(N, H) float64 Σλ/Σ|λ| over the eigenvalues of the full V × V OV circuit
    W_U · diag(g_f) · W_O,h · W_V,h · diag(g_a) · W_Eᵀ, from the file's tensors or ``w``
    (:func:`decoder_tensors`)."""
    spec, w = model.spec, file_tensors(model) if w is None else w
    size, group = spec.head_dim, spec.heads // spec.kv_heads
    embedding = w["token_embd.weight"]  # (V, D)
    reading = unembedding(w) * w["output_norm.weight"]  # (V, D)
    scores = torch.empty(spec.layers, spec.heads, dtype=torch.float64)
    for layer in range(spec.layers):
        p = f"blk.{layer}."
        for head in range(spec.heads):
            kv = head // group
            w_v = w[p + "attn_v.weight"][kv * size : (kv + 1) * size]  # (E, D)
            w_o = w[p + "attn_output.weight"][:, head * size : (head + 1) * size]  # (D, E)
            tokens_in = (embedding * w[p + "attn_norm.weight"]).T  # (D, V)
            full = reading @ w_o @ w_v @ tokens_in  # (V, V)
            eigenvalues = torch.linalg.eigvals(full)  # (V,)
            scores[layer, head] = eigenvalues.real.sum() / eigenvalues.abs().sum()
    return scores


def model_log_probs(decoder, ids) -> torch.Tensor:
    """(L, V) the decoder's own next-token log-probabilities."""
    return F.log_softmax(decoder(as_ids(ids)).logits[0].double(), dim=-1)


def captured_run(decoder, ids, monkeypatch) -> tuple[torch.Tensor, torch.Tensor]:
    """The stream entering every layer and after the last (N + 1, L, D), and every head's
    output (N, H, L, E), float64, taken from a plain forward of the decoder (pre-hooks on its
    layers, a hook on the last, ``attend`` wrapped in this thread)."""
    streams, outputs = [], []
    this_thread = threading.get_ident()
    original = llama_block.attend

    def recording(q, k, v, variant, **kwargs):
        result = original(q, k, v, variant, **kwargs)
        if threading.get_ident() == this_thread:
            outputs.append(result.output[0].double())  # (H, L, E)
        return result

    hooks = [
        layer.register_forward_pre_hook(lambda _, a: streams.append(a[0][0].double()))
        for layer in decoder.layers
    ]
    hooks.append(
        decoder.layers[-1].register_forward_hook(
            lambda _, a, out: streams.append(out[0][0].double())
        )
    )
    monkeypatch.setattr(llama_block, "attend", recording)
    try:
        decoder(as_ids(ids))
    finally:
        monkeypatch.setattr(llama_block, "attend", original)
        for hook in hooks:
            hook.remove()
    return torch.stack(streams), torch.stack(outputs)


def captured_parts(decoder, streams, outputs) -> torch.Tensor:
    """(P, L, D) float64 the embedding, each head's write (output · its W_O slice) and each
    MLP's write (what the layer added beyond its heads)."""
    size, heads = decoder.config.head_dim, decoder.config.num_heads
    parts = [streams[0]]
    for layer, block in enumerate(decoder.layers):
        w_o = block.out.double()  # (D, H·E)
        writes = [outputs[layer, h] @ w_o[:, h * size : (h + 1) * size].T for h in range(heads)]
        parts.extend((*writes, streams[layer + 1] - streams[layer] - sum(writes)))
    return torch.stack(parts)
