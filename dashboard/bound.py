"""The widgets Streamlit binds to the URL: :func:`slider_int`, :func:`float_input` (a slider
or a number box), :func:`checkbox` and :func:`text`, each drawn with ``bind="query-params"``
under the key ``"<page>.<name>"``, which is also its query name (pages reach them through
:mod:`dashboard.state`).

Streamlit seeds them from the link, writes each change to the URL, drops a value at its
default from it, and keeps the value across a page switch (a bound widget's value persists
for the session whatever its ``persist_state``, so none is given). What stays ours is
small and named (:func:`_draw_bound`):

* **the notice.** Streamlit drops a value it cannot read silently, and reads some that the
  page refuses (``12.5`` for a whole number is cut to 12, a text with a line break is kept),
  so on a widget's first draw the link's text is checked before the widget exists
  (:func:`dashboard.url_state.check_raws`): a refused value gets the notice and its
  default;
* **the nearest allowed value.** A value outside the widget's range now (a range that
  depends on another control), or between a slider's steps, becomes the nearest value the
  widget offers before it is drawn, whatever put it there: a link's or a room's with the
  usual notice, the learner's own move of another control with a quiet caption
  (:func:`dashboard.url_values.nearest_int`, ``nearest_float``);
* **the lock.** A follower's controls are drawn disabled (:func:`dashboard.url_state.locked`);
* **the corrected link.** Streamlit seeds a widget's first draw from the link as it reads
  it, over a value put in ``st.session_state``. So a value the check changed (refused,
  snapped, cut, or ``?x=1`` for a checkbox, which Streamlit reads only as ``true``/``false``
  and drops) is corrected in the URL before the widget exists: a default leaves it, another
  value replaces the link's text and the run starts again once, its notices carried. Where
  Streamlit still reads a value the page refuses (``12.5`` as 12, the last of a repeated
  key), the run starts again at once with the checked value in ``st.session_state``;
* **what a room sets for a follower** (:func:`dashboard.url_state.give_values`): put into
  ``st.session_state`` before the widget is drawn.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator
from streamlit.errors import StreamlitAPIException

from dashboard.i18n import t
from dashboard.url_state import (
    NOT_GIVEN,
    Parser,
    add_notice,
    check_raws,
    given_raw,
    locked,
    record_bound,
    rerun_to_fix,
    take_fix,
    touch,
)
from dashboard.url_values import (
    clean_text,
    cut_text,
    nearest_float,
    nearest_int,
    parse_bool,
    parse_float,
    parse_int,
    parse_text,
    serialise,
    snap_to_step,
)

_CUT = "_state.cut."
_HUGE = 10**12  # a linked whole number is read up to this size, then moved into range
BIND = "query-params"
"""Streamlit's binding of a widget to the query parameter named by its key."""
_CORRECTED = "_state.corrected"  # (key, texts) of link values corrected in the URL once
FLOAT_WIDGETS = {"slider": "slider", "number": "number_input"}
"""The widgets :func:`float_input` draws, by name: the Streamlit method of each."""


def widget_key(page: str, name: str) -> str:
    """Widget and query key: ``"<page>.<name>"``, or ``name`` alone for app-wide controls."""
    return f"{page}.{name}" if page else name


CONTROLS_BOX = "_bound.controls_box"
"""This run's box for a page's controls, when not the sidebar (the presentation view's
"Controls" box above the page, set by :func:`dashboard.presentation.begin_page`)."""


def controls_box() -> DeltaGenerator:
    """Where a page's controls go this run: the sidebar, or the box set under
    :data:`CONTROLS_BOX`."""
    return st.session_state.get(CONTROLS_BOX) or st.sidebar


def container(where: DeltaGenerator | None) -> DeltaGenerator:
    """Where a widget goes: ``where``, or the sidebar when it is ``None``."""
    return controls_box() if where is None else where


def _url_text(value: Any, default: Any) -> str | None:
    """The URL text of a bound widget's value: ``None`` at its default (not in the URL)."""
    return None if value == default else serialise(value)


def _correct_link(key: str, raws: list[str], value: Any, default: Any) -> None:
    """Before the bound widget ``key`` is first drawn: put the checked ``value`` in the URL
    in place of the link's ``raws`` when they differ (once for a link's texts). A default
    leaves the URL and the run goes on; another value replaces the link's text and the run
    starts again, so that Streamlit seeds the widget from the corrected link."""
    text = _url_text(value, default)
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
    rerun_to_fix()


def _draw_bound(
    key: str,
    default: Any,
    check: Callable[[list[str]], Any],
    draw: Callable[[], Any],
    nearest: Callable[[Any], Any],
    say_moved: Callable[[Any], None],
) -> Any:
    """Draw the bound widget ``draw()`` under ``key`` with what stays ours, and return its
    value (recorded for the view's link).

    Before the widget is drawn, every value it could take is put in its current range by
    ``nearest`` (value -> the nearest value the widget allows now, the default for a value
    of the wrong kind), whatever put it there:

    * a value to correct (:func:`dashboard.url_state.take_fix`), asked for by an earlier run
      whose ranges may have been others;
    * a room's value (:func:`dashboard.url_state.given_raw`) or, on the widget's first draw,
      the link's texts: checked by ``check`` (texts -> value in range, adding the one-line
      notice when it refused or moved one) and corrected in the URL (:func:`_correct_link`;
      a room's value on the widget's first draw is also put into the URL, which Streamlit
      would seed it from: a follower whose tab reconnected to a new session still holds its
      old link);
    * the kept value, when the range moved under it (the learner's move of another control,
      a restored session): moved to the nearest allowed value and said by ``say_moved``, a
      quiet caption.

    When Streamlit still seeded the widget with another value than the checked one (it reads
    ``12.5`` as 12 and takes the last of a repeated key, where the page refuses both), the run
    starts again at once with the checked value put into ``st.session_state``
    (:func:`dashboard.url_state.rerun_to_fix`), which then wins.
    """
    wanted = take_fix(key)
    checked = False
    if wanted is not NOT_GIVEN:
        st.session_state[key] = nearest(wanted)
    elif (raw := given_raw(key)) is not NOT_GIVEN:
        wanted = default if raw is None else check([raw])
        first_draw = key not in st.session_state
        st.session_state[key] = wanted
        if first_draw and (raws := st.query_params.get_all(key)):
            # a new session (a reconnected follower) would be seeded from its old link
            _correct_link(key, raws, wanted, default)
    elif key not in st.session_state:
        raws = st.query_params.get_all(key)
        if raws:
            wanted = check(raws)
            checked = True
            _correct_link(key, raws, wanted, default)
    else:
        kept = st.session_state[key]
        moved = nearest(kept)
        if moved != kept or type(moved) is not type(kept):
            st.session_state[key] = moved
            say_moved(moved)
    value = draw()
    if checked and value != wanted:
        rerun_to_fix(key, wanted)
    record_bound(key, _url_text(value, default))
    return value


def moved_caption(box: DeltaGenerator, label: str) -> Callable[[Any], None]:
    """What a widget under ``label`` says when its range moved under its value: a caption in
    ``box`` naming the value it now shows."""
    return lambda value: box.caption(t("common.moved_in_range", label=label, value=value))


def _of_kind(kind: type, default: Any) -> Callable[[Any], Any]:
    """``nearest`` for a widget without a range: its value when of ``kind``, else ``default``."""
    return lambda value: value if isinstance(value, kind) else default


def _number_check(
    key: str, parse: Parser, nearest: Callable[[Any], Any], low: float, high: float, step: float
) -> Callable[[list[str]], Any]:
    """The check of a link's (or a room's) number for ``key``: parsed by ``parse`` (a
    refusal gives ``nearest(None)``, the default, and its notice), then moved to the nearest
    value the widget allows with a notice naming both: outside [``low``, ``high``] (a range
    that depends on another control, or a hand-made link) or between a slider's steps."""

    def check(raws: list[str]) -> Any:
        value = check_raws(key, raws, None, parse)
        if value is None:
            return nearest(None)
        moved = nearest(value)
        if not math.isclose(moved, value, rel_tol=1e-9, abs_tol=1e-12):
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
    """An integer slider bound to the URL under ``"<page>.<name>"``.

    Args:
        page, name: form the widget key and query key ``"<page>.<name>"``.
        label: the translated label.
        low, high, step: slider range; a URL value outside [low, high] is refused, one
            between the steps goes to the nearest step (both with a notice).
        default: value when the URL has none or a bad one (clamped into [low, high]).
        help: translated tooltip.
        where: container; default the sidebar.
        disabled: grey the slider out.

    Returns:
        The current value.

    Raises:
        ValueError: when ``low > high``.
    """
    if low > high:
        raise ValueError(f"slider {page}.{name}: low {low} > high {high}")
    key = widget_key(page, name)
    default = snap_to_step(min(max(default, low), high), low, high, step)
    if low == high:
        touch(key)
        container(where).caption(f"{label}: {low}")
        return low
    nearest = nearest_int(low, high, step, default)
    box = container(where)
    return _draw_bound(
        key,
        default,
        _number_check(key, lambda raw: parse_int(raw, -_HUGE, _HUGE), nearest, low, high, step),
        lambda: box.slider(
            label,
            low,
            high,
            default,
            step,
            key=key,
            help=help,
            disabled=disabled or locked(key),
            bind=BIND,
        ),
        nearest,
        moved_caption(box, label),
    )


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
    """A float slider or number box bound to the URL under ``"<page>.<name>"``.

    Args:
        page, name, label, low, high, default, step, help, where, disabled: as
            :func:`slider_int` (a number box takes any linked number in range).
        widget: ``"slider"`` or ``"number"`` (a number box, for values typed exactly).
        fmt: printf-style display format, e.g. ``"%.2f"`` (default: Streamlit's).

    Returns:
        The current value.

    Raises:
        ValueError: when ``low >= high`` or ``widget`` is not one of :data:`FLOAT_WIDGETS`.
    """
    if widget not in FLOAT_WIDGETS:
        raise ValueError(f"float widget {widget!r}; valid: {', '.join(FLOAT_WIDGETS)}")
    if low >= high:
        raise ValueError(f"{widget} {page}.{name}: low {low} >= high {high}")
    key = widget_key(page, name)
    low, high = float(low), float(high)
    default = min(max(float(default), low), high)
    nearest = nearest_float(low, high, float(step) if widget == "slider" else None, default)
    box = container(where)
    draw = getattr(box, FLOAT_WIDGETS[widget])
    return _draw_bound(
        key,
        default,
        _number_check(
            key, lambda raw: parse_float(raw, -math.inf, math.inf), nearest, low, high, step
        ),
        lambda: draw(
            label,
            low,
            high,
            default,
            float(step),
            key=key,
            help=help,
            disabled=disabled or locked(key),
            format=fmt,
            bind=BIND,
        ),
        nearest,
        moved_caption(box, label),
    )


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
    ``1``/``0``, as links once wrote them, is read and corrected to ``true``/``false``).

    Returns:
        The current value.
    """
    key = widget_key(page, name)
    default = bool(default)
    return _draw_bound(
        key,
        default,
        lambda raws: check_raws(key, raws, default, parse_bool),
        lambda: container(where).checkbox(
            label, default, key=key, help=help, disabled=disabled or locked(key), bind=BIND
        ),
        _of_kind(bool, default),
        moved_caption(container(where), label),
    )


def _keep_text(key: str, max_len: int) -> None:
    """Make the text under ``key`` fit: control characters become spaces, a longer text is
    cut to its first ``max_len`` characters and its full length is remembered for the note
    (the widget's ``on_change`` callback)."""
    full = clean_text(str(st.session_state.get(key, "")))
    st.session_state[key] = cut_text(full, max_len)
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
    """A text input bound to the URL under ``"<page>.<name>"``.

    Text is kept, never thrown away: markup characters (``<``, ``{``, a backtick, …) are
    text, a pasted tab or line break becomes a space, and a longer text (typed, pasted or
    linked) is cut to its first ``max_len`` characters with a note under the box saying so.
    The widget has no ``max_chars``: with one, the browser refuses a long paste whole. A
    link's text with a control character falls back to ``default`` with a notice saying
    which character (see :func:`dashboard.url_values.parse_text`).

    Args:
        page, name, label, help, where: as :func:`slider_int`.
        default: the text of a fresh page.
        max_len: the most characters kept (a positive whole number).

    Returns:
        The current text, at most ``max_len`` characters.

    Raises:
        ValueError: when ``max_len`` is not positive.
    """
    key = widget_key(page, name)
    default = cut_text(default, max_len)

    def check(raws: list[str]) -> str:
        full = check_raws(key, raws, default, parse_text, max_raw=None)
        if len(full) > max_len:  # (the corrected link's run keeps the length for the note)
            st.session_state[_CUT + key] = len(full)
        return cut_text(full, max_len)

    box = container(where)
    value = _draw_bound(
        key,
        default,
        check,
        lambda: box.text_input(
            label,
            default,
            key=key,
            help=help,
            on_change=_keep_text,
            args=(key, max_len),
            disabled=locked(key),
            bind=BIND,
        ),
        _of_kind(str, default),
        moved_caption(box, label),
    )
    full_len = st.session_state.get(_CUT + key, 0)
    if full_len and len(value) == max_len:
        box.info(t("common.text_cut", n=max_len, total=full_len))
    return value
