"""The view's state in the URL: every control lives in the query so that a link reproduces
the view. Pages call the helpers with their page name, e.g.
``seq_len = state.slider_int("scaling", "seq_len", t("common.ctl_seq_len"), 4, 512, 64)``;
the widget key and the query key are both ``"<page>.<name>"``.

**Bound by Streamlit.** :func:`slider_int`, :func:`float_input` (a slider or a number box),
:func:`checkbox` and :func:`text` are drawn with ``bind="query-params"``: Streamlit seeds
them from the link, writes each change to the URL, drops a value at its default from it and
keeps the value across a page switch. What stays ours around them (the refusal notice, the
nearest step, the corrected link, a room's values) is :mod:`dashboard.bound`.

**Ours.** :func:`select`, :func:`radio` and :func:`multiselect` stay on our own code:
Streamlit's binding writes an option's *displayed* text (what ``format_func`` returns) to the
URL and matches the link against it, and our options are shown as translated labels
(English/中文), so a bound choice would put "缩放点积注意力" into a link and a Chinese link
would not open in English. Ours read the option's stable name from the URL
(:func:`dashboard.url_state.read`) and write it back on every run
(:func:`dashboard.url_state.write`).

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

from dashboard.bound import (
    FLOAT_WIDGETS,
    checkbox,
    container,
    controls_box,
    float_input,
    moved_caption,
    slider_int,
    text,
    widget_key,
)
from dashboard.i18n import t
from dashboard.url_state import (
    APP_KEYS,
    NOT_GIVEN,
    Parser,
    add_notice,
    begin_run,
    carry_notices,
    check_raws,
    finish_run,
    forget,
    give_values,
    given_raw,
    lock_controls,
    locked,
    note_unknown_keys,
    notices,
    read,
    render_notices,
    touch,
    unknown_keys,
    view_query,
    write,
)
from dashboard.url_values import (
    parse_bool,
    parse_choice,
    parse_choice_list,
    parse_float,
    parse_int,
    parse_int_list,
    parse_text,
    serialise,
)

__all__ = [
    "APP_KEYS",
    "FLOAT_WIDGETS",
    "add_notice",
    "begin_run",
    "carry_notices",
    "checkbox",
    "controls_box",
    "finish_run",
    "forget",
    "float_input",
    "give_values",
    "lock_controls",
    "locked",
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


def _prepare(
    key: str, default: Any, parse: Parser, nearest: Callable[[Any], Any], label: str, where
) -> None:
    """Seed our own widget's state of ``key`` from a room's value or the URL once; a kept
    value the widget no longer offers (its options depend on another control) becomes
    ``nearest(value)``, with a quiet caption (:func:`dashboard.bound.moved_caption`)."""
    raw = given_raw(key)
    if raw is not NOT_GIVEN:
        value = default if raw is None else check_raws(key, [raw], default, parse)
        st.session_state[key] = nearest(value)
        touch(key)
    elif key not in st.session_state:
        st.session_state[key] = nearest(read(key, default, parse))
    else:
        touch(key)
        kept = st.session_state[key]
        moved = nearest(kept)
        if moved != kept:
            st.session_state[key] = moved
            moved_caption(container(where), label)(
                ", ".join(map(str, moved)) if isinstance(moved, list) else moved
            )


def _choice_parser(key: str, options: list[Any], nearest: Callable[[Any], Any]) -> Parser:
    """A link's (or a room's) choice for ``key``: one of ``options``, or, for numeric
    options, a number between them taken as the nearest option with a notice naming it."""
    numeric = all(isinstance(o, int | float) and not isinstance(o, bool) for o in options)

    def parse(raw: str) -> Any:
        try:
            return parse_choice(raw, options)
        except ValueError:
            if not numeric:
                raise
            number = parse_float(raw, -math.inf, math.inf)  # text is refused as before
            moved = nearest(number)
            add_notice(key, raw, "nearest_option", value=moved)
            return moved

    return parse


def nearest_option(options: Sequence[Any], default: Any) -> Callable[[Any], Any]:
    """The option nearest a value: itself when offered, else the nearest number of numeric
    options (a choice whose options depend on another control), else ``default``."""
    numeric = all(isinstance(o, int | float) and not isinstance(o, bool) for o in options)

    def nearest(value: Any) -> Any:
        if value in options:
            return value
        if numeric and isinstance(value, int | float) and not isinstance(value, bool):
            return min(options, key=lambda o: (abs(o - value), o))
        return default

    return nearest


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
    key = widget_key(page, name)
    if default not in options:
        default = options[0]
    nearest = nearest_option(options, default)
    _prepare(key, default, _choice_parser(key, options, nearest), nearest, label, where)
    widget = getattr(container(where), kind)
    extra = {} if horizontal is None else {"horizontal": horizontal}
    shown = {serialise(o): str(format_func(o)) for o in options}  # labels fixed in this run
    value = widget(
        label,
        options,
        key=key,
        format_func=lambda o: shown[serialise(o)],
        help=help,
        disabled=locked(key),
        **extra,
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
    key = widget_key(page, name)
    default = [o for o in default if o in options][:max_selections]

    def nearest(value: Any) -> list[Any]:
        """The offered ones of a kept choice (options that depend on another control)."""
        if not isinstance(value, list):
            return default
        return [v for v in value if v in options][:max_selections]

    parse = lambda raw: parse_choice_list(raw, options, max_selections)  # noqa: E731
    _prepare(key, default, parse, nearest, label, where)
    shown = {serialise(o): str(format_func(o)) for o in options}
    value = container(where).multiselect(
        label,
        options,
        key=key,
        format_func=lambda o: shown[serialise(o)],
        max_selections=max_selections,
        help=help,
        disabled=locked(key),
        placeholder=t("common.placeholder_choose_many"),
    )
    write(key, list(value))
    return list(value)
