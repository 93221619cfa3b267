"""Attention Lab: page config, the shared sidebar and the page list (routing only).

Run it with ``streamlit run dashboard/app.py``.

How the framework fits together (follow this when adding a page):

* **Pages** live in ``dashboard/views/<page>.py``, one per file, and are listed in
  :data:`dashboard.views.PAGES` for ``st.navigation``; the title is ``t("common.page_<page>")``.
  Each page ends the same way: ``controls.page_intro(PAGE)``, ``ctl = <page>_controls(PAGE)``
  (a frozen config of plain values), ``render(ctl)`` (see CONTRIBUTING.md).
* **Strings** come from :func:`dashboard.i18n.t` with keys ``"<namespace>.<name>"`` stored in
  ``dashboard/locales/{en,zh}/<namespace>.json``; a page uses its own namespace plus
  ``common``. The sidebar language switch is the query parameter ``lang``.
* **Controls** are made with :mod:`dashboard.state` helpers (``slider_int``, ``select``, …)
  or :mod:`dashboard.controls` groups, with keys ``"<page>.<param>"``: each value is read
  from the URL (bad values fall back to defaults with one visible notice per page), shown
  as a widget, and written back, so the URL always reproduces the view.
* **Data**: tensor maths only in the :mod:`dashboard.data` package (cached calls taking plain
  values or a frozen :class:`dashboard.config.LayerConfig`);
  :mod:`dashboard.charts` turns DataFrames into Altair charts (or, for big heatmaps, the
  data of the canvas heatmap that :mod:`dashboard.charts.canvas` draws); :mod:`dashboard.exports`
  adds download buttons.
* This file runs on every rerun: it resets the URL bookkeeping, draws the language and
  device choice, runs the page, then shows URL notices above the page, fills the
  copy-link box, and drops query keys the page did not use. It imports ``dashboard`` as an
  installed package (``-e .`` in requirements.txt), so it needs no import-path edit.
* **Process state** (torch's threads, the profiler, the C heaps, start-up order) has one
  owner, :mod:`dashboard.runtime`: each run is counted by
  :func:`dashboard.runtime.threads.script_run`, which shares the cores between concurrent
  runs, and :mod:`dashboard.runtime.startup` says what happens before and after each page
  (which pages import torch early and which late; see its docstring). The sidebar's device
  line keeps its place under the language switch and is drawn by the page's first
  :func:`dashboard.controls.current_device` call (listing the devices needs torch, imported
  meanwhile).
"""

from __future__ import annotations

import copy
from pathlib import Path
from urllib.parse import urlencode

import streamlit as st

from dashboard import (
    controls,
    landing,
    lesson_author,
    lesson_bar,
    lesson_figures,
    lesson_focus,
    presentation,
    room_controls,
    state,
)
from dashboard.i18n import LANG_KEY, LANG_NAMES, LANGS, current_lang, t
from dashboard.rooms import push
from dashboard.runtime import startup, threads
from dashboard.serving import prewarm
from dashboard.views import APP_ICON, PAGES, SECTIONS, default_page

VIEWS_DIR = Path(__file__).parent / "views"
_PAGES_KEY = "_nav.pages"  # (language, pages, root) of this session: see session_pages
DEFAULT_BASE_URL = "http://localhost:8501/"


def language_switch() -> str:
    """Draw the English/中文 switch (query parameter ``lang``) and return the language."""
    return state.radio(
        "",
        LANG_KEY,
        t("common.lang_label"),
        LANGS,
        "en",
        format_func=LANG_NAMES.get,
        horizontal=True,
    )


def current_url() -> str:
    """Return the full URL of the current view: the page address plus the query string of
    this run's values (:func:`dashboard.state.view_query`)."""
    base = st.context.url or DEFAULT_BASE_URL
    base = base.split("?", 1)[0]
    query = urlencode(state.view_query())
    return f"{base}?{query}" if query else base


def navigation_pages() -> dict[str, st.Page]:
    """Every page of :data:`dashboard.views.PAGES` by name, with its translated title, each
    at its own path (the landing page too: ``/intuition``)."""
    return {
        name: st.Page(
            VIEWS_DIR / f"{name}.py",
            title=t(f"common.page_{name}"),
            icon=icon,
            url_path=name,
        )
        for name, icon in PAGES
    }


def root_page() -> st.Page:
    """What the root URL (``/``) opens: Streamlit serves its default page there and only
    there, so the landing page as the default had no path of its own (``/intuition`` was
    "Page not found"). This hidden default is never drawn: :func:`main` sends it on to the
    landing page at its own path (or to the page a root link names) with the link's query."""
    name, icon = PAGES[0]
    return st.Page(
        VIEWS_DIR / f"{name}.py",
        title=t(f"common.page_{name}"),
        icon=icon,
        url_path="",
        default=True,
        visibility="hidden",
    )


def session_pages() -> tuple[dict[str, st.Page], st.Page]:
    """This run's own pages and hidden root, copied from the session's, which are made once
    per session and language: ``st.Page`` resolves its file on the disk each time it is made
    (an eighth of a follower's rerun, measured with py-spy in ``bench.load --mode room``),
    and a copy does not. Each run gets copies because ``st.navigation`` marks the page it
    returns as runnable on the object itself and ``Page.run`` clears the mark, and two runs
    of one session can overlap (a run that a newer request stopped goes on until its next
    message): on shared objects, the old run's ``page.run()`` after the new run's
    ``st.navigation`` would take that run's mark, and the new run would end in "This page
    cannot be called directly" (``tests/browser/test_rerun_race.py``)."""
    lang = current_lang()
    kept = st.session_state.get(_PAGES_KEY)
    if kept is None or kept[0] != lang:
        kept = (lang, navigation_pages(), root_page())
        st.session_state[_PAGES_KEY] = kept
    return {name: copy.copy(page) for name, page in kept[1].items()}, copy.copy(kept[2])


def navigation_sections(pages: dict[str, st.Page], root: st.Page) -> dict[str, list[st.Page]]:
    """The sidebar's sections (:data:`dashboard.views.SECTIONS`) with their translated labels;
    the hidden root goes first in the first section."""
    sections = {
        t(f"common.nav_{name}"): [pages[page] for page in names] for name, names in SECTIONS
    }
    first = next(iter(sections))
    sections[first].insert(0, root)
    return sections


def link_query() -> dict[str, list[str]]:
    """The query of this run's link as given, every value of a repeated key kept."""
    return {key: st.query_params.get_all(key) for key in st.query_params}


def page_name(pages: dict[str, st.Page], page: st.Page) -> str:
    """The name (file stem) under which ``page`` is listed in ``pages``."""
    return next(name for name, listed in pages.items() if listed is page)


def main() -> None:
    """Draw the shared sidebar and run the selected page."""
    st.set_page_config(
        page_title="Attention Lab",
        page_icon=APP_ICON,
        layout="wide",
        initial_sidebar_state=presentation.sidebar_state(),
    )
    pages, root = session_pages()
    page = st.navigation(navigation_sections(pages, root), expanded=True)
    push.note_full_run(page, link_query())  # the page the room's fragments belong to (push)
    state.begin_run()
    presentation.begin_page()  # controls go to the sidebar until the page opens its box
    if page is root:  # the landing page, or the page a root link from before names
        start = default_page(list(st.query_params.keys()))  # (/?playground.… opens it)
        st.switch_page(pages[start], query_params=link_query())
    language_switch()  # after the redirect, so that the landed page reads the link's lang
    room = room_controls.room_link()  # room=CODE stays across pages
    room_controls.follow_now(room, pages, page_name(pages, page))  # the presenter's view, locked
    lesson = lesson_bar.lesson_link(page_name(pages, page), room.code)  # lesson=NAME&…step=K
    lesson = lesson_bar.arrive(pages, page_name(pages, page), lesson, room.code)  # Next, Back
    lesson_focus.note_step(lesson)  # a long page folds what comes after the step's section
    startup.before_page(page_name(pages, page))  # torch imported while the page draws
    controls.reserve_device_line()  # drawn when the page first asks for the device
    presentation.present_switch()  # this tab's own: a room never shares it
    notice_box, lesson_box = st.container(), st.container(key=lesson_bar.BAR_KEY)
    room_box, room_sidebar = st.container(), presentation.room_box(room.code)
    if page_name(pages, page) == PAGES[0][0] and lesson is None:
        # the lab's name, its lessons and a map, above the landing page (not in a lesson)
        landing.landing_header(pages, room.code)
    room_controls.controls_note()  # a follower's controls are locked: one line says so
    lesson_figures.begin_run()  # the page notes the figures it shows (the take-home record)
    page.run()
    controls.page_notes(page_name(pages, page))  # what to look for, and more, after it
    lesson_bar.lesson_bar(
        lesson,
        page_name(pages, page),
        lesson_box,
        can_move=not state.locked(lesson_bar.STEP_KEY),  # a follower's lesson is the room's
        room=room.code if room.code and room_controls.presenting() else "",
    )
    controls.current_device()  # the device line, if the page did not ask for it
    state.render_notices(notice_box)
    state.finish_run()
    room_controls.room_controls(room, pages, page_name(pages, page), room_sidebar, room_box)
    if room.code and room_controls.presenting():  # the presenter makes and loads lessons
        lesson_author.author_panel(page_name(pages, page), room_box, room.code)
    with st.sidebar:
        st.divider()
        st.caption(t("common.copy_link_label"))
        st.code(current_url(), language=None, wrap_lines=True)
        st.caption(t("common.copy_link_note"))
    startup.after_page()  # once the page is on its way: freeze, profiler, trim
    prewarm.after_page(lesson, current_lang())  # each lesson step, in the gaps between runs
    room_controls.wake_followers()  # a presenter's new view: the room follows at once


with threads.script_run():
    main()
