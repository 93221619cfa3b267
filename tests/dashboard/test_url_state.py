"""URL state: a link reproduces the view; tampered values fall back with a visible notice."""

from __future__ import annotations

import pytest

from dashboard import state
from tests.dashboard.conftest import assert_clean, open_app

SCRIPT = "<script>alert(1)</script>"


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
    assert state.parse_text("那只猫 sat.", 20) == "那只猫 sat."
    for bad in (SCRIPT, "a" * 21, "javascript:x", "line\nbreak"):
        with pytest.raises(ValueError):
            state.parse_text(bad, 20)
    assert state.parse_int_list("1,2, 3", 0, 5, 4) == [1, 2, 3]
    for bad in ("", "1,2,3,4,5", "1,x", "1,9"):
        with pytest.raises(ValueError):
            state.parse_int_list(bad, 0, 5, 4)


def test_round_trip_reproduces_the_view():
    at = open_app("playground")
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
    params = {k: at.query_params[k] for k in at.query_params}
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
    assert at.selectbox(key="playground.d_model").value == 64
    assert at.slider(key="playground.dropout").value == 0.0
    assert len(at.warning) == 1
    notice = at.warning[0].value
    for key in ("playground.seq_len", "playground.variant", "playground.seed", "lang"):
        assert f"` {key} `" in notice
    assert f"` {SCRIPT} `" in notice  # literal text: an inline code span
    assert "<" not in notice.replace(f"` {SCRIPT} `", "")
    assert at.query_params["playground.seq_len"] in ("16", ["16"])
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


def test_float_input_reads_the_url_for_both_widgets_and_rejects_out_of_range():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_float_widgets_app)
    at.query_params["t.slide"] = "7"
    at.query_params["t.typed"] = "1.5"
    at.run()
    assert not at.exception
    assert at.slider(key="t.slide").value == 0.5
    assert at.number_input(key="t.typed").value == 1.5
    assert len(at.warning) == 1 and "` t.slide `" in at.warning[0].value
    assert at.query_params["t.slide"] in ("0.5", ["0.5"])
    assert at.query_params["t.typed"] in ("1.5", ["1.5"])


def test_float_input_refuses_an_unknown_widget_and_an_empty_range():
    with pytest.raises(ValueError, match="dial"):
        state.float_input("t", "x", "X", 0.0, 1.0, 0.5, step=0.1, widget="dial")
    with pytest.raises(ValueError, match="low 1.0 >= high 1.0"):
        state.float_input("t", "x", "X", 1.0, 1.0, 1.0, step=0.1)
