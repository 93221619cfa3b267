"""Instructors make their own lessons: the presenter of a room opens **Make a lesson** above
the page and

* adds the view on the screen as a step (its page and this page's values, exactly the link's
  query; a title, what to notice, notes for the presenter and a ready question of the page;
  a text written in one language only is used for both);
* reorders and removes steps, and names the lesson (file name, title, minutes, level);
* downloads the lesson file (TOML, :func:`dashboard.lessons.model.lesson_toml`), or uses it
  in the room at once;
* loads a lesson file (an upload), and reads why a file of the operator's lessons folder
  was left out (the whole reason).

Everything is checked as a shipped file is (:func:`dashboard.lessons.model.parse_lesson`):
what cannot be used gets one line with the whole reason, naming the step and the field. A
lesson used or loaded here belongs to the presenter's room
(:func:`dashboard.lessons.library.load_lesson`: the room keeps its text, for its learners on
every replica; never written into the operator's folder); the draft is this tab's own until
then. Every text of a lesson file is shown as plain text.
"""

from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dashboard import state
from dashboard.i18n import current_lang, t, t_in
from dashboard.lesson_bar import go_to_step
from dashboard.lessons import library
from dashboard.lessons.model import (
    LEVELS,
    MAX_STEPS,
    Lesson,
    LessonError,
    Step,
    Text,
    lesson_toml,
    parse_lesson,
    parse_step,
)
from dashboard.literal import plain
from dashboard.rooms.questions import ready_questions

STEPS = "_author.steps"  # the draft's steps, in order
_ADDED = "_author.added"  # a line saying what the last action did
_LOADED = "_author.loaded"  # (file id, the outcome's line) of the last upload read
NO_QUESTION = ""


def both(en: str, zh: str) -> dict[str, str]:
    """A text in both languages from two fields; one left empty takes the other's text."""
    en, zh = en.strip(), zh.strip()
    return {"en": en or zh, "zh": zh or en}


def view_step(page: str, query: dict[str, str], fields: dict[str, str], number: int) -> Step:
    """The step that shows ``page`` with ``query``'s values of that page, checked.

    Args:
        page: the page on the screen.
        query: this view's link query (other pages' keys, the language and the room's are
            left out).
        fields: ``title_en``, ``title_zh``, ``notice_en``, ``notice_zh``, ``notes_en``,
            ``notes_zh`` and ``question`` (a ready question's id, or ``""``).
        number: the step's number in the lesson, from 1.

    Raises:
        LessonError: naming the step and the field, for a text missing or too long.
    """
    raw = {
        "page": page,
        "query": {key: value for key, value in query.items() if key.startswith(f"{page}.")},
        "title": both(fields["title_en"], fields["title_zh"]),
        "notice": both(fields["notice_en"], fields["notice_zh"]),
    }
    if fields["question"]:
        raw["question"] = fields["question"]
    if fields["notes_en"].strip() or fields["notes_zh"].strip():
        raw["notes"] = both(fields["notes_en"], fields["notes_zh"])
    return parse_step(raw, t("lesson.author_draft"), number)


def draft_lesson(name: str, title: dict[str, str], minutes: int, level: str, steps) -> Lesson:
    """The draft as a lesson, checked as a file is (written and read back).

    Raises:
        LessonError: naming the field (the name, the title, the steps) that cannot be used.
    """
    if not steps:
        raise LessonError(f"{name}.toml: {t('lesson.author_no_steps')}")
    text = Text(title["en"] or name, title["zh"] or name)  # (both() filled the other)
    lesson = Lesson(name, text, minutes, level, tuple(steps))
    return parse_lesson(lesson_toml(lesson), name)


def move_step(index: int, by: int) -> None:
    """Move step ``index`` (from 0) of the draft ``by`` places (a callback)."""
    steps = st.session_state[STEPS]
    target = min(max(index + by, 0), len(steps) - 1)
    steps.insert(target, steps.pop(index))


def remove_step(index: int) -> None:
    """Remove step ``index`` (from 0) of the draft (a callback)."""
    st.session_state[STEPS].pop(index)


def author_panel(page: str, box: DeltaGenerator, room: str) -> None:
    """The presenter's **Make a lesson** in ``box``: the step form for this view, the draft's
    steps, its name, download and use, and loading a file.

    Args:
        page: the page on the screen (its view is what a new step shows).
        box: where the panel goes (above the page, with the room's parts).
        room: the room presented: a lesson used or loaded here is its own.
    """
    steps = st.session_state.setdefault(STEPS, [])
    with box.expander(t("lesson.author_title"), icon=":material/edit_note:"):
        _add_form(page, steps)
        said = st.session_state.pop(_ADDED, "")
        if said:
            st.success(said)
        _draft_steps(steps)
        _name_and_use(steps, room)
        _upload(room)
        for reason in library.folder_lessons()[1]:  # the operator's folder: what it left out
            st.caption(t("lesson.author_left_out", reason=plain(reason)))


def _add_form(page: str, steps: list[Step]) -> None:
    """The form that adds this view as the draft's next step."""
    lang = current_lang()
    with st.form("_author.add", clear_on_submit=True, border=True):
        st.markdown(f"**{t('lesson.author_add_title', n=len(steps) + 1)}**")
        fields = {}
        for field, label in (("title", "title_field"), ("notice", "notice"), ("notes", "notes")):
            left, right = st.columns(2)
            for lang_key, column, name in (("en", left, "English"), ("zh", right, "中文")):
                fields[f"{field}_{lang_key}"] = column.text_input(
                    f"{t(f'lesson.author_{label}')} · {name}", key=f"_author.{field}_{lang_key}"
                )
        choices = [NO_QUESTION, *(q.id for q in ready_questions(page))]
        fields["question"] = st.selectbox(
            t("lesson.author_question"),
            choices,
            key="_author.question",
            format_func=lambda c: t_in(lang, f"room.q_{c}") if c else t_in(lang, "lesson.none"),
        )
        st.caption(t("lesson.author_one_language"))
        if st.form_submit_button(t("lesson.author_add"), type="primary"):
            try:
                if len(steps) >= MAX_STEPS:
                    raise LessonError(t("lesson.author_full", n=MAX_STEPS))
                steps.append(view_step(page, state.view_query(), fields, len(steps) + 1))
            except LessonError as err:
                st.warning(t("lesson.author_refused", detail=plain(err)))
            else:
                st.session_state[_ADDED] = t("lesson.author_added", n=len(steps))
                st.rerun()


def _draft_steps(steps: list[Step]) -> None:
    """The draft's steps, each with ↑, ↓ and ✕."""
    lang = current_lang()
    for index, step in enumerate(steps):
        label, up, down, drop = st.columns([8, 1, 1, 1], vertical_alignment="center")
        page = t(f"common.page_{step.page}")
        label.markdown(f"{index + 1}. **{plain(step.title(lang))}** · {page}")
        args = (index,)
        up.button("↑", key=f"_author.up.{index}", on_click=move_step, args=(index, -1))
        down.button("↓", key=f"_author.down.{index}", on_click=move_step, args=(index, 1))
        drop.button("✕", key=f"_author.drop.{index}", on_click=remove_step, args=args)


def _name_and_use(steps: list[Step], room: str) -> None:
    """The lesson's name, title, minutes and level; its file to download; using it here."""
    lang = current_lang()  # bound now: a label is formatted again outside this run
    name = st.text_input(t("lesson.author_name"), "my-lesson", key="_author.name", max_chars=40)
    left, right = st.columns(2)
    title = both(
        left.text_input(t("lesson.author_lesson_title") + " · English", key="_author.lesson_en"),
        right.text_input(t("lesson.author_lesson_title") + " · 中文", key="_author.lesson_zh"),
    )
    left, right = st.columns(2)
    minutes = left.number_input(t("lesson.author_minutes"), 1, 240, 10, key="_author.minutes")
    level = right.selectbox(
        t("lesson.author_level"),
        LEVELS,
        key="_author.level",
        format_func=lambda level: t_in(lang, f"lesson.level_{level}"),
    )
    try:
        lesson = draft_lesson(name.strip(), title, int(minutes), level, steps)
    except LessonError as err:
        if steps:
            st.warning(t("lesson.author_refused", detail=plain(err)))
        return
    data = lesson_toml(lesson).encode("utf-8")
    download, use = st.columns(2)
    download.download_button(
        t("lesson.author_download"),
        data,
        file_name=f"{lesson.name}.toml",
        mime="application/toml",
        key="_author.download",
    )
    if use.button(t("lesson.author_use"), key="_author.use", type="primary"):
        _use(data, f"{lesson.name}.toml", room)


def _use(data: bytes, filename: str, room: str) -> None:
    """Keep the lesson in ``room`` and go to its first step (or say why not)."""
    try:
        lesson = library.load_lesson(data, filename, room)
    except LessonError as err:
        st.warning(t("lesson.author_refused", detail=plain(err)))
        return
    go_to_step(lesson.name, 1)
    st.rerun()


def _upload(room: str) -> None:
    """Load a lesson file: checked, kept in ``room``, and offered as a link to step 1."""
    uploaded = st.file_uploader(t("lesson.author_upload"), type=["toml"], key="_author.upload")
    if uploaded is None:
        return
    done = st.session_state.get(_LOADED)
    if done is None or done[0] != uploaded.file_id:
        try:
            lesson = library.load_lesson(uploaded.getvalue(), uploaded.name, room)
            done = (uploaded.file_id, lesson.name, "")
        except LessonError as err:
            done = (uploaded.file_id, "", str(err))
        st.session_state[_LOADED] = done
    _, name, problem = done
    if problem:
        st.warning(t("lesson.author_refused", detail=plain(problem)))
        return
    lesson = library.find_lesson(name, room)
    if lesson is None:  # the room ended since
        return
    st.success(t("lesson.author_loaded", title=plain(lesson.title(current_lang()))))
    st.button(
        t("lesson.author_open"),
        key="_author.open",
        on_click=go_to_step,
        args=(lesson.name, 1),
        type="primary",
    )
    if not st.session_state[STEPS]:  # an empty draft starts from the loaded lesson
        st.session_state[STEPS] = list(lesson.steps)
