"""The query–key map (attention_core.experiments.qk_map): the collected q/k are the ones the
model attends with, the normalisation changes no attention row, PCA against numpy's SVD,
t-SNE finite and seeded, the trust figure against scipy's Spearman (or an explicit rank
formula), bad input refused. Tiny GGUF decoders (fast tier); e5 in the model tier (the
``e5`` fixture)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attention_core.experiments import qk_map, qk_projection
from attention_core.pretrained import load_gguf
from tests.tiny_gguf import write_tiny_gguf

SENTENCES = ("the cat sat on the mat", "a hat in the cat", "the the cat")
ARCHITECTURES = ("llama", "qwen2", "qwen3")


@pytest.fixture(scope="module")
def tiny_decoders(tmp_path_factory):
    """One tiny float32 decoder per architecture (GQA: 4 query heads, 2 key heads)."""
    folder = tmp_path_factory.mktemp("qk_map")
    return {
        arch: load_gguf(
            write_tiny_gguf(folder / f"{arch}.gguf", architecture=arch, seed=7).path,
            weights_dtype="float32",
        )
        for arch in ARCHITECTURES
    }


@pytest.fixture(scope="module")
def tiny_qk(tiny_decoders):
    return qk_map.decoder_head_qk(tiny_decoders["llama"], SENTENCES, layer=1, head=3)


@pytest.mark.parametrize("arch", ARCHITECTURES)
@pytest.mark.parametrize(("layer", "head"), [(0, 0), (1, 3)])
def test_collected_qk_are_what_the_decoder_attends_with(tiny_decoders, arch, layer, head):
    tiny = tiny_decoders[arch]
    qk = qk_map.decoder_head_qk(tiny, SENTENCES, layer=layer, head=head)
    captured = {}

    def capture(module, args, output):  # the layer's own (x, weights, (k, v))
        captured["weights"], captured["k"] = output[1], output[2][0]

    handle = tiny.layers[layer].register_forward_hook(capture)
    try:
        for text, q, k, weights in zip(SENTENCES, qk.queries, qk.keys, qk.weights, strict=True):
            ids = torch.tensor([tiny.tokenize(text).input_ids])  # (1, L)
            tiny(ids, need_weights=True)
            hooked = captured["weights"][0, head].double().numpy()  # (L, L)
            kv_head = head // tiny.config.group_size
            np.testing.assert_allclose(k, captured["k"][0, kv_head].double().numpy(), atol=1e-6)
            np.testing.assert_allclose(weights, hooked, atol=1e-7)
            rows = qk_map.attention_rows(q, k, 1 / math.sqrt(q.shape[1]), causal=True)
            np.testing.assert_allclose(rows, hooked, atol=2e-6)
    finally:
        handle.remove()
    assert qk.causal and qk.scale == pytest.approx(1 / math.sqrt(tiny.config.head_dim))
    assert [len(t) for t in qk.tokens] == [q.shape[0] for q in qk.queries]


def test_normalisation_changes_no_attention_row(tiny_qk):
    normalized = qk_map.normalize_qk(tiny_qk)
    assert normalized.row_change <= qk_map.ROW_TOLERANCE
    all_q, all_k = np.concatenate(normalized.queries), np.concatenate(normalized.keys)
    assert np.linalg.norm(all_q, axis=1).mean() == pytest.approx(
        np.linalg.norm(all_k, axis=1).mean(), rel=1e-12
    )
    # translated first: the key mean met the query mean before the scaling by s and 1/s
    s = normalized.factor
    np.testing.assert_allclose(all_k.mean(0) * s, all_q.mean(0) / s, atol=1e-12)
    for q, k, q2, k2 in zip(
        tiny_qk.queries, tiny_qk.keys, normalized.queries, normalized.keys, strict=True
    ):
        before = qk_map.attention_rows(q, k, tiny_qk.scale, causal=True)
        after = qk_map.attention_rows(q2, k2, tiny_qk.scale, causal=True)
        assert np.abs(after - before).max() <= 1e-6


def test_joint_points_order_and_labels(tiny_qk):
    normalized = qk_map.normalize_qk(tiny_qk)
    points = qk_map.joint_points(tiny_qk, normalized)
    total = tiny_qk.token_count
    assert points.points.shape == (2 * total, tiny_qk.queries[0].shape[1])
    assert not points.is_key[:total].any() and points.is_key[total:].all()
    np.testing.assert_array_equal(points.points[0], normalized.queries[0][0])
    np.testing.assert_array_equal(points.points[total], normalized.keys[0][0])
    assert points.tokens[:total] == points.tokens[total:]
    assert set(points.languages) == {"en"}


def test_pca_matches_numpy_svd(tiny_qk):
    x = qk_map.joint_points(tiny_qk, qk_map.normalize_qk(tiny_qk)).points
    projection = qk_projection.project_pca(x)
    centred = x - x.mean(0)
    singular = np.linalg.svd(centred, compute_uv=False)
    shares = singular**2 / (singular**2).sum()
    np.testing.assert_allclose(projection.explained, shares[:2], rtol=1e-10)
    np.testing.assert_allclose(projection.coords.var(0) * len(x), singular[:2] ** 2, rtol=1e-9)
    assert projection.coords.shape == (len(x), 2)
    np.testing.assert_array_equal(qk_projection.project_pca(x).coords, projection.coords)


def test_tsne_is_finite_and_seeded():
    pytest.importorskip("sklearn")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((60, 8))
    first = qk_projection.project_tsne(x, seed=3)
    assert first.coords.shape == (60, 2) and np.isfinite(first.coords).all()
    np.testing.assert_array_equal(qk_projection.project_tsne(x, seed=3).coords, first.coords)


def _spearman_by_formula(a, b) -> float:
    """Pearson's correlation of average ranks, written out."""

    def ranks(v):
        v = np.asarray(v)
        out = np.empty(len(v))
        for i, value in enumerate(v):
            out[i] = (v < value).sum() + ((v == value).sum() + 1) / 2
        return out

    ra, rb = ranks(a), ranks(b)
    return float(np.corrcoef(ra, rb)[0, 1])


def test_map_trust_is_spearman_over_causal_pairs(tiny_qk):
    points = qk_map.joint_points(tiny_qk, qk_map.normalize_qk(tiny_qk)).points
    coords = qk_projection.project_pca(points).coords
    trust = qk_projection.map_trust(tiny_qk, coords)
    assert trust.pairs == sum(n * (n + 1) // 2 for n in map(len, tiny_qk.tokens))
    distances, negatives = qk_projection.pair_scores(tiny_qk, coords)
    try:
        from scipy.stats import spearmanr
    except ModuleNotFoundError:
        expected = _spearman_by_formula(distances, negatives)
    else:
        expected = float(spearmanr(distances, negatives).statistic)
    assert trust.spearman == pytest.approx(expected, abs=1e-12)
    assert trust.spearman == pytest.approx(_spearman_by_formula(distances, negatives), abs=1e-12)
    # the first pair: query 0 and key 0 of sentence 0
    total = tiny_qk.token_count
    assert distances[0] == pytest.approx(np.linalg.norm(coords[0] - coords[total]))
    assert negatives[0] == pytest.approx(-tiny_qk.queries[0][0] @ tiny_qk.keys[0][0])


@pytest.mark.parametrize(
    ("sentences", "layer", "head", "match"),
    [
        ((), 0, 0, "non-empty"),
        ("the cat", 0, 0, "non-empty"),
        (("the cat", "  "), 0, 0, "non-blank"),
        (("the cat",), 2, 0, "layer"),
        (("the cat",), 0, 4, "head"),
        (("the cat",), -1, 0, "layer"),
        (("the cat",), 0, True, "head"),
        (("the cat " * 100,) * 3, 0, 0, "MAX_MAP_TOKENS"),
    ],
)
def test_bad_input_is_refused(tiny_decoders, sentences, layer, head, match):
    with pytest.raises(ValueError, match=match):
        qk_map.decoder_head_qk(tiny_decoders["llama"], sentences, layer, head)


def test_bad_points_and_variant_are_refused(tiny_decoders, tiny_qk):
    with pytest.raises(ValueError, match="points"):
        qk_projection.project_pca(np.zeros((2, 4)))
    with pytest.raises(ValueError, match="points"):
        qk_projection.project_pca(np.full((5, 4), np.nan))
    with pytest.raises(ValueError, match="MAX_MAP_TOKENS"):
        qk_projection.project_pca(np.zeros((2 * qk_map.MAX_MAP_TOKENS + 1, 4)))
    with pytest.raises(ValueError, match="seed"):
        qk_projection.project_tsne(np.zeros((5, 4)), seed=-1)
    with pytest.raises(ValueError, match="rows"):
        qk_projection.map_trust(tiny_qk, np.zeros((3, 2)))
    with pytest.raises(ValueError, match="HeadQK"):
        qk_map.normalize_qk("not a head")
    local = tiny_decoders["llama"].with_variant("local")
    with pytest.raises(ValueError, match="dense exact"):
        qk_map.decoder_head_qk(local, ("the cat",), 0, 0)


def test_sentence_language():
    assert qk_map.sentence_language("the cat") == "en"
    assert qk_map.sentence_language("那只猫坐在垫子上") == "zh"


# --- e5 (model tier: the ``e5`` fixture loads the real model) ---------------------------


@pytest.fixture(scope="module")
def e5():
    from attention_core.pretrained import load_e5_small

    return load_e5_small()


def test_e5_qk_are_what_the_encoder_attends_with(e5):
    qk = qk_map.encoder_head_qk(e5, qk_map.E5_SENTENCES, layer=5, head=2)
    assert not qk.causal and qk.languages[:2] == ("en", "zh")
    for q, k, weights in zip(qk.queries, qk.keys, qk.weights, strict=True):
        rows = qk_map.attention_rows(q, k, qk.scale, causal=False)
        np.testing.assert_allclose(rows, weights, atol=2e-6)
    normalized = qk_map.normalize_qk(qk)
    assert normalized.row_change <= qk_map.ROW_TOLERANCE
    points = qk_map.joint_points(qk, normalized)
    coords = qk_projection.project_pca(points.points).coords
    assert -1 <= qk_projection.map_trust(qk, coords).spearman <= 1
    distances = qk_projection.translation_distances(qk, coords)
    assert [p[:3] for p in distances.pairs] == [
        ("cat", "猫", "query"),
        ("mat", "垫子", "query"),
        ("cat", "猫", "key"),
        ("mat", "垫子", "key"),
    ]
    assert all(0 <= s <= 1 for s in distances.share_closer) and distances.random_median > 0
