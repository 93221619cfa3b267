"""A run's bookkeeping of the URL (the widgets that use it are :mod:`dashboard.state`):
the one link notice (:func:`add_notice`, :func:`render_notices`; every key and value shown
as literal text), the values Streamlit does not bind (:func:`read`, :func:`write`: choices,
the lesson, the room's keys, in the URL and this session's memory, as a page switch drops the
query), a room's values for a follower (:func:`give_values`, :func:`lock_controls`), and the
link of this run's view (:func:`view_query`: the browser writes a bound widget's moves to its
address bar, and the server learns them only on the next page load).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator
from streamlit.errors import StreamlitAPIException

from dashboard.i18n import t
from dashboard.literal import literal
from dashboard.url_values import MAX_RAW_LEN, RefusedValue, serialise, suggest_key

_NOTICES = "_state.notices"
_CARRIED = "_state.carried"  # notices of a run cut short (a fix, a page switch)
_FIXES = "_state.fixes"  # {key: value} the next run puts into bound widgets
_FIXING = "_state.fixing"  # this run's share of them
_TOUCHED = "_state.touched"  # the query keys this run used
_MEMORY = "_state.memory"  # {key: value} this session wrote
_GIVEN = "_state.given"  # (page, {key: text}): a room's values for this run's widgets
_LOCKED = "_state.locked"  # the keys left free while this run's controls are locked
_BOUND = "_state.bound"  # {key: URL text, None at the default} of this run's bound widgets
_EVER_BOUND = "_state.ever_bound"  # every bound key this session drew
APP_KEYS: frozenset[str] = frozenset({"lang", "device", "present"})
"""Query keys of the app itself: never reported as unknown, even on a run that does not draw
them (the device box exists only with several devices)."""
GIVEN_APP_KEYS: frozenset[str] = frozenset({"lesson", "lesson.step"})
"""Keys of the app a room's view gives a follower as it gives a page's (the lesson's step)."""
UNKNOWN_KEY = "unknown_key"
"""The reason of a query key that no control used (not a code of ``REASONS``)."""
NOT_GIVEN = object()
"""What :func:`given_raw` and :func:`take_fix` return for a key without a value."""

Parser = Callable[[str], Any]
"""Turns a URL value's text into a value; raises ``ValueError`` to refuse it."""


@dataclass(frozen=True)
class Notice:
    """A part of the link not used: ``key``, ``raw`` text, ``reason`` (a code of
    :data:`~dashboard.url_values.REASONS`, or :data:`UNKNOWN_KEY`) and its ``detail``."""

    key: str
    raw: str
    reason: str
    detail: tuple[tuple[str, Any], ...] = ()


def notice_line(notice: Notice) -> str:
    """One notice as a line of markdown in the page's language: the key and value as literal
    text, then why (for an unknown key, the likely intended key when there is one)."""
    detail = dict(notice.detail)
    key, value = literal(notice.key), literal(notice.raw)
    if notice.reason != UNKNOWN_KEY:
        reason = t(f"common.url_reason_{notice.reason}", **detail)
        return t("common.url_notice_item", key=key, value=value, reason=reason)
    line = t("common.url_notice_unknown", key=key, value=value)
    if "suggestion" in detail:
        line += " " + t("common.url_notice_suggest", key=literal(detail["suggestion"]))
    return line


def begin_run() -> None:
    """Start a run's bookkeeping (app.py calls it first): the notices carried from a run cut
    short, the values to fix, no keys in use, no room values, unlocked."""
    ss = st.session_state
    ss[_NOTICES] = list(ss.pop(_CARRIED, []))
    ss[_FIXING] = ss.pop(_FIXES, {})
    ss[_TOUCHED], ss[_BOUND], ss[_GIVEN], ss[_LOCKED] = [], {}, None, None


def add_notice(key: str, raw: str, reason: str = "not_accepted", **detail: Any) -> None:
    """Record that the URL value ``raw`` for ``key`` was refused, with the ``reason`` code
    and the values its message names (shown by :func:`render_notices`)."""
    found = st.session_state.setdefault(_NOTICES, [])
    entry = Notice(key, raw, reason, tuple(sorted(detail.items())))
    if entry not in found:
        found.append(entry)


def carry_notices() -> None:
    """Show this run's notices in the next run (this one is cut short)."""
    st.session_state[_CARRIED] = list(st.session_state.get(_NOTICES, []))


def rerun_to_fix(key: str | None = None, value: Any = None) -> None:
    """Start the run again now (``st.rerun``), its notices carried; with a ``key``, the next
    run puts ``value`` into that bound widget before drawing it (:func:`take_fix`)."""
    if key is not None:
        st.session_state.setdefault(_FIXES, {})[key] = value
    carry_notices()
    st.rerun()


def take_fix(key: str) -> Any:
    """The value this run puts into the bound widget ``key`` (:func:`rerun_to_fix`), or
    :data:`NOT_GIVEN`."""
    return st.session_state.get(_FIXING, {}).pop(key, NOT_GIVEN)


def render_notices(where: DeltaGenerator | None = None) -> None:
    """Show one warning (call it after the page drew its controls): a line for every refused
    URL value of this run and every unknown query key, one that no control of this run used,
    this session never wrote or bound, and not of :data:`APP_KEYS`."""
    ss = st.session_state
    used = [*ss.get(_TOUCHED, []), *sorted(APP_KEYS)]
    known = {*used, *ss.get(_MEMORY, {}), *ss.get(_EVER_BOUND, ())}
    for key in [k for k in st.query_params.keys() if k not in known]:
        suggestion = suggest_key(key, used)
        extra = {} if suggestion is None else {"suggestion": suggestion}
        add_notice(key, " & ".join(st.query_params.get_all(key)), UNKNOWN_KEY, **extra)
    if found := ss.get(_NOTICES):
        lines = "\n".join(f"- {notice_line(n)}" for n in found)
        (where or st).warning(t("common.url_notice_title") + "\n\n" + lines)


def touch(key: str) -> None:
    """Note that this run uses the query key ``key`` (kept by :func:`finish_run`)."""
    touched = st.session_state.setdefault(_TOUCHED, [])
    if key not in touched:
        touched.append(key)


def finish_run() -> None:
    """Drop query parameters that no control used in this run, so the URL is exactly the
    view (Streamlit drops a bound one itself, when its widget is not drawn)."""
    touched = set(st.session_state.get(_TOUCHED, []))
    for key in [k for k in st.query_params.keys() if k not in touched]:
        try:
            del st.query_params[key]
        except StreamlitAPIException:  # bound to a widget: not ours to delete
            pass


def write(key: str, value: Any) -> None:
    """Write ``value`` to the URL under ``key`` and remember it for this session."""
    touch(key)
    text = serialise(value)
    if st.query_params.get_all(key) != [text]:
        st.query_params[key] = text
    st.session_state.setdefault(_MEMORY, {})[key] = value


def forget(key: str) -> None:
    """Take ``key`` out of the URL and this session's memory (a lesson the learner left)."""
    st.session_state.setdefault(_MEMORY, {}).pop(key, None)
    if key in st.query_params:
        del st.query_params[key]


def check_raws(
    key: str, raws: list[str], default: Any, parse: Parser, *, max_raw: int | None = MAX_RAW_LEN
) -> Any:
    """Return the value of the link's texts ``raws`` (at least one) for ``key``, or
    ``default`` with a notice saying why they are refused: a repeated key, a text longer than
    ``max_raw`` (``None``: no limit, for text that is cut instead), or a ``ValueError`` of
    ``parse`` (a :class:`~dashboard.url_values.RefusedValue` says why)."""
    if len(raws) > 1:
        add_notice(key, " & ".join(raws), "repeated_key")
        return default
    raw = raws[0]
    try:
        if max_raw is not None and len(raw) > max_raw:
            raise RefusedValue(f"{key} is over {max_raw} characters", "too_long", max=max_raw)
        return parse(raw)
    except RefusedValue as err:
        add_notice(key, raw, err.reason, **err.detail)
    except ValueError:
        add_notice(key, raw)
    return default


def read(key: str, default: Any, parse: Parser, *, max_raw: int | None = MAX_RAW_LEN) -> Any:
    """Return the value of ``key`` from a room (:func:`give_values`), else the URL (checked
    by :func:`check_raws`), else this session's memory, else ``default``."""
    touch(key)
    given = given_raw(key)
    if given is None:  # the presenter left it at its default
        return default
    raws = st.query_params.get_all(key) if given is NOT_GIVEN else [given]
    if not raws:
        return st.session_state.get(_MEMORY, {}).get(key, default)
    return check_raws(key, raws, default, parse, max_raw=max_raw)


def give_values(page: str, values: Mapping[str, str]) -> None:
    """What a room sets for a follower, before the page draws: this run's widgets of ``page``
    take ``values`` (checked as a link's are), the others of the page their default."""
    st.session_state[_GIVEN] = (page, dict(values))


def given_raw(key: str) -> Any:
    """The text a room gave ``key`` in this run: a string, ``None`` for a key of the given
    page left at its default, or :data:`NOT_GIVEN`."""
    given = st.session_state.get(_GIVEN)
    if given is None or not (key.startswith(f"{given[0]}.") or key in GIVEN_APP_KEYS):
        return NOT_GIVEN
    return given[1].get(key)


def lock_controls(free: frozenset[str]) -> None:
    """Draw this run's controls disabled, all but those under the keys ``free`` (a follower's
    own: the language, the presentation view). The next run starts unlocked."""
    st.session_state[_LOCKED] = frozenset(free)


def locked(key: str) -> bool:
    """Whether the control under ``key`` is drawn disabled this run (:func:`lock_controls`)."""
    free = st.session_state.get(_LOCKED)
    return free is not None and key not in free


def record_bound(key: str, text: str | None) -> None:
    """Note a bound widget's value as the URL shows it (``None`` at its default), for
    :func:`view_query`."""
    touch(key)
    st.session_state.setdefault(_BOUND, {})[key] = text
    st.session_state.setdefault(_EVER_BOUND, set()).add(key)


def view_query() -> dict[str, str]:
    """The query of this run's view: the URL's keys (the last text of a repeated one), each
    bound key as this run drew it (dropped at its default). A bound key this run did not draw
    is left out: a request sent before the browser caught up with a page switch (a
    follower's poll) still carries another page's."""
    drawn = st.session_state.get(_BOUND, {})
    ever = st.session_state.get(_EVER_BOUND, set())
    query = {k: v for k, v in st.query_params.to_dict().items() if k not in ever}
    return query | {k: v for k, v in drawn.items() if v is not None}
