"""What a head writes (attention_core.experiments.logit_lens): the logit lens, the direct logit
attribution, one head's write as tokens and the OV copying scores, against the float64
references of tests/core/logit_lens_reference.py.

The reference reads only the tiny GGUF file's tensors as ``gguf`` decodes them
(tests/tiny_gguf.py), never the library: it runs the model in float64 (checked here against
``tiny_gguf.reference_forward``'s logits) keeping the stream after every layer and every
head's write, and forms each head's full V × V OV circuit to take its eigenvalues with
``torch.linalg.eigvals`` (the check of the library's E × E shortcut). The files: llama with
grouped-query attention (4 query heads on 2 key/value heads), Qwen2 with q/k/v biases, Qwen3
with per-head q/k norms, and an untied llama whose 4 query heads share one key/value head.
SmolLM2 is checked in tests/core/test_logit_lens_smollm2.py (the ``model`` tier).
"""

from __future__ import annotations

import pytest
import torch

from attention_core.experiments import logit_lens as ll
from attention_core.experiments.heads import as_ids
from attention_core.experiments.ov_copying import ov_copying_scores
from attention_core.pretrained import load_gguf
from attention_core.pretrained.int4 import int4_available
from tests.core.logit_lens_reference import (
    captured_parts,
    captured_run,
    decoder_tensors,
    file_tensors,
    model_log_probs,
    norm_scale,
    reference_copying,
    reference_dla,
    reference_lens,
    reference_run,
    unembedding,
)
from tests.tiny_gguf import _rms, reference_forward, write_tiny_gguf

LAYERS = 3
LENGTH = 12
CASES = {
    "llama": {"architecture": "llama"},
    "qwen2": {"architecture": "qwen2"},
    "qwen3": {"architecture": "qwen3"},
    "llama-untied-one-kv": {"architecture": "llama", "tied": False, "kv_heads": 1},
}
LENS_TOLERANCE = 1e-5  # float32 log-probabilities against float64 (measured ≤ 2.3e-6)
MODEL_TOLERANCE = 1e-5  # the lens's last row against the model's own log-probabilities
DLA_TOLERANCE = 1e-5  # float32 parts against float64, relative to Σ|part| (measured ≤ 2e-7)
SUM_TOLERANCE = 1e-4  # the parts' sum against the model's logit difference, relative
COPY_TOLERANCE = 1e-6  # the E × E shortcut against the full V × V eigenvalues (measured ≤ 1.2e-7)
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


@pytest.mark.parametrize("case", CASES)
def test_the_reference_run_is_the_tiny_files_model(tiny, case):
    """The float64 reference's parts add up to its streams, and its last stream gives
    tiny_gguf.reference_forward's logits (the reference is the model)."""
    model, _ = tiny[case]
    ids = _ids(len(model.vocab))
    streams, parts = reference_run(model, ids)
    heads = model.spec.heads
    for layer in range(LAYERS + 1):
        summed = parts[: 1 + layer * (heads + 1)].sum(0)
        torch.testing.assert_close(summed, streams[layer], atol=1e-12, rtol=0)
    logits, _ = reference_forward(model, ids)
    w = file_tensors(model)
    mine = _rms(streams[-1], w["output_norm.weight"]) @ unembedding(w).T
    torch.testing.assert_close(mine, logits, atol=1e-12, rtol=0)


@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_the_lens_matches_the_float64_reference(tiny, case, frozen):
    model, decoder = tiny[case]
    ids = _ids(decoder.config.vocab_size, seed=1)
    streams, _ = reference_run(model, ids)
    lens = ll.logit_lens(decoder, ids, frozen_scale=frozen)
    assert lens.shape == (LAYERS + 1, LENGTH, decoder.config.vocab_size)
    assert lens.dtype == torch.float32
    expected = reference_lens(model, streams, frozen)
    assert float((lens.double() - expected).abs().max()) <= LENS_TOLERANCE


@pytest.mark.parametrize("case", CASES)
def test_the_lens_last_row_is_the_models_own_log_probs(tiny, case):
    _, decoder = tiny[case]
    ids = _ids(decoder.config.vocab_size, seed=2)
    own = model_log_probs(decoder, ids)
    for frozen in (False, True):
        lens = ll.logit_lens(decoder, ids, frozen_scale=frozen)
        assert float((lens[-1].double() - own).abs().max()) <= MODEL_TOLERANCE


@pytest.mark.parametrize("frozen", [False, True])
def test_the_last_positions_are_the_full_lens_cut(tiny, frozen):
    """``positions=k`` reads the whole prompt and keeps the last k positions' rows."""
    model, decoder = tiny["qwen2"]
    ids = _ids(decoder.config.vocab_size, seed=5)
    streams, _ = reference_run(model, ids)
    expected = reference_lens(model, streams, frozen)  # (N + 1, L, V)
    for kept in (1, 3, LENGTH):
        lens = ll.logit_lens(decoder, ids, frozen_scale=frozen, positions=kept)
        assert lens.shape == (LAYERS + 1, kept, decoder.config.vocab_size)
        assert float((lens.double() - expected[:, -kept:]).abs().max()) <= LENS_TOLERANCE


@pytest.mark.parametrize("case", CASES)
def test_the_run_is_the_models_forward_and_is_cached(tiny, case):
    """The lens's run takes the decoder's own path: its logits are the forward's, bit for
    bit; a repeated call returns the same run, another decoder (a twin) its own."""
    _, decoder = tiny[case]
    ids = _ids(decoder.config.vocab_size, seed=9)
    run = ll.lens_run(decoder, ids)
    assert torch.equal(run.logits, decoder(as_ids(ids)).logits[0])
    assert ll.lens_run(decoder, torch.tensor(ids)) is run
    assert ll.lens_run(decoder.with_variant("scaled"), ids) is not run
    summed = run.last_writes.sum(0)  # (D,) every part's write at the last position
    torch.testing.assert_close(summed, run.streams[-1, -1], atol=1e-5, rtol=0)


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
    assert float((lens[-1].double() - model_log_probs(decoder, ids)).abs().max()) <= 1e-5


@pytest.mark.parametrize("case", ["llama", "qwen2", "qwen3"])
def test_the_attribution_of_bfloat16_weights_sums_to_the_logit_difference_roughly(tiny, case):
    """bfloat16 rounds each projection's input and output, the parts are projected unrounded:
    their sum is the model's difference to bfloat16's precision (measured ≤ 2.3e-3 of
    Σ|part|), not float32's."""
    model, _ = tiny[case]
    decoder = load_gguf(model.path, weights_dtype="bfloat16")
    ids = _ids(decoder.config.vocab_size, seed=5)
    logits = decoder(as_ids(ids)).logits[0, -1].double()
    values = ll.direct_logit_attribution(decoder, ids, 3, 7).values()
    size = sum(abs(value) for value in values)
    assert abs(sum(values) - float(logits[3] - logits[7])) <= 1e-2 * size


def test_the_copying_scores_of_bfloat16_weights_are_those_of_their_values(tiny):
    """With bfloat16 weights the scores are the full circuits' of the rounded weights."""
    model, _ = tiny["qwen2"]
    decoder = load_gguf(model.path, weights_dtype="bfloat16")
    expected = reference_copying(model, decoder_tensors(decoder))
    assert float((ov_copying_scores(decoder) - expected).abs().max()) <= COPY_TOLERANCE


@pytest.mark.parametrize("case", CASES)
def test_the_attribution_matches_the_reference_and_sums_to_the_logit_difference(tiny, case):
    model, decoder = tiny[case]
    cfg = decoder.config
    ids = _ids(cfg.vocab_size, seed=5)
    streams, parts = reference_run(model, ids)
    logits = decoder(as_ids(ids)).logits[0, -1].double()  # (V,)
    for answer, alternative in ((3, 7), (int(logits.argmax()), int(logits.argmin()))):
        dla = ll.direct_logit_attribution(decoder, ids, answer, alternative)
        names = ["embed"]
        for layer in range(LAYERS):
            names += [f"L{layer}H{h}" for h in range(cfg.num_heads)] + [f"L{layer}MLP"]
        assert list(dla) == names
        values = torch.tensor(list(dla.values()), dtype=torch.float64)
        expected = reference_dla(model, streams, parts, answer, alternative)
        size = float(expected.abs().sum())
        assert float((values - expected).abs().max()) <= DLA_TOLERANCE * size
        difference = float(logits[answer] - logits[alternative])
        assert abs(float(values.sum()) - difference) <= SUM_TOLERANCE * size


@pytest.mark.parametrize("case", CASES)
def test_a_heads_write_tokens_match_the_reference(tiny, case):
    model, decoder = tiny[case]
    cfg = decoder.config
    ids = _ids(cfg.vocab_size, seed=6)
    streams, parts = reference_run(model, ids)
    w = file_tensors(model)
    for layer, head in ((0, 0), (1, cfg.num_heads - 1), (LAYERS - 1, 1)):
        tokens = ll.head_write_tokens(decoder, ids, layer, head, k=5)
        write = parts[1 + layer * (cfg.num_heads + 1) + head, -1]  # (D,)
        normed = write * w["output_norm.weight"] / norm_scale(streams[-1, -1])
        expected = unembedding(w) @ normed  # (V,)
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
    scores = ov_copying_scores(decoder)
    assert scores.shape == (LAYERS, decoder.config.num_heads)
    assert scores.dtype == torch.float64
    expected = reference_copying(model)
    assert float((scores - expected).abs().max()) <= COPY_TOLERANCE
    assert bool((scores.abs() <= 1).all())


def test_a_head_that_writes_back_its_token_scores_one(tiny):
    """A head whose value rows are B (after the attention norm's weight) and whose slice of
    W_O is Bᵀ, in a tied model with g_f = 1, has the circuit W_E·Bᵀ·B·W_Eᵀ: a Gram matrix,
    positive semi-definite, so Σλ = Σ|λ| and the score is 1; head 1, which shares the value
    head and writes −Bᵀ, scores −1."""
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
    scores = ov_copying_scores(twin)
    assert abs(float(scores[0, 0]) - 1) <= 1e-6
    assert abs(float(scores[0, 1]) + 1) <= 1e-6


def test_nothing_changes_the_decoder(tiny):
    _, decoder = tiny["qwen3"]
    before = {name: t.clone() for name, t in decoder.state_dict().items()}
    ids = _ids(decoder.config.vocab_size, seed=7)
    ll.logit_lens(decoder, ids)
    ll.logit_lens(decoder, ids, frozen_scale=True)
    ll.direct_logit_attribution(decoder, ids, 1, 2)
    ll.head_write_tokens(decoder, ids, 1, 1)
    ov_copying_scores(decoder)
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
    for positions in (0, len(ids) + 1, 1.5, True):
        with pytest.raises(ValueError, match="positions"):
            ll.logit_lens(decoder, ids, positions=positions)
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
    for function in (ov_copying_scores, lambda d: ll.logit_lens(d, ids)):
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
    ):
        with pytest.raises(ValueError, match="logit lens .* need float weights.*'int4'"):
            call()
    with pytest.raises(ValueError, match="weights_dtype='int4'"):
        ov_copying_scores(decoder)


@pytest.mark.parametrize("case", CASES)
def test_the_captured_parts_are_the_reference_parts(tiny, case, monkeypatch):
    """The SmolLM2 checks below read the parts from a plain forward (hooks): on the tiny
    files those parts are the float64 reference's."""
    model, decoder = tiny[case]
    ids = _ids(decoder.config.vocab_size, seed=8)
    streams, outputs = captured_run(decoder, ids, monkeypatch)
    expected_streams, expected_parts = reference_run(model, ids)
    torch.testing.assert_close(streams, expected_streams, atol=1e-5, rtol=0)
    parts = captured_parts(decoder, streams, outputs)
    torch.testing.assert_close(parts, expected_parts, atol=1e-5, rtol=0)
