"""Teaching a room: the presenter's key and publishing, and where a run's room parts go.

A learner opens the usual link plus ``room=CODE``. ``dashboard/app.py`` calls
:func:`room_link` before the page (the code, checked, is written back to the URL, so it stays
with the session across page changes and shows in the copy-link box), :func:`follow_now`
next, and :func:`room_controls` after the page, once the URL holds exactly the page's view:

* **The presenter** typed the key (:mod:`dashboard.rooms.presenter`) into the sidebar's
  password field: each of their runs publishes their page and query values (without the
  language and the room's own keys, :func:`dashboard.rooms.link.shared_params`) to the room,
  and they can put a question to it (:mod:`dashboard.room_questions`); at the very end of the
  run, :func:`wake_followers` wakes the room.
* **A follower** (everyone else) follows the presenter (:mod:`dashboard.room_follow`) and
  answers the room's questions.

The key never goes into the URL (a password field with no URL state). The room's query keys
and their checks are :mod:`dashboard.rooms.link`.
"""

from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dashboard import state
from dashboard.i18n import t
from dashboard.literal import literal
from dashboard.room_follow import apply_pending, follower_controls, send_before_page, view_now
from dashboard.room_questions import ask_controls, tally_controls
from dashboard.rooms import presenter, push
from dashboard.rooms.codes import parse_room_code
from dashboard.rooms.link import FOLLOW_KEY, ROOM_KEY, SERVER_KEY, RoomLink, parse_marker
from dashboard.rooms.store import RoomLimitError

KEY_WIDGET = "_room.presenter_key"
_PUBLISHED = "_room.published"  # the room's version this presenter last woke the room for
_WAKE = "_room.wake"  # a room whose followers this presenter's run wakes when it ends


def room_link(page: str) -> RoomLink:
    """Read the room's keys from the URL (or this session's memory of them), write them back
    and seed the follow switch; a bad code gets the usual notice and no room. A follower on
    their way to the presenter's view of ``page`` gets its values here, before any widget of
    the run is made (see :func:`dashboard.room_follow.apply_pending`).

    Args:
        page: the name of the page this run shows.

    Returns:
        The room code and the server id of the link.
    """
    presenter.presenter_key()  # made, and printed when generated, as the first page opens
    code = state.read(ROOM_KEY, "", parse_room_code)
    if not code:
        if ROOM_KEY in st.query_params:  # a refused code: its notice shows it, the URL drops it
            del st.query_params[ROOM_KEY]
        return RoomLink("", "")
    state.write(ROOM_KEY, code)
    apply_pending(page)
    marker = state.read(SERVER_KEY, "", parse_marker)
    if marker:
        state.write(SERVER_KEY, marker)
    if FOLLOW_KEY not in st.session_state:
        st.session_state[FOLLOW_KEY] = state.read(FOLLOW_KEY, True, state.parse_bool)
    state.write(FOLLOW_KEY, bool(st.session_state[FOLLOW_KEY]))
    return RoomLink(code, marker)


def presenting() -> bool:
    """Whether this session typed the presenter key (checked in constant time)."""
    given = st.session_state.get(KEY_WIDGET)
    return bool(given) and presenter.key_matches(given)


def follow_now(link: RoomLink, pages: dict, page: str) -> None:
    """Before the page draws: a follower is sent to the presenter's view
    (:func:`dashboard.room_follow.send_before_page`); the presenter never is.

    Args:
        link: from :func:`room_link`.
        pages: the app's ``st.Page`` objects by page name.
        page: the name of the page this run shows.
    """
    if not presenting():
        send_before_page(link, pages, page)


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
        max_chars=presenter.MAX_KEY_LEN,
        help=t("room.presenter_key_help"),
    )
    if given and presenter.key_matches(given):
        presenter_controls(link, page, sidebar, main)
        return
    if given:
        sidebar.error(t("room.wrong_key"))
    follower_controls(link, pages, page, sidebar, main)


def presenter_controls(link: RoomLink, page: str, sidebar: DeltaGenerator, main: DeltaGenerator):
    """Publish this run's view to the room; offer questions and show the live tally."""
    store = presenter.shared_store()
    push.registry().forget(link.code, push.this_session())  # followed before typing the key
    try:
        store.open(link.code)
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
        if ask_controls(link.code, page):
            st.session_state[_WAKE] = link.code  # the room sees the question at once
        tally_controls(link.code)


def wake_followers() -> None:
    """At the very end of a presenter's run that published a new view: wake the room's
    followers (:mod:`dashboard.rooms.push`). Last, so that their thirty reruns do not
    hold back the presenter's own."""
    code = st.session_state.pop(_WAKE, None)
    if code:
        push.wake(code)
