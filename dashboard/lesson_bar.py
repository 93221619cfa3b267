"""Walking a lesson: the link's ``lesson=NAME&lesson.step=K`` shows a bar above the page.

The bar says "Step K of N", the step's title and what to notice, with **Back** and **Next**
(the lessons' texts are the lab's own, shipped files, drawn as Markdown).
Moving to a step takes the learner to its page with its values (:func:`arrive`: a switch of
page with the step's link, then its values put into the page's controls before they are
drawn, as a room's view is). The learner may move the controls: the bar then says the view is
no longer the step's and offers **Back to the step's view**. The step is in the link, so a
reload, Back/Forward and a shared link land on the same step. A lesson that does not exist,
or a step past its end, gets the usual one-line notice.

In a room the lesson keys travel with the presenter's view: a follower sees the same bar
without Back and Next (their controls follow the presenter's, :mod:`dashboard.room_follow`),
and the presenter alone reads the step's notes and asks the step's question to the room
with one click (its tally shows below, as for any question).
"""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dashboard import room_controls, state
from dashboard.i18n import current_lang, t
from dashboard.lesson_record import record_markdown
from dashboard.lessons import model
from dashboard.lessons.library import all_lessons
from dashboard.lessons.model import LESSON_KEY, STEP_KEY, Lesson, Step
from dashboard.room_questions import SEEN_POLLS
from dashboard.url_values import RefusedValue, nearest_int

DEFAULT_BASE = "http://localhost:8501/"  # a link's address when the run has none (tests)
_ARRIVE = "_lesson.arrive"  # (lesson name, step number): the step this session moves to
_OPENED = "_lesson.opened"  # the lessons this session's links opened


def parse_lesson_name(raw: str) -> str:
    """A lesson's name from the link: a shipped lesson, one of the operator's folder or one
    loaded into this server (:func:`dashboard.lessons.library.all_lessons`).

    Raises:
        RefusedValue: naming the lessons there are, for any other text.
    """
    if raw not in all_lessons():
        names = ", ".join(all_lessons())
        raise RefusedValue(f"no lesson {raw!r}", "unknown_lesson", lessons=names)
    return raw


def lesson_link(page: str) -> tuple[Lesson, int] | None:
    """The lesson and step (from 1) this run's link names, written back to it; ``None`` when
    it names none (or one that does not exist: the notice says so). A step past the lesson's
    ends is moved to the nearest one, with the notice. A link that opens a lesson on another
    page than its step's (``/?lesson=why-sqrt-dk``) takes the learner to the step
    (:func:`arrive`).

    Args:
        page: the name of the page this run shows.
    """
    in_link = LESSON_KEY in st.query_params
    name = state.read(LESSON_KEY, "", parse_lesson_name)
    if not name:
        return None
    lesson = all_lessons()[name]
    last = len(lesson.steps)
    raw = st.query_params.get(STEP_KEY)
    number = state.read(STEP_KEY, 1, lambda text: state.parse_int(text, -(10**12), 10**12))
    moved = nearest_int(1, last, 1, 1)(number)
    if moved != number:
        state.add_notice(STEP_KEY, str(raw), "moved_in_range", value=moved, low=1, high=last)
        number = moved
    state.write(LESSON_KEY, name)
    state.write(STEP_KEY, number)
    opened = st.session_state.setdefault(_OPENED, set())
    if in_link and name not in opened:
        opened.add(name)
        own = any(key.startswith(f"{page}.") for key in st.query_params)
        if lesson.steps[number - 1].page != page or not own:  # not the view of a copied link
            st.session_state[_ARRIVE] = (name, number)
    return lesson, number


def step_query(lesson: Lesson, number: int) -> dict[str, str]:
    """The link of step ``number`` of ``lesson``: its page's values, the lesson's keys and
    this learner's language (the presentation view stays with the tab by itself,
    :func:`dashboard.presentation.present_switch`)."""
    return model.step_query(lesson, number, current_lang())


def go_to_step(name: str, number: int) -> None:
    """Next, Back, "Back to the step's view" and a lesson just loaded (a callback, before
    the rerun): the run takes this session to step ``number`` of lesson ``name``."""
    st.session_state[_ARRIVE] = (name, number)


def arrive(pages: dict, page: str, found: tuple[Lesson, int] | None) -> tuple[Lesson, int] | None:
    """Before the page draws: a learner who pressed Next, Back or "Back to the step's view"
    (or opened a lesson's link, :func:`lesson_link`) is taken to that step: switched to its
    page with its link (the run ends), then, on that page, each control takes the step's
    value before it is drawn (:func:`dashboard.state.give_values`).

    Args:
        pages: the app's ``st.Page`` objects by page name.
        page: the name of the page this run shows.
        found: the lesson and step of this run's link (:func:`lesson_link`).

    Returns:
        The lesson and step this run shows.
    """
    pending = st.session_state.get(_ARRIVE)
    if pending is None or pending[0] not in all_lessons():
        return found
    lesson = all_lessons()[pending[0]]
    step = lesson.steps[pending[1] - 1]
    if step.page != page:
        state.carry_notices()  # a link's refused step, said on the step's page
        st.switch_page(pages[step.page], query_params=step_query(lesson, pending[1]))
    del st.session_state[_ARRIVE]
    state.give_values(page, dict(step.query))
    state.write(LESSON_KEY, lesson.name)
    state.write(STEP_KEY, pending[1])
    return lesson, pending[1]


def on_step_view(step: Step, page: str) -> bool:
    """Whether this run shows step ``step``'s view: its page, and each value it sets."""
    query = state.view_query()
    return page == step.page and all(query.get(key) == value for key, value in step.query)


def lesson_bar(
    found: tuple[Lesson, int] | None,
    page: str,
    box: DeltaGenerator,
    *,
    can_move: bool,
    room: str,
) -> None:
    """The lesson's bar in ``box``: the step, its title and what to notice, Back and Next
    (when ``can_move``: not for a follower), "Back to the step's view" when the page shows
    another view, and the step's notes for the presenter.

    Args:
        found: the lesson and step of this run's link (:func:`lesson_link`), or ``None``.
        page: the page this run shows.
        box: where the bar goes (above the page).
        can_move: whether this learner moves through the lesson (not a locked follower).
        room: the room this tab presents ("" when it presents none): the presenter alone
            reads the notes and asks the step's question with one click.
    """
    if found is None:
        return
    lesson, number = found
    lang, step, last = current_lang(), found[0].steps[number - 1], len(found[0].steps)
    with box.container(border=True):
        st.caption(f"{lesson.title(lang)} · {t('lesson.step_of', k=number, n=last)}")
        st.markdown(f"**{step.title(lang)}**")
        st.markdown(f"{t('lesson.notice')} {step.notice(lang)}")
        if can_move:
            _moves(lesson, number, last)
            if not on_step_view(step, page):
                st.caption(t("lesson.moved_away"))
                st.button(
                    t("lesson.back_to_step"),
                    key="_lesson.back_to_step",
                    on_click=go_to_step,
                    args=(lesson.name, number),
                )
        if not can_move:  # a follower: the record all the same
            record_button(lesson, number, st)
        if room and step.question:
            _ask_button(room, step.question, number)
        if room and step.notes is not None:
            with st.expander(t("lesson.notes")):
                st.markdown(step.notes(lang))


def _ask_button(room: str, question_id: str, number: int) -> None:
    """The presenter's one click that puts the step's question to the room."""
    left, right = st.columns([2, 3], vertical_alignment="center")
    right.caption(t(f"room.q_{question_id}"))
    if left.button(t("lesson.ask_step"), key=f"_lesson.ask.{number}", icon="🙋"):
        room_controls.ask_step_question(room, question_id)


def step_link(lesson: Lesson, number: int) -> str:
    """The full link of step ``number`` (this server's address, the step's page and query)."""
    parts = urlsplit(st.context.url or DEFAULT_BASE)
    root = parts.path.rsplit("/", 1)[0]
    page = lesson.steps[number - 1].page
    return f"{parts.scheme}://{parts.netloc}{root}/{page}?{urlencode(step_query(lesson, number))}"


def record_button(lesson: Lesson, number: int, where: DeltaGenerator) -> None:
    """The take-home record's download (:mod:`dashboard.lesson_record`), marked on the last
    step."""
    lang = current_lang()
    polls = st.session_state.get(SEEN_POLLS, {})
    text = record_markdown(lesson, lang, lambda k: step_link(lesson, k), polls)
    where.download_button(
        t("lesson.record"),
        text.encode("utf-8"),
        file_name=f"{lesson.name}-{lang}.md",
        mime="text/markdown",
        key="_lesson.record",
        type="primary" if number == len(lesson.steps) else "secondary",
    )


def _moves(lesson: Lesson, number: int, last: int) -> None:
    """Back and Next (each disabled at its end of the lesson), the record, and leaving the
    lesson."""
    back, ahead, record, leave = st.columns([1, 1, 2, 2])
    record_button(lesson, number, record)
    back.button(
        t("lesson.back"),
        key="_lesson.back",
        disabled=number == 1,
        on_click=go_to_step,
        args=(lesson.name, number - 1),
    )
    ahead.button(
        t("lesson.next"),
        key="_lesson.next",
        type="primary",
        disabled=number == last,
        on_click=go_to_step,
        args=(lesson.name, number + 1),
    )
    leave.button(t("lesson.leave"), key="_lesson.leave", on_click=_leave)


def _leave() -> None:
    """ "Leave the lesson" (a callback): the lesson's keys leave the link and this session."""
    for key in (LESSON_KEY, STEP_KEY):
        state.forget(key)
