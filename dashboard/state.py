"""URL state: every control lives in ``st.query_params`` so that a link reproduces the view.

The pattern, for a control ``"<page>.<name>"`` (the query key and the widget key are equal):

1. **Read**: on the first run of the widget, its value comes from the URL, else from this
   session's memory of it (query parameters are dropped when the user switches pages), else
   the default. A missing value gives the default silently. A malformed, out-of-range,
   unknown, over-long or repeated value gives the default *and* a notice saying why, shown
   once on the page by :func:`render_notices` (the bad value is shown as literal text by
   :func:`dashboard.literal.literal`: never rendered as markdown, never a link). A query key
   that no control of the page used and that this session never wrote (a typo such as
   ``playground.seqlen``) is named in the same notice, with the closest key the page does
   use; the app-level keys of :data:`APP_KEYS` are always known.
2. **Widget**: the widget is created with that initial value through ``st.session_state``.
3. **Write back**: its current value is written to ``st.query_params`` on every run; at the
   end of the run :func:`finish_run` drops query keys that this run did not use, so the URL
   holds exactly the view.

One call does all three: :func:`slider_int`, :func:`float_input` (a slider or a number
box), :func:`select`, :func:`radio`, :func:`multiselect`, :func:`checkbox`, :func:`text`
(text is cut to its limit with a note, never thrown away; markup characters are text).
Steps 1 and 3, the notices and the ``url_*`` readers of values that have no widget live in
:mod:`dashboard.url_state`; the parsers of a URL value's text (``parse_int``,
``parse_choice``, …) are pure functions in :mod:`dashboard.url_values`. Both are re-exported
here, so a page needs ``state`` alone. A linked whole number between a slider's steps
becomes the nearest step, with a notice.

Pages call the helpers with their page name, e.g.
``seq_len = state.slider_int("scaling", "seq_len", t("common.ctl_seq_len"), 4, 512, 64)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dashboard.i18n import t
from dashboard.url_state import (
    APP_KEYS,
    Parser,
    add_notice,
    begin_run,
    finish_run,
    note_unknown_keys,
    notices,
    read,
    render_notices,
    touch,
    unknown_keys,
    url_bool,
    url_choice,
    url_float,
    url_int,
    url_int_list,
    url_text,
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
    "url_bool",
    "url_choice",
    "url_float",
    "url_int",
    "url_int_list",
    "url_text",
    "write",
]

_CUT = "_state.cut."
FLOAT_WIDGETS = {"slider": "slider", "number": "number_input"}
"""The widgets :func:`float_input` draws, by name: the Streamlit method of each."""


def _prepare(key: str, default: Any, parse: Parser, valid: Callable[[Any], bool]) -> None:
    """Seed the widget state of ``key`` from the URL once; repair it when no longer valid."""
    if key not in st.session_state:
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


def _snap_link_value(
    key: str, snap: Callable[[Any], Any], parse: Callable[[str], Any], step: float
) -> None:
    """A link's number between a slider's steps becomes the nearest step (``snap``), with a
    notice naming both (the slider could not show it); a value ``parse`` refuses is left
    to the usual read and its notice."""
    raws = st.query_params.get_all(key)
    if len(raws) != 1:
        return
    try:
        value = parse(raws[0])
    except ValueError:
        return
    snapped = snap(value)
    if not math.isclose(snapped, value, rel_tol=1e-9, abs_tol=1e-12):
        add_notice(key, raws[0], "snapped", value=snapped, step=step)
        st.session_state[key] = snapped
        touch(key)


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
    """An integer slider whose value lives in the URL under ``"<page>.<name>"``.

    Args:
        page, name: form the widget key and query key ``"<page>.<name>"``.
        label: the translated label.
        low, high, step: slider range; a URL value outside [low, high] is rejected.
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
    if key not in st.session_state and step > 1:
        _snap_link_value(
            key,
            lambda v: snap_to_step(v, low, high, step),
            lambda raw: parse_int(raw, low, high),
            step,
        )
    _prepare(
        key,
        default,
        lambda raw: parse_int(raw, low, high),
        lambda v: (
            isinstance(v, int)
            and not isinstance(v, bool)
            and low <= v <= high
            and (v - low) % step == 0
        ),
    )
    if low == high:
        value = low
        _where(where).caption(f"{label}: {low}")
    else:
        value = _where(where).slider(
            label, low, high, step=step, key=key, help=help, disabled=disabled
        )
    write(key, value)
    return value


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
    """A float slider or number box whose value lives in the URL under ``"<page>.<name>"``.

    Args:
        page, name, label, low, high, default, step, help, where, disabled: as
            :func:`slider_int`.
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
    if widget == "slider" and key not in st.session_state:
        _snap_link_value(
            key,
            lambda v: snap_float_to_step(v, low, high, float(step)),
            lambda raw: parse_float(raw, low, high),
            step,
        )
    _prepare(
        key,
        default,
        lambda raw: parse_float(raw, low, high),
        lambda v: isinstance(v, float) and low <= v <= high,
    )
    draw = getattr(_where(where), FLOAT_WIDGETS[widget])
    value = draw(
        label, low, high, step=float(step), key=key, help=help, disabled=disabled, format=fmt
    )
    write(key, value)
    return value


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
    """A checkbox whose value lives in the URL under ``"<page>.<name>"`` as true/false.

    Returns:
        The current value.
    """
    key = _key(page, name)
    _prepare(key, bool(default), parse_bool, lambda v: isinstance(v, bool))
    value = _where(where).checkbox(label, key=key, help=help, disabled=disabled)
    write(key, value)
    return value


def _keep_text(key: str, max_len: int) -> None:
    """Make the text under ``key`` fit: control characters become spaces, a longer text is
    cut to its first ``max_len`` characters and its full length is remembered for the note
    (the widget's ``on_change`` callback, and the first read of a link's text)."""
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
    """A text input whose value lives in the URL under ``"<page>.<name>"``.

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
    if key not in st.session_state:
        st.session_state[key] = read(key, default, parse_text, max_raw=None)
        _keep_text(key, max_len)
    else:
        touch(key)
        if not isinstance(st.session_state[key], str):
            st.session_state[key] = default
    box = _where(where)
    value = box.text_input(label, key=key, help=help, on_change=_keep_text, args=(key, max_len))
    full_len = st.session_state.get(_CUT + key, 0)
    if full_len and len(value) == max_len:
        box.info(t("common.text_cut", n=max_len, total=full_len))
    write(key, value)
    return value
