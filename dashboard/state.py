"""The view's state in the URL, so that a link reproduces the view: the one module pages use.
Every control's widget key and query key is ``"<page>.<name>"``, e.g.
``seq_len = state.slider_int("scaling", "seq_len", t("common.ctl_seq_len"), 4, 512, 64)``.

Sliders, number boxes, checkboxes and text boxes are bound by Streamlit
(:mod:`dashboard.bound`). :func:`select`, :func:`radio` and :func:`multiselect` stay ours:
Streamlit's binding writes an option's *displayed* text (what ``format_func`` returns) to the
URL, and our options show translated labels, so a bound choice would put "缩放点积注意力" into
a link that would not open in English. Ours write the option's stable name
(:func:`dashboard.url_state.write`). The notices, our own values, a room's values and the
view's link are :mod:`dashboard.url_state`; the parsers, :mod:`dashboard.url_values`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dashboard import bound, url_state, url_values
from dashboard.bound import container, moved_caption, widget_key
from dashboard.i18n import t
from dashboard.url_state import NOT_GIVEN, Parser, add_notice, check_raws, given_raw, touch

# What pages use of the modules behind this one.
slider_int, float_input, controls_box = bound.slider_int, bound.float_input, bound.controls_box
checkbox, text = bound.checkbox, bound.text
begin_run, finish_run = url_state.begin_run, url_state.finish_run
carry_notices, render_notices = url_state.carry_notices, url_state.render_notices
read, write, forget = url_state.read, url_state.write, url_state.forget
view_query, give_values = url_state.view_query, url_state.give_values
lock_controls, locked = url_state.lock_controls, url_state.locked
parse_int, parse_float = url_values.parse_int, url_values.parse_float
parse_bool, parse_text = url_values.parse_bool, url_values.parse_text
parse_choice, parse_int_list = url_values.parse_choice, url_values.parse_int_list
Why = Callable[[str], str | None] | None  # why a link's value is not offered, or None


def _prepare(
    key: str, default: Any, parse: Parser, nearest: Callable[[Any], Any], say_moved: Callable
) -> None:
    """Put our own widget's value of ``key`` into ``st.session_state`` before it is drawn: a
    room's value, else on its first draw the link's (or this session's memory of it), else
    the kept one; ``nearest`` moves a value the widget no longer offers (its options depend
    on another control) to one it does, said by ``say_moved`` when it was the kept one."""
    if (raw := given_raw(key)) is not NOT_GIVEN:
        value = default if raw is None else check_raws(key, [raw], default, parse)
        st.session_state[key] = nearest(value)
    elif key not in st.session_state:
        st.session_state[key] = nearest(url_state.read(key, default, parse))
    elif (moved := nearest(kept := st.session_state[key])) != kept:
        st.session_state[key] = moved
        say_moved(", ".join(map(str, moved)) if isinstance(moved, list) else moved)
    touch(key)


def _choice_parser(key: str, options: list[Any], nearest: Callable, left_out: Why) -> Parser:
    """A link's (or a room's) choice for ``key``: one of ``options`` (a value ``left_out``
    explains is refused with that reason), or between numeric ones the nearest, with a notice."""
    numeric = all(map(url_values.is_number, options))

    def parse(raw: str) -> Any:
        try:
            return url_values.parse_choice(raw, options)
        except ValueError:
            if left_out is not None and (why := left_out(raw)) is not None:
                raise url_values.RefusedValue(f"left out: {raw!r}", "left_out", why=why) from None
            if not numeric:
                raise
            moved = nearest(url_values.parse_float(raw, -math.inf, math.inf))
            add_notice(key, raw, "nearest_option", value=moved)
            return moved

    return parse


def _shown(options: list[Any], format_func: Callable[[Any], str]) -> Callable[[Any], str]:
    """The label of each option, fixed for this run (by the option's URL text)."""
    labels = {url_values.serialise(o): str(format_func(o)) for o in options}
    return lambda option: labels[url_values.serialise(option)]


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
    kind: str = "selectbox",
    left_out: Why = None,
    **extra: Any,
) -> Any:
    """A select box (or another single choice ``kind``: ``"radio"``) whose value lives in the
    URL under ``"<page>.<name>"`` as the text of a plain option (str/int/float), shown as
    ``format_func(option)``; ``default`` (else the first option) stands for a missing or bad
    one, and ``left_out(raw)`` why a value is not offered (for its notice); ``extra`` goes to
    the widget. Returns the option; ``ValueError`` for no options."""
    options = list(options)
    if not options:
        raise ValueError(f"control {page}.{name} has no options")
    key, box = widget_key(page, name), container(where)
    default = default if default in options else options[0]
    nearest = url_values.nearest_option(options, default)
    parse = _choice_parser(key, options, nearest, left_out)
    _prepare(key, default, parse, nearest, moved_caption(box, label))
    value = getattr(box, kind)(
        label, options, key=key, format_func=_shown(options, format_func), help=help,
        disabled=locked(key), **extra,
    )  # fmt: skip
    write(key, value)
    return value


def radio(*args: Any, horizontal: bool = False, **kwargs: Any) -> Any:
    """Like :func:`select`, drawn as radio buttons (for two to four options; ``horizontal``:
    in a row)."""
    return select(*args, kind="radio", horizontal=horizontal, **kwargs)


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
    """A multiselect whose value lives in the URL as ``"<page>.<name>=a,b"``: an unknown or
    repeated choice, or more than ``max_selections``, gives the default with a notice. Returns
    the options in selection order; ``ValueError`` for no options."""
    options = list(options)
    if not options:
        raise ValueError(f"control {page}.{name} has no options")
    key, box = widget_key(page, name), container(where)
    default = [o for o in default if o in options][:max_selections]

    def nearest(value: Any) -> list[Any]:
        """The offered ones of a kept choice (options that depend on another control)."""
        return (
            [v for v in value if v in options][:max_selections]
            if isinstance(value, list)
            else default
        )

    parse = lambda raw: url_values.parse_choice_list(raw, options, max_selections)  # noqa: E731
    _prepare(key, default, parse, nearest, moved_caption(box, label))
    value = list(
        box.multiselect(
            label, options, key=key, format_func=_shown(options, format_func), help=help,
            max_selections=max_selections, disabled=locked(key),
            placeholder=t("common.placeholder_choose_many"),
        )
    )  # fmt: skip
    write(key, value)
    return value
