"""The landing page's header, above the Intuition page: the lab's name and what it is in one
sentence, the lessons as links, and where attention sits in a transformer, each box a link to
the page that shows it (``dashboard/app.py`` draws it when the landing page runs)."""

from __future__ import annotations

import streamlit as st

from dashboard.i18n import current_lang, t
from dashboard.lesson_bar import LESSON_KEY, STEP_KEY
from dashboard.lessons.model import LEVELS, shipped_lessons

# the boxes of where attention sits in a transformer, each with the page that shows it
DIAGRAM = (("tokens", "step_by_step"), ("embeddings", "playground"), ("attention", "multihead"))
DIAGRAM += (("mlp", "decoder"), ("next", "decoder"))


def landing_header() -> None:
    """The lab's name and what it is in one sentence, the lessons as links (title, steps,
    minutes, level), and where attention sits in a transformer, each box a link to the page
    that shows it; the analogies follow."""
    lang = current_lang()
    st.title(t("intuition.lab_title"))
    st.markdown(t("intuition.lab_sentence"))
    lessons = sorted(shipped_lessons().items(), key=lambda item: LEVELS.index(item[1].level))
    for column, (name, lesson) in zip(st.columns(len(lessons)), lessons, strict=True):
        first = lesson.steps[0].page
        column.page_link(
            f"views/{first}.py",
            label=f"**{lesson.title(lang)}**",
            icon=":material/school:",
            query_params={LESSON_KEY: name, STEP_KEY: "1", "lang": lang},
        )
        level = t(f"lesson.level_{lesson.level}")
        steps, minutes = len(lesson.steps), lesson.minutes
        column.caption(t("intuition.lesson_line", steps=steps, minutes=minutes, level=level))
    diagram = st.container(border=True)
    diagram.caption(t("intuition.diagram_flow"))
    for column, (box, page) in zip(diagram.columns(len(DIAGRAM)), DIAGRAM, strict=True):
        column.page_link(
            f"views/{page}.py", label=t(f"intuition.box_{box}"), query_params={"lang": lang}
        )
