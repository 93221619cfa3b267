"""The widgets Streamlit binds to the URL: :func:`slider_int`, :func:`float_input` (a slider
or a number box), :func:`checkbox` and :func:`text`, each drawn with ``bind="query-params"``
under the key ``"<page>.<name>"``, its query name (pages reach them through
:mod:`dashboard.state`). Streamlit seeds them from the link, writes each change to the URL,
drops a value at its default and keeps the value across a page switch. What stays ours is in
:func:`_draw_bound`: Streamlit drops a value it cannot read silently and reads some the page
refuses (``12.5`` for a whole number as 12), so a link's text is checked first, for the
notice; a value outside the range now, or between a slider's steps, becomes the nearest
allowed one; and the link in the address bar is corrected to what the page shows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator
from streamlit.errors import StreamlitAPIException

from dashboard import url_state, url_values
from dashboard.i18n import t
from dashboard.url_state import NOT_GIVEN, Parser, add_notice, check_raws

_CUT = "_state.cut."
_CORRECTED = "_state.corrected"  # (key, texts) of link values corrected in the URL once
_HUGE = 10**12  # a linked whole number is read up to this size, then moved into range
BIND = "query-params"
"""Streamlit's binding of a widget to the query parameter named by its key."""
FLOAT_WIDGETS = {"slider": "slider", "number": "number_input"}
"""The widgets :func:`float_input` draws, by name: the Streamlit method of each."""
CONTROLS_BOX = "_bound.controls_box"
"""This run's box for a page's controls, when not the sidebar (the presentation view's
"Controls" box, set by :func:`dashboard.presentation.begin_page`)."""


def widget_key(page: str, name: str) -> str:
    """Widget and query key: ``"<page>.<name>"``, or ``name`` alone for app-wide controls."""
    return f"{page}.{name}" if page else name


def controls_box() -> DeltaGenerator:
    """Where a page's controls go this run: the sidebar, or the box of :data:`CONTROLS_BOX`."""
    return st.session_state.get(CONTROLS_BOX) or st.sidebar


def container(where: DeltaGenerator | None) -> DeltaGenerator:
    """Where a widget goes: ``where``, or :func:`controls_box` when it is ``None``."""
    return controls_box() if where is None else where


def moved_caption(box: DeltaGenerator, label: str) -> Callable[[Any], None]:
    """What a widget under ``label`` says when its range moved under its value: a caption in
    ``box`` naming the value it now shows."""
    return lambda value: box.caption(t("common.moved_in_range", label=label, value=value))


def _correct_link(key: str, raws: list[str], value: Any, default: Any) -> None:
    """Before the bound widget ``key`` is first drawn, put the checked ``value`` in the URL in
    place of the link's ``raws`` (once for a link's texts): a default leaves the URL, another
    value replaces the text and the run starts again, so that Streamlit seeds the widget from
    the corrected link (it seeds a first draw from the link, over ``st.session_state``)."""
    text = None if value == default else url_values.serialise(value)
    corrected = st.session_state.setdefault(_CORRECTED, set())
    if raws == [text] or (key, tuple(raws)) in corrected:
        return
    corrected.add((key, tuple(raws)))
    try:
        if text is None:
            del st.query_params[key]
            return
        st.query_params[key] = text
    except StreamlitAPIException:  # bound by an earlier draw: the check after it corrects
        return
    url_state.rerun_to_fix()


def _draw_bound(
    key: str,
    default: Any,
    check: Callable[[list[str]], Any],
    nearest: Callable[[Any], Any],
    draw: Callable[..., Any],
    say_moved: Callable[[Any], None],
    *,
    disabled: bool = False,
) -> Any:
    """Draw the bound widget ``draw(key=…, bind=…, disabled=…)`` under ``key`` and return
    its value (recorded for the view's link). Before the draw, its value is put in its
    current range by ``nearest`` (the default for a value of the wrong kind): a fix asked
    for by the run before (:func:`dashboard.url_state.take_fix`); a room's value, or the
    link's texts on the first draw, checked by ``check`` (texts -> value in range, with the
    notice) and corrected in the link (:func:`_correct_link`; a reconnected follower still
    holds its old link), and where Streamlit still drew another value (``12.5`` read as 12)
    the run starts again with the checked one in ``st.session_state``, which then wins; or
    the kept value, when the range moved under it (said by ``say_moved``)."""
    wanted = NOT_GIVEN
    if (fix := url_state.take_fix(key)) is not NOT_GIVEN:
        st.session_state[key] = nearest(fix)
    elif (raw := url_state.given_raw(key)) is not NOT_GIVEN:
        wanted = default if raw is None else check([raw])
        first_draw = key not in st.session_state
        st.session_state[key] = wanted
        if first_draw and (raws := st.query_params.get_all(key)):
            _correct_link(key, raws, wanted, default)
    elif key in st.session_state:
        kept = st.session_state[key]
        if (moved := nearest(kept)) != kept or type(moved) is not type(kept):
            st.session_state[key] = moved
            say_moved(moved)
    elif raws := st.query_params.get_all(key):
        wanted = check(raws)
        _correct_link(key, raws, wanted, default)
    value = draw(key=key, bind=BIND, disabled=disabled or url_state.locked(key))
    if wanted is not NOT_GIVEN and value != wanted:
        url_state.rerun_to_fix(key, wanted)
    url_state.record_bound(key, None if value == default else url_values.serialise(value))
    return value


def _number_check(
    key: str, parse: Parser, nearest: Callable[[Any], Any], low: float, high: float, step: float
) -> Callable[[list[str]], Any]:
    """The check of a link's (or a room's) number for ``key``: parsed by ``parse`` (a refusal
    gives the default and its notice), then moved to the nearest value the widget allows,
    with a notice naming it, when outside [``low``, ``high``] or between a slider's steps."""

    def check(raws: list[str]) -> Any:
        value = check_raws(key, raws, None, parse)
        moved = nearest(value)
        if value is not None and not math.isclose(moved, value, rel_tol=1e-9, abs_tol=1e-12):
            if low <= value <= high:
                add_notice(key, raws[0], "snapped", value=moved, step=step)
            else:
                add_notice(key, raws[0], "moved_in_range", value=moved, low=low, high=high)
        return moved

    return check


def slider_int(
    page: str,
    name: str,
    label: str,
    low: int,
    high: int,
    default: int,
    *,
    step: int = 1,
    help: str | None = None,
    where: DeltaGenerator | None = None,
    disabled: bool = False,
) -> int:
    """An integer slider bound to the URL under ``"<page>.<name>"`` (:func:`widget_key`) in
    ``where`` (default :func:`container`), with the translated ``label`` and ``help``; returns
    its value. A linked value outside [low, high] or between the steps goes to the nearest
    one offered, with a notice; ``default`` (clamped) stands for a missing or bad one.
    ``ValueError`` when ``low > high``."""
    if low > high:
        raise ValueError(f"slider {page}.{name}: low {low} > high {high}")
    key, box = widget_key(page, name), container(where)
    default = url_values.snap_to_step(min(max(default, low), high), low, high, step)
    if low == high:
        url_state.touch(key)
        box.caption(f"{label}: {low}")
        return low
    nearest = url_values.nearest_int(low, high, step, default)
    parse = partial(url_values.parse_int, low=-_HUGE, high=_HUGE)
    check = _number_check(key, parse, nearest, low, high, step)
    draw = partial(box.slider, label, low, high, default, step, help=help)
    say_moved = moved_caption(box, label)
    return _draw_bound(key, default, check, nearest, draw, say_moved, disabled=disabled)


def float_input(
    page: str,
    name: str,
    label: str,
    low: float,
    high: float,
    default: float,
    *,
    step: float,
    widget: str = "slider",
    help: str | None = None,
    where: DeltaGenerator | None = None,
    disabled: bool = False,
    fmt: str | None = None,
) -> float:
    """A float slider, or number box (``widget="number"``, for values typed exactly), bound
    as :func:`slider_int` is (a number box takes any linked number in range); ``fmt`` is a
    printf-style format, e.g. ``"%.2f"``. ``ValueError`` when ``low >= high`` or ``widget`` is
    not one of :data:`FLOAT_WIDGETS`."""
    if widget not in FLOAT_WIDGETS:
        raise ValueError(f"float widget {widget!r}; valid: {', '.join(FLOAT_WIDGETS)}")
    if low >= high:
        raise ValueError(f"{widget} {page}.{name}: low {low} >= high {high}")
    key, box = widget_key(page, name), container(where)
    low, high, step = float(low), float(high), float(step)
    default = min(max(float(default), low), high)
    nearest = url_values.nearest_float(low, high, step if widget == "slider" else None, default)
    parse = partial(url_values.parse_float, low=-math.inf, high=math.inf)
    check = _number_check(key, parse, nearest, low, high, step)
    method = getattr(box, FLOAT_WIDGETS[widget])
    draw = partial(method, label, low, high, default, step, help=help, format=fmt)
    say_moved = moved_caption(box, label)
    return _draw_bound(key, default, check, nearest, draw, say_moved, disabled=disabled)


def _of_kind(kind: type, default: Any) -> Callable[[Any], Any]:
    """``nearest`` for a widget without a range: its value when of ``kind``, else ``default``."""
    return lambda value: value if isinstance(value, kind) else default


def checkbox(
    page: str,
    name: str,
    label: str,
    default: bool,
    *,
    help: str | None = None,
    where: DeltaGenerator | None = None,
    disabled: bool = False,
) -> bool:
    """A checkbox bound to the URL under ``"<page>.<name>"`` as true/false (a link's
    ``1``/``0``, as links once wrote them, is read too). Returns the current value."""
    key, box, default = widget_key(page, name), container(where), bool(default)
    check = partial(check_raws, key, default=default, parse=url_values.parse_bool)
    nearest = _of_kind(bool, default)
    draw = partial(box.checkbox, label, default, help=help)
    say_moved = moved_caption(box, label)
    return _draw_bound(key, default, check, nearest, draw, say_moved, disabled=disabled)


def _keep_text(key: str, max_len: int) -> None:
    """Make the typed text under ``key`` fit (the widget's ``on_change``): control characters
    become spaces, and a longer text is cut to ``max_len`` characters, its length kept for
    the note."""
    full = url_values.clean_text(str(st.session_state.get(key, "")))
    st.session_state[key] = url_values.cut_text(full, max_len)
    st.session_state[_CUT + key] = len(full) if len(full) > max_len else 0


def text(
    page: str,
    name: str,
    label: str,
    default: str,
    max_len: int,
    *,
    help: str | None = None,
    where: DeltaGenerator | None = None,
) -> str:
    """A text input bound to the URL under ``"<page>.<name>"``; returns its text, never
    thrown away: markup characters are text, a pasted tab or line break becomes a space, and
    a longer text (typed, pasted or linked) is cut to its first ``max_len`` (positive)
    characters with a note (with ``max_chars`` the browser would refuse a long paste whole).
    A link's text with a control character falls back to ``default`` with a notice."""
    key, box = widget_key(page, name), container(where)
    default = url_values.cut_text(default, max_len)

    def check(raws: list[str]) -> str:
        full = check_raws(key, raws, default, url_values.parse_text, max_raw=None)
        if len(full) > max_len:  # (kept for the note by the corrected link's run)
            st.session_state[_CUT + key] = len(full)
        return url_values.cut_text(full, max_len)

    keep = {"on_change": _keep_text, "args": (key, max_len)}
    draw = partial(box.text_input, label, default, help=help, **keep)
    value = _draw_bound(
        key, default, check, _of_kind(str, default), draw, moved_caption(box, label)
    )
    if (full_len := st.session_state.get(_CUT + key, 0)) and len(value) == max_len:
        box.info(t("common.text_cut", n=max_len, total=full_len))
    return value
