"""The Scaling, Variants, Properties, Gradients and In-practice pages, in both languages."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dashboard.i18n import t_in
from dashboard.numbers import parse_plain_number, plain_number
from tests.dashboard.conftest import assert_clean, canvas_heatmaps, metrics, open_app

CHART = "vega_lite_chart"


def _charts(at) -> int:
    return len(at.get(CHART)) + len(at.get("arrow_vega_lite_chart")) + len(canvas_heatmaps(at))


def _verdicts(at) -> list[str]:
    return [m.value for m in at.markdown if m.value.startswith((":green[", ":red["))]


# --- scaling ---------------------------------------------------------------------------------


def test_scaling_default_english():
    at = open_app("scaling")
    assert_clean(at)
    assert at.title[0].value == "Why scale by √d_k"
    shown = metrics(at)
    assert shown["Largest d_k"] == "256"
    assert abs(float(shown["Std of scores, unscaled"]) - 16.0) < 1.0
    assert abs(float(shown["Std of scores, scaled"]) - 1.0) < 0.06
    assert float(shown["Largest weight, unscaled"]) > 0.8
    table = at.dataframe[0].value
    assert table["d_k"].tolist() == [32, 64, 128, 256]
    assert _charts(at) == 6


def _row_chart(at) -> list[dict]:
    """The rows of the scaling page's one-query chart (key, series, weight)."""
    from tests.pictures import element_spec

    for element in at.get(CHART):
        spec = element_spec(element)
        title = spec.get("title", {})
        text = " ".join(title["text"]) if isinstance(title.get("text"), list) else title.get("text")
        if text and ("One query" in text or "一个查询" in text):
            return spec["datasets"][spec["data"]["name"]]
    raise AssertionError("no one-query chart on the page")


@pytest.mark.parametrize(
    ("lang", "d_ks", "seq_len"), [("en", "32,64,128,256", 10), ("zh", "8,512", 6)]
)
def test_scaling_draws_one_query_scaled_and_unscaled(lang, d_ks, seq_len):
    import torch

    from attention_core.experiments.scaling import derived_seed

    at = open_app("scaling", lang=lang, **{"scaling.d_ks": d_ks, "scaling.seq_len": str(seq_len)})
    assert_clean(at)
    d_k = max(int(d) for d in d_ks.split(","))
    generator = torch.Generator().manual_seed(derived_seed(0, d_k))  # the page's seed is 0
    q = torch.randn(1, d_k, generator=generator, dtype=torch.float64).numpy()
    k = torch.randn(seq_len, d_k, generator=generator, dtype=torch.float64).numpy()
    scores = (q @ k.T)[0]  # (L,)

    def softmax(x):
        e = np.exp(x - x.max())
        return e / e.sum()

    reference = {
        t_in(lang, "scaling.series_unscaled"): softmax(scores),
        t_in(lang, "scaling.series_scaled"): softmax(scores / math.sqrt(d_k)),
    }
    rows = _row_chart(at)
    for series, expected in reference.items():
        shown = [r for r in rows if r["series"] == series]
        assert [r["key"] for r in shown] == [str(j) for j in range(1, seq_len + 1)]
        assert [r["weight"] for r in shown] == pytest.approx(expected, abs=1e-9)
    unscaled, scaled = reference.values()
    assert unscaled.max() > scaled.max()  # the caption's claim, from the page's numbers
    caption = next(c.value for c in at.caption if f"d_k = {d_k}" in c.value)
    assert plain_number(unscaled.max()) in caption and plain_number(scaled.max()) in caption


def test_scaling_custom_d_ks_chinese():
    at = open_app("scaling", lang="zh", **{"scaling.d_ks": "8,1024", "scaling.trials": "50"})
    assert_clean(at)
    shown = metrics(at)
    assert shown["最大的 d_k"] == "1024"
    assert abs(float(shown["分数标准差（未缩放）"]) - 32.0) < 3.0
    assert at.dataframe[0].value["d_k"].tolist() == [8, 1024]


@pytest.mark.parametrize("bad", ["32,abc", "0,64", "5000", ",,,"])
def test_scaling_bad_d_ks_warns_and_falls_back(bad):
    at = open_app("scaling", **{"scaling.d_ks": bad, "scaling.seq_len": "999"})
    assert not at.exception
    assert any("is not valid" in w.value for w in at.warning)
    assert at.dataframe[0].value["d_k"].tolist() == [32, 64, 128, 256]
    assert any("` scaling.seq_len `" in w.value for w in at.warning)  # URL notice kept


# --- variants --------------------------------------------------------------------------------


def test_variants_default_english():
    at = open_app("variants")
    assert_clean(at)
    diffs = [parse_plain_number(m.value) for m in at.metric if m.label == "max |output − full|"]
    assert len(diffs) == 3  # scaled, local, linear
    assert diffs[0] == 0.0
    assert diffs[1] > 1e-3 and diffs[2] > 1e-3  # local drops keys; linear approximates
    # weights per variant, and a pattern for the local window, which drops keys: full and
    # linear attention's would be one block of colour, said in words instead; then the cost
    # charts (time, memory), measured at short lengths on arrival
    assert _charts(at) == 6
    notes = [box.value for box in at.info]
    assert notes.count(t_in("en", "variants.pattern_all")) == 2
    assert at.button[0].label == "Measure time and memory"
    maps = canvas_heatmaps(at)
    patterns = [m["values"][0] for m in maps if m["title"].startswith("Mask pattern")]
    weights = [m["values"][0] for m in maps if m["title"].startswith("Weights")]
    assert len(patterns) == 1 and len(weights) == 3  # scaled and linear see every key
    for w in weights:
        np.testing.assert_allclose(w.sum(axis=-1), 1.0, atol=1e-5)
    # local: a band around the diagonal, and no weight outside it
    n = patterns[0].shape[0]
    distance = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    band = patterns[0] > 0
    assert band.all(axis=None, where=distance == 0) and not band.all()
    assert np.all(band == (distance <= distance[band].max()))
    assert np.all(weights[1][~band] == 0)


def test_variants_exact_ones_match_full_chinese_causal():
    at = open_app(
        "variants",
        lang="zh",
        **{
            "variants.variants": "stable,chunked",
            "variants.mask": "causal",
            "variants.input": "random",
        },
    )
    assert_clean(at)
    diffs = [
        parse_plain_number(m.value) for m in at.metric if m.label == "最大 |输出 − 完整注意力|"
    ]
    assert len(diffs) == 2 and max(diffs) < 1e-5
    patterns = [m["values"][0] for m in canvas_heatmaps(at) if m["title"].startswith("掩码")]
    assert len(patterns) == 2
    for pattern in patterns:
        np.testing.assert_array_equal(pattern, np.tril(np.ones_like(pattern)))
    sparsity = [m.value for m in at.metric if m.label == t_in("zh", "common.metric_sparsity")]
    n = 32
    assert sparsity == [f"{(n - 1) / (2 * n):.1%}"] * 2


def test_variants_measure_button_shows_cost(monkeypatch):
    from dashboard import data

    at = open_app("variants", **{"variants.variants": "scaled", "variants.max_l": "256"})
    at.button[0].click().run()
    assert_clean(at)
    cost = at.dataframe[-1].value
    assert len(cost) == 4 * 3  # 4 variants x L in (64, 128, 256)
    assert (cost["Time (ms)"] > 0).all()
    assert _charts(at) == 1 + 2  # the variant's weights (its pattern is all 1s) + cost

    def measured_again(*args):
        raise AssertionError(f"cell {args} read again")

    # a later run (a room's follower) reads the whole table: no cell, no progress bar
    monkeypatch.setattr(data, "complexity_cell", measured_again)
    at.button[0].click().run()
    assert_clean(at)
    assert len(at.dataframe[-1].value) == 12


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_variants_cost_says_whether_local_ran_the_band_kernel(lang):
    from attention_core.variants import band_kernel

    if not band_kernel.status().available:
        pytest.skip(f"the band kernel is not in use here: {band_kernel.status().reason}")
    query = {"variants.variants": "local", "variants.max_l": "128"}
    at = open_app("variants", lang=lang, **query)
    at.button[0].click().run()
    assert_clean(at)
    captions = [c.value for c in at.caption]
    isa = band_kernel.status().isas[0]
    assert t_in(lang, "variants.kernel_on", isa=isa) in captions
    with band_kernel.disabled():
        at = open_app("variants", lang=lang, **query)
        at.button[0].click().run()
        off = t_in(lang, "variants.kernel_off", reason=band_kernel.status().reason)
    assert_clean(at)
    assert off in [c.value for c in at.caption]


def test_variants_bad_url_value_falls_back_with_notice():
    at = open_app("variants", **{"variants.variants": "scaled,nope", "variants.seq_len": "x"})
    assert not at.exception
    assert any("` variants.seq_len `" in w.value for w in at.warning)
    assert any("` variants.variants `" in w.value for w in at.warning)
    assert len([m for m in at.metric if m.label == "max |output − full|"]) == 3


# --- properties ------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_properties_default(lang):
    at = open_app("properties", lang=lang)
    assert_clean(at)
    values = [m.value for m in at.metric]
    eq_plain, eq_causal = parse_plain_number(values[0]), parse_plain_number(values[1])
    assert eq_plain < 1e-5 and eq_causal > 1e-3
    chunk_plain, chunk_causal = parse_plain_number(values[6]), parse_plain_number(values[7])
    assert chunk_plain < 1e-5 and chunk_causal < 1e-5
    leak_causal, leak_plain = float(values[4]), float(values[5])
    assert leak_causal < 1e-6 and leak_plain > 1e-3
    verdicts = _verdicts(at)
    assert verdicts[0].startswith(":green[") and verdicts[1].startswith(":red[")
    assert [v.startswith(":green[") for v in verdicts] == [
        True,
        False,
        True,
        True,
        True,
        False,
        True,
        True,
    ]
    if lang == "en":
        assert "holds" in verdicts[0] and "broken" in verdicts[1]
        assert values[2] == "min 1.0000, max 1.0000"
    naive = at.dataframe[0].value.iloc[0]
    assert naive.iloc[1] + naive.iloc[2] > 0  # NaN + inf counts of the naive fp16 softmax


def test_properties_random_perm_with_positions():
    at = open_app(
        "properties",
        **{
            "properties.perm_mode": "random",
            "properties.positional": "true",
            "properties.seq_len": "8",
        },
    )
    assert_clean(at)
    assert parse_plain_number(at.metric[0].value) > 1e-3  # positions break equivariance
    used = next(c.value for c in at.caption if c.value.startswith("Permutation used"))
    perm = [int(p) for p in used.split(":")[1].split(",")]
    assert sorted(perm) == list(range(8))


def test_properties_perm_of_another_length_falls_back_to_random_with_a_warning():
    """Moving L must not turn the typed permutation into an error box."""
    at = open_app("properties", **{"properties.perm": "0,1,2,3"})
    assert not at.exception
    assert not at.error, [e.value for e in at.error]
    assert any("4 positions" in w.value for w in at.warning)
    used = next(c.value for c in at.caption if c.value.startswith("Permutation used"))
    assert sorted(int(p) for p in used.split(":")[1].split(",")) == list(range(5))


@pytest.mark.parametrize("bad", ["0,0,1,2,3", "9,1,2,3,4", "a,b"])
def test_properties_bad_perm_is_an_error_not_a_traceback(bad):
    at = open_app("properties", **{"properties.perm": bad})
    assert not at.exception
    assert any("is not a permutation" in e.value for e in at.error)
    assert math.isfinite(parse_plain_number(metrics(at)["max |chunked − full|, no mask"]))


# --- gradients -------------------------------------------------------------------------------


def test_gradients_default_english():
    at = open_app("gradients")
    assert not at.exception
    shown = metrics(at)
    for name in ("W_Q", "W_K", "W_V", "input x"):
        assert float(shown[f"‖∇{name}‖, scaled attention"]) > 0
    assert _charts(at) == 1 + 4


def test_gradients_tutorial_init_chinese():
    at = open_app("gradients", lang="zh", **{"gradients.init": "randn", "gradients.d_ks": "16,64"})
    assert not at.exception
    assert float(metrics(at)["‖∇W_V‖，缩放注意力"]) > 0
    spread = at.dataframe[0].value
    assert sorted(set(spread["d_k"])) == [16, 64]


# --- in practice -----------------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_practice_page(lang):
    at = open_app("practice", lang=lang, **{"practice.seq_len": "32"})
    assert_clean(at)
    values = [m.value for m in at.metric]
    bf16, fp16, fp64 = (parse_plain_number(v) for v in values[:3])
    assert fp64 < 1e-6 < fp16 < bf16 < 0.05
    measured = at.dataframe[0].value
    assert measured["L"].tolist() == [256, 512, 1024]
    full, chunked = measured.iloc[-1, 1], measured.iloc[-1, 2]
    assert chunked < full
    assert _charts(at) == 2


def test_cost_chart_reaches_16384_for_sub_quadratic_variants_within_budget():
    """Above L=2048 only variants whose memory model grows slower than L² (the registry's
    estimate at L against L/2) and fits the budget are measured; the page offers L=16384."""
    from attention_core import estimate_memory
    from attention_core.device import resolve_budget
    from dashboard import data

    names = ("scaled", "local", "linear", "chunked", "stable", "random", "block")
    assert data.measurable_variants(names, 2048, 4, 32) == names
    long = data.measurable_variants(names, 16384, 4, 32)
    assert {"local", "linear", "chunked", "block"} <= set(long)
    assert "stable" not in long and "random" not in long
    for name in long:  # each fits the budget there
        assert estimate_memory(name, batch=1, heads=4, L=16384, E=32) <= resolve_budget(None)
    at = open_app("variants", **{"variants.max_l": "16384"})
    assert not at.exception and not at.warning
    assert at.selectbox(key="variants.max_l").value == 16384


def test_variants_says_exact_only_beside_a_difference_within_its_tolerance():
    """ "Same output as full attention" is measured: yes beside a difference within 10⁻⁵, no
    beside a local window's difference (the words never contradict the numbers)."""
    at = open_app("variants", **{"variants.variants": "stable,local", "variants.input": "random"})
    assert_clean(at)
    table = at.dataframe[0].value
    (column,) = [c for c in table.columns if c.startswith("Same output as full attention")]
    assert "10⁻⁵" in column
    diffs = [parse_plain_number(m.value) for m in at.metric if m.label == "max |output − full|"]
    assert len(diffs) == 2 and diffs[0] < 1e-5 < diffs[1]
    assert list(table[column]) == ["yes", "no"]
