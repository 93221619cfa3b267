"""Questions to a room: the presenter asks one (ready for the page, or typed) and watches
the live tally; each follower answers once, and sees the answer and the tally once revealed.

The questions themselves and their checks are :mod:`dashboard.rooms.questions`; the tally is
kept by the room's store (:mod:`dashboard.rooms.store`). :mod:`dashboard.room_controls` puts
these parts on the presenter's page, :mod:`dashboard.room_follow` on a follower's.
"""

from __future__ import annotations

import secrets

import streamlit as st

from dashboard.i18n import current_lang, t, t_in
from dashboard.literal import literal, plain
from dashboard.room_reach import room_reach
from dashboard.rooms import presenter, push
from dashboard.rooms.questions import (
    QuestionRefused,
    ready_questions,
    ready_to_ask,
    typed_question,
)
from dashboard.rooms.store import (
    MAX_OPTIONS,
    Poll,
    Question,
    QuestionClosedError,
    RoomEndedError,
    RoomLimitError,
    RoomServerUnreachable,
)

TALLY_POLL_S = 1.0
TYPED = "typed"
_VOTER = "_room.voter"
_MY_ANSWER = "_room.my_answer"  # (question number, choice)
SEEN_POLLS = "_room.polls"  # {question number: (Poll, my choice or None)}, for the record


def question_text(question: Question, lang: str | None = None) -> str:
    """The question in ``lang`` (this session's language when not given; a typed one as
    typed)."""
    if not question.ready:
        return plain(question.text)
    return t_in(lang or current_lang(), f"room.q_{question.ready}")


def option_text(question: Question, index: int, lang: str | None = None) -> str:
    """Answer ``index`` of ``question`` in ``lang`` (this session's language when not
    given)."""
    if question.ready:
        return t_in(lang or current_lang(), f"room.q_{question.ready}_a{index}")
    return plain(question.options[index])


def voter() -> str:
    """This session's anonymous id in the room (one answer per learner)."""
    if _VOTER not in st.session_state:
        st.session_state[_VOTER] = secrets.token_hex(8)
    return st.session_state[_VOTER]


def ask_controls(code: str, page: str) -> bool:
    """The presenter's "Ask the room": a ready question of this page or a typed one.

    Returns:
        Whether a question was put to the room in this run (its followers are to be woken).
    """
    with st.expander(t("room.ask_header")):
        choices = [q.id for q in ready_questions(page)] + [TYPED]
        lang = current_lang()  # bound now: a label is formatted again outside this run
        choice = st.radio(
            t("room.ask_pick"),
            choices,
            key=f"_room.pick.{page}",
            format_func=lambda c: t_in(lang, "room.ask_typed" if c == TYPED else f"room.q_{c}"),
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
            except QuestionRefused as err:
                rule = t(f"room.bad_question_{err.reason}", **err.detail)
                st.warning(t("room.bad_question", detail=rule))
                return False
            return put_question(code, asked)
    return False


def put_question(code: str, question: Question) -> bool:
    """Put ``question`` to room ``code`` (replacing the one asked before); a room that has
    ended, a room server out of reach or a question the store refuses gets one line saying
    so, where this is called.

    Returns:
        Whether the room now has the question (its followers are to be woken).
    """
    try:
        presenter.shared_store().ask(code, question)
    except RoomEndedError:
        st.warning(t("room.ended", code=literal(code)))
    except RoomServerUnreachable:
        st.warning(t("room.unreachable", code=literal(code)))
    except ValueError as err:
        st.warning(t("room.bad_question", detail=literal(err)))
    else:
        return True
    return False


@st.fragment(run_every=TALLY_POLL_S)
def tally_controls(code: str) -> None:
    """The presenter's live view of the room: learners, the question, its tally, the reveal
    (while the room server cannot be reached, one line saying so)."""
    push.back_to_full_run_page()  # a timer's run on the page the server switched away from
    with room_reach(code):
        _tally(code)


def _tally(code: str) -> None:
    """One poll of :func:`tally_controls`."""
    store = presenter.shared_store()
    snap = store.get(code)
    if snap is None:
        st.warning(t("room.ended", code=literal(code)))
        return
    st.caption(t("room.viewers", n=snap.viewers))
    poll = snap.poll
    if poll is None:
        return
    remember_poll(poll)
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


def seen_polls() -> dict[int, tuple[Poll, int | None]]:
    """This session's questions seen, by number: (the newest state seen, this learner's
    answer or ``None``). One dict for the session's life, updated in place, so that a
    take-home record made later from it (outside any run) holds the answers given since."""
    return st.session_state.setdefault(SEEN_POLLS, {})


def remember_poll(poll: Poll) -> None:
    """Keep the newest state of ``poll`` seen by this session, with this learner's answer
    to it (a lesson's take-home record lists them)."""
    mine = st.session_state.get(_MY_ANSWER)
    choice = mine[1] if mine is not None and mine[0] == poll.number else None
    seen_polls()[poll.number] = (poll, choice)


def answer_controls(code: str, poll: Poll) -> None:
    """The question with one button per answer; after the reveal, the answer and tally."""
    remember_poll(poll)
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
                presenter.shared_store().answer(code, voter(), index, poll.number)
                st.session_state[_MY_ANSWER] = mine = (poll.number, index)
                remember_poll(poll)
            except RoomLimitError:
                st.warning(t("room.answer_full"))
            except QuestionClosedError:
                st.warning(t("room.answer_closed"))
            except RoomEndedError:
                st.warning(t("room.ended", code=literal(code)))
            except ValueError as err:
                st.warning(t("room.answer_refused", detail=literal(err)))
    if mine is not None and mine[0] == poll.number:
        st.caption(t("room.your_answer", answer=option_text(question, mine[1])))
