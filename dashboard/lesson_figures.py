"""Each lesson step's headline figure, as its page showed it, for the take-home record.

A page draws the number a step is about with :func:`headline_metric`: an ``st.metric`` that
also notes its label and value for this run, under the section of the page whose step is
about it (a name of :data:`dashboard.views.PAGE_SECTIONS`, or ``""`` for a step that names
none). After the page, the lesson bar keeps the figure noted for the step's section when
the page shows the step's own view (:func:`keep_for_step`); the record lists the figures
kept (:mod:`dashboard.lesson_record`): the numbers this learner's screen showed, in the
language it showed them in. A section whose step shows no single number notes none (the
record then lists the step's values alone).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import streamlit as st

_RUN = "_lesson.headlines"  # this run's figures: section -> "label = value", the first noted
KEPT_KEY = "_lesson.figures"  # (step number, lang) -> "label = value", kept for the session


def headline_metric(where: Any, label: str, value: Any, *, section: str = "", **kwargs) -> None:
    """Draw ``where.metric(label, value, **kwargs)`` and note it as the headline figure of
    ``section`` for this run (the first noted for a section counts).

    Args:
        where: ``st`` or a container or column.
        label, value: as ``st.metric`` takes them (the value as the page prints it).
        section: the page section whose lesson step this number is about (``""``: a step
            that names no section).
    """
    where.metric(label, value, **kwargs)
    _noted().setdefault(section, f"{label} = {value}")


def note_all(figures: Mapping[str, str]) -> None:
    """Note figures recorded before, section -> text (a replayed section's: see
    :mod:`dashboard.replay`), each unless its section has one already."""
    noted = _noted()
    for section, text in figures.items():
        noted.setdefault(section, text)


@contextlib.contextmanager
def noting() -> Iterator[dict[str, str]]:
    """Collect the figures noted inside the block into the dict yielded (section -> text),
    and note them in this run too (a replayed section's first drawing)."""
    outer = st.session_state.get(_RUN)
    inner: dict[str, str] = {}
    st.session_state[_RUN] = inner
    try:
        yield inner
    finally:
        st.session_state[_RUN] = outer if outer is not None else {}
        note_all(inner)


def _session_dict(key: str) -> dict:
    """The dict the session keeps under ``key`` (made when first asked)."""
    found = st.session_state.get(key)
    if found is None:
        found = st.session_state[key] = {}
    return found


def _noted() -> dict[str, str]:
    """This run's noted figures."""
    return _session_dict(_RUN)


def begin_run() -> None:
    """Forget the figures the last run noted (``dashboard/app.py``, before the page runs)."""
    st.session_state[_RUN] = {}


def kept_figures() -> dict[tuple[int, str], str]:
    """This session's kept figures, (step number, lang) -> text: one dict, updated in place
    (the record, made when its button is clicked, reads it then)."""
    return _session_dict(KEPT_KEY)


def keep_for_step(number: int, section: str | None, lang: str) -> str | None:
    """Keep the figure this run noted for ``section`` as step ``number``'s, in ``lang``.

    Returns:
        The figure's text (the section's, else the page's figure for any of its steps), or
        ``None`` when the page noted neither.
    """
    noted = st.session_state.get(_RUN, {})
    figure = noted.get(section or "") or noted.get("")  # "": the page's figure for any step
    if figure is not None:
        kept_figures()[(number, lang)] = figure
    return figure
