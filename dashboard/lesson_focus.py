"""A long page in a lesson: the sections the lesson is about drawn, those below them folded,
each drawn when its fold is opened.

Heads at work is ten charts and two tables over about 7,000 px. A lesson step about one of
its sections (``section = "census"``) scrolls there, but Next was done only once the browser
had drawn the whole page (``python -m bench.lesson_next --lesson inside-a-real-model``: the
why step 0.71 s median with every section drawn, 0.50 s with the folds). So a page with several
sections opens its boxes with :func:`section_boxes`: outside a lesson, or on a page whose
sections the lesson's steps do not name, every box is a plain container and every section
is drawn. In a lesson step on a page whose sections its steps name, the sections after the
lowest one named sit in folds (``st.expander`` with ``on_change="rerun"``, Streamlit's lazy
expander): a fold's section is drawn only on the runs where its learner has opened it. The
lesson's steps on that page draw the same sections (the census step's words speak of the
copy test below it, and the step after it changes one section, not the page's layout).

The lesson step of this run is noted by :func:`note_step` (``dashboard/app.py``, once the run
knows its lesson and step, before the page draws).
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dashboard.lessons.model import Lesson

_STEP_SECTIONS = "_lesson_focus.sections"  # (page, the lesson's sections of it), or None
FOLD_KEY = "_fold.{page}.{name}"  # each fold's own open state (this tab's; a room shares none)


@dataclass(frozen=True)
class SectionBox:
    """Where one section of a page goes, and whether to draw it on this run."""

    box: DeltaGenerator
    shown: bool


def note_step(found: tuple[Lesson, int] | None) -> None:
    """Keep the page of this run's lesson step and the sections of it the lesson's steps
    name (``None``: not in a lesson)."""
    if found is None:
        st.session_state[_STEP_SECTIONS] = None
        return
    lesson, number = found
    page = lesson.steps[number - 1].page
    named = frozenset(s.section for s in lesson.steps if s.page == page and s.section)
    st.session_state[_STEP_SECTIONS] = (page, named)


def lesson_sections(page: str) -> frozenset[str]:
    """The sections of ``page`` this run's lesson is about (none outside a lesson step on
    ``page``)."""
    noted = st.session_state.get(_STEP_SECTIONS)
    return noted[1] if noted is not None and noted[0] == page else frozenset()


def folded_after(order: tuple[str, ...], named: frozenset[str]) -> frozenset[str]:
    """The sections of ``order`` (the page's sections, top to bottom) below the lowest one
    of ``named``; none when ``named`` holds none of them."""
    places = [order.index(name) for name in named if name in order]
    return frozenset(order[max(places) + 1 :]) if places else frozenset()


def section_boxes(
    page: str, titles: dict[str, str], above: tuple[str, ...] = ()
) -> dict[str, SectionBox]:
    """One box per section of ``page``, in the order of ``titles`` (section name → its title,
    top to bottom), made where those sections go: a container for a section drawn now, a
    fold (labelled with its title) for one below the lesson's sections (:func:`folded_after`),
    shown when its learner has opened it. ``above``: the names of the page's sections
    already drawn above these."""
    folded = folded_after((*above, *titles), lesson_sections(page))
    boxes = {}
    for name, title in titles.items():
        if name in folded:
            fold = st.expander(title, key=FOLD_KEY.format(page=page, name=name), on_change="rerun")
            boxes[name] = SectionBox(fold, bool(fold.open))
        else:
            boxes[name] = SectionBox(st.container(), True)
    return boxes
