"""The Playground, Step-by-step and Multi-head pages in both languages."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dashboard.i18n import t_in
from tests.dashboard.conftest import assert_clean, canvas_heatmaps, metrics, open_app


def _row_sums(at, lang="en"):
    label = "Row sums of the averaged map" if lang == "en" else "平均图的行和"
    return metrics(at)[label]


def test_playground_in_english():
    at = open_app("playground", **{"playground.input": "random"})
    assert_clean(at)
    assert at.title[0].value == "Playground"
    shown = metrics(at)
    assert shown["Tokens L"] == "16" and shown["d_k per head"] == "16"
    assert shown["Device"] == ("cuda" if torch.cuda.is_available() else "cpu")
    assert _row_sums(at) == "min 1.0000, max 1.0000"
    assert shown["Sparsity (zero weights)"] == "0.0%"
    grid, avg, out = canvas_heatmaps(at)
    assert grid["panels"] == ["Head 0", "Head 1", "Head 2", "Head 3"]
    assert grid["values"].shape == (4, 16, 16) and grid["scores"].shape == (4, 16, 16)
    assert grid["panel_title"] == "Head" and grid["score_title"] == "Raw score"
    # every query row of every head and of the average is a distribution over the keys
    np.testing.assert_allclose(grid["values"].sum(axis=-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(avg["values"].sum(axis=-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(avg["values"][0], grid["values"].mean(axis=0), atol=1e-6)
    assert grid["scale"]["domain"][1] == pytest.approx(float(grid["values"].max()), rel=1e-6)
    assert out["values"].shape == (1, 16, 64) and out["scale"]["reverse"]
    assert not at.get("vega_lite_chart")


def test_playground_causal_chinese_sentence():
    at = open_app(
        "playground",
        lang="zh",
        **{"playground.input": "preset_zh", "playground.mask": "causal", "playground.heads": "2"},
    )
    assert_clean(at)
    shown = metrics(at)
    n = int(shown["词元数 L"])
    assert n == 17  # 那只猫坐在垫子上，它看起来很舒服。 -> one token per character
    assert shown["零权重占比"] == f"{(n - 1) / (2 * n):.1%}"
    assert _row_sums(at, "zh") == "最小 1.0000，最大 1.0000"


def test_playground_large_sequence_is_pooled():
    at = open_app("playground", **{"playground.seq_len": "1024", "playground.heads": "8"})
    assert_clean(at)
    heatmaps = canvas_heatmaps(at)
    assert len(heatmaps) == 3
    assert all(spec["subtitle"].startswith("pooled to") for spec in heatmaps)
    for spec in heatmaps:
        assert 0 < spec["values"].size <= 128 * 128
        assert len(spec["rows"]) <= 64 and len(spec["cols"]) <= 64
    grid, avg, _out = heatmaps
    assert grid["values"].shape[0] == 8
    # each pooled cell is a block mean: a pooled row sums to (pooled columns / columns)
    pooled_cols = len(avg["cols"])
    np.testing.assert_allclose(avg["values"].sum(axis=-1) * 1024 / pooled_cols, 1.0, atol=1e-4)
    assert _row_sums(at) == "min 1.0000, max 1.0000"


def test_playground_linear_variant_hides_dropout_and_typed_sentence():
    at = open_app(
        "playground",
        **{
            "playground.variant": "linear",
            "playground.input": "typed",
            "playground.sentence": "Attention is all you need, they said.",
        },
    )
    assert_clean(at)
    assert "playground.dropout" not in [s.key for s in at.slider]
    assert metrics(at)["Tokens L"] == "9"


def test_playground_weights_over_budget_show_output_stats(monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_MEMORY_BUDGET_MIB", "1")
    at = open_app("playground", **{"playground.seq_len": "1024", "playground.seed": "4242"})
    assert_clean(at)
    assert len(at.warning) == 1 and "memory budget" in at.warning[0].value
    assert "Output mean ± std" in metrics(at)
    assert not at.get("vega_lite_chart") and not canvas_heatmaps(at)


def test_playground_over_budget_shows_error(monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_MEMORY_BUDGET_MIB", "0.001")
    at = open_app("playground", **{"playground.seq_len": "512", "playground.variant": "stable"})
    assert not at.exception
    assert len(at.error) == 1
    assert "Lower the sequence length" in at.error[0].value


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_step_by_step_numbers_agree(lang):
    at = open_app("step_by_step", lang=lang)
    assert_clean(at)
    values = list(metrics(at).values())
    weight, recomputed, row_sum = values
    assert weight == recomputed
    assert row_sum == "1.0000"
    # every matrix but the mask, which without the causal mask is all 1s: said in words
    assert len(at.get("vega_lite_chart")) >= 11
    assert t_in(lang, "step_by_step.mask_flat") in [box.value for box in at.info]


def test_step_by_step_causal_cell_is_zero():
    at = open_app(
        "step_by_step",
        **{
            "step_by_step.causal": "true",
            "step_by_step.query": "1",
            "step_by_step.key": "4",
            "step_by_step.sentence": "preset_en",
            "step_by_step.tokens": "8",
        },
    )
    assert_clean(at)
    shown = metrics(at)
    assert shown["Weight from the matrix"] == "0.0000"
    assert shown["Sum of row 1"] == "1.0000"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_multihead_page(lang):
    at = open_app(
        "multihead", lang=lang, **{"multihead.mask": "causal", "multihead.input": "random"}
    )
    assert_clean(at)
    shown = list(metrics(at).values())
    assert shown[0] == "8"
    assert float(shown[1]) <= float(shown[2]) + 1e-9  # no head beats the uniform entropy
    gallery, real = canvas_heatmaps(at)
    assert len(gallery["panels"]) == 8 and gallery["scale"]["domain"] == [0.0, 1.0]
    np.testing.assert_allclose(gallery["values"].sum(axis=-1), 1.0, atol=1e-5)
    heads = real["values"]
    assert heads.shape == (8, 12, 12)
    np.testing.assert_allclose(heads.sum(axis=-1), 1.0, atol=1e-5)
    assert np.all(np.triu(heads, k=1) == 0)  # causal: no weight on a later key


def test_refused_computation_still_shows_url_notice_and_link(monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_MEMORY_BUDGET_MIB", "0.001")
    at = open_app(
        "playground",
        **{"playground.seq_len": "512", "playground.variant": "stable", "playground.seed": "x"},
    )
    assert not at.exception
    assert len(at.error) == 1 and len(at.warning) == 1
    assert "` playground.seed `" in at.warning[0].value
    assert "playground.seq_len=512" in at.sidebar.code[0].value


def test_playground_peak_memory_is_measured_and_holds_the_weights():
    at = open_app("playground", **{"playground.seq_len": "128", "playground.heads": "8"})
    assert_clean(at)
    shown = metrics(at)
    assert "Peak memory" in shown, shown  # "Memory (est.)" when only estimated
    value, unit = shown["Peak memory"].split()
    scale = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[unit]
    # the (H, L, L) float32 weights alone take 8 * 128 * 128 * 4 bytes = 512 KiB
    assert float(value) * scale >= 8 * 128 * 128 * 4


def test_attention_peak_matches_the_run_it_measures():
    from dashboard import data
    from dashboard.config import LayerConfig

    cfg = LayerConfig(seq_len=64, d_model=32, heads=4, pad_len=64, seed=3, device="cpu")
    run = data.attention_run(cfg)
    peak = data.attention_peak(cfg)
    assert run.weights.shape == (4, 64, 64)
    assert peak.measured and peak.bytes >= run.weights.nbytes


def test_a_heatmap_costs_one_forward_pass_and_one_profiled_pass(monkeypatch):
    """On a cache miss, a heatmap's run is one forward pass of the layer (weights and scores
    from the core, no second pass to rebuild scores or to time it) plus, for the peak
    memory, one profiled pass."""
    import attention_core
    from attention_core import experiments
    from dashboard import data
    from dashboard.config import LayerConfig

    data.attention_run(LayerConfig(seq_len=8, seed=1, device="cpu"))  # warm the variant
    forwards, profiled = [], []
    real_forward = attention_core.MultiHeadSelfAttention.forward_intermediates
    real_measure = experiments.measure_peak_bytes

    def counting_forward(module, x, *args, **kwargs):
        forwards.append(tuple(x.shape))
        return real_forward(module, x, *args, **kwargs)

    def counting_measure(fn, device):
        profiled.append(len(forwards))
        return real_measure(fn, device)

    monkeypatch.setattr(
        attention_core.MultiHeadSelfAttention, "forward_intermediates", counting_forward
    )
    monkeypatch.setattr(experiments, "measure_peak_bytes", counting_measure)
    cfg = LayerConfig(seq_len=24, d_model=32, heads=4, seed=12345, device="cpu")
    run = data.attention_run(cfg)
    assert forwards == [(1, 24, 32)] and run.scores is not None
    data.attention_peak(cfg)
    assert profiled == [1] and forwards == [(1, 24, 32), (1, 24, 32)]
    data.attention_run(cfg), data.attention_peak(cfg)  # cached: no pass at all
    assert len(forwards) == 2


def test_run_scores_are_the_cores_scaled_masked_scores():
    """The tooltips' raw scores: q·kᵀ/√d_k of the seeded layer (an explicit float64 formula
    on its own projections), −inf where the causal mask blocks the key; linear has none."""
    import math

    import numpy as np
    import torch

    import attention_core
    from dashboard import data
    from dashboard.config import LayerConfig

    cfg = LayerConfig(seq_len=6, d_model=16, heads=2, mask_kind="causal", seed=4, device="cpu")
    run = data.attention_run(cfg)
    x, _tokens = data.build_input("random", "", 6, 16, 4)
    layer = attention_core.MultiHeadSelfAttention(16, 2, init_seed=4).double()
    with torch.no_grad():
        q, k, _v = layer.project_qkv(x.double())  # (1, H, L, E)
    expected = (q @ k.transpose(-2, -1))[0].numpy() / math.sqrt(8)  # (H, L, L)
    lower = np.tril(np.ones((6, 6), dtype=bool))
    np.testing.assert_allclose(run.scores[:, lower], expected[:, lower], rtol=1e-5, atol=1e-5)
    assert np.all(np.isneginf(run.scores[:, ~lower]))
    linear = data.attention_run(LayerConfig(variant="linear", seq_len=6, device="cpu"))
    assert linear.weights is not None and linear.scores is None and linear.mean_scores is None


def test_a_root_link_made_for_the_playground_still_opens_it():
    """Before Intuition became the landing page, the root was the Playground, so a copied
    link could be ``/?playground.seq_len=8``: it opens the Playground with that length."""
    from dashboard.views import default_page

    assert default_page(["lang", "playground.seq_len", "scaling.seed"]) == "playground"
    assert default_page(["lang", "device"]) == "intuition"
    assert default_page(["nosuchpage.x"]) == "intuition"
    at = open_app(**{"playground.seq_len": "8", "playground.seed": "3"})
    assert_clean(at)
    assert metrics(at)["Tokens L"] == "8"
    assert open_app().title[0].value != at.title[0].value


@pytest.mark.parametrize("page", ["playground", "multihead", "variants"])
def test_a_fresh_page_opens_on_the_tutorial_s_sentence_with_its_tokens_labelled(page):
    """The first maps a learner meets are of 那只猫坐在垫子上…, each row and column named by
    its token; random vectors are one choice away, and a link from before that sets the
    random input's length (and names no input) still opens random vectors."""
    from dashboard import data

    at = open_app(page)
    assert_clean(at)
    assert at.selectbox(key=f"{page}.input").value == "preset_zh"
    expected = data.axis_labels(data.input_tokens("preset_zh", "", 0))
    rows = [spec["rows"] for spec in canvas_heatmaps(at)]
    assert expected in rows, rows[:1]
    old = open_app(page, **{f"{page}.seq_len": "20"})
    assert_clean(old)
    assert old.selectbox(key=f"{page}.input").value == "random"
    assert old.slider(key=f"{page}.seq_len").value == 20


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("page", ["intuition", "step_by_step", "scaling", "variants"])
def test_the_notes_follow_the_page_folded_and_ask_before_they_answer(page, lang):
    """The picture first: under the title only the purpose line; "What to look for" comes
    after the page, closed, and asks (each point a question), its answers one click further
    (a popover); the long explanation and the glossary follow, closed too."""
    from dashboard.i18n import t_in

    at = open_app(page, lang=lang)
    assert_clean(at)
    labels = [e.label for e in at.expander]
    notes = [t_in(lang, f"common.{key}") for key in ("what_to_look_for", "about_this_page")]
    notes.append(t_in(lang, "common.glossary_title"))
    assert labels[-3:] == notes
    assert all(not e.proto.expanded for e in at.expander[-3:])
    questions = t_in(lang, f"{page}.look_for")
    marks = "?？"
    assert all(any(m in line for m in marks) for line in questions.splitlines() if line.strip())
    shown = [m.value for m in at.markdown]
    assert t_in(lang, f"{page}.purpose") in shown and len(t_in(lang, f"{page}.purpose")) <= 200
    assert t_in(lang, f"{page}.look_for_answers") in shown  # in the popover
    assert t_in(lang, f"{page}.intro") in shown and t_in(lang, "common.glossary") in shown
