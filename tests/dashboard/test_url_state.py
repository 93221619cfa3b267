"""URL state: a link reproduces the view; tampered values fall back with a visible notice."""

from __future__ import annotations

import pytest

from dashboard import state, url_values
from dashboard.controls import SENTENCE_MAX_CHARS
from dashboard.url_values import RefusedValue
from tests.dashboard.conftest import assert_clean, link_params, open_app, url_value

SCRIPT = "<script>alert(1)</script>"
MARKUP_SENTENCES = [  # markup characters are text
    "If x < 3 then the cat {sleeps}",
    "I <3 cats",
    "a `tick` and a \\ backslash > here",
    "see data: the table, not javascript: code",
    SCRIPT,
]
PARAGRAPH = (
    "The cat sat on the mat because it was warm, and the dog watched it from the door. " * 4
)[
    # 300 characters: more than the 200 a sentence box keeps
    :300
]


@pytest.mark.parametrize(("raw", "expected"), [("4", 4), ("+7", 7), ("1024", 1024), (" 12 ", 12)])
def test_parse_int_accepts_whole_numbers_in_range(raw, expected):
    assert state.parse_int(raw, 4, 1024) == expected


@pytest.mark.parametrize("raw", ["3", "1025", "-5", "9" * 40, "1.5", "abc", "", "1e3", SCRIPT])
def test_parse_int_rejects_bad_values(raw):
    with pytest.raises(ValueError):
        state.parse_int(raw, 4, 1024)


@pytest.mark.parametrize("raw", ["nan", "inf", "-0.1", "0.95", "1e400", "x"])
def test_parse_float_rejects_bad_values(raw):
    with pytest.raises(ValueError):
        state.parse_float(raw, 0.0, 0.9)


def test_parse_choice_bool_text_and_lists():
    assert state.parse_choice("64", [32, 64]) == 64
    assert state.parse_choice("scaled", ["basic", "scaled"]) == "scaled"
    with pytest.raises(ValueError):
        state.parse_choice("Scaled", ["basic", "scaled"])
    assert state.parse_bool("TRUE") is True and state.parse_bool("0") is False
    with pytest.raises(ValueError):
        state.parse_bool("yes")
    assert state.parse_text("那只猫 sat.") == "那只猫 sat."
    assert state.parse_int_list("1,2, 3", 0, 5, 4) == [1, 2, 3]
    for bad in ("", "1,2,3,4,5", "1,x", "1,9"):
        with pytest.raises(ValueError):
            state.parse_int_list(bad, 0, 5, 4)


RANDOM = {"playground.input": "random"}  # the slider of L exists for random vectors


def test_round_trip_reproduces_the_view():
    at = open_app("playground", **RANDOM)
    at.selectbox(key="playground.variant").set_value("local")
    at.selectbox(key="playground.mask").set_value("causal")
    at.slider(key="playground.seq_len").set_value(24)
    at.slider(key="playground.seed").set_value(7)
    at.run()
    at.slider(key="playground.local.window_size").set_value(5)
    at.selectbox(key="playground.d_model").set_value(48)
    at.run()
    at.selectbox(key="playground.heads").set_value(6)
    at.run()
    assert_clean(at)
    params = link_params(at)
    assert params["playground.local.window_size"] == ["5"] or params[
        "playground.local.window_size"
    ] in ("5", ["5"])
    fresh = open_app(
        "playground", **{k: (v[0] if isinstance(v, list) else v) for k, v in params.items()}
    )
    assert_clean(fresh)
    assert not fresh.warning
    for key in (
        "playground.variant",
        "playground.mask",
        "playground.d_model",
        "playground.heads",
    ):
        assert fresh.selectbox(key=key).value == at.selectbox(key=key).value, key
    for key in ("playground.seq_len", "playground.seed", "playground.local.window_size"):
        assert fresh.slider(key=key).value == at.slider(key=key).value, key
    assert fresh.selectbox(key="playground.heads").value == 6
    before = {m.label: m.value for m in at.metric if m.label != "Time"}
    after = {m.label: m.value for m in fresh.metric if m.label != "Time"}
    assert before == after


def test_tampered_url_gives_defaults_and_one_literal_notice():
    at = open_app(
        "playground",
        **{
            "playground.seq_len": "99999999999999999999",
            "playground.variant": SCRIPT,
            "playground.seed": ["1", "2"],
            "playground.d_model": "-64",
            "playground.dropout": "nan",
            "lang": "klingon",
            "unknown.key": "x",
        },
    )
    assert_clean(at)
    assert at.slider(key="playground.seq_len").value == 16
    assert at.selectbox(key="playground.variant").value == "scaled"
    assert at.slider(key="playground.seed").value == 0
    assert at.selectbox(key="playground.d_model").value == 8  # -64: the nearest width offered
    assert at.slider(key="playground.dropout").value == 0.0
    assert len(at.warning) == 1
    notice = at.warning[0].value
    moved = "not one of the choices offered here, so the nearest one, 8"
    assert f"` playground.d_model ` = ` -64 `: {moved}" in notice
    for key in ("playground.seq_len", "playground.variant", "playground.seed", "lang"):
        assert f"` {key} `" in notice
    assert f"` {SCRIPT} `" in notice  # literal text: an inline code span
    assert "<" not in notice.replace(f"` {SCRIPT} `", "")
    assert url_value(at.query_params, "playground.seq_len", "16") in ("16", ["16"])
    assert "unknown.key" not in at.query_params
    at.run()
    assert not at.warning, "the notice is shown once, then the URL is clean"


def test_language_in_url_and_kept_across_pages():
    at = open_app("playground", lang="zh")
    assert at.title[0].value == "实验场"
    at.switch_page("views/multihead.py").run()
    assert_clean(at)
    assert at.title[0].value == "多头注意力"
    assert at.query_params["lang"] in ("zh", ["zh"])


def _float_widgets_app():
    from dashboard import state

    state.begin_run()
    state.float_input("t", "slide", "Slide", 0.0, 1.0, 0.5, step=0.1)
    state.float_input("t", "typed", "Typed", 0.0, 2.0, 1.0, step=0.25, widget="number")
    state.render_notices()


def test_float_input_reads_the_url_for_both_widgets_and_moves_out_of_range_to_the_nearest():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_float_widgets_app)
    at.query_params["t.slide"] = "7"
    at.query_params["t.typed"] = "1.5"
    at.run()
    assert not at.exception
    slider = at.slider(key="t.slide")
    assert slider.value == slider.max == 1.0  # 7 is outside 0..1: the nearest allowed value
    assert at.number_input(key="t.typed").value == 1.5
    assert len(at.warning) == 1 and "` t.slide `" in at.warning[0].value
    assert "nearest allowed value, 1.0" in at.warning[0].value
    assert url_value(at.query_params, "t.slide", "1.0") in ("1.0", ["1.0"])
    assert at.query_params["t.typed"] in ("1.5", ["1.5"])


def test_float_input_refuses_an_unknown_widget_and_an_empty_range():
    with pytest.raises(ValueError, match="dial"):
        state.float_input("t", "x", "X", 0.0, 1.0, 0.5, step=0.1, widget="dial")
    with pytest.raises(ValueError, match="low 1.0 >= high 1.0"):
        state.float_input("t", "x", "X", 1.0, 1.0, 1.0, step=0.1)


# ---------------------------------------------------------------- text is text (D4, D5)


@pytest.mark.parametrize("text", MARKUP_SENTENCES)
def test_parse_text_keeps_markup_characters(text):
    assert state.parse_text(text) == text


@pytest.mark.parametrize(
    ("text", "named"),
    [("line\nbreak", "U+000A (LINE FEED)"), ("a\tb", "U+0009 (TAB)"), ("nul\x00", "U+0000")],
)
def test_parse_text_refuses_a_control_character_and_names_it(text, named):
    with pytest.raises(RefusedValue) as refused:
        state.parse_text(text)
    assert refused.value.reason == "forbidden_char"
    assert refused.value.detail == {"char": named}


def test_cut_and_clean_text():
    assert url_values.cut_text("abcdef", 4) == "abcd"
    assert url_values.cut_text("ab", 4) == "ab"
    assert url_values.clean_text("a\tb\nc") == "a b c"
    with pytest.raises(ValueError, match="0"):
        url_values.cut_text("ab", 0)


def _typed(at):
    return at.text_input(key="playground.sentence")


@pytest.mark.parametrize("text", MARKUP_SENTENCES[:2])
def test_typed_markup_sentence_is_kept_and_used(text):
    at = open_app("playground", **{"playground.input": "typed"})
    _typed(at).input(text).run()
    assert_clean(at)
    assert _typed(at).value == text
    assert not at.warning, [w.value for w in at.warning]
    from dashboard import data

    assert link_params(at)["playground.sentence"] in (text, [text])
    shown = {m.label: m.value for m in at.metric}
    assert shown["Tokens L"] == str(len(data.tokens_for(text)))


@pytest.mark.parametrize("text", MARKUP_SENTENCES[:2])
def test_linked_markup_sentence_is_kept(text):
    at = open_app("playground", **{"playground.input": "typed", "playground.sentence": text})
    assert_clean(at)
    assert _typed(at).value == text
    assert not at.warning, [w.value for w in at.warning]


def test_long_paste_is_cut_with_a_note_not_dropped():
    at = open_app("playground", **{"playground.input": "typed"})
    _typed(at).input(PARAGRAPH).run()
    assert_clean(at)
    kept = PARAGRAPH[:SENTENCE_MAX_CHARS]
    assert _typed(at).value == kept
    assert link_params(at)["playground.sentence"] in (kept, [kept])
    notes = [i.value for i in at.info]
    assert f"Your text was cut to its first {SENTENCE_MAX_CHARS} characters (it had 300)" in (
        " ".join(notes)
    ), notes
    assert not any("no tokens" in w.value for w in at.warning)
    _typed(at).input("a short one").run()
    assert _typed(at).value == "a short one"
    assert not any("was cut" in i.value for i in at.info), "the note goes with the cut text"


def test_long_linked_sentence_is_cut_with_a_note_in_chinese():
    at = open_app(
        "playground", lang="zh", **{"playground.input": "typed", "playground.sentence": PARAGRAPH}
    )
    assert_clean(at)
    assert _typed(at).value == PARAGRAPH[:SENTENCE_MAX_CHARS]
    assert any(f"只保留了前 {SENTENCE_MAX_CHARS} 个字符" in i.value for i in at.info)
    assert not at.warning, [w.value for w in at.warning]


# ---------------------------------------------------------------- notices say why (D15)


@pytest.mark.parametrize(
    ("params", "english", "chinese"),
    [
        (
            {"playground.seq_len": "2000"},
            "allowed range 4 to 1024 here, so the nearest allowed value, 1024",
            "超出此处允许的范围 4 到 1024，所以改用最近的允许值 1024",
        ),
        ({"playground.seq_len": "abc"}, "not a whole number", "不是整数"),
        ({"playground.seq_len": "9" * 300}, "longer than 200 characters", "超过 200 个字符"),
        ({"playground.seed": ["1", "2"]}, "given more than once", "出现了不止一次"),
        ({"playground.variant": "flash"}, "not one of the choices", "不是此处提供的选项"),
        ({"playground.dropout": "nan"}, "not a number", "不是数字"),
        (  # an empty list is allowed: the notice names the limit, not "needs 1 to 4 items"
            {"variants.variants": "basic,scaled,stable,local,block"},
            "names 5 items, and at most 4 are allowed",
            "列出了 5 项，最多只允许 4 项",
        ),
        (
            {"playground.input": "typed", "playground.sentence": "two\nlines"},
            "control character U+000A (LINE FEED)",
            "控制字符 U+000A (LINE FEED)",
        ),
    ],
)
def test_refused_link_value_says_why_in_both_languages(params, english, chinese):
    page = next(iter(params)).split(".")[0]
    for lang, reason in (("en", english), ("zh", chinese)):
        at = open_app(page, lang=lang, **params)
        assert not at.exception
        assert len(at.warning) == 1, [w.value for w in at.warning]
        assert reason in at.warning[0].value, at.warning[0].value


def test_unknown_key_is_named_with_the_likely_intended_one():
    for lang, suggest in (("en", "Did you mean"), ("zh", "你是不是想写")):
        at = open_app(
            "playground",
            lang=lang,
            **{"playground.seqlen": "64", "device": "cpu", "zz": SCRIPT, **RANDOM},
        )
        assert_clean(at)
        assert len(at.warning) == 1, [w.value for w in at.warning]
        notice = at.warning[0].value
        assert "` playground.seqlen `" in notice and f"{suggest} ` playground.seq_len `" in notice
        assert f"` zz ` = ` {SCRIPT} `" in notice  # a hostile key and value: literal text
        assert "` lang `" not in notice and "` device `" not in notice  # app-level keys
        assert at.slider(key="playground.seq_len").value == 16
        assert "playground.seqlen" not in at.query_params
        at.run()
        assert not at.warning, "named once, then the URL is clean"


def test_keys_the_app_wrote_are_never_reported_as_unknown():
    """A key the session wrote (the sentence) that the next run no longer draws (the input is
    random now) is dropped without a notice: the user changed a control, not the link."""
    at = open_app("playground", **{"playground.input": "typed"})
    at.selectbox(key="playground.input").set_value("random").run()
    assert_clean(at)
    assert not at.warning, [w.value for w in at.warning]


def test_every_refusal_reason_reads_in_both_languages():
    from dashboard.i18n import LANGS, t_in

    values = {"low": 4, "high": 1024, "max": 200, "char": "U+000A (LINE FEED)", "count": 5}
    values |= {"step": 50, "value": 350, "lessons": "why-sqrt-dk", "why": "an empty file"}
    for lang in LANGS:
        for reason in url_values.REASONS:
            text = t_in(lang, f"common.url_reason_{reason}", **values)
            assert text and "{" not in text, (lang, reason, text)
    with pytest.raises(ValueError, match="no_such_reason"):
        RefusedValue("x", "no_such_reason")


@pytest.mark.parametrize(
    ("value", "low", "high", "step", "snapped"),
    [
        (333, 50, 2000, 50, 350),
        (324, 50, 2000, 50, 300),
        (325, 50, 2000, 50, 300),
        (5, 0, 64, 2, 4),
        (7, 0, 64, 2, 6),
        (63, 0, 63, 2, 62),
        (40, 0, 40, 8, 40),
    ],
)
def test_a_value_between_steps_snaps_to_the_nearest_the_slider_offers(
    value, low, high, step, snapped
):
    offered = range(low, high + 1, step)
    nearest = min(offered, key=lambda v: (abs(v - value), v))  # the rule written out
    assert url_values.snap_to_step(value, low, high, step) == nearest == snapped


def test_a_linked_value_between_the_sliders_steps_is_snapped_with_a_notice():
    """A URL value is snapped to what the widget offers, with a notice (Watch's steps go by 50)."""
    for lang, words in (("en", "steps of 50, so the nearest step, 350"), ("zh", "步长 50")):
        at = open_app("watch", lang=lang, **{"watch.steps": "333"})
        assert_clean(at)
        assert at.slider(key="watch.steps").value == 350
        assert len(at.warning) == 1 and words in at.warning[0].value, [w.value for w in at.warning]
        at.run()
        assert not at.warning and at.slider(key="watch.steps").value == 350


@pytest.mark.parametrize(
    ("value", "low", "high", "step"),
    [(0.3, -2.0, 6.0, 0.5), (0.33, 0.0, 1.0, 0.05), (5.99, -2.0, 6.0, 0.5), (0.999, 0.0, 1.0, 0.3)],
)
def test_a_float_between_steps_snaps_to_the_nearest_the_slider_offers(value, low, high, step):
    count = int((high - low) / step + 1e-9)
    offered = [round(low + k * step, 9) for k in range(count + 1)]  # the slider's values
    nearest = min(offered, key=lambda v: abs(v - value))
    assert url_values.snap_float_to_step(value, low, high, step) == pytest.approx(nearest)
    assert url_values.snap_float_to_step(value, low, high, step) in offered


def test_a_linked_float_between_the_sliders_steps_is_snapped_with_a_notice():
    for lang, words in (("en", "steps of 0.5, so the nearest step, 0.5"), ("zh", "步长 0.5")):
        at = open_app("intuition", lang=lang, **{"intuition.boss": "0.3"})
        assert_clean(at)
        assert at.slider(key="intuition.boss").value == 0.5
        assert len(at.warning) == 1 and words in at.warning[0].value, [w.value for w in at.warning]
    on_step = open_app("intuition", **{"intuition.boss": "1.5"})
    assert not on_step.warning and on_step.slider(key="intuition.boss").value == 1.5


# ---------------------------------------------------------------- widgets bound by Streamlit


@pytest.mark.parametrize(("raw", "checked"), [("1", True), ("true", True), ("TRUE", True)])
def test_a_checkbox_link_as_old_links_wrote_it_opens_checked_and_reads_true(raw, checked):
    """Links once wrote a checkbox as ``1``; Streamlit's binding reads only true/false, so the
    link's text is corrected to ``true`` before the widget exists (one rerun), silently."""
    at = open_app("step_by_step", **{"step_by_step.causal": raw})
    assert_clean(at)
    assert at.checkbox(key="step_by_step.causal").value is checked
    assert at.query_params["step_by_step.causal"] in ("true", ["true"])
    assert link_params(at)["step_by_step.causal"] == "true"
    assert not at.warning, [w.value for w in at.warning]


def test_a_checkbox_link_of_0_opens_unchecked_and_leaves_the_url():
    at = open_app("step_by_step", **{"step_by_step.causal": "0"})
    assert_clean(at)
    assert at.checkbox(key="step_by_step.causal").value is False
    assert "step_by_step.causal" not in at.query_params  # the default is not in the URL
    assert not at.warning, [w.value for w in at.warning]


def test_a_bound_value_at_its_default_leaves_the_link_and_another_joins_it():
    at = open_app("playground", **RANDOM)
    assert "playground.seq_len" not in link_params(at)
    at.slider(key="playground.seq_len").set_value(24).run()
    assert link_params(at)["playground.seq_len"] == "24"
    at.slider(key="playground.seq_len").set_value(16).run()
    assert "playground.seq_len" not in link_params(at)


def test_values_survive_a_page_switch_and_come_back_in_the_link():
    at = open_app("playground", **RANDOM)
    at.slider(key="playground.seq_len").set_value(24)
    at.selectbox(key="playground.variant").set_value("local").run()
    at.switch_page("views/multihead.py").run()
    assert_clean(at)
    assert not any(k.startswith("playground.") for k in link_params(at))
    at.switch_page("views/playground.py").run()
    assert_clean(at)
    assert at.slider(key="playground.seq_len").value == 24
    assert at.selectbox(key="playground.variant").value == "local"
    assert link_params(at)["playground.seq_len"] == "24"
    assert link_params(at)["playground.variant"] == "local"
    assert not at.warning, [w.value for w in at.warning]


def _binding_app():
    import streamlit as st

    if "seen" not in st.session_state:
        st.session_state["seen"] = True
        st.session_state["s"] = 16  # loses to the link on the first draw
    st.slider("S", 4, 1024, 16, key="s", bind="query-params")
    st.checkbox("C", False, key="c", bind="query-params")
    try:
        st.query_params["s"] = "8"
    except Exception as err:  # noqa: BLE001 (the refusal is what is checked)
        st.session_state["refused"] = type(err).__name__


def test_streamlits_binding_behaves_as_bound_py_expects():
    """The three behaviours of ``bind="query-params"`` that dashboard/bound.py relies on
    (CONTRIBUTING.md, URL state): an upgrade that changes one fails here first."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_binding_app)
    at.query_params["s"] = "64"
    at.query_params["c"] = "1"
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.slider(key="s").value == 64  # the link wins over st.session_state
    assert at.checkbox(key="c").value is False and "c" not in at.query_params  # dropped
    assert at.session_state["refused"] == "StreamlitAPIException"  # bound: not settable
