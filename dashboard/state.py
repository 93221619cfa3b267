"""URL state: every control lives in ``st.query_params`` so that a link reproduces the view.

The pattern, for a control ``"<page>.<name>"`` (the query key and the widget key are equal):

1. **Read**: on the first run of the widget, its value comes from the URL, else from this
   session's memory of it (query parameters are dropped when the user switches pages), else
   the default. A missing value gives the default silently. A malformed, out-of-range,
   unknown, over-long or repeated value gives the default *and* a notice, shown once on the
   page by :func:`render_notices` (the bad value is shown as literal text by
   :func:`dashboard.literal.literal`: never rendered as markdown, never a link).
2. **Widget**: the widget is created with that initial value through ``st.session_state``.
3. **Write back**: its current value is written to ``st.query_params`` on every run; at the
   end of the run :func:`finish_run` drops query keys that this run did not use, so the URL
   holds exactly the view.

One call does all three: :func:`slider_int`, :func:`float_input` (a slider or a number
box), :func:`select`, :func:`radio`, :func:`multiselect`, :func:`checkbox`, :func:`text`.
The ``url_*`` readers (:func:`url_int`, :func:`url_float`, :func:`url_choice`,
:func:`url_bool`, :func:`url_text`, :func:`url_int_list`) do steps 1 and 3 for values that
have no widget.

The parsers of a URL value's text (``parse_int``, ``parse_choice``, …) are pure functions in
:mod:`dashboard.url_values`, re-exported here.

Pages call the helpers with their page name, e.g.
``seq_len = state.slider_int("scaling", "seq_len", t("common.ctl_seq_len"), 4, 512, 64)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dashboard.i18n import t
from dashboard.literal import literal
from dashboard.url_values import (
    MAX_RAW_LEN,
    parse_bool,
    parse_choice,
    parse_choice_list,
    parse_float,
    parse_int,
    parse_int_list,
    parse_text,
    serialise,
)

_NOTICES = "_state.notices"
_TOUCHED = "_state.touched"
_MEMORY = "_state.memory"

Parser = Callable[[str], Any]
FLOAT_WIDGETS = {"slider": "slider", "number": "number_input"}
"""The widgets :func:`float_input` draws, by name: the Streamlit method of each."""


def _session_list(name: str) -> list:
    if name not in st.session_state:
        st.session_state[name] = []
    return st.session_state[name]


def _memory() -> dict[str, Any]:
    if _MEMORY not in st.session_state:
        st.session_state[_MEMORY] = {}
    return st.session_state[_MEMORY]


def begin_run() -> None:
    """Reset this run's notices and the set of URL keys in use (app.py calls it first)."""
    st.session_state[_NOTICES] = []
    st.session_state[_TOUCHED] = []


def add_notice(key: str, raw: str) -> None:
    """Record that the URL value ``raw`` for ``key`` was rejected (shown by render_notices)."""
    notices = _session_list(_NOTICES)
    entry = (key, raw)
    if entry not in notices:
        notices.append(entry)


def notices() -> list[tuple[str, str]]:
    """Return this run's rejected ``(key, raw value)`` pairs."""
    return list(st.session_state.get(_NOTICES, []))


def render_notices(where: DeltaGenerator | None = None) -> None:
    """Show one warning listing every rejected URL value of this run (as literal text)."""
    found = notices()
    if not found:
        return
    lines = [t("common.url_notice_item", key=literal(k), value=literal(v)) for k, v in found]
    body = t("common.url_notice_title") + "\n\n" + "\n".join(f"- {line}" for line in lines)
    (where or st).warning(body)


def _touch(key: str) -> None:
    touched = _session_list(_TOUCHED)
    if key not in touched:
        touched.append(key)


def finish_run() -> None:
    """Drop query parameters that no control used in this run, so the URL is exactly the view."""
    touched = set(st.session_state.get(_TOUCHED, []))
    for key in list(st.query_params.keys()):
        if key not in touched:
            del st.query_params[key]


def write(key: str, value: Any) -> None:
    """Write ``value`` to the URL under ``key`` and remember it for this session."""
    _touch(key)
    text = serialise(value)
    if st.query_params.get(key) != text or len(st.query_params.get_all(key)) != 1:
        st.query_params[key] = text
    _memory()[key] = value


def read(key: str, default: Any, parse: Parser) -> Any:
    """Return the validated URL value of ``key`` (default on absence or rejection).

    Args:
        key: the query key, ``"<page>.<name>"``.
        default: value used when the key is missing or rejected.
        parse: turns the raw string into a value; raises ``ValueError`` to reject it.

    Returns:
        The parsed value, this session's remembered value, or ``default``.
    """
    _touch(key)
    raws = st.query_params.get_all(key)
    if not raws:
        return _memory().get(key, default)
    if len(raws) > 1:
        add_notice(key, " & ".join(raws))
        return default
    raw = raws[0]
    try:
        if len(raw) > MAX_RAW_LEN:
            raise ValueError(f"value of {key} is longer than {MAX_RAW_LEN} characters")
        return parse(raw)
    except ValueError:
        add_notice(key, raw)
        return default


def url_int(key: str, default: int, low: int, high: int) -> int:
    """Read a whole number in [low, high] from the URL and write it back; see :func:`read`."""
    value = read(key, default, lambda raw: parse_int(raw, low, high))
    write(key, value)
    return value


def url_float(key: str, default: float, low: float, high: float) -> float:
    """Read a number in [low, high] from the URL and write it back; see :func:`read`."""
    value = read(key, default, lambda raw: parse_float(raw, low, high))
    write(key, value)
    return value


def url_choice(key: str, default: Any, options: Sequence[Any]) -> Any:
    """Read one of ``options`` from the URL and write it back; see :func:`read`."""
    value = read(key, default, lambda raw: parse_choice(raw, options))
    if value not in options:
        value = default
    write(key, value)
    return value


def url_bool(key: str, default: bool) -> bool:
    """Read a boolean from the URL and write it back; see :func:`read`."""
    value = read(key, default, parse_bool)
    write(key, value)
    return value


def url_text(key: str, default: str, max_len: int) -> str:
    """Read plain text of at most ``max_len`` characters from the URL and write it back."""
    value = read(key, default, lambda raw: parse_text(raw, max_len))
    write(key, value)
    return value


def url_int_list(key: str, default: list[int], low: int, high: int, max_items: int) -> list[int]:
    """Read comma-separated whole numbers in [low, high] from the URL and write them back."""
    value = read(key, default, lambda raw: parse_int_list(raw, low, high, max_items))
    write(key, value)
    return list(value)


def _prepare(key: str, default: Any, parse: Parser, valid: Callable[[Any], bool]) -> None:
    """Seed the widget state of ``key`` from the URL once; repair it when no longer valid."""
    if key not in st.session_state:
        value = read(key, default, parse)
        st.session_state[key] = value if valid(value) else default
    else:
        _touch(key)
        if not valid(st.session_state[key]):
            st.session_state[key] = default


def _key(page: str, name: str) -> str:
    """Widget and query key: ``"<page>.<name>"``, or ``name`` alone for app-wide controls."""
    return f"{page}.{name}" if page else name


def _where(where: DeltaGenerator | None) -> DeltaGenerator:
    return st.sidebar if where is None else where


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
    default = min(max(default, low), high)
    _prepare(
        key,
        default,
        lambda raw: parse_int(raw, low, high),
        lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high,
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

    Script-like or over-long text (from the URL or typed) falls back to ``default`` with a
    notice; see :func:`parse_text`.

    Returns:
        The current, validated text.
    """
    key = _key(page, name)

    def valid(v: Any) -> bool:
        if not isinstance(v, str):
            return False
        try:
            parse_text(v, max_len)
        except ValueError:
            return False
        return True

    if key in st.session_state and not valid(st.session_state[key]):
        add_notice(key, str(st.session_state[key]))
    _prepare(key, default, lambda raw: parse_text(raw, max_len), valid)
    value = _where(where).text_input(label, key=key, help=help, max_chars=max_len)
    write(key, value)
    return value
