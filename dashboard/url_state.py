"""The link's values: every setting of a view read from ``st.query_params`` with checks, and
written back, so that a link reproduces the view (the widgets that use it are
:mod:`dashboard.state`).

* :func:`read` returns a query key's validated value, else this session's memory of it
  (query parameters are dropped when the user switches pages), else the default; a
  malformed, out-of-range, unknown, over-long or repeated value gives the default *and* a
  notice saying why (:func:`add_notice`), shown once by :func:`render_notices` with every
  unknown query key (a typo, named with the closest key the page uses);
* :func:`write` puts a value in the URL and this session's memory; :func:`finish_run` drops
  the query keys this run did not use (:func:`touch`), so the URL holds exactly the view;
* the ``url_*`` readers (:func:`url_int`, :func:`url_float`, :func:`url_choice`,
  :func:`url_bool`, :func:`url_text`, :func:`url_int_list`) read and write back a value that
  has no widget.

The parsers of a value's text are the pure functions of :mod:`dashboard.url_values`; the
notice's words are :mod:`dashboard.url_notices`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dashboard.url_notices import UNKNOWN_KEY, Notice, notices_markdown
from dashboard.url_values import (
    MAX_RAW_LEN,
    RefusedValue,
    cut_text,
    parse_bool,
    parse_choice,
    parse_float,
    parse_int,
    parse_int_list,
    parse_text,
    serialise,
    suggest_key,
)

_NOTICES = "_state.notices"
_TOUCHED = "_state.touched"
_MEMORY = "_state.memory"
APP_KEYS: frozenset[str] = frozenset({"lang", "device"})
"""Query keys of the app itself (the language, the device): never reported as unknown, even
on a run that does not draw them (the device box exists only with several devices)."""

Parser = Callable[[str], Any]
"""Turns a URL value's text into a value; raises ``ValueError`` to refuse it."""


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


def add_notice(key: str, raw: str, reason: str = "not_accepted", **detail: Any) -> None:
    """Record that the URL value ``raw`` for ``key`` was refused and why (shown by
    :func:`render_notices`).

    Args:
        key: the query key. raw: the value as given.
        reason: a code of :data:`dashboard.url_values.REASONS` or
            :data:`dashboard.url_notices.UNKNOWN_KEY`.
        detail: the values the reason's message names.
    """
    notices = _session_list(_NOTICES)
    entry = Notice(key, raw, reason, tuple(sorted(detail.items())))
    if entry not in notices:
        notices.append(entry)


def notices() -> list[Notice]:
    """Return this run's notices, in the order they were found."""
    return list(st.session_state.get(_NOTICES, []))


def unknown_keys() -> list[str]:
    """Query keys that no control of this run used, that this session never wrote and that
    are not :data:`APP_KEYS`: a typo or a key of another page (call it after the page ran)."""
    known = set(st.session_state.get(_TOUCHED, [])) | set(_memory()) | APP_KEYS
    return [key for key in st.query_params.keys() if key not in known]


def note_unknown_keys() -> None:
    """Add a notice for each of :func:`unknown_keys`, naming the closest key the page used."""
    known = [*st.session_state.get(_TOUCHED, []), *sorted(APP_KEYS)]
    for key in unknown_keys():
        raw = " & ".join(st.query_params.get_all(key))
        suggestion = suggest_key(key, known)
        extra = {} if suggestion is None else {"suggestion": suggestion}
        add_notice(key, raw, UNKNOWN_KEY, **extra)


def render_notices(where: DeltaGenerator | None = None) -> None:
    """Show one warning listing every refused URL value of this run with why, and every
    unknown query key (all as literal text). Call it after the page has drawn its controls."""
    note_unknown_keys()
    found = notices()
    if not found:
        return
    (where or st).warning(notices_markdown(found))


def touch(key: str) -> None:
    """Note that this run uses the query key ``key`` (kept by :func:`finish_run`)."""
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
    touch(key)
    text = serialise(value)
    if st.query_params.get(key) != text or len(st.query_params.get_all(key)) != 1:
        st.query_params[key] = text
    _memory()[key] = value


def read(key: str, default: Any, parse: Parser, *, max_raw: int | None = MAX_RAW_LEN) -> Any:
    """Return the validated URL value of ``key`` (default on absence or rejection).

    Args:
        key: the query key, ``"<page>.<name>"``.
        default: value used when the key is missing or rejected.
        parse: turns the raw string into a value; raises ``ValueError`` to reject it (a
            :class:`~dashboard.url_values.RefusedValue` says why in the notice).
        max_raw: a longer raw value is refused before parsing (``None``: no limit, for text
            that is cut rather than refused).

    Returns:
        The parsed value, this session's remembered value, or ``default``.
    """
    touch(key)
    raws = st.query_params.get_all(key)
    if not raws:
        return _memory().get(key, default)
    if len(raws) > 1:
        add_notice(key, " & ".join(raws), "repeated_key")
        return default
    raw = raws[0]
    try:
        if max_raw is not None and len(raw) > max_raw:
            message = f"value of {key} is longer than {max_raw} characters"
            raise RefusedValue(message, "too_long", max=max_raw)
        return parse(raw)
    except RefusedValue as err:
        add_notice(key, raw, err.reason, **err.detail)
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
    """Read text from the URL, cut to its first ``max_len`` characters, and write it back."""
    value = cut_text(read(key, default, parse_text, max_raw=None), max_len)
    write(key, value)
    return value


def url_int_list(key: str, default: list[int], low: int, high: int, max_items: int) -> list[int]:
    """Read comma-separated whole numbers in [low, high] from the URL and write them back."""
    value = read(key, default, lambda raw: parse_int_list(raw, low, high, max_items))
    write(key, value)
    return list(value)
