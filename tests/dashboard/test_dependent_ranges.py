"""No control can crash a page: a value outside its control's range *now* (a range that
depends on another control) is moved to the nearest allowed value before the widget is
drawn, never to the default, whatever put it there (``dashboard/bound.py``, ``state.py``).

Each dependent control below is driven through the three paths, in AppTest:

* **a link** naming a value past the range the link's other value allows: the nearest, with
  the usual one-line notice naming the key and the value used;
* **the learner's own move** of the control it depends on: the nearest, with a quiet caption
  (no notice);
* **a room's view** with such a value (a follower): the nearest, with the notice.

The dependent controls of the lab, and the control each range depends on:

* driven here: ``properties.cutoff`` (``properties.seq_len``: 0 .. L - 2);
  ``playground.pad_len`` and ``multihead.pad_len`` (their ``seq_len``: 1 .. L);
  ``playground.local.window_size`` (``playground.seq_len``: 1 .. max(16, L));
  ``playground.heads`` and ``properties.heads``, choices (their ``d_model``: its divisors);
  ``heads.why_query`` and ``heads.why_key`` (``heads.length``: up to 2 L; the model tier);
* drawn by the same ``state.slider_int``/``select``/``multiselect``, not driven here (their
  ranges follow the installed model or a training run): ``watch.step`` (``watch.steps``);
  ``heads.top_k``, ``heads.count``, ``heads.first_layer``, ``heads.layer``, ``heads.head``,
  ``heads.qk_layer``, ``heads.qk_head``, ``heads.off`` (the model's layers × heads);
  ``decoder.layer``, ``decoder.head``, ``decoder.shift`` (the model); ``real_model.token``
  (the sentence's tokens).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from dashboard.rooms import presenter
from dashboard.rooms.store import View
from tests.dashboard.conftest import open_app


@dataclass(frozen=True)
class Dependent:
    page: str
    base: dict  # the link's other values that make the control appear
    upstream: str  # the control the range depends on
    wide: object  # its value with a wide range, then its value with a narrow one
    narrow: object
    key: str  # the dependent control
    far: object  # a value inside the wide range, outside the narrow one
    nearest: object  # what it becomes under the narrow range
    widget: str = "slider"


CASES = [
    Dependent("properties", {}, "seq_len", 16, 4, "cutoff", 14, 2),
    Dependent(
        "playground", {"input": "random", "mask": "padding"}, "seq_len", 64, 8, "pad_len", 60, 8
    ),
    Dependent(
        "multihead", {"input": "random", "mask": "padding"}, "seq_len", 64, 8, "pad_len", 60, 8
    ),
    Dependent(
        "playground",
        {"input": "random", "variant": "local"},
        "seq_len",
        64,
        8,
        "local.window_size",
        60,
        16,
    ),
    Dependent("playground", {}, "d_model", 96, 64, "heads", 12, 8, widget="selectbox"),
    Dependent("properties", {}, "d_model", 64, 8, "heads", 16, 8, widget="selectbox"),
    Dependent("heads", {}, "length", 64, 4, "why_query", 100, 8),  # the model tier
    Dependent("heads", {}, "length", 64, 4, "why_key", 120, 8),
]
IDS = [f"{c.page}.{c.key}" for c in CASES]


def link(case: Dependent, upstream: object, value: object) -> dict[str, str]:
    query = {f"{case.page}.{k}": str(v) for k, v in case.base.items()}
    query[f"{case.page}.{case.upstream}"] = str(upstream)
    query[f"{case.page}.{case.key}"] = str(value)
    return query


def widget(at, case: Dependent, name: str):
    return getattr(at, case.widget if name == case.key else _upstream_widget(case))(
        key=f"{case.page}.{name}"
    )


def _upstream_widget(case: Dependent) -> str:
    return "selectbox" if case.upstream == "d_model" else "slider"


def notices(at) -> str:
    return "\n".join(str(w.value) for w in at.warning)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_link_past_the_range_takes_the_nearest_value_with_a_notice(case):
    at = open_app(case.page, **link(case, case.narrow, case.far))
    assert not at.exception, at.exception
    assert widget(at, case, case.key).value == case.nearest
    said = notices(at)
    assert f"{case.page}.{case.key}" in said
    if case.widget == "slider":
        assert f"nearest allowed value, {case.nearest}" in said, said


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_learner_s_own_move_takes_the_nearest_value_with_a_caption(case):
    at = open_app(case.page, **link(case, case.wide, case.far))
    assert not at.exception and widget(at, case, case.key).value == case.far
    widget(at, case, case.upstream).set_value(case.narrow).run()
    assert not at.exception, at.exception
    assert widget(at, case, case.key).value == case.nearest  # not the default
    assert f"moved to {case.nearest}" in "\n".join(c.value for c in at.caption)
    assert f"{case.page}.{case.key}" not in notices(at)  # a quiet caption, no notice


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_room_s_view_past_the_range_takes_the_nearest_value_with_a_notice(case):
    code = f"t-{uuid.uuid4().hex[:10]}"
    store = presenter.shared_store()
    store.present(code, "a-presenter", take_over=True)
    store.publish(code, View.of(case.page, link(case, case.narrow, case.far)))
    at = open_app(case.page, room=code)
    assert not at.exception, at.exception
    control = widget(at, case, case.key)
    assert control.value == case.nearest and control.disabled  # the follower's, locked
    assert f"{case.page}.{case.key}" in notices(at)


def test_a_fix_asked_by_a_run_with_another_range_is_moved_into_this_one():
    """The crash of the issue: a value a run asked the next to put into a widget (Streamlit
    read a link's 12.5 as 12) reached a run whose range had shrunk meanwhile; it raised
    StreamlitValueAboveMaxError. Now it is moved to the nearest allowed value."""
    at = open_app("properties", **{"properties.seq_len": "16", "properties.cutoff": "14"})
    at.session_state["_state.fixes"] = {"properties.cutoff": 14}
    at.slider(key="properties.seq_len").set_value(4).run()
    assert not at.exception, at.exception
    assert at.slider(key="properties.cutoff").value == 2
