"""Replayed page sections (dashboard/replay.py): a second session that shows the same values
gets exactly the elements the first one drew, in its own language, and switching replay off
draws the same page again from the readable code."""

from __future__ import annotations

import json

import pytest

from dashboard import replay
from tests.dashboard.conftest import assert_clean, metrics, open_app

SCALING = {"scaling.seq_len": "12", "scaling.trials": "40", "scaling.d_ks": "16,64,256"}


def page_output(at) -> dict:
    """What a learner sees of a page: metrics, tables, chart specs (data included), text."""
    charts = []
    for chart in at.get("vega_lite_chart"):
        spec = json.loads(chart.proto.spec)
        datasets = sorted(bytes(d.data.data) for d in chart.proto.datasets)
        charts.append((json.dumps(spec, sort_keys=True), datasets, bytes(chart.proto.data.data)))
    return {
        "metrics": metrics(at),
        "tables": [frame.value.to_dict() for frame in at.dataframe],
        "charts": charts,
        "text": [m.value for m in at.markdown] + [c.value for c in at.caption],
    }


def test_a_second_session_replays_what_the_first_drew():
    first = open_app("scaling", **SCALING)
    assert_clean(first)
    assert len(first.get("vega_lite_chart")) == 6  # with one query's row scaled and unscaled
    second = open_app("scaling", **SCALING)
    assert_clean(second)
    assert page_output(second) == page_output(first)


REPLAYING_PAGES = {
    "scaling": SCALING,
    "step_by_step": {"step_by_step.tokens": "5", "step_by_step.d_k": "4"},
    "gradients": {"gradients.d_ks": "16,64", "gradients.trials": "2"},
    "practice": {"practice.seq_len": "32"},
}


@pytest.mark.parametrize("page", sorted(REPLAYING_PAGES))
def test_replay_switched_off_draws_the_same_page(page: str, monkeypatch: pytest.MonkeyPatch):
    params = REPLAYING_PAGES[page]
    open_app(page, **params)  # the first session draws and records
    replayed_page = open_app(page, **params)
    assert_clean(replayed_page)
    monkeypatch.setenv(replay.OFF_ENV, "1")
    assert not replay.replay_enabled()
    drawn = open_app(page, **params)
    assert_clean(drawn)
    assert page_output(drawn) == page_output(replayed_page)
    assert page_output(drawn)["charts"] or page_output(drawn)["metrics"]


def test_each_language_gets_its_own_drawing():
    english = open_app("scaling", **SCALING)
    chinese = open_app("scaling", lang="zh", **SCALING)
    assert_clean(chinese)
    assert set(metrics(english)) != set(metrics(chinese))
    assert any("缩放" in label for label in metrics(chinese))
    assert list(metrics(english).values()) == list(metrics(chinese).values())


def test_other_values_are_drawn_not_replayed():
    small = page_output(open_app("scaling", **SCALING))
    larger = page_output(open_app("scaling", **{**SCALING, "scaling.seq_len": "40"}))
    assert small["tables"] != larger["tables"]
    assert small["charts"] != larger["charts"]


def _counting_page() -> None:
    from pathlib import Path

    import streamlit as st

    from dashboard.replay import replayed

    log = Path(st.query_params["log"])

    @replayed
    def section(n: int) -> None:
        with log.open("a") as out:
            out.write(f"{n}\n")
        st.metric("n squared", n * n)
        left, _ = st.columns(2)
        left.caption(f"n = {n}")

    section(int(st.query_params["n"]))


@pytest.mark.parametrize("off", [False, True])
def test_a_section_is_drawn_once_per_values(off: bool, monkeypatch: pytest.MonkeyPatch, tmp_path):
    from streamlit.testing.v1 import AppTest

    if off:
        monkeypatch.setenv(replay.OFF_ENV, "1")
    log = tmp_path / "drawn.txt"
    log.touch()
    shown = []
    for n in (3, 3, 4, 3):
        at = AppTest.from_function(_counting_page, default_timeout=30)
        at.query_params["n"], at.query_params["log"] = str(n), str(log)
        at.run()
        assert not at.exception
        shown.append((at.metric[0].value, at.caption[0].value))
    assert shown == [("9", "n = 3"), ("9", "n = 3"), ("16", "n = 4"), ("9", "n = 3")]
    drawn = [int(line) for line in log.read_text().split()]
    assert drawn == ([3, 3, 4, 3] if off else [3, 4])
