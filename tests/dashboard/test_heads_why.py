"""Heads at work, "Why this head looks there" (section 2b) on SmolLM2 in both languages: the
section draws, its sentences and metrics quote the library's numbers (``key_contrast``,
``score_parts`` and ``predicted_attention_without`` computed here on a bfloat16 SmolLM2 of the
test's own, as ``dashboard/data/heads.py`` loads the page's twin), a key after the query gives
the causal notice, and the section's values round-trip through the URL.

Each sentence is read back through its own locale template (its placeholders become capture
groups), so the test checks the numbers the page filled in, in either language."""

from __future__ import annotations

import re
import string

import pytest
from streamlit.testing.v1 import AppTest

from attention_core.experiments import head_ablation, heads
from attention_core.experiments.score_parts import key_contrast, score_parts
from attention_core.experiments.score_without import predicted_attention_without
from attention_core.pretrained import load_smollm2
from dashboard.data import own_models
from dashboard.data.heads import HEADS_FLOAT_DTYPE
from dashboard.data.heads_why import induction_key, part_head, part_mlp
from dashboard.i18n import lookup, t_in
from tests.core.references import needs_smollm2
from tests.dashboard.conftest import (
    assert_clean,
    link_or_default,
    link_params,
    open_app,
    quoted_near,
)
from tests.tiny_gguf import write_tiny_gguf

PAGE = "heads"
LANGS = ("en", "zh")
LENGTH, SEED = 24, 0  # the page's default copy test
QUERY = LENGTH + (LENGTH + 1) // 2  # the section's default query: the second copy's middle
KEY = QUERY - LENGTH + 1  # where an induction head should look from it
TINY, TINY_INT4 = "tiny.gguf", "tiny_int4.gguf"
MATRICES = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


@pytest.fixture(scope="module")
def float_model():
    """SmolLM2 with the weights the page's twin has (bfloat16)."""
    return load_smollm2(weights_dtype=HEADS_FLOAT_DTYPE)


@pytest.fixture(scope="module")
def ids(float_model) -> list[int]:
    return [int(i) for i in head_ablation.repeated_tokens(float_model, LENGTH, SEED)]


def open_page(lang: str, **params: str) -> AppTest:
    """Run the app on the Heads page with ``heads.<key>`` query values."""
    return open_app(PAGE, lang=lang, **{f"{PAGE}.{key}": value for key, value in params.items()})


WHY_KEYS = ("why_head", "why_query", "why_key", "why_off")


def why_link(at: AppTest) -> dict[str, str]:
    """The section's values as its link gives them (a bound widget's default, which the link
    leaves out, read from the widget); the head is a select, always in the link."""
    link = link_params(at)
    return {
        f"{PAGE}.{k}": link[f"{PAGE}.{k}"]
        if k == "why_head"
        else link_or_default(at, f"{PAGE}.{k}")
        for k in WHY_KEYS
    }


def filled(at: AppTest, lang: str, key: str, kind: str = "markdown") -> dict[str, str]:
    """The values the page put into the placeholders of ``heads.<key>`` in its one element of
    ``kind`` (markdown, info) that matches the template (pytest.fail when none does)."""
    template = lookup(f"heads.{key}", lang)
    pattern = ""
    for literal_text, name, _, _ in string.Formatter().parse(template):
        pattern += re.escape(literal_text)
        if name:
            pattern += f"(?P<{name}>.+?)"
    for element in getattr(at, kind):
        found = re.fullmatch(pattern, element.value, flags=re.S)
        if found:
            return found.groupdict()
    pytest.fail(f"no markdown fills heads.{key} in {lang}")


def assert_quoted(measured: float, quoted: str) -> None:
    assert quoted_near(measured, quoted), (measured, quoted)


def test_part_names_and_the_induction_key():
    assert part_head("L16H0") == (16, 0) and part_head("MLP16") is None
    assert part_mlp("MLP16") == 16 and part_mlp("emb") is None
    assert induction_key(QUERY, LENGTH) == KEY
    assert induction_key(5, LENGTH) == 5  # the first copy: no earlier occurrence


@needs_smollm2
@pytest.mark.parametrize("lang", LANGS)
def test_the_section_quotes_the_library(float_model, page_model, ids, lang):
    at = open_page(lang, why_off="true")
    assert not at.exception, [e.value for e in at.exception]
    offered = {button.label for button in at.get("download_button")}
    assert {t_in(lang, "common.export_png"), t_in(lang, "common.export_svg")} <= offered
    params = why_link(at)
    census = heads.census(page_model, ids)  # the page's census picks the default head
    layer, head = head_ablation.ranked_heads(census.scores["induction"], 1)[0]
    assert params == {
        "heads.why_head": f"{layer}.{head}",
        "heads.why_query": str(QUERY),
        "heads.why_key": str(KEY),
        "heads.why_off": "true",
    }
    cell = {"layer": layer, "head": head, "query": QUERY, "key": KEY}
    parts = score_parts(float_model, ids, **cell)
    contrast = key_contrast(float_model, ids, **cell)
    line = filled(at, lang, "why_cell_line")
    assert line["head"] == f"{layer}.{head}" and line["query"] == str(QUERY)
    assert_quoted(parts.score, line["score"])
    shares = filled(at, lang, "why_shares")
    total = contrast.contributions.sum()
    assert shares["key"] == str(KEY)
    assert shares["others"] == t_in(lang, "heads.why_others", n=QUERY)  # "5 other keys"
    assert_quoted(contrast.difference, shares["difference"])
    assert shares["first"].startswith(contrast.names[0])
    assert shares["second"].startswith(contrast.names[1])
    assert_quoted(100 * contrast.contributions[0] / total, shares["first_share"].rstrip("%"))
    assert_quoted(100 * contrast.contributions[1] / total, shares["second_share"].rstrip("%"))
    top = contrast.names[0]
    without = predicted_attention_without(
        float_model, ids, layer=layer, head=head, query=QUERY, part=top
    )
    quoted = filled(at, lang, "why_without")
    assert quoted["part"].startswith(top)
    for name in ("clean", "predicted", "measured"):
        assert_quoted(float(getattr(without, name)[KEY]), quoted[name])
    assert quoted["repair"].startswith(without.repair[0][0])
    assert_quoted(without.repair[0][1], quoted["change"])
    shown = {m.label: m.value for m in at.metric}
    labels = {
        "clean": lookup("heads.metric_why_clean", lang).format(key=KEY),
        "predicted": lookup("heads.metric_why_predicted", lang).format(part=top),
        "measured": lookup("heads.metric_why_measured", lang).format(part=top),
    }
    assert {name: shown[label] for name, label in labels.items()} == {
        name: quoted[name] for name in labels
    }


@needs_smollm2
@pytest.mark.parametrize("lang", LANGS)
def test_a_key_after_the_query_gives_the_causal_notice(float_model, lang):
    at = open_page(lang, why_query="10", why_key="20")
    assert not at.exception, [e.value for e in at.exception]
    notice = lookup("heads.why_causal", lang).format(key=20, query=10)
    assert notice in [w.value for w in at.warning]
    assert link_params(at)["heads.why_key"] == "20"


@needs_smollm2
def test_the_url_round_trips_the_section(float_model):
    values = {"why_head": "17.8", "why_query": "40", "why_key": "17", "why_off": "false"}
    at = open_page("en", **values)
    assert not at.exception, [e.value for e in at.exception]
    assert {k: why_link(at)[f"{PAGE}.{k}"] for k in values} == values
    line = filled(at, "en", "why_cell_line")
    assert (line["head"], line["query"], line["key"]) == ("17.8", "40", "17")
    hint = filled(at, "en", "why_off_hint", "info")
    assert hint["part"]
    at.run()  # a rerun keeps every value
    assert {k: why_link(at)[f"{PAGE}.{k}"] for k in values} == values


@pytest.fixture
def own_folder(tmp_path, monkeypatch):
    """The server names a folder holding a tiny float model and its 4-bit copy, for one
    test (the folder lists are forgotten before and after)."""
    write_tiny_gguf(tmp_path / TINY)
    write_tiny_gguf(tmp_path / TINY_INT4, types=tuple((kind, "Q4_0") for kind in MATRICES))
    monkeypatch.setenv(own_models.MODELS_DIR_ENV, str(tmp_path))
    own_models.configured_folders.clear()
    own_models.own_model_scan.clear()
    yield tmp_path
    own_models.configured_folders.clear()
    own_models.own_model_scan.clear()


@pytest.mark.parametrize("page", [PAGE])
def test_an_own_model_splits_its_scores_and_4_bit_says_why_not(page, own_folder):
    at = open_page("en", model=TINY)
    assert_clean(at)
    line = filled(at, "en", "why_cell_line")
    assert line["query"] == str(QUERY) and line["key"] == str(KEY)
    at = open_page("en", model=TINY_INT4)
    assert_clean(at)
    assert [i.value for i in at.info].count(lookup("heads.why_needs_float", "en")) == 1
