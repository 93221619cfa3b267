"""Following the presenter: a follower's view is sent to the presenter's, and stops
following when the learner moves.

The state machine lives in this session's state (its keys start with ``_room.``): a switch
asked for (:data:`_PENDING`: version, view, tries) becomes the view this follower shows
(:data:`_APPLIED`) once a run shows it; a later run whose view differs from it means the
learner moved a control or changed page, and following turns off (:data:`_LEFT`). Before the
page draws, :func:`send_before_page` sends a follower whose presenter moved on; after it,
:func:`follower_controls` draws the switch and the polling fragment
(:func:`follower_live_controls`, every :data:`POLL_S` seconds, the fallback for
:mod:`dashboard.rooms.push`'s wake-ups). :func:`apply_pending`, at the start of a run, gives
the page's widgets the presenter's values (:func:`dashboard.state.give_values`: through
``st.session_state`` before each is drawn, with the usual checks; a value the presenter
left at its default, so not in their URL, takes its default).

A request the browser sent before it had the view a run gave it is no move of the
learner's. The browser's poll timer can fire while the server's run sending the follower on
is queued or under way; Streamlit then runs the poll's request, or merges the two into one
run, with the query, page and widget values the browser still had, and that run shows the
old view. Each follower run writes the version of the view it shows to the link
(``room.view``, :func:`shown_version`), so such a request carries an older version than the
one this follower was sent to (:func:`_behind`): the follower is sent again instead of
being told that it moved, and a poll whose link lags behind the view its tab shows runs the
page again, which writes the link again.
"""

from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dashboard import state
from dashboard.i18n import LANG_KEY, current_lang, t
from dashboard.literal import literal
from dashboard.presentation import PRESENT_KEY, presenting
from dashboard.room_questions import answer_controls, voter
from dashboard.room_reach import room_reach, server_back
from dashboard.rooms import presenter, push
from dashboard.rooms.link import (
    FOLLOW_KEY,
    ROOM_KEY,
    SERVER_KEY,
    VIEW_KEY,
    RoomLink,
    parse_view_version,
    shared_params,
)
from dashboard.rooms.store import RoomSnapshot, View
from dashboard.url_state import check_raws

OWN_KEYS = (LANG_KEY, PRESENT_KEY)  # each learner's own: never shared by a room
POLL_S = 5.0  # the fallback: the presenter's moves and questions wake followers at once
# (rooms/push.py); thirty followers polling every 2 s kept 0.1-0.2 of a core busy
_APPLIED = "_room.applied"  # (version, View) of the presenter's view this follower shows
_PENDING = "_room.pending"  # (version, View, tries): a switch to it asked, not yet seen
MAX_TRIES = 3  # switches asked for one view before the follower stops trying
_WAS_FOLLOWING = "_room.was_following"
_LEFT = "_room.left"  # following was turned off because the learner moved
_SEEN = "_room.seen"  # this session saw the room open
_AWAY = "_room.away"  # this follower was told the presenter is away
_GAVE_UP = "_room.gave_up"  # the switches stopped with the follower on another page


def apply_pending(page: str) -> None:
    """Put the presenter's view that this follower is being sent to into this run: the
    widgets of ``page`` take the presenter's values (:func:`dashboard.state.give_values`),
    each checked as a link's value is; one the presenter left at its default takes its
    default.

    Done at the start of the run, not by the switch alone: Streamlit merges a rerun asked
    for before the last one started (the fragment's next poll) into it, with that request's
    query and widget values, which would undo the switch's.
    """
    pending = st.session_state.get(_PENDING)
    if pending is None or pending[1].page != page or not st.session_state.get(FOLLOW_KEY):
        return
    state.give_values(page, dict(pending[1].params))


def view_now(page: str) -> View:
    """This run's view: ``page`` and the values of its link (:func:`dashboard.state.view_query`)
    without the language and room keys.

    Raises:
        ValueError: when the view is too large to share (see :meth:`View.of`).
    """
    return View.of(page, shared_params(state.view_query(), own_keys=OWN_KEYS))


def shown_version(*, notice: bool = False) -> int | None:
    """The version of the presenter's view that this run's request says its tab shows (the
    link's ``room.view``, written by each follower run).

    Args:
        notice: the key counts as used by this run, and a bad value gets the usual notice
            (the follower's next run writes the right one); without it a bad value is
            quietly ``None`` (a poll, which draws no notices).

    Returns:
        The version, or ``None`` when the link names none or a bad one.
    """
    raws = st.query_params.get_all(VIEW_KEY)
    if notice:
        state.touch(VIEW_KEY)
    if not raws:
        return None
    if notice:
        return check_raws(VIEW_KEY, raws, None, parse_view_version)
    try:
        return parse_view_version(raws[0]) if len(raws) == 1 else None
    except ValueError:
        return None


def drop_shown_version() -> None:
    """Take ``room.view`` out of the link of a run that shows no presenter's view (a learner
    who stopped following, or the presenter): the key is a follower's own."""
    if VIEW_KEY in st.query_params:
        del st.query_params[VIEW_KEY]


def _behind(shown: int | None, applied: tuple[int, View] | None) -> bool:
    """Whether a request's link (``shown``, :func:`shown_version`) names an older view than
    the one this follower was sent to: the browser sent it before it had that view."""
    return shown is not None and applied is not None and shown != applied[0]


def follower_controls(
    link: RoomLink, pages: dict, page: str, sidebar: DeltaGenerator, main: DeltaGenerator
) -> None:
    """The follower's switch: turned off when the learner moved, and a jump to the
    presenter when it is on and the presenter is elsewhere; then the live fragment (which
    says when the room server cannot be reached, and asks again)."""
    snap = None
    with room_reach(link.code, say=False):
        snap = presenter.shared_store().get(link.code, voter())
    applied = _landed(page)
    was_following = st.session_state.get(_WAS_FOLLOWING, False)
    # a view counted as shown after MAX_TRIES cut-short switches never landed: a run
    # elsewhere is not the learner's move (the next poll sends the follower on)
    settled = (
        applied is not None
        and _PENDING not in st.session_state
        and not st.session_state.get(_GAVE_UP)
    )
    # a view other than the one sent: the learner's move, unless the browser sent the
    # request before it had that view (then the follower is sent again)
    elsewhere = settled and _safe_view(page) != applied[1]
    stale = elsewhere and _behind(link.shown, applied)
    if was_following and st.session_state.get(FOLLOW_KEY) and elsewhere and not stale:
        st.session_state[FOLLOW_KEY] = False
        st.session_state[_LEFT] = True
    following = sidebar.toggle(t("room.follow"), key=FOLLOW_KEY, help=t("room.follow_help"))
    state.write(FOLLOW_KEY, following)
    st.session_state[_WAS_FOLLOWING] = following
    if following:
        push.registry().register(link.code, push.this_session())
    else:
        push.registry().forget(link.code, push.this_session())
    if following:
        st.session_state[_LEFT] = False
        if snap is not None and (not was_following or stale or _moved_on(snap, applied)):
            jump(link, pages, page, snap)  # ends the run unless the view is shown already
        shown = st.session_state.get(_APPLIED)
        if shown is not None:
            state.write(VIEW_KEY, shown[0])
        push.remember_this_query()
    else:
        drop_shown_version()
        if st.session_state.get(_LEFT):
            sidebar.info(t("room.left_notice"))
        else:
            sidebar.caption(t("room.not_following"))
    if snap is not None:
        state.write(SERVER_KEY, presenter.SERVER_ID)
    with main:
        follower_live_controls(link, pages, page)


def send_before_page(link: RoomLink, pages: dict, page: str) -> None:
    """Before the page draws: a follower whose presenter moved on (or who just arrived, or
    just turned following on) is sent there at once (a run that a wake-up from
    :mod:`dashboard.rooms.push` or a poll asked for), so only the presenter's view is
    drawn. Whether the learner moved a control is decided after the page ran
    (:func:`follower_controls`). The presenter is never sent (the caller checks).

    Args:
        link: from :func:`dashboard.room_controls.room_link`.
        pages: the app's ``st.Page`` objects by page name.
        page: the name of the page this run shows.
    """
    if not (link.code and st.session_state.get(FOLLOW_KEY)):
        return
    applied = _landed(page)
    if _PENDING in st.session_state:
        return
    snap = presenter.shared_store().get(link.code)
    if snap is not None and _moved_on(snap, applied):
        jump(link, pages, page, snap, before_page=True)


def _safe_view(page: str) -> View | None:
    try:
        return view_now(page)
    except ValueError:
        return None


def _landed(page: str) -> tuple[int, View] | None:
    """The presenter's view this follower shows: a switch asked for becomes it once a run
    shows that view (a switch can be lost when another rerun overtakes it)."""
    pending = st.session_state.get(_PENDING)
    if pending is not None and _safe_view(page) == pending[1]:
        st.session_state[_APPLIED] = pending[:2]
        st.session_state[_GAVE_UP] = False
        del st.session_state[_PENDING]
    return st.session_state.get(_APPLIED)


def _lost(page: str, applied: tuple[int, View] | None) -> bool:
    """In a poll: whether the browser shows a view other than the one this follower was
    sent to. The run that sent it there can be cut short by the browser's next request,
    and Streamlit then drops the run's unsent messages, the new query among them; the poll
    carries the browser's query, so it sees the difference and sends the follower again.
    A follower left on another page than the view's when :data:`MAX_TRIES` switches were
    cut short (a slow page, wake-ups and polls overtaking each other) is lost too: the view
    counted as shown, and only a poll can still send the follower there. (A learner's own
    move never shows here: the run it starts turns following off.)"""
    if applied is None or _PENDING in st.session_state:
        return False
    if applied[1].page != page:
        return bool(st.session_state.get(_GAVE_UP))
    return _safe_view(page) != applied[1]


def _moved_on(snap: RoomSnapshot, applied: tuple[int, View] | None) -> bool:
    """Whether the presenter's view is newer than the one this follower was sent to."""
    return snap.view is not None and (applied is None or applied[0] != snap.version)


def jump(
    link: RoomLink, pages: dict, page: str, snap: RoomSnapshot, *, before_page: bool = False
) -> None:
    """Send this follower to the presenter's view: switch to it with the presenter's values,
    their own language and the room's keys, their values of that page forgotten (ends the
    run, unless they are there already). A switch is asked again, up to :data:`MAX_TRIES`
    times, until a run shows that view.

    ``before_page``: called before the page made any widget
    (:func:`dashboard.room_controls.follow_now`). A view of
    this same page is then put into this run (:func:`apply_pending`) instead of a rerun, so
    a woken follower draws the presenter's view in one run, not two."""
    view = snap.view
    if view is None or view.page not in pages:
        return
    st.session_state[_WAS_FOLLOWING] = True
    pending = st.session_state.get(_PENDING)
    tries = pending[2] + 1 if pending is not None and pending[0] == snap.version else 1
    if _safe_view(page) == view or tries > MAX_TRIES:
        st.session_state[_APPLIED] = (snap.version, view)
        st.session_state[_GAVE_UP] = view.page != page  # still on another page: polls retry
        st.session_state.pop(_PENDING, None)
        return
    st.session_state[_PENDING] = (snap.version, view, tries)
    if view.page == page:
        if before_page:
            apply_pending(page)  # no widget of the page made yet: this run draws the view
            return
        st.rerun()  # apply_pending sets the values when the run starts
    query = dict(view.params)
    query.update(
        {
            LANG_KEY: current_lang(),
            **({PRESENT_KEY: "true"} if presenting() else {}),
            ROOM_KEY: link.code,
            FOLLOW_KEY: "true",
            SERVER_KEY: presenter.SERVER_ID,
        }
    )
    st.switch_page(pages[view.page], query_params=query)


def presence_line(snap: RoomSnapshot) -> None:
    """Say when the room's presenter has been away for some seconds (their tab closed or
    lost its connection), and, once, when they are back."""
    if snap.presenter_away:
        st.session_state[_AWAY] = True
        st.warning(t("room.presenter_away", code=literal(snap.code), s=int(snap.presenter_seen_s)))
    elif st.session_state.pop(_AWAY, False):
        st.info(t("room.presenter_back", code=literal(snap.code)))


@st.fragment(run_every=POLL_S)
def follower_live_controls(link: RoomLink, pages: dict, page: str) -> None:
    """Every :data:`POLL_S` seconds: follow the presenter, say where the room stands, and
    offer the current question's answers; while the room server cannot be reached, say so
    in one line (the page goes on) and ask again at the next poll."""
    with room_reach(link.code):
        _follow_live(link, pages, page)


def _follow_live(link: RoomLink, pages: dict, page: str) -> None:
    """One poll of :func:`follower_live_controls` (its messages, and those of a run it
    sends the follower on to, go whole: :func:`dashboard.rooms.push.send_whole_messages`)."""
    push.send_whole_messages()
    snap = presenter.shared_store().get(link.code, voter())
    server_back()
    if snap is None:
        ended = st.session_state.get(_SEEN) or link.marker
        st.warning(t(f"room.{'ended' if ended else 'waiting'}", code=literal(link.code)))
        return
    st.session_state[_SEEN] = True
    applied = st.session_state.get(_APPLIED)
    if st.session_state.get(FOLLOW_KEY):
        if _moved_on(snap, applied) or _lost(page, applied):
            jump(link, pages, page, snap)
        elif _behind(shown_version(), applied):
            st.rerun()  # the browser's link lags behind its view: the page's run writes it
    presence_line(snap)
    if st.session_state.get(FOLLOW_KEY) and not snap.presenter_away:
        st.caption(t("room.following", code=literal(link.code)))
    if snap.poll is not None:
        answer_controls(link.code, snap.poll)
