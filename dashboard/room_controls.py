"""Teaching a room: the presenter's key, the learners' "Follow the presenter" and questions.

A learner opens the usual link plus ``room=CODE``. ``dashboard/app.py`` calls
:func:`room_link` before the page (the code, checked, is written back to the URL, so it stays
with the session across page changes and shows in the copy-link box) and
:func:`room_controls` after it, once the URL holds exactly the page's view:

* **The presenter** typed the key (:mod:`dashboard.rooms.presenter`) into the sidebar's
  password field: each of their runs publishes their page and query values (without the
  language and the room's own keys) to the room, and they can put a question to it.
* **A follower** (everyone else) polls the room in a fragment every :data:`POLL_S` seconds;
  while "Follow the presenter" is on and the presenter's view changed,
  :func:`streamlit.switch_page` opens the presenter's page with the presenter's values, the
  follower's own language and the room's keys (the same page: a rerun); at the start of that
  run, before any widget is made, :func:`apply_pending` puts the presenter's values in the
  URL and forgets the follower's, so state.py seeds every control from the URL, with the
  usual checks. A run whose view differs from
  the one the follower was sent to means the learner moved a control or changed page:
  following turns off, and turning it on again jumps to the presenter.

The key never goes into the URL (a password field with no URL state). ``room.server`` holds
the id of the server whose room the link followed: after a restart, or on another replica,
the page says the room has ended instead of waiting for it.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dashboard import state
from dashboard.i18n import LANG_KEY, current_lang, t
from dashboard.literal import literal
from dashboard.rooms import presenter, push
from dashboard.rooms.codes import parse_room_code
from dashboard.rooms.questions import ready_questions, ready_to_ask, typed_question
from dashboard.rooms.store import (
    MAX_OPTIONS,
    Poll,
    Question,
    RoomEndedError,
    RoomLimitError,
    RoomSnapshot,
    View,
)

ROOM_KEY = "room"
FOLLOW_KEY = "room.follow"
SERVER_KEY = "room.server"
KEY_WIDGET = "_room.presenter_key"
POLL_S = 5.0  # the fallback: the presenter's moves and questions wake followers at once
# (rooms/push.py); thirty followers polling every 2 s kept 0.1-0.2 of a core busy
TALLY_POLL_S = 1.0
TYPED = "typed"
_APPLIED = "_room.applied"  # (version, View) of the presenter's view this follower shows
_PENDING = "_room.pending"  # (version, View, tries): a switch to it asked, not yet seen
MAX_TRIES = 3  # switches asked for one view before the follower stops trying
_WAS_FOLLOWING = "_room.was_following"
_LEFT = "_room.left"  # following was turned off because the learner moved
_VOTER = "_room.voter"
_MY_ANSWER = "_room.my_answer"  # (question number, choice)
_SEEN = "_room.seen"  # this session saw the room open
_PUBLISHED = "_room.published"  # the room's version this presenter last woke the room for
_WAKE = "_room.wake"  # a room whose followers this presenter's run wakes when it ends
_MARKER = re.compile(r"[0-9a-f]{1,16}")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~:$])")


@dataclass(frozen=True)
class RoomLink:
    """The room this run belongs to.

    Attributes:
        code: the room's code, ``""`` when the link names none (or a bad one).
        marker: the server id a follower's link carries (``""`` before it followed).
    """

    code: str
    marker: str


def parse_marker(raw: str) -> str:
    """A server id from the URL (hex, at most 16 characters).

    Raises:
        ValueError: naming the value, for anything else.
    """
    if not _MARKER.fullmatch(raw):
        raise ValueError(f"server id {raw!r}")
    return raw


def room_link(page: str) -> RoomLink:
    """Read the room's keys from the URL (or this session's memory of them), write them back
    and seed the follow switch; a bad code gets the usual notice and no room. A follower on
    their way to the presenter's view of ``page`` gets its values here, before any widget of
    the run is made (see :func:`apply_pending`).

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


def apply_pending(page: str) -> None:
    """Put the presenter's view that this follower is being sent to into this run: the
    URL's values of ``page`` become the presenter's and this session's widget values of it
    are forgotten, so state.py seeds every control from the URL, with the usual checks.

    Done at the start of the run, not by the switch alone: Streamlit merges a rerun asked
    for before the last one started (the fragment's next poll) into it, with that request's
    query and widget values, which would undo the switch's.
    """
    pending = st.session_state.get(_PENDING)
    if pending is None or pending[1].page != page or not st.session_state.get(FOLLOW_KEY):
        return
    prefix = f"{page}."
    for key in [k for k in st.session_state if str(k).startswith(prefix)]:
        del st.session_state[key]
    for key in [k for k in st.query_params if k.startswith(prefix)]:
        del st.query_params[key]
    for key, value in pending[1].params:
        st.query_params[key] = value


def view_now(page: str) -> View:
    """This run's view: ``page`` and the URL's values without the language and room keys.

    Raises:
        ValueError: when the view is too large to share (see :meth:`View.of`).
    """
    params = {
        key: value
        for key, value in st.query_params.to_dict().items()
        if key != LANG_KEY and key != ROOM_KEY and not key.startswith(f"{ROOM_KEY}.")
    }
    return View.of(page, params)


def _plain(text: str) -> str:
    """Typed text shown as itself in markdown (its markup characters escaped)."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def question_text(question: Question) -> str:
    """The question in this session's language (a typed one as typed)."""
    return t(f"room.q_{question.ready}") if question.ready else _plain(question.text)


def option_text(question: Question, index: int) -> str:
    """Answer ``index`` of ``question`` in this session's language."""
    if question.ready:
        return t(f"room.q_{question.ready}_a{index}")
    return _plain(question.options[index])


def _voter() -> str:
    if _VOTER not in st.session_state:
        st.session_state[_VOTER] = secrets.token_hex(8)
    return st.session_state[_VOTER]


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
        ask_controls(link.code, page)
        tally_controls(link.code)


def wake_followers() -> None:
    """At the very end of a presenter's run that published a new view: wake the room's
    followers (:mod:`dashboard.rooms.push`). Last, so that their thirty reruns do not
    hold back the presenter's own."""
    code = st.session_state.pop(_WAKE, None)
    if code:
        push.wake(code)


def ask_controls(code: str, page: str) -> None:
    """The presenter's "Ask the room": a ready question of this page or a typed one."""
    with st.expander(t("room.ask_header")):
        choices = [q.id for q in ready_questions(page)] + [TYPED]
        choice = st.radio(
            t("room.ask_pick"),
            choices,
            key=f"_room.pick.{page}",
            format_func=lambda c: t("room.ask_typed") if c == TYPED else t(f"room.q_{c}"),
        )
        text, answers, correct = "", "", None
        asked = ready_to_ask(choice) if choice != TYPED else None
        if choice == TYPED:
            text = st.text_input(t("room.typed_text"), key="_room.typed_text", max_chars=200)
            answers = st.text_area(t("room.typed_answers"), key="_room.typed_answers")
            count = min(len([a for a in answers.splitlines() if a.strip()]), MAX_OPTIONS)
            correct = st.selectbox(
                t("room.typed_correct"),
                [None, *range(count)],
                key="_room.typed_correct",
                format_func=lambda i: t("room.typed_no_correct") if i is None else str(i + 1),
            )
        if st.button(t("room.ask_button"), key="_room.ask", type="primary"):
            try:
                asked = asked or typed_question(text, answers, correct)
                presenter.shared_store().ask(code, asked)
                st.session_state[_WAKE] = code  # the room sees the question at once
            except (ValueError, RoomEndedError) as err:
                st.warning(t("room.bad_question", detail=literal(err)))


@st.fragment(run_every=TALLY_POLL_S)
def tally_controls(code: str) -> None:
    """The presenter's live view of the room: learners, the question, its tally, the reveal."""
    store = presenter.shared_store()
    snap = store.get(code)
    if snap is None:
        st.warning(t("room.ended", code=literal(code)))
        return
    st.caption(t("room.viewers", n=snap.viewers))
    poll = snap.poll
    if poll is None:
        return
    show_poll(poll)
    left, right = st.columns(2)
    if not poll.revealed and left.button(t("room.reveal"), key="_room.reveal"):
        store.reveal(code)
        push.wake(code)
        st.rerun(scope="fragment")
    if right.button(t("room.clear"), key="_room.clear"):
        store.clear_question(code)
        push.wake(code)
        st.rerun(scope="fragment")


def show_poll(poll: Poll) -> None:
    """The question, its tally as bars and, once revealed, the answer and where the page
    measures it."""
    question = poll.question
    st.markdown(f"**{t('room.question_title')}:** {question_text(question)}")
    st.caption(t("room.answers_count", n=poll.answers))
    for index, count in enumerate(poll.tally):
        right = poll.revealed and index == question.correct
        label = f"{'✅ ' if right else ''}{option_text(question, index)}: {count}"
        st.progress(count / poll.answers if poll.answers else 0.0, text=label)
    if poll.revealed:
        show_answer(question)


def show_answer(question: Question) -> None:
    """The right answer and the figure the page measures (nothing to reveal in a poll)."""
    if question.correct is None:
        st.info(t("room.poll_no_answer"))
        return
    answer = option_text(question, question.correct)
    why = t(f"room.q_{question.ready}_why") if question.ready else ""
    st.success(f"**{t('room.answer_is', answer=answer)}**" + (f"\n\n{why}" if why else ""))


def follower_controls(
    link: RoomLink, pages: dict, page: str, sidebar: DeltaGenerator, main: DeltaGenerator
) -> None:
    """The follower's switch: turned off when the learner moved, and a jump to the
    presenter when it is on and the presenter is elsewhere; then the live fragment."""
    snap = presenter.shared_store().get(link.code, _voter())
    applied = _landed(page)
    was_following = st.session_state.get(_WAS_FOLLOWING, False)
    settled = applied is not None and _PENDING not in st.session_state
    if was_following and st.session_state.get(FOLLOW_KEY) and settled:
        if _safe_view(page) != applied[1]:
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
        if snap is not None and (not was_following or _moved_on(snap, applied)):
            jump(link, pages, page, snap)
    elif st.session_state.get(_LEFT):
        sidebar.info(t("room.left_notice"))
    else:
        sidebar.caption(t("room.not_following"))
    if snap is not None:
        state.write(SERVER_KEY, presenter.SERVER_ID)
    with main:
        follower_live_controls(link, pages, page)


def follow_now(link: RoomLink, pages: dict, page: str) -> None:
    """Before the page draws: a follower whose presenter moved on (or who just arrived, or
    just turned following on) is sent there at once (a run that a wake-up from
    :mod:`dashboard.rooms.push` or a poll asked for), so only the presenter's view is
    drawn. Whether the learner moved a control is decided after the page ran
    (:func:`follower_controls`).

    Args:
        link: from :func:`room_link`.
        pages: the app's ``st.Page`` objects by page name.
        page: the name of the page this run shows.
    """
    if not (link.code and st.session_state.get(FOLLOW_KEY)):
        return
    given = st.session_state.get(KEY_WIDGET)
    if given and presenter.key_matches(given):
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
        del st.session_state[_PENDING]
    return st.session_state.get(_APPLIED)


def _lost(page: str, applied: tuple[int, View] | None) -> bool:
    """In a poll: whether the browser shows a view other than the one this follower was
    sent to. The run that sent it there can be cut short by the browser's next request,
    and Streamlit then drops the run's unsent messages, the new query among them; the poll
    carries the browser's query, so it sees the difference and sends the follower again.
    (A learner's own move never shows here: the run it starts turns following off.)"""
    if applied is None or _PENDING in st.session_state or applied[1].page != page:
        return False
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

    ``before_page``: called before the page made any widget (:func:`follow_now`). A view of
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
            ROOM_KEY: link.code,
            FOLLOW_KEY: "true",
            SERVER_KEY: presenter.SERVER_ID,
        }
    )
    st.switch_page(pages[view.page], query_params=query)


@st.fragment(run_every=POLL_S)
def follower_live_controls(link: RoomLink, pages: dict, page: str) -> None:
    """Every :data:`POLL_S` seconds: follow the presenter, say where the room stands, and
    offer the current question's answers."""
    snap = presenter.shared_store().get(link.code, _voter())
    if snap is None:
        ended = st.session_state.get(_SEEN) or link.marker
        st.warning(t(f"room.{'ended' if ended else 'waiting'}", code=literal(link.code)))
        return
    st.session_state[_SEEN] = True
    applied = st.session_state.get(_APPLIED)
    if st.session_state.get(FOLLOW_KEY) and (_moved_on(snap, applied) or _lost(page, applied)):
        jump(link, pages, page, snap)
    if st.session_state.get(FOLLOW_KEY):
        st.caption(t("room.following", code=literal(link.code)))
    if snap.poll is not None:
        answer_controls(link.code, snap.poll)


def answer_controls(code: str, poll: Poll) -> None:
    """The question with one button per answer; after the reveal, the answer and tally."""
    if poll.revealed:
        show_poll(poll)
        return
    question = poll.question
    st.markdown(f"**{t('room.question_title')}:** {question_text(question)}")
    mine = st.session_state.get(_MY_ANSWER)
    columns = st.columns(len(question.options))
    for index, column in enumerate(columns):
        chosen = mine == (poll.number, index)
        if column.button(
            option_text(question, index),
            key=f"_room.answer.{poll.number}.{index}",
            type="primary" if chosen else "secondary",
            use_container_width=True,
        ):
            try:
                presenter.shared_store().answer(code, _voter(), index, poll.number)
                st.session_state[_MY_ANSWER] = mine = (poll.number, index)
            except RoomLimitError:
                st.warning(t("room.answer_full"))
            except (ValueError, RoomEndedError) as err:
                st.warning(t("room.answer_refused", detail=literal(err)))
    if mine is not None and mine[0] == poll.number:
        st.caption(t("room.your_answer", answer=option_text(question, mine[1])))
