"""The view's state in the URL: every control lives in the query so that a link reproduces
the view. Pages call the helpers with their page name, e.g.
``seq_len = state.slider_int("scaling", "seq_len", t("common.ctl_seq_len"), 4, 512, 64)``;
the widget key and the query key are both ``"<page>.<name>"``.

**Bound by Streamlit.** :func:`slider_int`, :func:`float_input` (a slider or a number box),
:func:`checkbox` and :func:`text` draw widgets with ``bind="query-params"``: Streamlit seeds
them from the link, writes each change to the URL, drops a value at its default from it,
and keeps the value across a page switch (a bound widget persists for the session, so no
``persist_state`` is needed). What stays ours is small and named (:func:`_draw_bound`):

* **the notice.** Streamlit drops a value it cannot read silently, and reads some that the
  page refuses (``12.5`` for a whole number is cut to 12, a text with a line break is kept),
  so on a widget's first draw the link's text is checked before the widget exists
  (:func:`dashboard.url_state.check_raws`): a refused value gets the notice and its
  default;
* **the nearest step.** A linked number between a slider's steps becomes the nearest step,
  with a notice (:func:`dashboard.url_values.snap_to_step`, ``snap_float_to_step``);
* **the corrected link.** Streamlit seeds a widget's first draw from the link as it reads
  it, over a value put in ``st.session_state``. So a value the check changed (refused,
  snapped, cut, or ``?x=1`` for a checkbox, which Streamlit reads only as ``true``/``false``
  and drops) is corrected in the URL before the widget exists: a default leaves it, another
  value replaces the link's text and the run starts again once, its notices carried. Where
  Streamlit still reads a value the page refuses (``12.5`` as 12, the last of a repeated
  key), the run starts again at once with the checked value in ``st.session_state``;
* **what a room sets for a follower** (:func:`dashboard.url_state.give_values`): put into
  ``st.session_state`` before the widget is drawn.

**Ours.** :func:`select`, :func:`radio` and :func:`multiselect` stay on our own code:
Streamlit's binding writes an option's *displayed* text (what ``format_func`` returns) to the
URL and matches the link against it, and our options are shown as translated labels
(English/中文), so a bound choice would put "缩放点积注意力" into a link and a Chinese link
would not open in English. Ours read the option's stable name from the URL
(:func:`dashboard.url_state.read`) and write it back on every run
(:func:`dashboard.url_state.write`). A linked whole number between a slider's steps
becomes the nearest step, with a notice.

The notices, the ``read``/``write`` of our own values, the room's values and the link built
from a run's values live in :mod:`dashboard.url_state`; the parsers of a URL value's text
(``parse_int``, ``parse_choice``, …) are pure functions in :mod:`dashboard.url_values`. Both
are re-exported here, so a page needs ``state`` alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator
from streamlit.errors import StreamlitAPIException

from dashboard.i18n import t
from dashboard.url_state import (
    APP_KEYS,
    NOT_GIVEN,
    Parser,
    add_notice,
    begin_run,
    check_raws,
    finish_run,
    give_values,
    given_raw,
    note_unknown_keys,
    notices,
    read,
    record_bound,
    render_notices,
    rerun_to_fix,
    take_fix,
    touch,
    unknown_keys,
    view_query,
    write,
)
from dashboard.url_values import (
    clean_text,
    cut_text,
    parse_bool,
    parse_choice,
    parse_choice_list,
    parse_float,
    parse_int,
    parse_int_list,
    parse_text,
    serialise,
    snap_float_to_step,
    snap_to_step,
)

__all__ = [
    "APP_KEYS",
    "add_notice",
    "begin_run",
    "checkbox",
    "finish_run",
    "float_input",
    "give_values",
    "multiselect",
    "note_unknown_keys",
    "notices",
    "parse_bool",
    "parse_choice",
    "parse_float",
    "parse_int",
    "parse_int_list",
    "parse_text",
    "radio",
    "read",
    "render_notices",
    "select",
    "slider_int",
    "text",
    "unknown_keys",
    "view_query",
    "write",
]

_CUT = "_state.cut."
BIND = "query-params"
"""Streamlit's binding of a widget to the query parameter named by its key."""
_CORRECTED = "_state.corrected"  # (key, texts) of link values corrected in the URL once
FLOAT_WIDGETS = {"slider": "slider", "number": "number_input"}
"""The widgets :func:`float_input` draws, by name: the Streamlit method of each."""


def _prepare(key: str, default: Any, parse: Parser, valid: Callable[[Any], bool]) -> None:
    """Seed our own widget's state of ``key`` from a room's value or the URL once; repair it
    when no longer valid."""
    raw = given_raw(key)
    if raw is not NOT_GIVEN:
        value = default if raw is None else check_raws(key, [raw], default, parse)
        st.session_state[key] = value if valid(value) else default
        touch(key)
    elif key not in st.session_state:
        value = read(key, default, parse)
        st.session_state[key] = value if valid(value) else default
    else:
        touch(key)
        if not valid(st.session_state[key]):
            st.session_state[key] = default


def _key(page: str, name: str) -> str:
    """Widget and query key: ``"<page>.<name>"``, or ``name`` alone for app-wide controls."""
    return f"{page}.{name}" if page else name


def _where(where: DeltaGenerator | None) -> DeltaGenerator:
    return st.sidebar if where is None else where


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
    valid: Callable[[Any], bool],
) -> Any:
    """Draw the bound widget ``draw()`` under ``key`` with what stays ours, and return its
    value (recorded for the view's link).

    Before the widget is drawn: a value to correct (:func:`dashboard.url_state.take_fix`)
    or a room's value (:func:`dashboard.url_state.given_raw`) is put into
    ``st.session_state``; on the widget's first draw the link's texts are checked by
    ``check`` (texts -> value, adding any notice) and corrected in the URL
    (:func:`_correct_link`); a kept value no longer ``valid`` (a range that shrank) is
    reset to ``default``. When Streamlit still seeded the widget with another value than
    the checked one (it reads ``12.5`` as 12 and takes the last of a repeated key, where
    the page refuses both), the run starts again at once with the checked value put into
    ``st.session_state`` (:func:`dashboard.url_state.rerun_to_fix`), which then wins.
    """
    wanted = take_fix(key)
    checked = False
    if wanted is not NOT_GIVEN:
        st.session_state[key] = wanted
    elif (raw := given_raw(key)) is not NOT_GIVEN:
        wanted = default if raw is None else check([raw])
        st.session_state[key] = wanted
    elif key not in st.session_state:
        raws = st.query_params.get_all(key)
        if raws:
            wanted = check(raws)
            checked = True
            _correct_link(key, raws, wanted, default)
    elif not valid(st.session_state[key]):
        st.session_state[key] = default
    value = draw()
    if checked and value != wanted:
        rerun_to_fix(key, wanted)
    record_bound(key, _url_text(value, default))
    return value


def _snapped(key: str, raw: str, value: Any, snap: Callable[[Any], Any], step: float) -> Any:
    """A link's number between a slider's steps becomes the nearest step (``snap``), with a
    notice naming both (the slider could not show it)."""
    snapped = snap(value)
    if not math.isclose(snapped, value, rel_tol=1e-9, abs_tol=1e-12):
        add_notice(key, raw, "snapped", value=snapped, step=step)
    return snapped


def _number_check(
    key: str, default: Any, parse: Parser, snap: Callable[[Any], Any] | None, step: float
) -> Callable[[list[str]], Any]:
    """The check of a link's number for ``key``: parsed by ``parse`` (a refusal gives the
    default and its notice), then snapped to the slider's steps when ``snap`` is given."""

    def check(raws: list[str]) -> Any:
        value = check_raws(key, raws, None, parse)
        if value is None:
            return default
        return value if snap is None else _snapped(key, raws[0], value, snap, step)

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
    key = _key(page, name)
    default = snap_to_step(min(max(default, low), high), low, high, step)
    if low == high:
        touch(key)
        _where(where).caption(f"{label}: {low}")
        return low
    snap = (lambda v: snap_to_step(v, low, high, step)) if step > 1 else None
    return _draw_bound(
        key,
        default,
        _number_check(key, default, lambda raw: parse_int(raw, low, high), snap, step),
        lambda: _where(where).slider(
            label, low, high, default, step, key=key, help=help, disabled=disabled, bind=BIND
        ),
        lambda v: (
            isinstance(v, int)
            and not isinstance(v, bool)
            and low <= v <= high
            and (v - low) % step == 0
        ),
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
    key = _key(page, name)
    low, high = float(low), float(high)
    default = min(max(float(default), low), high)
    snap = None
    if widget == "slider":
        snap = lambda v: snap_float_to_step(v, low, high, float(step))  # noqa: E731
    draw = getattr(_where(where), FLOAT_WIDGETS[widget])
    return _draw_bound(
        key,
        default,
        _number_check(key, default, lambda raw: parse_float(raw, low, high), snap, step),
        lambda: draw(
            label,
            low,
            high,
            default,
            float(step),
            key=key,
            help=help,
            disabled=disabled,
            format=fmt,
            bind=BIND,
        ),
        lambda v: isinstance(v, float) and low <= v <= high,
    )


def select(
    page: str,
    name: str,
    label: str,
    options: Sequence[Any],
    default: Any,
    *,
    format_func: Callable[[Any], str] = str,
    help: str | None = None,
    where: DeltaGenerator | None = None,
) -> Any:
    """A selectbox whose value lives in the URL under ``"<page>.<name>"``.

    Args:
        page, name: form the key ``"<page>.<name>"``.
        label: the translated label.
        options: plain values (str/int/float); the URL holds their text form.
        default: value when the URL has none or a bad one (first option if not in options).
        format_func: option -> translated display text.
        help, where: as :func:`slider_int`.

    Returns:
        The selected option.

    Raises:
        ValueError: when ``options`` is empty.
    """
    return _choice_widget(
        "selectbox",
        page,
        name,
        label,
        options,
        default,
        format_func=format_func,
        help=help,
        where=where,
    )


def radio(
    page: str,
    name: str,
    label: str,
    options: Sequence[Any],
    default: Any,
    *,
    format_func: Callable[[Any], str] = str,
    help: str | None = None,
    where: DeltaGenerator | None = None,
    horizontal: bool = False,
) -> Any:
    """Like :func:`select`, drawn as radio buttons (for two to four options).

    Args:
        horizontal: lay the options out in a row.

    Raises:
        ValueError: when ``options`` is empty.
    """
    return _choice_widget(
        "radio",
        page,
        name,
        label,
        options,
        default,
        format_func=format_func,
        help=help,
        where=where,
        horizontal=horizontal,
    )


def _choice_widget(
    kind: str,
    page: str,
    name: str,
    label: str,
    options: Sequence[Any],
    default: Any,
    *,
    format_func: Callable[[Any], str],
    help: str | None,
    where: DeltaGenerator | None,
    horizontal: bool | None = None,
) -> Any:
    """A select box or radio (``kind``) whose value lives in the URL: see :func:`select`."""
    options = list(options)
    if not options:
        raise ValueError(f"control {page}.{name} has no options")
    key = _key(page, name)
    if default not in options:
        default = options[0]
    _prepare(key, default, lambda raw: parse_choice(raw, options), lambda v: v in options)
    widget = getattr(_where(where), kind)
    extra = {} if horizontal is None else {"horizontal": horizontal}
    shown = {serialise(o): str(format_func(o)) for o in options}  # labels fixed in this run
    value = widget(
        label, options, key=key, format_func=lambda o: shown[serialise(o)], help=help, **extra
    )
    write(key, value)
    return value


def multiselect(
    page: str,
    name: str,
    label: str,
    options: Sequence[Any],
    default: Sequence[Any],
    max_selections: int,
    *,
    format_func: Callable[[Any], str] = str,
    help: str | None = None,
    where: DeltaGenerator | None = None,
) -> list[Any]:
    """A multiselect whose value lives in the URL as ``"<page>.<name>=a,b"``.

    An unknown or repeated choice, or more than ``max_selections``, falls back to the
    default with a notice (Streamlit itself would raise on too many selections).

    Returns:
        The selected options, in selection order.

    Raises:
        ValueError: when ``options`` is empty.
    """
    options = list(options)
    if not options:
        raise ValueError(f"control {page}.{name} has no options")
    key = _key(page, name)
    default = [o for o in default if o in options][:max_selections]

    def valid(value: Any) -> bool:
        return (
            isinstance(value, list)
            and len(value) <= max_selections
            and all(v in options for v in value)
        )

    _prepare(key, default, lambda raw: parse_choice_list(raw, options, max_selections), valid)
    shown = {serialise(o): str(format_func(o)) for o in options}
    value = _where(where).multiselect(
        label,
        options,
        key=key,
        format_func=lambda o: shown[serialise(o)],
        max_selections=max_selections,
        help=help,
        placeholder=t("common.placeholder_choose_many"),
    )
    write(key, list(value))
    return list(value)


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
    key = _key(page, name)
    default = bool(default)
    return _draw_bound(
        key,
        default,
        lambda raws: check_raws(key, raws, default, parse_bool),
        lambda: _where(where).checkbox(
            label, default, key=key, help=help, disabled=disabled, bind=BIND
        ),
        lambda v: isinstance(v, bool),
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
    key = _key(page, name)
    default = cut_text(default, max_len)

    def check(raws: list[str]) -> str:
        full = check_raws(key, raws, default, parse_text, max_raw=None)
        if len(full) > max_len:  # (the corrected link's run keeps the length for the note)
            st.session_state[_CUT + key] = len(full)
        return cut_text(full, max_len)

    box = _where(where)
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
            bind=BIND,
        ),
        lambda v: isinstance(v, str),
    )
    full_len = st.session_state.get(_CUT + key, 0)
    if full_len and len(value) == max_len:
        box.info(t("common.text_cut", n=max_len, total=full_len))
    return value
