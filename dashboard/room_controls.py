"""Teaching a room: the presenter's key and publishing, and where a run's room parts go.

A learner opens the usual link plus ``room=CODE``. ``dashboard/app.py`` calls
:func:`room_link` before the page (the code, checked, is written back to the URL, so it stays
with the session across page changes and shows in the copy-link box), :func:`follow_now`
next, and :func:`room_controls` after the page, once the URL holds exactly the page's view:

* **The presenter** typed the key (:mod:`dashboard.rooms.presenter`) into the sidebar's
  password field. One session presents a room at a time: the newest to type the key takes
  it over, and an older tab is told and offered to take it back (:func:`claim`). A
  presenter's tab says it is there every :data:`PRESENCE_S` seconds
  (:func:`presenter_heartbeat`), so followers learn when it has gone. Each of their runs
  publishes their page and query values (without the
  language and the room's own keys, :func:`dashboard.rooms.link.shared_params`) to the room,
  and they can put a question to it (:mod:`dashboard.room_questions`); at the very end of the
  run, :func:`wake_followers` wakes the room.
* **A follower** (everyone else) follows the presenter (:mod:`dashboard.room_follow`) and
  answers the room's questions.

The key never goes into the URL (a password field with no URL state). The room's query keys
and their checks are :mod:`dashboard.rooms.link`.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from functools import partial

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dashboard import state
from dashboard.i18n import t
from dashboard.literal import literal
from dashboard.room_follow import follow_before_page, follower_controls, lock_line, view_now
from dashboard.room_questions import ask_controls, put_question, tally_controls
from dashboard.room_reach import UNREACHABLE, room_reach, server_back
from dashboard.rooms import presenter, push
from dashboard.rooms.codes import parse_room_code
from dashboard.rooms.link import FOLLOW_KEY, ROOM_KEY, SERVER_KEY, RoomLink, parse_marker
from dashboard.rooms.questions import ready_to_ask
from dashboard.rooms.store import Poll, RoomLimitError, RoomServerUnreachable

KEY_WIDGET = "_room.presenter_key"
_KEY_KEPT = "_room.key_kept"  # the key as typed: a run that switches page drops the widget's
_PUBLISHED = "_room.published"  # the room's version this presenter last woke the room for
_WAKE = "_room.wake"  # a room whose followers this presenter's run wakes when it ends
_TAB = "_room.tab"  # this session's id as a presenter
_CLAIMED = "_room.claimed"  # the room this session took to present (the newest tab wins)
PRESENCE_S = 5.0  # the presenter's heartbeat; followers see them away after three missed


def room_link() -> RoomLink:
    """Read the room's keys from the URL (or this session's memory of them), write them back
    and seed the follow switch; a bad code gets the usual notice and no room.

    Returns:
        The room code and the server id of the link.
    """
    presenter.presenter_key()  # made, and printed when generated, as the first page opens
    keep_typed_key()
    code = state.read(ROOM_KEY, "", parse_room_code)
    if not code:
        if ROOM_KEY in st.query_params:  # a refused code: its notice shows it, the URL drops it
            del st.query_params[ROOM_KEY]
        return RoomLink("", "")
    state.write(ROOM_KEY, code)
    marker = state.read(SERVER_KEY, "", parse_marker)
    if marker:
        state.write(SERVER_KEY, marker)
    if FOLLOW_KEY not in st.session_state:
        st.session_state[FOLLOW_KEY] = state.read(FOLLOW_KEY, True, state.parse_bool)
    state.write(FOLLOW_KEY, bool(st.session_state[FOLLOW_KEY]))
    return RoomLink(code, marker)


def keep_typed_key() -> None:
    """Give the key field back the key this tab typed when Streamlit dropped it: a run that
    switches page (Next to a step on another page, a link on the landing page) ends before
    the field is drawn, and Streamlit forgets a widget a run did not draw, which would make
    the presenter a follower."""
    kept = st.session_state.get(_KEY_KEPT)
    if kept and KEY_WIDGET not in st.session_state:
        st.session_state[KEY_WIDGET] = kept


def _remember_key() -> None:
    """The key field's ``on_change``: keep what was typed (an empty field stops presenting)."""
    st.session_state[_KEY_KEPT] = st.session_state.get(KEY_WIDGET, "")


def presenting() -> bool:
    """Whether this session typed the presenter key (checked in constant time)."""
    given = st.session_state.get(KEY_WIDGET)
    return bool(given) and presenter.key_matches(given)


def follow_now(link: RoomLink, pages: dict, page: str) -> None:
    """Before the page draws: a follower takes the presenter's view, its controls locked
    (:func:`dashboard.room_follow.follow_before_page`); the presenter never follows.

    Args:
        link: from :func:`room_link`.
        pages: the app's ``st.Page`` objects by page name.
        page: the name of the page this run shows.
    """
    if link.code and not presenting():
        follow_before_page(link, pages, page)


def controls_note() -> None:
    """Above the page's controls: a locked follower's line (:func:`lock_line`)."""
    lock_line()


def room_controls(
    link: RoomLink, pages: dict, page: str, sidebar: DeltaGenerator, main: DeltaGenerator
) -> None:
    """The room's part of the page, after the page ran: the presenter key, then the
    presenter's publishing and questions or the follower's switch and answers.

    Args:
        link: from :func:`room_link`.
        pages: the app's ``st.Page`` objects by page name (a follower switches to one).
        page: the name of the page that ran.
        sidebar: a sidebar container reserved above the page's controls.
        main: a container reserved above the page.
    """
    if not link.code:
        return
    sidebar.markdown(t("room.in_room", code=literal(link.code)))
    given = sidebar.text_input(
        t("room.presenter_key"),
        type="password",
        key=KEY_WIDGET,
        on_change=_remember_key,
        max_chars=presenter.MAX_KEY_LEN,
        help=t("room.presenter_key_help"),
    )
    if given and presenter.key_matches(given):
        with room_reach(link.code, main):
            presenter_controls(link, page, sidebar, main)
        if st.session_state.get(UNREACHABLE):
            with main:
                presenter_heartbeat(link.code)  # asks again; the page publishes when back
        return
    if given:
        sidebar.error(t("room.wrong_key"))
    follower_controls(link, pages, page, sidebar, main)


def tab_id() -> str:
    """This session's own random id as a presenter (made once per session; independent of
    Streamlit's session ids, so it means the same on every replica)."""
    if _TAB not in st.session_state:
        st.session_state[_TAB] = secrets.token_hex(8)
    return st.session_state[_TAB]


PRESENTS, TAKEN, ENDED = "presents", "taken", "ended"


def claim(code: str) -> str:
    """Present room ``code`` from this session: the first run after the key was typed (or
    after "Present here" or "Open the room again") takes the room over, opening it; later
    runs keep it only while no newer tab took it, and never open it again by themselves: a
    room that the room server no longer has (a Redis that lost its data, hours idle) has
    ended, and this tab says so.

    Returns:
        :data:`PRESENTS`, :data:`TAKEN` (a newer tab presents) or :data:`ENDED`.

    Raises:
        RoomLimitError: when the store has no room for a new room.
    """
    me, store = tab_id(), presenter.shared_store()
    take_over = st.session_state.get(_CLAIMED) != code
    if not take_over and store.get(code) is None:
        return ENDED
    snap = store.present(code, me, take_over=take_over)
    st.session_state[_CLAIMED] = code
    return PRESENTS if snap.presenter == me else TAKEN


def take_back(code: str) -> None:
    """The "Present here" and "Open the room again" buttons' callback: the next run takes
    the room over (opening it again)."""
    if st.session_state.get(_CLAIMED) == code:
        del st.session_state[_CLAIMED]


def presenter_controls(link: RoomLink, page: str, sidebar: DeltaGenerator, main: DeltaGenerator):
    """Publish this run's view to the room; offer questions and show the live tally (or, in
    a tab whose room a newer tab took, say so and offer to take it back)."""
    store = presenter.shared_store()
    push.registry().forget(link.code, push.this_session())  # followed before typing the key
    try:
        claimed = claim(link.code)
        if claimed != PRESENTS:
            sidebar.warning(
                t(
                    f"room.{'taken_over' if claimed == TAKEN else 'ended_here'}",
                    code=literal(link.code),
                )
            )
            label = "take_back" if claimed == TAKEN else "reopen"
            sidebar.button(
                t(f"room.{label}"), key="_room.take_back", on_click=take_back, args=(link.code,)
            )
            return
        snap = store.publish(link.code, view_now(page))
        if st.session_state.get(_PUBLISHED) != snap.version:
            st.session_state[_PUBLISHED] = snap.version
            st.session_state[_WAKE] = link.code
    except RoomLimitError:
        sidebar.error(t("room.too_many_rooms", code=literal(link.code)))
        return
    except ValueError:
        sidebar.warning(t("room.view_too_big"))
    state.write(SERVER_KEY, presenter.SERVER_ID)
    sidebar.success(t("room.presenting", code=literal(link.code)))
    with main:
        presenter_heartbeat(link.code)
        if ask_controls(link.code, page):
            st.session_state[_WAKE] = link.code  # the room sees the question at once
        tally_controls(link.code)


@st.fragment(run_every=PRESENCE_S)
def presenter_heartbeat(code: str) -> None:
    """Every :data:`PRESENCE_S` seconds while the presenter's tab is open: say the presenter
    is there; when a newer tab took the room, rerun the page so this one is told. When the
    room server stops answering, or answers again, rerun the page: it says so in one line,
    or publishes its view again."""
    push.back_to_full_run_page()  # a timer's run on the page the server switched away from
    was_away = bool(st.session_state.get(UNREACHABLE))
    with room_reach(code, say=False):
        if was_away:
            presenter.shared_store().get(code)  # raises while the room server is away
            server_back()
            st.rerun(scope="app")
        if st.session_state.get(_CLAIMED) == code and claim(code) != PRESENTS:
            st.rerun(scope="app")
    if not was_away and st.session_state.get(UNREACHABLE):
        st.rerun(scope="app")


def ask_step_question(code: str, question_id: str) -> None:
    """A lesson step's "Ask the room" (one click, on the presenter's lesson bar): put the
    step's ready question to room ``code``; the room is woken at the end of the run, and the
    tally shows below as for any question.

    Raises:
        ValueError: naming ``question_id`` when no page has such a ready question.
    """
    if put_question(code, ready_to_ask(question_id)):
        st.session_state[_WAKE] = code


def wake_followers() -> None:
    """At the very end of a presenter's run that published a new view: wake the room's
    followers (:mod:`dashboard.rooms.push`). Last, so that their thirty reruns do not
    hold back the presenter's own."""
    code = st.session_state.pop(_WAKE, None)
    if code:
        push.wake(code)


def room_poll_reader() -> Callable[[], Poll | None]:
    """A call, for use outside any run (a download made when clicked), that reads this run's
    room's current question at that moment: ``None`` without a room or a question."""
    return partial(current_poll, st.query_params.get(ROOM_KEY, ""))


def current_poll(code: str) -> Poll | None:
    """Room ``code``'s current question now; ``None`` without one, for no room or one that
    ended, and while the room server cannot be reached (what was seen stays)."""
    if not code:
        return None
    try:
        snap = presenter.shared_store().get(code)
    except RoomServerUnreachable:
        return None
    return None if snap is None else snap.poll
