"""The link's values that stay ours, and the link built from a run's values (the widgets
that use it are :mod:`dashboard.state`).

Sliders, number boxes, checkboxes and text boxes are bound to the URL by Streamlit
(``bind="query-params"``); select boxes, radios and multiselects, the language and the
room's keys are read and written here:

* :func:`read` returns a query key's validated value (:func:`check_raws`), else this
  session's memory of it (query parameters are dropped when the user switches pages), else
  the default; a malformed, out-of-range, unknown, over-long or repeated value gives the
  default *and* a notice saying why (:func:`add_notice`), shown once by
  :func:`render_notices` with every unknown query key (a typo, named with the closest key
  the page uses);
* :func:`write` puts a value in the URL and this session's memory; :func:`finish_run` drops
  the query keys this run did not use (:func:`touch`), so the URL holds exactly the view;
* :func:`give_values` is what a room sets for a follower: the presenter's values of a page,
  put into this run's widgets through ``st.session_state`` before they are drawn
  (:func:`given_raw`); :func:`lock_controls` draws them disabled while the follower follows;
* :func:`view_query` is the link of the view from this run's values (the copy-link box, a
  presenter's published view): the URL's own keys plus each bound widget's value when it is
  not its default (:func:`record_bound`), as Streamlit's binding writes the address bar;
* :func:`rerun_to_fix` starts the run again with its notices when :mod:`dashboard.state`
  corrects a link's value (:func:`take_fix`).

The parsers of a value's text are the pure functions of :mod:`dashboard.url_values`; the
notice's words are :mod:`dashboard.url_notices`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator
from streamlit.errors import StreamlitAPIException

from dashboard.url_notices import UNKNOWN_KEY, Notice, notices_markdown
from dashboard.url_values import MAX_RAW_LEN, RefusedValue, serialise, suggest_key

_NOTICES = "_state.notices"
_CARRIED = "_state.carried"  # notices of a run cut short to correct a link value
_FIXES = "_state.fixes"  # {key: value} the next run puts into bound widgets (the rerun)
_FIXING = "_state.fixing"  # this run's share of them
_TOUCHED = "_state.touched"
_MEMORY = "_state.memory"
_GIVEN = "_state.given"  # (page, {key: text}): a room's values for this run's widgets
_PAGE = "_state.page"  # the page this run draws
_BOUND = "_state.bound"  # {page: {key: URL text, None at the default}} of bound widgets
_LOCKED = "_state.locked"  # the keys left free while this run's controls are locked
APP_KEYS: frozenset[str] = frozenset({"lang", "device", "present"})
GIVEN_APP_KEYS: frozenset[str] = frozenset({"lesson", "lesson.step"})
"""Keys of the app a room's view gives a follower as it gives a page's (the lesson's step)."""
"""Query keys of the app itself (the language, the device, the presentation view): never
reported as unknown, even on a run that does not draw them (the device box exists only with
several devices)."""
NOT_GIVEN = object()
"""What :func:`given_raw` returns for a key no room gave a value for in this run."""

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


def begin_run(page: str = "") -> None:
    """Start a run's bookkeeping (app.py calls it first): the notices (those carried from a
    run cut short to correct a link value come first), the values to correct, the URL keys
    in use, no room values.

    Args:
        page: the name of the page this run draws (the key of :func:`view_query`).
    """
    st.session_state[_NOTICES] = list(st.session_state.pop(_CARRIED, []))
    st.session_state[_FIXING] = st.session_state.pop(_FIXES, {})
    st.session_state[_TOUCHED] = []
    st.session_state[_GIVEN] = None
    st.session_state[_LOCKED] = None
    st.session_state[_PAGE] = page


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


def rerun_to_fix(key: str | None = None, value: Any = None) -> None:
    """Start the run again now, with this run's notices carried to it; with a ``key``, the
    next run puts ``value`` into that bound widget before drawing it (:func:`take_fix`).

    Raises:
        streamlit.runtime.scriptrunner.RerunException: always (``st.rerun``).
    """
    if key is not None:
        st.session_state.setdefault(_FIXES, {})[key] = value
    st.session_state[_CARRIED] = notices()
    st.rerun()


def carry_notices() -> None:
    """Show this run's notices in the next run (this one ends in a switch of page)."""
    st.session_state[_CARRIED] = notices()


def take_fix(key: str) -> Any:
    """The value this run puts into the bound widget ``key`` (:func:`rerun_to_fix`), or
    :data:`NOT_GIVEN`."""
    return st.session_state.get(_FIXING, {}).pop(key, NOT_GIVEN)


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
    """Drop query parameters that no control used in this run, so the URL is exactly the
    view, and forget the bound values of widgets this run did not draw. A bound widget's
    parameter cannot be deleted through ``st.query_params``: Streamlit drops it itself at
    the end of the run that no longer draws the widget."""
    touched = set(st.session_state.get(_TOUCHED, []))
    for key in list(st.query_params.keys()):
        if key not in touched:
            try:
                del st.query_params[key]
            except StreamlitAPIException:  # bound to a widget: Streamlit drops it
                pass
    shown = _bound_values()
    for key in [k for k in shown if k not in touched]:
        del shown[key]


def write(key: str, value: Any) -> None:
    """Write ``value`` to the URL under ``key`` and remember it for this session."""
    touch(key)
    text = serialise(value)
    if st.query_params.get(key) != text or len(st.query_params.get_all(key)) != 1:
        st.query_params[key] = text
    _memory()[key] = value


def forget(key: str) -> None:
    """Take ``key`` out of the URL and this session's memory (a value the page no longer
    uses, such as a lesson the learner left)."""
    _memory().pop(key, None)
    if key in st.query_params:
        del st.query_params[key]


def check_raws(
    key: str, raws: list[str], default: Any, parse: Parser, *, max_raw: int | None = MAX_RAW_LEN
) -> Any:
    """Return the value of the link's texts ``raws`` for ``key``, or ``default`` with a
    notice saying why when they are refused.

    Args:
        key: the query key, ``"<page>.<name>"``.
        raws: every text the link gives for ``key`` (at least one).
        default: value used when the texts are refused.
        parse: turns the raw string into a value; raises ``ValueError`` to reject it (a
            :class:`~dashboard.url_values.RefusedValue` says why in the notice).
        max_raw: a longer raw value is refused before parsing (``None``: no limit, for text
            that is cut rather than refused).

    Returns:
        The parsed value, or ``default``.
    """
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


def read(key: str, default: Any, parse: Parser, *, max_raw: int | None = MAX_RAW_LEN) -> Any:
    """Return the validated URL value of ``key``, or the room's value of it for a follower
    (:func:`give_values`); the default on absence or rejection.

    Args:
        key, default, parse, max_raw: as :func:`check_raws`.

    Returns:
        The parsed value, this session's remembered value, or ``default``.
    """
    touch(key)
    given = given_raw(key)
    if given is None:  # the presenter left it at its default
        return default
    raws = st.query_params.get_all(key) if given is NOT_GIVEN else [given]
    if not raws:
        return _memory().get(key, default)
    return check_raws(key, raws, default, parse, max_raw=max_raw)


def give_values(page: str, values: Mapping[str, str]) -> None:
    """What a room sets for a follower: this run's widgets of ``page`` take ``values`` (the
    presenter's query values of that page, as text), each checked as a link's value is, and
    a widget of the page that ``values`` does not name takes its default. Call it before
    the page draws; each widget puts its value into ``st.session_state`` before it is drawn
    (:func:`given_raw`), and Streamlit's binding, or :func:`write`, puts it in the URL.

    Args:
        page: the page whose widgets take the values (their keys start ``"<page>."``).
        values: query values by key.
    """
    st.session_state[_GIVEN] = (page, dict(values))


def lock_controls(free: frozenset[str]) -> None:
    """Draw this run's controls disabled, all but those under the keys ``free`` (a follower's
    own: the language, the presentation view). Call it before the page draws; the next run
    starts unlocked (:func:`begin_run`)."""
    st.session_state[_LOCKED] = frozenset(free)


def locked(key: str) -> bool:
    """Whether the control under ``key`` is drawn disabled this run (:func:`lock_controls`)."""
    free = st.session_state.get(_LOCKED)
    return free is not None and key not in free


def given_raw(key: str) -> Any:
    """The text a room gave ``key`` in this run (:func:`give_values`): a string, ``None``
    for a key of the given page that the presenter left at its default, or
    :data:`NOT_GIVEN`."""
    given = st.session_state.get(_GIVEN)
    if given is None or not (key.startswith(f"{given[0]}.") or key in GIVEN_APP_KEYS):
        return NOT_GIVEN
    return given[1].get(key)


def _bound_values() -> dict[str, str | None]:
    bound = st.session_state.setdefault(_BOUND, {})
    return bound.setdefault(st.session_state.get(_PAGE, ""), {})


def record_bound(key: str, text: str | None) -> None:
    """Note a bound widget's value as the URL shows it (``None``: at its default, so not in
    the URL), for :func:`view_query`; the key counts as written by this session."""
    touch(key)
    _bound_values()[key] = text
    _memory().setdefault(key, None)


def view_query() -> dict[str, str]:
    """The query of this run's view, from its values: the URL's keys (the last text of a
    repeated one), each bound widget's value replaced by the one it holds (dropped at its
    default). Used for the copy-link box and the view a presenter publishes; it is right
    before the URL has caught up (a bound value the browser has not sent back yet, a test
    runner that keeps no address bar).

    A bound key of another page this session drew is left out: a request sent before the
    browser's URL caught up with a page switch (a follower's poll) still carries it.

    Returns:
        Query values by key.
    """
    page = st.session_state.get(_PAGE, "")
    bound = st.session_state.get(_BOUND, {})
    elsewhere = {key for name, keys in bound.items() if name != page for key in keys}
    elsewhere -= set(_bound_values())
    query = {k: v for k, v in st.query_params.to_dict().items() if k not in elsewhere}
    for key, text in _bound_values().items():
        if text is None:
            query.pop(key, None)
        else:
            query[key] = text
    return query
