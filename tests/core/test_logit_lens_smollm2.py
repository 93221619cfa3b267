"""What a head writes on SmolLM2-135M (float32): the logit lens, the direct logit attribution,
heads' writes as tokens and the OV copying scores against float64 computations written in
tests/core/logit_lens_reference.py and here, from the streams and head outputs a plain forward
passes (hooks, checked on the tiny files in tests/core/test_logit_lens.py) and from the
weights. The sequence is the copy test's: BOS, 10 random tokens, the same 10 again.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from attention_core.experiments import logit_lens as ll
from attention_core.experiments.head_ablation import repeated_tokens
from attention_core.experiments.heads import as_ids
from attention_core.experiments.ov_copying import ov_copying_scores
from tests.core.logit_lens_reference import (
    captured_parts,
    captured_run,
    model_log_probs,
    norm_scale,
)

SMOLLM2_COPY = 10  # BOS + 10 random tokens, the same 10 again
SMOLLM2_HEADS = ((0, 0), (18, 6), (29, 8))  # the first, the induction head 18.6, the last
LENS_TOLERANCE = 3e-4  # float32 products of 576 terms against float64 (measured 8.7e-5)
MODEL_TOLERANCE = 1e-5  # the last row against the model's own log-probabilities (3.8e-6)
PART_TOLERANCE = 1e-5  # each part against float64, relative to Σ|part| (measured 2e-8)
SUM_TOLERANCE = 1e-4  # Σ parts against the model's difference, relative (measured 1e-7)
COPY_TOLERANCE = 5e-6  # the library's products are float32 (measured 4.4e-7)


def test_smollm2_lens_is_the_float64_lens_of_its_streams(decoder32, monkeypatch):
    """SmolLM2 on BOS + 10 random tokens repeated: the lens against the float64 lens of the
    streams a plain forward passes between its layers, its last row against the model's own
    log-probabilities, and the frozen scale's early rows flatter (higher entropy)."""
    ids = list(repeated_tokens(decoder32, SMOLLM2_COPY, 0))
    streams, _ = captured_run(decoder32, ids, monkeypatch)
    assert torch.equal(ll.lens_run(decoder32, ids).logits, decoder32(as_ids(ids)).logits[0])
    w_u, g_f = decoder32.embedding.double(), decoder32.final_norm.double()
    entropies = []
    for frozen in (False, True):
        lens = ll.logit_lens(decoder32, ids, frozen_scale=frozen)
        assert lens.shape == (decoder32.config.num_layers + 1, len(ids), w_u.shape[0])
        scale = norm_scale(streams[-1])[None] if frozen else norm_scale(streams)  # (1 or N + 1, L)
        expected = F.log_softmax(streams / scale[..., None] * g_f @ w_u.T, dim=-1)
        assert float((lens.double() - expected).abs().max()) <= LENS_TOLERANCE
        own = model_log_probs(decoder32, ids)
        assert float((lens[-1].double() - own).abs().max()) <= MODEL_TOLERANCE
        entropies.append(-(lens.double().exp() * lens).sum(-1).mean(-1))  # (N + 1,)
    assert bool((entropies[1][:10] > entropies[0][:10]).all()), entropies  # row 0: 10.8 vs 0.06


def test_smollm2_attribution_is_the_float64_split_of_its_logit_difference(decoder32, monkeypatch):
    """In the second copy the next token is the one that followed the current token before:
    every part's share of logit[that] − logit[another] against the float64 split of the
    captured parts, and the sum against the model's own difference."""
    ids = list(repeated_tokens(decoder32, SMOLLM2_COPY, 0))[: 1 + SMOLLM2_COPY + 4]
    answer, alternative = ids[5], ids[6]  # the last token is ids[4]; ids[5] followed it
    streams, outputs = captured_run(decoder32, ids, monkeypatch)
    parts = captured_parts(decoder32, streams, outputs)
    w_u, g_f = decoder32.embedding.double(), decoder32.final_norm.double()
    direction = (w_u[answer] - w_u[alternative]) * g_f / norm_scale(streams[-1, -1])
    expected = parts[:, -1] @ direction  # (P,)
    dla = ll.direct_logit_attribution(decoder32, ids, answer, alternative)
    values = torch.tensor(list(dla.values()), dtype=torch.float64)
    size = float(expected.abs().sum())
    assert float((values - expected).abs().max()) <= PART_TOLERANCE * size
    logits = decoder32(as_ids(ids)).logits[0, -1].double()
    assert (
        abs(float(values.sum()) - float(logits[answer] - logits[alternative]))
        <= SUM_TOLERANCE * size
    )
    assert float(logits[answer] - logits[alternative]) > 0  # it predicts the copy


def test_smollm2_head_tokens_are_its_write_against_every_token(decoder32, monkeypatch):
    ids = list(repeated_tokens(decoder32, SMOLLM2_COPY, 0))
    streams, outputs = captured_run(decoder32, ids, monkeypatch)
    parts = captured_parts(decoder32, streams, outputs)
    w_u, g_f = decoder32.embedding.double(), decoder32.final_norm.double()
    heads = decoder32.config.num_heads
    for layer, head in SMOLLM2_HEADS:
        tokens = ll.head_write_tokens(decoder32, ids, layer, head)
        write = parts[1 + layer * (heads + 1) + head, -1]  # (D,)
        expected = w_u @ (write * g_f / norm_scale(streams[-1, -1]))  # (V,)
        size = float(expected.abs().max())
        top = expected.topk(10)
        torch.testing.assert_close(
            torch.tensor(tokens.top_values), top.values, atol=1e-5 * size, rtol=0
        )
        chosen = expected[torch.tensor(tokens.bottom)]
        bottom = expected.topk(10, largest=False).values
        torch.testing.assert_close(chosen, bottom, atol=1e-5 * size, rtol=0)


def test_smollm2_copying_scores_match_the_small_circuit_taken_the_other_way(decoder32):
    """The E × E matrix B·A formed here through the vocabulary in float64,
    (W_V,h · diag(g_a) · W_Eᵀ) · (W_U · diag(g_f) · W_O,h), instead of the library's shared
    (D, D) product: the same copying scores for a few heads, and all scores within [−1, 1]."""
    scores = ov_copying_scores(decoder32)
    cfg = decoder32.config
    assert scores.shape == (cfg.num_layers, cfg.num_heads)
    assert bool((scores.abs() <= 1).all())
    size, group = cfg.head_dim, cfg.group_size
    w_e = decoder32.embedding.double()  # (V, D)
    reading = w_e * decoder32.final_norm.double()  # (V, D), tied: W_U = W_E
    for layer, head in SMOLLM2_HEADS:
        block = decoder32.layers[layer]
        first_v = (cfg.num_heads + cfg.num_kv_heads + head // group) * size
        w_v = block.qkv[first_v : first_v + size].double() * block.attn_norm.double()  # (E, D)
        w_o = block.out[:, head * size : (head + 1) * size].double()  # (D, E)
        small = (w_v @ w_e.T) @ (reading @ w_o)  # (E, V) @ (V, E) -> (E, E)
        eigenvalues = torch.linalg.eigvals(small)
        expected = float(eigenvalues.real.sum() / eigenvalues.abs().sum())
        assert abs(float(scores[layer, head]) - expected) <= COPY_TOLERANCE
