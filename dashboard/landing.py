"""The landing page's header, above the Intuition page: the lab's name and what it is in one
sentence, the lessons as links, and where attention sits in a transformer, each box a link to
the page that shows it (``dashboard/app.py`` draws it when the landing page runs)."""

from __future__ import annotations

import streamlit as st

from dashboard.i18n import current_lang, t
from dashboard.lesson_bar import LESSON_KEY, STEP_KEY, shown
from dashboard.lessons.library import all_lessons
from dashboard.lessons.model import LEVELS, Lesson, shipped_lessons

# the boxes of where attention sits in a transformer, each with the page that shows it
DIAGRAM = (("tokens", "step_by_step"), ("embeddings", "playground"), ("attention", "multihead"))
DIAGRAM += (("mlp", "decoder"), ("next", "decoder"))
OWN_PER_ROW = 3  # the lessons of this server's own, per row


def _lesson_links(pages: dict, lessons: list[Lesson], columns: int = 0) -> None:
    """One column per lesson: its title as a link to its first step, and a line with its
    steps, minutes and level."""
    lang = current_lang()
    for column, lesson in zip(st.columns(columns or len(lessons)), lessons, strict=False):
        column.page_link(
            pages[lesson.steps[0].page],
            label=f"**{shown(lesson, lesson.title(lang))}**",
            icon=":material/school:",
            query_params={LESSON_KEY: lesson.name, STEP_KEY: "1", "lang": lang},
        )
        level = t(f"lesson.level_{lesson.level}")
        steps, minutes = len(lesson.steps), lesson.minutes
        column.caption(t("intuition.lesson_line", steps=steps, minutes=minutes, level=level))


def landing_header(pages: dict, room: str = "") -> None:
    """The lab's name and what it is in one sentence, the lessons as links (title, steps,
    minutes, level), and where attention sits in a transformer, each box a link to the page
    that shows it; the analogies follow.

    Args:
        pages: the app's ``st.Page`` objects by page name: a link names the page object, not
            its file (the landing page's file also backs the hidden root page, whose link
            would send the learner on through the root and lose what that run did not draw).
        room: the room of this visitor's link (``""``: none): the lessons its presenter
            loaded are listed for its learners alone.
    """
    lang = current_lang()
    st.title(t("intuition.lab_title"))
    st.markdown(t("intuition.lab_sentence"))
    _lesson_links(pages, sorted(shipped_lessons().values(), key=lambda ls: LEVELS.index(ls.level)))
    own = [ls for name, ls in all_lessons(room).items() if name not in shipped_lessons()]
    if own:  # the operator's folder, and the lessons loaded in this visitor's room
        st.caption(t("lesson.map_own"))
        for start in range(0, len(own), OWN_PER_ROW):
            _lesson_links(pages, own[start : start + OWN_PER_ROW], columns=OWN_PER_ROW)
    diagram = st.container(border=True)
    diagram.caption(t("intuition.diagram_flow"))
    for column, (box, page) in zip(diagram.columns(len(DIAGRAM)), DIAGRAM, strict=True):
        column.page_link(pages[page], label=t(f"intuition.box_{box}"), query_params={"lang": lang})
