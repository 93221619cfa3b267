"""Every string exists in English and Chinese, with the same placeholders."""

from __future__ import annotations

import json
import re
import string
from pathlib import Path

import pytest

from dashboard import i18n, model_choices

DASHBOARD = Path(i18n.__file__).parent
LITERAL_KEY = re.compile(r"""\bt(?:_in)?\(\s*(?:[a-z_]+\s*,\s*)?["']([a-z_]+\.[A-Za-z0-9_]+)["']""")


def _placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def _all_files() -> dict[str, dict[str, Path]]:
    files: dict[str, dict[str, Path]] = {}
    for lang in i18n.LANGS:
        for path in sorted((i18n.LOCALES_DIR / lang).glob("*.json")):
            files.setdefault(path.stem, {})[lang] = path
    return files


def _registry_text_keys() -> set[str]:
    """The ``common`` keys whose English is the registry's: each variant's label and
    explanation, and each of its parameters' help."""
    from attention_core import VARIANTS

    keys = set()
    for name, spec in VARIANTS.items():
        keys |= {f"variant_{name}", f"variant_{name}_explain"}
        keys |= {f"param_{name}_{p.name}_help" for p in spec.params}
    return keys


def test_every_namespace_exists_in_both_languages():
    for namespace, by_lang in _all_files().items():
        assert set(by_lang) == set(i18n.LANGS), f"{namespace}.json only in {sorted(by_lang)}"


@pytest.mark.parametrize("namespace", sorted(_all_files()))
def test_keys_and_placeholders_match_across_languages(namespace):
    tables = {}
    for lang in i18n.LANGS:
        path = i18n.LOCALES_DIR / lang / f"{namespace}.json"
        table = json.loads(path.read_text(encoding="utf-8"))
        assert all(isinstance(v, str) and v.strip() for v in table.values()), path
        tables[lang] = table
    en, zh = tables["en"], tables["zh"]
    # zh alone carries the variants' text: English is the registry's (one source each)
    registry_text = _registry_text_keys() if namespace == "common" else set()
    assert sorted(set(en) - set(zh)) == [], f"{namespace}: keys missing in zh"
    assert sorted(set(zh) - set(en) - registry_text) == [], f"{namespace}: keys missing in en"
    for key in en:
        assert _placeholders(en[key]) == _placeholders(zh[key]), f"{namespace}.{key}"


def test_every_literal_key_in_the_code_exists_in_both_languages():
    found = {}
    for path in DASHBOARD.rglob("*.py"):
        for key in LITERAL_KEY.findall(path.read_text(encoding="utf-8")):
            found.setdefault(key, path.name)
    assert len(found) > 50, "the key scan found suspiciously few keys"
    missing = [
        f"{key} ({found[key]}, {lang})"
        for key in sorted(found)
        for lang in i18n.LANGS
        if i18n.lookup(key, lang) is None
    ]
    assert missing == []


MODEL_KEYS = (
    "model",
    "missing",
    "loading",
    "metric_unk",
    "metric_sinks",
    "unk_note",
    "pronoun_caveat",
    "pair_caption",
    "ctl_text_help",
)


def test_computed_keys_exist_for_every_option():
    from attention_core import VARIANTS
    from dashboard import data
    from dashboard.exports import MIME_TYPES
    from dashboard.views import PAGES

    keys = [f"common.page_{name}" for name, _ in PAGES]
    keys += [f"common.input_{kind}" for kind in data.INPUT_KINDS]
    keys += [f"common.mask_{kind}" for kind in data.MASK_KINDS]
    for spec in VARIANTS.values():
        keys += [f"common.param_{p.name}" for p in spec.params]
    for matrix in ("X", "W_Q", "W_K", "W_V", "Q", "K", "V", "scores", "scaled", "mask"):
        keys += [f"step_by_step.m_{matrix}", f"step_by_step.f_{matrix}"]
    keys += [f"multihead.pattern_{name}" for name in ("local", "global", "forward", "backward")]
    for model in data.MODELS:
        keys += [f"real_model.{name}_{model}" for name in MODEL_KEYS]
    keys += [f"real_model.preset_{preset}" for preset in data.MODEL_PRESETS]
    # model_choices.preset_text_controls' labels, by each page's namespace
    texts = {"decoder": data.DECODER_PRESETS, "real_model": data.MODEL_PRESETS}
    texts["heads"] = data.HEADS_PRESETS
    for namespace, presets in texts.items():
        keys += [f"{namespace}.{name}" for name in ("ctl_preset", "ctl_text", "text_blank")]
        keys += [f"{namespace}.preset_{preset}" for preset in (*presets, model_choices.CUSTOM)]
    keys += ["decoder.ctl_text_help", "heads.ctl_text_help"]
    keys += [f"common.export_{kind}" for kind in MIME_TYPES]  # the export buttons' labels
    for page in ("playground", "step_by_step", "multihead"):
        keys += [f"{page}.{name}" for name in ("title", "purpose", "intro")]
        keys += [f"{page}.look_for", f"{page}.look_for_answers"]
    missing = [(k, lang) for k in keys for lang in i18n.LANGS if i18n.lookup(k, lang) is None]
    assert missing == []


def test_missing_key_is_loud_and_malformed_key_rejected():
    with pytest.raises(KeyError, match="common.no_such_key"):
        i18n.t_in("en", "common.no_such_key")
    with pytest.raises(ValueError, match="nodot"):
        i18n.lookup("nodot", "en")
    with pytest.raises(ValueError, match="fr"):
        i18n.load_namespace("fr", "common")


def test_formatting_fills_placeholders_in_both_languages():
    assert i18n.t_in("en", "common.ctl_d_k", d_k=16).endswith("16")
    assert "16" in i18n.t_in("zh", "common.ctl_d_k", d_k=16)
    assert i18n.t_in("zh", "common.page_playground") == "实验场"


def test_variant_text_has_one_source_in_each_language():
    """English variant text is the registry's (label, explanation); Chinese is the zh
    locale's, for every registered variant; the en locale holds no second copy."""
    from attention_core import VARIANTS

    for name, spec in VARIANTS.items():
        assert spec.label.strip() and spec.explanation.strip(), name
        for key in (f"common.variant_{name}", f"common.variant_{name}_explain"):
            assert i18n.lookup(key, "en") is None, f"{key} duplicates the registry's English"
            zh = i18n.lookup(key, "zh")
            assert zh and any("\u4e00" <= c <= "\u9fff" for c in zh), (key, zh)


def test_parameter_help_has_one_source_in_each_language():
    """Every registered variant's parameters have a tooltip in both languages: English is
    the registry's ``Param.help``, Chinese the zh locale's ``param_<variant>_<name>_help``."""
    from attention_core import VARIANTS

    for name, spec in VARIANTS.items():
        for p in spec.params:
            key = f"common.param_{name}_{p.name}_help"
            assert p.help.strip(), key
            assert i18n.lookup(key, "en") is None, f"{key} duplicates the registry's English"
            zh = i18n.lookup(key, "zh")
            assert zh and any("\u4e00" <= c <= "\u9fff" for c in zh), (key, zh)


def test_parameter_tooltips_follow_the_language():
    """The sidebar's parameter tooltips are Chinese in the Chinese UI, the registry's
    English in the English one."""
    from attention_core import VARIANTS
    from tests.dashboard.conftest import assert_clean, open_app

    window = VARIANTS["local"].param("window_size")
    for lang, expected in (
        ("zh", i18n.t_in("zh", "common.param_local_window_size_help")),
        ("en", window.help),
    ):
        at = open_app("playground", lang=lang, **{"playground.variant": "local"})
        assert_clean(at)
        assert at.slider(key="playground.local.window_size").help == expected, lang


def test_parameter_help_falls_back_to_the_registry_for_a_new_variant():
    """A variant registered at run time (no locale entry) shows its own English help."""
    from attention_core import Param
    from dashboard import controls

    param = Param("width", "int", 3, 1, 9, 1, "how wide, in tokens")
    assert controls.param_help("made_up_variant", param) == "how wide, in tokens"
    assert controls.param_help("made_up_variant", Param("flag", "bool", False)) is None


CJK = re.compile(r"[\u4e00-\u9fff]")
# code names a Chinese page may show only in brackets after the Chinese term (or as `code`)
CODE_NAMES = ("shift", "reverse", "induction", "sort", "stable", "chunked", "fused")


def _bare_code_names(text: str) -> list[str]:
    """The :data:`CODE_NAMES` in ``text`` outside brackets （…）, backticks and
    placeholders."""
    outside = re.sub(r"（[^）]*）|`[^`]*`|\{[^}]*\}", "", text)
    return [name for name in CODE_NAMES if re.search(rf"\b{name}\b", outside)]


def test_chinese_strings_name_tasks_and_variants_in_chinese():
    """D11-D13: no task or variant code name stands alone in a Chinese string; each follows
    its Chinese term in brackets (failed before on watch.task_*, watch.look_for,
    gradients.variants_note and variants.look_for: "shift：前一个词元", "stable、chunked")."""
    bare = {
        f"{namespace}.{key}": names
        for namespace in i18n.namespaces("zh")
        for key, text in i18n.load_namespace("zh", namespace).items()
        if (names := _bare_code_names(text))
    }
    assert not bare, bare
    for task in ("shift", "reverse", "induction", "sort"):
        label = i18n.t_in("zh", f"watch.task_{task}")
        assert CJK.match(label) and label.endswith(f"（{task}）"), label


def test_variants_page_shows_flags_and_memory_in_chinese():
    """The Variants page in Chinese: linear's causal flag reads 否 (not False), and scaled's
    memory line has no English words (failed before: "因果 = False", "fused ... with
    weights")."""
    from tests.dashboard.conftest import assert_clean, open_app

    at = open_app("variants", lang="zh", **{"variants.variants": "scaled,linear"})
    assert_clean(at)
    captions = " ".join(c.value for c in at.caption)
    assert "因果 = 否" in captions and "False" not in captions, captions
    lines = " ".join(m.value for m in at.markdown if "内存" in m.value)
    assert "fused" not in lines and "weights" not in lines and "融合内核" in lines, lines


def _refused_app(lang: str) -> None:
    import streamlit as st

    from dashboard import refusals

    st.query_params["lang"] = lang
    refusals.show_error(ValueError("seq_len must be at least 2, got 1"))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_refusal_speaks_the_page_language(lang):
    """show_error: English inline on an English page; on a Chinese page a Chinese summary
    with the library's English message kept in an expander (failed before: the ValueError's
    text sat in the Chinese error box)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_refused_app, args=(lang,)).run()
    assert not at.exception
    box = at.error[0].value
    if lang == "en":
        assert "seq_len must be at least 2, got 1" in box
        assert not at.expander
    else:
        assert box == i18n.t_in("zh", "common.error_invalid_short") and CJK.search(box)
        assert at.expander[0].label == i18n.t_in("zh", "common.error_detail")
        assert at.code[0].value == "seq_len must be at least 2, got 1"


def test_streamlits_own_placeholder_is_in_the_pages_language():
    """Regression: a multiselect said "Choose options" on a Chinese page."""
    from tests.dashboard.conftest import open_app

    for lang, words in (("en", "Choose one or more"), ("zh", "选择一项或多项")):
        at = open_app("variants", lang=lang)
        assert not at.exception
        boxes = at.get("multiselect")
        assert boxes and all(box.proto.placeholder == words for box in boxes)
