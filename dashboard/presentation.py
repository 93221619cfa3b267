"""The presentation view and the look every chart is drawn with.

``present=true`` in a tab's link (the sidebar's switch writes it; ``present=1`` is read too)
turns on the view for a room's projector: the sidebar starts collapsed, the page's controls
move into a folded "Controls" box under its title, chart text grows to at least 16 px and
titles to 22 px (:mod:`dashboard.charts.readable`; the canvas heatmap keeps its text at that
size and shrinks its cells to fit the column, two panels a row), and each section's
explanation folds behind "Read more" (:func:`explain`), as a page's notes do in every view
(``controls.page_notes``).
It is each tab's own choice: a room never passes it on (``room_follow`` shares every query
key but the language and this one).

Every chart a page draws goes through :func:`show_chart`, which also stands Chinese y
titles upright.
"""

from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dashboard import state
from dashboard.bound import CONTROLS_BOX
from dashboard.charts.readable import ChartLook, readable_chart, readable_spec
from dashboard.i18n import current_lang, t

PRESENT_KEY = "present"
_KEPT = "_present.kept"  # the switch's value, given back after a change of page
_LINK_TRUE = ("1", "true")
UPRIGHT_LANGS = frozenset({"zh"})
"""Languages whose chart titles are written in CJK characters: their y titles stand upright."""


def wants_present() -> bool:
    """Whether this run shows the presentation view, read before any widget is drawn (the
    sidebar's state is set first): the switch's value as the browser sent it, else the
    link's ``present``, else the value kept across a change of page (a run that switches
    page ends before it draws the switch, and Streamlit forgets it; the step or room link it
    switches with does not carry this tab's own ``present``)."""
    if PRESENT_KEY in st.session_state:
        return bool(st.session_state[PRESENT_KEY])
    if PRESENT_KEY in st.query_params:  # kept at once: the run may switch page before the
        # switch is drawn (a lesson's link whose first step is on another page)
        st.session_state[_KEPT] = st.query_params.get(PRESENT_KEY, "").lower() in _LINK_TRUE
    return bool(st.session_state.get(_KEPT))


def sidebar_state() -> str:
    """``initial_sidebar_state`` for this run: folded away in the presentation view. Sent on
    every run: the browser reopens a sidebar whose state a run left at "auto" on a screen
    wider than a phone's."""
    return "collapsed" if wants_present() else "auto"


def present_switch() -> bool:
    """Draw the sidebar's presentation-view switch (URL key ``present``) and return it.

    The switch is this tab's own, and stays on across a change of page that this run did not
    draw it in (a follower sent to the presenter's page, Next to a step on another page):
    Streamlit forgets a widget a run did not draw, and a bound widget's key cannot be given
    to ``st.switch_page``, so its value is kept apart and given back here."""
    if st.session_state.get(_KEPT) and PRESENT_KEY not in st.session_state:
        if PRESENT_KEY not in st.query_params:
            st.session_state[PRESENT_KEY] = True
    shown = state.checkbox(
        "", PRESENT_KEY, t("common.present_label"), False, help=t("common.present_help")
    )
    st.session_state[_KEPT] = shown
    return shown


def presenting() -> bool:
    """Whether this tab shows the presentation view (the switch's value this run)."""
    return bool(st.session_state.get(PRESENT_KEY, False))


def begin_page() -> None:
    """First thing in a run: controls go to the sidebar until :func:`controls_here` says
    otherwise. The box is a container of the run that made it; a control drawn into the box
    of an earlier run (the presentation switch, drawn before the page) addressed a block the
    browser no longer has after a change of page, and the page went blank ("Bad delta path
    index")."""
    st.session_state.pop(CONTROLS_BOX, None)


def controls_here() -> None:
    """In the presentation view, the folded "Controls" box here (under the page's title and
    purpose) holds the page's controls from now on (``state.controls_box``)."""
    if presenting():
        st.session_state[CONTROLS_BOX] = st.expander(t("common.present_controls"), expanded=False)


def room_box(code: str) -> DeltaGenerator:
    """Where the controls of room ``code`` go (the presenter key, the room's state): the
    sidebar, or in the presentation view a folded box named after the room at the top of the
    page, so that the key can be typed without opening the folded sidebar."""
    if presenting() and code:
        return st.expander(t("common.present_room", code=code), expanded=False)
    return st.sidebar.container()


def in_rows(count: int, per_row: int = 2) -> list:
    """``count`` columns side by side, or in the presentation view in rows of at most
    ``per_row``: four charts in one row of a projector's 853 px page spill out of it."""
    if not presenting():
        return st.columns(count)
    boxes: list = []
    while len(boxes) < count:
        boxes += st.columns(per_row)
    return boxes[:count]


def side_by_side(count: int) -> list:
    """``count`` columns side by side, or in the presentation view ``count`` containers one
    under another: half of a projector's 853 px page leaves a heatmap narrower than its legend
    and a bar chart too narrow to name its bars."""
    if presenting():
        return [st.container() for _ in range(count)]
    return st.columns(count)


def explain(text: str) -> None:
    """A section's explanation (markdown): as it is, or in the presentation view folded
    behind "Read more", leaving the room the title, the chart and its key numbers."""
    if presenting():
        with st.expander(t("common.present_more"), expanded=False):
            st.markdown(text)
    else:
        st.markdown(text)


def chart_look() -> ChartLook:
    """How this tab's charts read: upright y titles in Chinese, larger text when presenting."""
    return ChartLook(upright_y=current_lang() in UPRIGHT_LANGS, present=presenting())


def show_chart(box, chart, **kwargs) -> object:
    """Draw an Altair chart (``st.altair_chart``) or a Vega-Lite dict
    (``st.vega_lite_chart``) in ``box`` with this tab's :func:`chart_look`.

    Args:
        box: ``st`` (the current container) or a container (a column, the sidebar).
        chart: an Altair chart or a Vega-Lite spec dict.
        **kwargs: passed on (``theme``, ``key``, ``width``, ``on_select``, …).

    Returns:
        What Streamlit returns (the selection state when ``on_select`` is given).
    """
    look = chart_look()
    if isinstance(chart, dict):
        return box.vega_lite_chart(readable_spec(chart, look), **kwargs)
    return box.altair_chart(readable_chart(chart, look), **kwargs)
