"""A Hugging Face folder of the server's own on the real-model pages: a
tiny llama saved by transformers' ``save_pretrained`` (``tests/core/hf_tiny.py``) in the
folder ``ATTENTION_LAB_MODELS_DIR`` names is listed beside GGUF files, opened by its listed
name in both languages, drawn with its own shape, and its card says where it comes from; a
folder with only ``pytorch_model.bin`` is left out with its reason.

The Decoder page tests are the fast tier (SmolLM2's loader replaced by one that reports its
package missing, so no real model is read); the Heads at work and What a head writes tests
read e5-small or the page's own float model and take the ``page`` parameter (the ``model``
tier, ``tests/conftest.py``)."""

from __future__ import annotations

import shutil

import pytest

from dashboard.i18n import t_in
from dashboard.literal import literal
from dashboard.model_choices import MODEL_NAME_MAX_LEN
from tests.core.hf_tiny import SIZES, TinySpec, write_tiny_hf
from tests.dashboard.conftest import assert_clean, grid_rows, open_model_page

pytest.importorskip("transformers")

FOLDER, BIN_ONLY = "tiny-llama", "bin-only"
LANGS = ("en", "zh")
TIMEOUT_S = 600
LAYERS, HEADS = SIZES["num_hidden_layers"], SIZES["num_attention_heads"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A models folder: the tiny llama folder and a copy holding ``pytorch_model.bin``."""
    root = tmp_path_factory.mktemp("hf_models")
    tiny = write_tiny_hf(root / FOLDER, TinySpec("llama"))
    shutil.copytree(tiny, root / BIN_ONLY)
    (root / BIN_ONLY / "model.safetensors").rename(root / BIN_ONLY / "pytorch_model.bin")
    return root


@pytest.mark.parametrize("lang", LANGS)
def test_the_decoder_page_lists_draws_and_sources_a_folder_model(configured, no_smollm2, lang):
    at = open_model_page("decoder", lang, FOLDER, TIMEOUT_S)
    assert_clean(at)
    choice = at.selectbox(key="decoder.model")
    assert choice.value == FOLDER and FOLDER in choice.options and BIN_ONLY not in choice.options
    reason = t_in(lang, "common.own_reason_no_safetensors")
    line = t_in(
        lang, "common.own_left_out", name=literal(BIN_ONLY, MODEL_NAME_MAX_LEN), reason=reason
    )
    assert line in [c.value for c in at.sidebar.caption]
    card = "\n".join(m.value for m in at.markdown)
    assert f"**{t_in(lang, 'decoder.card_source')}:** {t_in(lang, 'decoder.source_hf')}" in card
    assert f"**{t_in(lang, 'decoder.card_name_hf')}:**" in card
    assert f"**{t_in(lang, 'decoder.card_layers')}:** {LAYERS}" in card


@pytest.mark.parametrize("page", ["heads"])
@pytest.mark.parametrize("lang", LANGS)
def test_heads_at_work_runs_on_a_folder_model_with_its_shape(page, lang, configured):
    at = open_model_page(page, lang, FOLDER, TIMEOUT_S)
    assert_clean(at)
    assert at.selectbox(key=f"{page}.model").value == FOLDER
    rows = grid_rows(at)
    assert len(rows) == LAYERS * HEADS
    assert {(r["layer"], r["head"]) for r in rows} == {
        (layer, head) for layer in range(LAYERS) for head in range(HEADS)
    }


@pytest.mark.parametrize("page", ["writes"])
def test_what_a_head_writes_reads_a_folder_model(page, configured):
    at = open_model_page(page, "en", FOLDER, TIMEOUT_S)
    assert_clean(at)
    assert at.selectbox(key=f"{page}.model").value == FOLDER
