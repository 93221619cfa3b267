"""Score parts (attention_core.experiments.score_parts and score_run): a real attention score
split into (query part × key part) terms, a logit difference split by the same parts, and the
attention row without one part, predicted and measured.

The fast tier runs on tiny GGUF files (tests/tiny_gguf.py: llama with GQA and interleaved
RoPE, Qwen2 with q/k/v bias, Qwen3 with per-head q/k norms, three layers each). The model's
own score comes from the q and k the decoder hands to ``attend`` (captured by wrapping it),
the stream from forward pre-hooks on the decoder's layers, the ablated row from a plain
``decoder(..., ablate=...)`` forward. One ``model``-tier test runs SmolLM2 layer 18 head 6.
"""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
import torch

from attention_core.experiments import score_parts as sp
from attention_core.experiments import score_run as sr
from attention_core.experiments import score_without as sw
from attention_core.experiments.head_ablation import repeated_tokens
from attention_core.experiments.heads import as_ids
from attention_core.pretrained import llama_block, load_gguf
from attention_core.pretrained.int4 import int4_available
from tests.tiny_gguf import write_tiny_gguf

LAYERS = 3
LENGTH = 12
ARCHITECTURES = ("llama", "qwen2", "qwen3")
CELLS = ((0, 0), (5, 2), (7, 6), (11, 0), (11, 11))
SUM_TOLERANCE = 1e-4  # relative to max(|score|, |q|·|k|/√E): float32 q, k against float64 parts
BF16_TOLERANCE = 3e-2  # bfloat16 rounds each projection's input and output; the parts do not
STREAM_TOLERANCE = 1e-5  # the decoder without weights may take another float32 attention path
Q4_MATRICES = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


@pytest.fixture(scope="module")
def tiny_files(tmp_path_factory):
    """A tiny three-layer file per architecture."""
    folder = tmp_path_factory.mktemp("score_parts")
    return {
        arch: write_tiny_gguf(folder / f"{arch}.gguf", architecture=arch, layers=LAYERS, seed=5)
        for arch in ARCHITECTURES
    }


@pytest.fixture(scope="module")
def tiny_f32(tiny_files):
    """Each tiny file loaded with float32 weights."""
    return {arch: load_gguf(t.path, weights_dtype="float32") for arch, t in tiny_files.items()}


def _ids(vocab: int, seed: int = 0, length: int = LENGTH) -> torch.Tensor:
    """(1, length) seeded random token ids."""
    return torch.randint(0, vocab, (1, length), generator=torch.Generator().manual_seed(seed))


def _captured_qk(tiny, ids, monkeypatch) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The (q (H, L, E), k (H, L, E)) each layer of ``tiny`` hands to ``attend``.

    Only this thread's calls are recorded: a background thread another test left running in
    this process (the dashboard's Heads prefetch, under pytest-xdist) may be inside
    ``attend`` too, and its calls would shift the layers."""
    seen = []
    original = llama_block.attend
    this_thread = threading.get_ident()

    def recording(q, k, v, variant, **kwargs):
        if threading.get_ident() == this_thread:
            seen.append((q[0].double(), k[0].double()))
        return original(q, k, v, variant, **kwargs)

    monkeypatch.setattr(llama_block, "attend", recording)
    tiny(ids)
    monkeypatch.setattr(llama_block, "attend", original)
    return seen


def _relative(total: float, score: float, scale: float) -> float:
    return abs(total - score) / max(abs(score), scale)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_parts_sum_to_the_decoders_own_score(tiny_f32, arch, monkeypatch):
    tiny = tiny_f32[arch]
    ids = _ids(tiny.config.vocab_size)
    captured = _captured_qk(tiny, ids, monkeypatch)
    size = tiny.config.head_dim
    worst = 0.0
    for layer in range(LAYERS):
        q_all, k_all = captured[layer]
        for head in range(tiny.config.num_heads):
            for query, key in CELLS:
                parts = sp.score_parts(tiny, ids, layer=layer, head=head, query=query, key=key)
                q, k = q_all[head, query], k_all[head, key]  # (E,) each
                score = float(q @ k) / math.sqrt(size)
                scale = float(q.norm() * k.norm()) / math.sqrt(size)
                assert parts.total == pytest.approx(float(parts.matrix.sum()))
                worst = max(worst, _relative(parts.total, score, scale))
                worst = max(worst, _relative(parts.score, score, scale))
                np.testing.assert_allclose(parts.key_sums.sum(), parts.total, rtol=1e-9)
                np.testing.assert_allclose(parts.query_sums, parts.matrix.sum(axis=1))
    assert worst <= SUM_TOLERANCE


def test_row_totals_give_the_decoders_weights(tiny_f32):
    """Softmax of the parts' totals over a row is the decoder's attention row (its log
    softmax differences are the score differences)."""
    tiny = tiny_f32["llama"]
    ids = _ids(tiny.config.vocab_size, seed=1)
    weights = tiny(ids, need_weights=True).attentions[2][0, 3, 9, :10].double()  # (S,)
    totals = [
        sp.score_parts(tiny, ids, layer=2, head=3, query=9, key=key).total for key in range(10)
    ]
    row = torch.softmax(torch.tensor(totals, dtype=torch.float64), dim=0)
    torch.testing.assert_close(row, weights, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_part_names(tiny_f32, arch):
    tiny = tiny_f32[arch]
    parts = sp.score_parts(tiny, _ids(tiny.config.vocab_size), layer=2, head=0, query=3, key=1)
    heads = tiny.config.num_heads
    expected = ["emb"]
    for layer in range(2):
        expected += [f"L{layer}H{h}" for h in range(heads)] + [f"MLP{layer}"]
    expected += ["bias"] if arch == "qwen2" else []
    assert parts.names == tuple(expected)
    assert parts.matrix.shape == (len(expected), len(expected))
    assert not parts.matrix.flags.writeable
    first = sp.score_parts(tiny, _ids(tiny.config.vocab_size), layer=0, head=0, query=3, key=1)
    assert first.names == (("emb", "bias") if arch == "qwen2" else ("emb",))


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_logit_parts_sum_to_the_logit_difference(tiny_f32, arch):
    tiny = tiny_f32[arch]
    ids = _ids(tiny.config.vocab_size, seed=2)
    logits = tiny(ids).logits[0].double()  # (L, V)
    for position, target, alternative in ((0, 5, 9), (6, 40, 41), (11, 100, 3)):
        parts = sp.logit_parts(tiny, ids, position=position, target=target, alternative=alternative)
        difference = float(logits[position, target] - logits[position, alternative])
        assert parts.difference == pytest.approx(difference, abs=1e-6)
        scale = float(np.abs(parts.contributions).sum())
        assert _relative(parts.total, difference, scale) <= SUM_TOLERANCE
        assert len(parts.names) == 1 + LAYERS * (tiny.config.num_heads + 1)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_rebuilt_stream_equals_the_decoders_hidden_states(tiny_f32, arch):
    tiny = tiny_f32[arch]
    ids = _ids(tiny.config.vocab_size, seed=3)
    inputs = []
    hooks = [
        layer.register_forward_pre_hook(lambda _, args: inputs.append(args[0][0].clone()))
        for layer in tiny.layers
    ]
    try:
        logits = tiny(ids).logits[0]  # (L, V)
    finally:
        for hook in hooks:
            hook.remove()
    run = sr.record_run(tiny, ids)
    for layer, hidden in enumerate(inputs):
        torch.testing.assert_close(run.residual[layer], hidden, atol=STREAM_TOLERANCE, rtol=0)
        rebuilt = run.writes[: sr.parts_before(tiny.config, layer)].double().sum(dim=0)
        torch.testing.assert_close(rebuilt, hidden.double(), atol=STREAM_TOLERANCE, rtol=0)
    rebuilt = run.writes.double().sum(dim=0)  # (L, D) after the last layer
    torch.testing.assert_close(rebuilt, run.residual[-1].double(), atol=STREAM_TOLERANCE, rtol=0)
    torch.testing.assert_close(run.logits, logits, atol=STREAM_TOLERANCE, rtol=0)


def test_second_call_reuses_the_run(tiny_f32, monkeypatch):
    tiny = tiny_f32["llama"]
    ids = _ids(tiny.config.vocab_size, seed=4)
    forwards = []
    original = sr.record_run
    monkeypatch.setattr(sr, "record_run", lambda *a, **k: forwards.append(1) or original(*a, **k))
    sp.score_parts(tiny, ids, layer=1, head=0, query=5, key=2)
    sp.score_parts(tiny, ids.tolist(), layer=2, head=3, query=8, key=8)
    sp.key_contrast(tiny, ids, layer=2, head=1, query=7, key=3)
    sp.logit_parts(tiny, ids, position=4, target=1, alternative=2)
    assert len(forwards) == 1
    assert sr.score_run(tiny, ids) is sr.score_run(tiny, ids)
    sp.score_parts(tiny.with_variant("scaled"), ids, layer=1, head=0, query=5, key=2)
    assert len(forwards) == 2  # another decoder object: another run


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_key_contrast_sums_to_the_score_difference(tiny_f32, arch):
    tiny = tiny_f32[arch]
    ids = _ids(tiny.config.vocab_size, seed=5)
    contrast = sp.key_contrast(tiny, ids, layer=2, head=1, query=10, key=4)
    scores = [
        sp.score_parts(tiny, ids, layer=2, head=1, query=10, key=key).score for key in range(11)
    ]
    others = [s for key, s in enumerate(scores) if key != 4]
    assert contrast.difference == pytest.approx(scores[4] - np.mean(others), abs=1e-9)
    scale = float(np.abs(contrast.contributions).sum())
    assert _relative(contrast.total, contrast.difference, scale) <= SUM_TOLERANCE
    assert list(contrast.contributions) == sorted(contrast.contributions, reverse=True)
    names = sp.score_parts(tiny, ids, layer=2, head=1, query=10, key=4).names
    assert sorted(contrast.names) == sorted(names)


@pytest.mark.parametrize(
    ("arch", "part"), [("llama", "L0H1"), ("qwen2", "L1H3"), ("qwen3", "L0H0")]
)
def test_measured_row_is_the_ablation_forwards_row(tiny_f32, arch, part):
    tiny = tiny_f32[arch]
    ids = _ids(tiny.config.vocab_size, seed=6)
    layer, head = (int(i) for i in part[1:].split("H"))
    without = sw.predicted_attention_without(tiny, ids, layer=2, head=2, query=9, part=part)
    ablated = tiny(ids, need_weights=True, ablate=[(layer, head)]).attentions[2][0, 2, 9, :10]
    clean = tiny(ids, need_weights=True).attentions[2][0, 2, 9, :10]
    np.testing.assert_allclose(without.measured, ablated.double().numpy(), atol=1e-7)
    np.testing.assert_allclose(without.clean, clean.double().numpy(), atol=1e-7)
    assert without.predicted.sum() == pytest.approx(1.0)
    assert part not in dict(without.repair)
    assert len(without.repair) == len(without.names) - 1
    changes = [abs(change) for _, change in without.repair]
    assert changes == sorted(changes, reverse=True)
    index = without.names.index(part)
    np.testing.assert_allclose(without.shares_measured[index], 0.0, atol=1e-12)


def test_predicted_row_is_the_matrices_without_the_part(tiny_f32):
    """The prediction is softmax over keys of the cell matrices less the part's row and
    column, computed here cell by cell."""
    tiny = tiny_f32["qwen2"]
    ids = _ids(tiny.config.vocab_size, seed=7)
    without = sw.predicted_attention_without(tiny, ids, layer=2, head=0, query=6, part="MLP0")
    index = without.names.index("MLP0")
    kept = []
    for key in range(7):
        matrix = sp.score_parts(tiny, ids, layer=2, head=0, query=6, key=key).matrix
        keep = np.arange(len(matrix)) != index
        kept.append(matrix[np.ix_(keep, keep)].sum())
    expected = np.exp(kept - np.max(kept)) / np.exp(kept - np.max(kept)).sum()
    np.testing.assert_allclose(without.predicted, expected, atol=1e-12)


def test_bfloat16_parts_sum_to_the_score_within_its_rounding(tiny_files):
    tiny = load_gguf(tiny_files["llama"].path, weights_dtype="bfloat16")
    ids = _ids(tiny.config.vocab_size)
    run = sr.score_run(tiny, ids)
    for layer, head, query, key in ((1, 0, 5, 2), (2, 3, 11, 0), (2, 1, 7, 7)):
        parts = sp.score_parts(tiny, ids, layer=layer, head=head, query=query, key=key)
        q = run.q[layer, head, query].double()
        k = run.k[layer, head // tiny.config.group_size, key].double()
        scale = float(q.norm() * k.norm()) / math.sqrt(tiny.config.head_dim)
        assert _relative(parts.total, parts.score, scale) <= BF16_TOLERANCE


def _cell(**changes) -> dict:
    return {"layer": 1, "head": 0, "query": 5, "key": 2} | changes


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (_cell(key=6), "key 6"),
        (_cell(query=LENGTH, key=0), "query"),
        (_cell(query=-1, key=0), "query"),
        (_cell(key=-1), "key"),
        (_cell(layer=LAYERS), "layer"),
        (_cell(layer=-1), "layer"),
        (_cell(head=4), "head"),
        (_cell(head=True), "head"),
    ],
)
def test_bad_cells_raise_naming_the_value(tiny_f32, arguments, named):
    tiny = tiny_f32["llama"]
    ids = _ids(tiny.config.vocab_size)
    with pytest.raises(ValueError, match=named):
        sp.score_parts(tiny, ids, **arguments)
    with pytest.raises(ValueError, match=named):
        sp.key_contrast(tiny, ids, **arguments)


def test_bad_inputs_raise(tiny_f32, tiny_files):
    tiny = tiny_f32["qwen2"]
    ids = _ids(tiny.config.vocab_size)
    vocab = tiny.config.vocab_size
    with pytest.raises(ValueError, match="non-empty"):
        sp.score_parts(tiny, [], **_cell())
    with pytest.raises(ValueError, match=str(vocab)):
        sp.score_parts(tiny, [1, 2, vocab], **_cell(query=2))
    with pytest.raises(ValueError, match="at most"):
        sr.score_run(tiny, [1] * (sr.MAX_RUN_LENGTH + 1))
    with pytest.raises(ValueError, match="query 0"):
        sp.key_contrast(tiny, ids, layer=1, head=0, query=0, key=0)
    with pytest.raises(ValueError, match="position"):
        sp.logit_parts(tiny, ids, position=LENGTH, target=1, alternative=2)
    with pytest.raises(ValueError, match="target"):
        sp.logit_parts(tiny, ids, position=0, target=vocab, alternative=2)
    with pytest.raises(ValueError, match="differ"):
        sp.logit_parts(tiny, ids, position=0, target=3, alternative=3)
    for part in ("bias", "MLP2", "L2H0", "nothing", 3):
        with pytest.raises(ValueError, match="part"):
            sw.predicted_attention_without(tiny, ids, layer=2, head=0, query=4, part=part)
    with pytest.raises(ValueError, match="side"):
        sp.side_parts(tiny, sr.score_run(tiny, ids), layer=0, head=0, positions=[0], side="v")
    with pytest.raises(ValueError, match="variant 'local'"):
        sp.score_parts(tiny.with_variant("local", window_size=2), ids, **_cell())
    with pytest.raises(ValueError, match="decoder"):
        sp.score_parts("tiny", ids, **_cell())


@pytest.mark.skipif(not int4_available(), reason="torch's int4 CPU kernel is not available")
def test_int4_weights_are_refused_by_name(tmp_path):
    path = tmp_path / "q4.gguf"
    write_tiny_gguf(path, types=tuple((kind, "Q4_1") for kind in Q4_MATRICES), seed=4)
    tiny = load_gguf(path, weights_dtype="int4")
    with pytest.raises(ValueError, match="weights_dtype='int4'"):
        sp.score_parts(tiny, _ids(tiny.config.vocab_size), **_cell())


def test_smollm2_induction_head_parts_sum_to_its_score(decoder32):
    """Layer 18 head 6 on BOS + 20 random tokens repeated once: the parts of a second-copy
    query's score, to its induction target and to other keys, sum to the model's score."""
    ids = repeated_tokens(decoder32, 20, 0)
    run = sr.score_run(decoder32, ids)
    forward = decoder32(as_ids(ids), need_weights=True)
    torch.testing.assert_close(run.weights[18], forward.attentions[18][0], atol=1e-6, rtol=0)
    size = decoder32.config.head_dim
    for query, key in ((30, 11), (30, 0), (30, 30), (40, 21), (25, 24)):
        parts = sp.score_parts(decoder32, ids, layer=18, head=6, query=query, key=key)
        q = run.q[18, 6, query].double()
        k = run.k[18, 6 // decoder32.config.group_size, key].double()
        scale = float(q.norm() * k.norm()) / math.sqrt(size)
        assert _relative(parts.total, parts.score, scale) <= SUM_TOLERANCE
        assert len(parts.names) == 1 + 18 * 10
