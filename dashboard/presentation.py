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

from typing import TYPE_CHECKING

import streamlit as st

from dashboard import state
from dashboard.bound import CONTROLS_BOX
from dashboard.charts.readable import ChartLook, readable_chart, readable_spec
from dashboard.i18n import current_lang, t

if TYPE_CHECKING:
    pass

PRESENT_KEY = "present"
_KEPT = "_present.kept"  # the switch's value, given back after a change of page
_LINK_TRUE = ("1", "true")
UPRIGHT_LANGS = frozenset({"zh"})
"""Languages whose chart titles are written in CJK characters: their y titles stand upright."""


def link_presents() -> bool:
    """Whether this run's link asks for the presentation view (read before any widget, to
    start the sidebar collapsed)."""
    return st.query_params.get(PRESENT_KEY, "").lower() in _LINK_TRUE


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
