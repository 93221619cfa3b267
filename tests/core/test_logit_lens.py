"""What a head writes (attention_core.experiments.logit_lens): the logit lens, the direct logit
attribution, one head's write as tokens and the OV copying scores, against a float64
re-implementation written here.

The reference reads only the tiny GGUF file's tensors as ``gguf`` decodes them
(tests/tiny_gguf.py), never the library: it runs the model in float64 (checked against
``tiny_gguf.reference_forward``'s logits) keeping the stream after every layer and every
head's write, and forms each head's full V × V OV circuit to take its eigenvalues with
``torch.linalg.eigvals`` (the check of the library's E × E shortcut). The files: llama with
grouped-query attention (4 query heads on 2 key/value heads), Qwen2 with q/k/v biases, Qwen3
with per-head q/k norms, and an untied llama whose 4 query heads share one key/value head.
The ``model`` tier checks the same identities on SmolLM2 (float32).
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from attention_core.experiments import logit_lens as ll
from attention_core.experiments.heads import as_ids
from attention_core.pretrained import load_gguf
from attention_core.pretrained.int4 import int4_available
from tests.tiny_gguf import RMS_EPS, TinyModel, _rms, _rotate, reference_forward, write_tiny_gguf

LAYERS = 3
LENGTH = 12
CASES = {
    "llama": {"architecture": "llama"},
    "qwen2": {"architecture": "qwen2"},
    "qwen3": {"architecture": "qwen3"},
    "llama-untied-one-kv": {"architecture": "llama", "tied": False, "kv_heads": 1},
}
LENS_TOLERANCE = 1e-5  # float32 log-probabilities against float64 (measured ≤ 3e-6)
MODEL_TOLERANCE = 1e-5  # the lens's last row against the model's own log-probabilities
DLA_TOLERANCE = 1e-5  # float32 parts against float64, relative to Σ|part| (measured ≤ 2e-7)
SUM_TOLERANCE = 1e-4  # the parts' sum against the model's logit difference, relative
COPY_TOLERANCE = 1e-6  # the E × E shortcut against the full V × V eigenvalues (measured ≤ 1e-7)
Q4_MATRICES = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Each case: (the written file's TinyModel, the float32 decoder)."""
    folder = tmp_path_factory.mktemp("logit_lens")
    held = {}
    for name, options in CASES.items():
        model = write_tiny_gguf(folder / f"{name}.gguf", layers=LAYERS, seed=5, **options)
        held[name] = (model, load_gguf(model.path, weights_dtype="float32"))
    return held


def _ids(vocab: int, seed: int = 0, length: int = LENGTH) -> list[int]:
    """``length`` seeded random token ids."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (length,), generator=generator).tolist()


def _weights(model: TinyModel) -> dict[str, torch.Tensor]:
    return {name: torch.from_numpy(value).double() for name, value in model.tensors.items()}


def _unembedding(w: dict[str, torch.Tensor]) -> torch.Tensor:
    """(V, D) the output matrix, the embedding when tied."""
    return w.get("output.weight", w["token_embd.weight"])


def _scale(x: torch.Tensor) -> torch.Tensor:
    """(...,) s(x) = sqrt(mean(x²) + eps) over the last axis."""
    return torch.sqrt(x.pow(2).mean(-1) + RMS_EPS)


def _reference_run(model: TinyModel, ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """The float64 forward of ``tiny_gguf.reference_forward``, keeping the parts apart.

    Returns:
        (streams (N + 1, L, D): after the embedding and after each layer; parts (P, L, D):
        the embedding, then per layer each head's write and the MLP's write).
    """
    spec, w = model.spec, _weights(model)
    length, size, heads = len(ids), spec.head_dim, spec.heads
    positions = torch.arange(length)
    x = w["token_embd.weight"][torch.tensor(ids)]  # (L, D)
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    streams, parts = [x], [x]
    for index in range(spec.layers):
        p = f"blk.{index}."
        h = _rms(x, w[p + "attn_norm.weight"])
        q, k, v = (h @ w[p + f"attn_{n}.weight"].T for n in "qkv")
        if spec.architecture == "qwen2":
            q, k, v = (t + w[p + f"attn_{n}.bias"] for t, n in zip((q, k, v), "qkv", strict=True))
        q = q.view(length, heads, size).transpose(0, 1)  # (H, L, E)
        k = k.view(length, spec.kv_heads, size).transpose(0, 1)  # (K, L, E)
        v = v.view(length, spec.kv_heads, size).transpose(0, 1)  # (K, L, E)
        if spec.architecture == "qwen3":
            q, k = _rms(q, w[p + "attn_q_norm.weight"]), _rms(k, w[p + "attn_k_norm.weight"])
        q, k = _rotate(q, positions, spec, None), _rotate(k, positions, spec, None)
        group = heads // spec.kv_heads
        k, v = k.repeat_interleave(group, 0), v.repeat_interleave(group, 0)  # (H, L, E)
        scores = q @ k.transpose(-1, -2) / math.sqrt(size)  # (H, L, L)
        weights = scores.masked_fill(~causal, float("-inf")).softmax(-1)
        outputs = weights @ v  # (H, L, E)
        w_o = w[p + "attn_output.weight"]  # (D, H·E)
        writes = [outputs[h] @ w_o[:, h * size : (h + 1) * size].T for h in range(heads)]
        x = x + sum(writes)
        hm = _rms(x, w[p + "ffn_norm.weight"])
        gate, up = hm @ w[p + "ffn_gate.weight"].T, hm @ w[p + "ffn_up.weight"].T
        mlp = (F.silu(gate) * up) @ w[p + "ffn_down.weight"].T
        x = x + mlp
        streams.append(x)
        parts.extend((*writes, mlp))
    return torch.stack(streams), torch.stack(parts)


def _reference_lens(model: TinyModel, streams: torch.Tensor, frozen: bool) -> torch.Tensor:
    """(N + 1, L, V) float64 log_softmax(W_U · (g_f ⊙ h / s)), s of h or of the last stream."""
    w = _weights(model)
    scale = _scale(streams[-1])[None] if frozen else _scale(streams)  # (1 or N + 1, L)
    normed = streams / scale[..., None] * w["output_norm.weight"]  # (N + 1, L, D)
    return F.log_softmax(normed @ _unembedding(w).T, dim=-1)


def _reference_dla(model: TinyModel, streams, parts, answer: int, alternative: int):
    """(P,) float64 ⟨g_f ⊙ part / s(h_N), W_U[answer] − W_U[alternative]⟩ at the last token."""
    w = _weights(model)
    u = _unembedding(w)
    direction = (u[answer] - u[alternative]) * w["output_norm.weight"] / _scale(streams[-1, -1])
    return parts[:, -1] @ direction  # (P, D) @ (D,) -> (P,)


def _reference_copying(model: TinyModel) -> torch.Tensor:
    """(N, H) float64 Σλ/Σ|λ| over the eigenvalues of the full V × V OV circuit
    W_U · diag(g_f) · W_O,h · W_V,h · diag(g_a) · W_Eᵀ."""
    spec, w = model.spec, _weights(model)
    size, group = spec.head_dim, spec.heads // spec.kv_heads
    embedding = w["token_embd.weight"]  # (V, D)
    reading = _unembedding(w) * w["output_norm.weight"]  # (V, D)
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


def _model_log_probs(decoder, ids) -> torch.Tensor:
    """(L, V) the decoder's own next-token log-probabilities."""
    return F.log_softmax(decoder(as_ids(ids)).logits[0].double(), dim=-1)


@pytest.mark.parametrize("case", CASES)
def test_the_reference_run_is_the_tiny_files_model(tiny, case):
    """The float64 reference's parts add up to its streams, and its last stream gives
    tiny_gguf.reference_forward's logits (the reference is the model)."""
    model, _ = tiny[case]
    ids = _ids(len(model.vocab))
    streams, parts = _reference_run(model, ids)
    heads = model.spec.heads
    for layer in range(LAYERS + 1):
        summed = parts[: 1 + layer * (heads + 1)].sum(0)
        torch.testing.assert_close(summed, streams[layer], atol=1e-12, rtol=0)
    logits, _ = reference_forward(model, ids)
    w = _weights(model)
    mine = _rms(streams[-1], w["output_norm.weight"]) @ _unembedding(w).T
    torch.testing.assert_close(mine, logits, atol=1e-12, rtol=0)


@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_the_lens_matches_the_float64_reference(tiny, case, frozen):
    model, decoder = tiny[case]
    ids = _ids(decoder.config.vocab_size, seed=1)
    streams, _ = _reference_run(model, ids)
    lens = ll.logit_lens(decoder, ids, frozen_scale=frozen)
    assert lens.shape == (LAYERS + 1, LENGTH, decoder.config.vocab_size)
    assert lens.dtype == torch.float32
    expected = _reference_lens(model, streams, frozen)
    assert float((lens.double() - expected).abs().max()) <= LENS_TOLERANCE


@pytest.mark.parametrize("case", CASES)
def test_the_lens_last_row_is_the_models_own_log_probs(tiny, case):
    _, decoder = tiny[case]
    ids = _ids(decoder.config.vocab_size, seed=2)
    own = _model_log_probs(decoder, ids)
    for frozen in (False, True):
        lens = ll.logit_lens(decoder, ids, frozen_scale=frozen)
        assert float((lens[-1].double() - own).abs().max()) <= MODEL_TOLERANCE


@pytest.mark.parametrize("case", CASES)
def test_a_frozen_scale_changes_the_early_rows_and_not_the_last(tiny, case):
    """Freezing s at the last layer's moves every earlier row (by far more than rounding)
    and leaves the last row as it is."""
    _, decoder = tiny[case]
    ids = _ids(decoder.config.vocab_size, seed=3)
    right = ll.logit_lens(decoder, ids)
    frozen = ll.logit_lens(decoder, ids, frozen_scale=True)
    torch.testing.assert_close(frozen[-1], right[-1], atol=1e-6, rtol=0)
    moved = (frozen[:-1] - right[:-1]).abs().amax(dim=(1, 2))  # (N,)
    assert bool((moved > 1e-2).all()), moved


def test_the_lens_of_bfloat16_weights_ends_in_the_models_log_probs(tiny):
    model, _ = tiny["llama"]
    decoder = load_gguf(model.path, weights_dtype="bfloat16")
    ids = _ids(decoder.config.vocab_size, seed=4)
    lens = ll.logit_lens(decoder, ids)
    assert float((lens[-1].double() - _model_log_probs(decoder, ids)).abs().max()) <= 1e-5


@pytest.mark.parametrize("case", CASES)
def test_the_attribution_matches_the_reference_and_sums_to_the_logit_difference(tiny, case):
    model, decoder = tiny[case]
    cfg = decoder.config
    ids = _ids(cfg.vocab_size, seed=5)
    streams, parts = _reference_run(model, ids)
    logits = decoder(as_ids(ids)).logits[0, -1].double()  # (V,)
    for answer, alternative in ((3, 7), (int(logits.argmax()), int(logits.argmin()))):
        dla = ll.direct_logit_attribution(decoder, ids, answer, alternative)
        names = ["embed"]
        for layer in range(LAYERS):
            names += [f"L{layer}H{h}" for h in range(cfg.num_heads)] + [f"L{layer}MLP"]
        assert list(dla) == names
        values = torch.tensor(list(dla.values()), dtype=torch.float64)
        expected = _reference_dla(model, streams, parts, answer, alternative)
        size = float(expected.abs().sum())
        assert float((values - expected).abs().max()) <= DLA_TOLERANCE * size
        difference = float(logits[answer] - logits[alternative])
        assert abs(float(values.sum()) - difference) <= SUM_TOLERANCE * size


@pytest.mark.parametrize("case", CASES)
def test_a_heads_write_tokens_match_the_reference(tiny, case):
    model, decoder = tiny[case]
    cfg = decoder.config
    ids = _ids(cfg.vocab_size, seed=6)
    streams, parts = _reference_run(model, ids)
    w = _weights(model)
    for layer, head in ((0, 0), (1, cfg.num_heads - 1), (LAYERS - 1, 1)):
        tokens = ll.head_write_tokens(decoder, ids, layer, head, k=5)
        write = parts[1 + layer * (cfg.num_heads + 1) + head, -1]  # (D,)
        normed = write * w["output_norm.weight"] / _scale(streams[-1, -1])
        expected = _unembedding(w) @ normed  # (V,)
        top, bottom = expected.topk(5), expected.topk(5, largest=False)
        assert tokens.top.tolist() == top.indices.tolist()
        assert tokens.bottom.tolist() == bottom.indices.tolist()
        size = float(expected.abs().max())
        torch.testing.assert_close(
            torch.tensor(tokens.top_values), top.values, atol=1e-5 * size, rtol=0
        )
        torch.testing.assert_close(
            torch.tensor(tokens.bottom_values), bottom.values, atol=1e-5 * size, rtol=0
        )
        assert (tokens.layer, tokens.head) == (layer, head)
        assert not tokens.top.flags.writeable


@pytest.mark.parametrize("case", CASES)
def test_the_copying_scores_are_the_full_circuits_eigenvalue_ratio(tiny, case):
    model, decoder = tiny[case]
    scores = ll.ov_copying_scores(decoder)
    assert scores.shape == (LAYERS, decoder.config.num_heads)
    assert scores.dtype == torch.float64
    expected = _reference_copying(model)
    assert float((scores - expected).abs().max()) <= COPY_TOLERANCE
    assert bool((scores.abs() <= 1).all())


def test_a_head_that_writes_back_its_token_scores_one(tiny):
    """A head whose value reads the (normed) embedding and whose output writes it back to the
    logits (W_V,h = W_Oᵀ-like through a positive map) copies: its circuit W_U·W_O·W_V·W_Eᵀ
    is then a Gram matrix, positive semi-definite, so Σλ = Σ|λ| and the score is 1; the
    opposite sign scores −1."""
    _, decoder = tiny["llama"]
    cfg = decoder.config
    size = cfg.head_dim
    twin = decoder._twin()
    block = twin.layers[0]
    first_v = (cfg.num_heads + cfg.num_kv_heads) * size
    basis = torch.randn(size, cfg.hidden_size, generator=torch.Generator().manual_seed(0))
    qkv = block.qkv.detach().clone()
    out = block.out.detach().clone()
    qkv[first_v : first_v + size] = basis / block.attn_norm  # W_V,0 · diag(g_a) = basis
    out[:, :size] = basis.T  # head 0: W_O,0 = basisᵀ
    out[:, size : 2 * size] = -basis.T  # head 1 shares the value head, writes it negated
    block.qkv = torch.nn.Parameter(qkv, requires_grad=False)
    block.out = torch.nn.Parameter(out, requires_grad=False)
    twin.final_norm = torch.nn.Parameter(torch.ones_like(decoder.final_norm), requires_grad=False)
    scores = ll.ov_copying_scores(twin)
    assert abs(float(scores[0, 0]) - 1) <= 1e-9
    assert abs(float(scores[0, 1]) + 1) <= 1e-9


def test_nothing_changes_the_decoder(tiny):
    _, decoder = tiny["qwen3"]
    before = {name: t.clone() for name, t in decoder.state_dict().items()}
    ids = _ids(decoder.config.vocab_size, seed=7)
    ll.logit_lens(decoder, ids)
    ll.logit_lens(decoder, ids, frozen_scale=True)
    ll.direct_logit_attribution(decoder, ids, 1, 2)
    ll.head_write_tokens(decoder, ids, 1, 1)
    ll.ov_copying_scores(decoder)
    after = decoder.state_dict()
    assert before.keys() == after.keys()
    assert all(torch.equal(before[name], after[name]) for name in before)
    assert (decoder.variant, decoder.training) == ("scaled", False)


def test_bad_input_is_refused_by_name(tiny):
    _, decoder = tiny["llama"]
    vocab = decoder.config.vocab_size
    ids = _ids(vocab)
    for answer, alternative, named in (
        (-1, 3, "answer"),
        (vocab, 3, "answer"),
        (2.5, 3, "answer"),
        (3, vocab + 7, "alternative"),
        (3, "x", "alternative"),
        (3, 3, "differ"),
    ):
        with pytest.raises(ValueError, match=named):
            ll.direct_logit_attribution(decoder, ids, answer, alternative)
    for bad_ids in ([], [0, vocab], [[1, 2], [3, 4]], [0.5, 1.5]):
        with pytest.raises(ValueError, match="input_ids"):
            ll.logit_lens(decoder, bad_ids)
    with pytest.raises(ValueError, match="frozen_scale"):
        ll.logit_lens(decoder, ids, frozen_scale="yes")
    for layer, head, k, named in (
        (LAYERS, 0, 3, "layer"),
        (0, decoder.config.num_heads, 3, "head"),
        (0, 0, 0, "k"),
        (0, 0, vocab + 1, "k"),
    ):
        with pytest.raises(ValueError, match=named):
            ll.head_write_tokens(decoder, ids, layer, head, k=k)
    with pytest.raises(ValueError, match="variant 'local'"):
        ll.logit_lens(decoder.with_variant("local", window_size=2), ids)
    for function in (ll.ov_copying_scores, lambda d: ll.logit_lens(d, ids)):
        with pytest.raises(ValueError, match="decoder"):
            function("tiny")


@pytest.mark.skipif(not int4_available(), reason="torch's int4 CPU kernel is not available")
def test_int4_weights_are_refused_by_name(tmp_path):
    path = tmp_path / "q4.gguf"
    write_tiny_gguf(path, types=tuple((kind, "Q4_1") for kind in Q4_MATRICES), seed=4)
    decoder = load_gguf(path, weights_dtype="int4")
    ids = _ids(decoder.config.vocab_size)
    for call in (
        lambda: ll.logit_lens(decoder, ids),
        lambda: ll.direct_logit_attribution(decoder, ids, 1, 2),
        lambda: ll.head_write_tokens(decoder, ids, 0, 0),
        lambda: ll.ov_copying_scores(decoder),
    ):
        with pytest.raises(ValueError, match="weights_dtype='int4'"):
            call()
