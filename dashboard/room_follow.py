"""Following the presenter: the rule, top to bottom.

A learner in a room (``room=CODE`` in their link) either follows the presenter or explores
on their own; the link's ``room.follow`` says which (on by default).

1. **Following.** Every run first reads the room (:func:`follow_before_page`). When the
   presenter is on another page, the follower is switched there with the presenter's values
   (the run ends); on this page, each control takes the presenter's value before it is drawn
   (:func:`dashboard.state.give_values`: the checks and notices of a link) and is drawn
   locked (:func:`dashboard.state.lock_controls`), with one line saying so
   (:func:`lock_line`). A locked control cannot move, so no run has to guess whether its
   values are the learner's move or a request sent before the last view arrived. The
   learner's language and presentation view stay theirs (:data:`OWN_KEYS`).
2. **Woken, or polling.** The presenter's new view wakes each follower at once
   (:mod:`dashboard.rooms.push`); a fragment reads the room every :data:`POLL_S` seconds as
   the fallback (:func:`follower_live`) and runs the page again when the room's view is
   not the one the follower shows, when the room server is back after an outage, or when
   the room ended or opened again.
3. **Exploring.** "Explore on my own" turns following off: the controls unlock and the view
   stays. "Follow again" turns it on: that very run applies the presenter's view.
4. **When the room cannot be followed.** The room server cannot be reached: one line, the
   last view stays (locked while following) and the room resumes by itself. The room has
   ended (no longer on the room server): one line saying so, the controls unlock, nothing
   says it follows. The presenter is away: one line, the view stays.
"""

from __future__ import annotations

import logging
import os

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dashboard import state
from dashboard.i18n import LANG_KEY, current_lang, t
from dashboard.literal import literal
from dashboard.presentation import PRESENT_KEY
from dashboard.room_questions import answer_controls, voter
from dashboard.room_reach import room_reach, server_back
from dashboard.rooms import presenter, push
from dashboard.rooms.link import FOLLOW_KEY, ROOM_KEY, SERVER_KEY, RoomLink, shared_params
from dashboard.rooms.store import RoomSnapshot, View

OWN_KEYS = (LANG_KEY, PRESENT_KEY)  # each learner's own: never shared by a room, never locked
POLL_ENV = "ATTENTION_LAB_FOLLOW_POLL_S"
DEFAULT_POLL_S, MIN_POLL_S, MAX_POLL_S = 5.0, 0.1, 60.0


def poll_seconds(raw: str | None) -> float:
    """The followers' poll interval from :data:`POLL_ENV` (seconds, 0.1 to 60; unset: 5).

    Raises:
        ValueError: naming ``raw`` when it is not a number in that range.
    """
    if raw is None or not raw.strip():
        return DEFAULT_POLL_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = float("nan")
    if not MIN_POLL_S <= seconds <= MAX_POLL_S:  # NaN fails too
        raise ValueError(
            f"{POLL_ENV}={raw!r}: give the followers' poll interval in seconds, "
            f"{MIN_POLL_S:g} to {MAX_POLL_S:g}"
        )
    return seconds


def _poll_from_env() -> float:
    """:func:`poll_seconds` of the environment's value; a bad one is named in the server's log
    and the default is used."""
    try:
        return poll_seconds(os.environ.get(POLL_ENV))
    except ValueError as err:
        logging.getLogger(__name__).warning("%s; polling every %g s", err, DEFAULT_POLL_S)
        return DEFAULT_POLL_S


POLL_S = _poll_from_env()
"""The fallback: the presenter's moves and questions wake followers at once
(:mod:`dashboard.rooms.push`); thirty followers polling every 2 s kept 0.1-0.2 of a core
busy. The tests set 0.3 s to meet the races of a page switch on every move."""
_SHOWN = "_room.shown"  # (version, View): the presenter's view the last run applied
_STATUS = "_room.status"  # what the last full run found: one of the STATUS values
FOLLOWING, WAITING, ENDED, UNREACHABLE, EXPLORING = (
    "following",
    "waiting",
    "ended",
    "unreachable",
    "exploring",
)
_SEEN = "_room.seen"  # this session saw the room open
_AWAY = "_room.away"  # this follower was told the presenter is away


def view_now(page: str) -> View:
    """This run's view: ``page`` and the values of its link (:func:`dashboard.state.view_query`)
    without each learner's own keys and the room's.

    Raises:
        ValueError: when the view is too large to share (see :meth:`View.of`).
    """
    return View.of(page, shared_params(state.view_query(), own_keys=OWN_KEYS))


def follows(link: RoomLink) -> bool:
    """Whether this session follows room ``link.code`` (the follow switch is on)."""
    return bool(link.code) and bool(st.session_state.get(FOLLOW_KEY))


def follow_before_page(link: RoomLink, pages: dict, page: str) -> None:
    """Before the page draws: a follower takes the presenter's view (step 1 of the module's
    rule) and its controls are locked; what the room's state was is kept for the parts after
    the page (:func:`follower_controls`). The presenter never follows (the caller checks).

    Args:
        link: the room of this run (:func:`dashboard.room_controls.room_link`).
        pages: the app's ``st.Page`` objects by page name.
        page: the name of the page this run shows.
    """
    if not follows(link):
        st.session_state[_STATUS] = EXPLORING
        return
    push.send_whole_messages()  # a wake-up may have aged the browser's cache (see push)
    st.session_state[_STATUS] = UNREACHABLE
    with room_reach(link.code, say=False):  # the room's part after the page says it
        snap = presenter.shared_store().get(link.code, voter())
        st.session_state[_STATUS] = _status_of(snap)
        if snap is not None and snap.view is not None and snap.view.page in pages:
            if elsewhere(snap, pages, page):
                _switch(link, pages, snap)  # ends the run
            state.give_values(page, dict(snap.view.params))
            st.session_state[_SHOWN] = (snap.version, snap.view)
    if st.session_state[_STATUS] in (FOLLOWING, UNREACHABLE):
        state.lock_controls(frozenset(OWN_KEYS))


def _status_of(snap: RoomSnapshot | None) -> str:
    """Following, waiting for a presenter's first view, or ended (the room is gone)."""
    if snap is None:
        return ENDED
    st.session_state[_SEEN] = True
    return FOLLOWING if snap.view is not None else WAITING


def _switch(link: RoomLink, pages: dict, snap: RoomSnapshot) -> None:
    """Switch to the presenter's page with their values, this learner's own keys and the
    room's (ends the run)."""
    query = dict(snap.view.params)
    query.update(
        {
            LANG_KEY: current_lang(),
            ROOM_KEY: link.code,
            FOLLOW_KEY: "true",
            SERVER_KEY: presenter.SERVER_ID,
        }
    )
    st.switch_page(pages[snap.view.page], query_params=query)


def lock_line() -> None:
    """Above a locked follower's controls: one line saying why they do not move."""
    if st.session_state.get(_STATUS) in (FOLLOWING, UNREACHABLE):
        state.controls_box().caption(t("room.locked_line"))


def _set_following(on: bool) -> None:
    """The buttons' callback (before their rerun): follow again, or explore on my own."""
    st.session_state[FOLLOW_KEY] = on


def follower_controls(
    link: RoomLink, pages: dict, page: str, sidebar: DeltaGenerator, main: DeltaGenerator
) -> None:
    """After the page: where this follower stands and the one button that changes it, then
    the live part (:func:`follower_live`).

    Args:
        link, pages, page: as :func:`follow_before_page`.
        sidebar: where the status line and the button go.
        main: where the live part goes (above the page).
    """
    following = follows(link)
    state.write(FOLLOW_KEY, following)
    if following:
        push.registry().register(link.code, push.this_session())
    else:
        push.registry().forget(link.code, push.this_session())
    status = st.session_state.get(_STATUS)
    if status != ENDED:
        state.write(SERVER_KEY, presenter.SERVER_ID)
    if following and status != ENDED:
        sidebar.caption(t("room.following_locked"))
        sidebar.button(
            t("room.explore"), key="_room.explore", on_click=_set_following, args=(False,)
        )
    elif not following:
        sidebar.caption(t("room.exploring"))
        sidebar.button(
            t("room.follow_again"), key="_room.follow_again", on_click=_set_following, args=(True,)
        )
    with main:
        follower_live(link, pages, page)


def presence_line(snap: RoomSnapshot) -> None:
    """Say when the room's presenter has been away for some seconds (their tab closed or
    lost its connection), with one line on how to present again from this tab (a presenter
    who reloaded is a follower until they type the key again), and, once, when they are
    back."""
    if snap.presenter_away:
        st.session_state[_AWAY] = True
        st.warning(t("room.presenter_away", code=literal(snap.code), s=int(snap.presenter_seen_s)))
        st.caption(t("room.present_again"))  # a presenter who reloaded reads how to go on
    elif st.session_state.pop(_AWAY, False):
        st.info(t("room.presenter_back", code=literal(snap.code)))


def elsewhere(snap: RoomSnapshot, pages: dict, page: str) -> bool:
    """Whether the room's view is on another page of this app than ``page``."""
    return snap.view is not None and snap.view.page in pages and snap.view.page != page


def out_of_date(snap: RoomSnapshot | None, pages: dict) -> bool:
    """Whether a follower's page is to run again: the room ended or opened again since its
    last run, or the room's view is one it can show and not the one it shows."""
    status = st.session_state.get(_STATUS)
    if (snap is None) != (status == ENDED):
        return True
    if snap is None or snap.view is None or snap.view.page not in pages:
        return False
    return st.session_state.get(_SHOWN) != (snap.version, snap.view) or status != FOLLOWING


@st.fragment(run_every=POLL_S)
def follower_live(link: RoomLink, pages: dict, page: str) -> None:
    """Every :data:`POLL_S` seconds: run the page again when it is out of date
    (:func:`out_of_date`, for a follower), say where the room stands, and offer the current
    question's answers; while the room server cannot be reached, say so in one line (the
    page goes on) and ask again at the next poll."""
    push.back_to_full_run_page()  # a timer's run on the page the server switched away from
    with room_reach(link.code):
        push.send_whole_messages()
        snap = presenter.shared_store().get(link.code, voter())
        back = server_back()
        if follows(link) and (back or out_of_date(snap, pages)):
            if not back and snap is not None and elsewhere(snap, pages, page):
                _switch(link, pages, snap)  # straight to the presenter's page: one run
            st.rerun(scope="app")
        if snap is None:
            ended = st.session_state.get(_SEEN) or link.marker
            st.warning(t(f"room.{'ended' if ended else 'waiting'}", code=literal(link.code)))
            return
        presence_line(snap)
        if follows(link) and not snap.presenter_away:
            st.caption(t("room.following", code=literal(link.code)))
        if snap.poll is not None:
            answer_controls(link.code, snap.poll)
