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
  data of the canvas heatmap that :mod:`dashboard.canvas` draws); :mod:`dashboard.exports`
  adds download buttons.
* This file runs on every rerun: it resets the URL bookkeeping, draws the language and
  device choice, runs the page, then shows URL notices above the page, fills the
  copy-link box, and drops query keys the page did not use. It imports ``dashboard`` as an
  installed package (``-e .`` in requirements.txt), so it needs no import-path edit.
* **Start-up cost**: this file and the modules it imports at the top import neither torch,
  nor the library, nor pandas/Altair (:mod:`dashboard.data` imports each name on first use).
  A page listed in :data:`TORCH_FREE_PAGES` (one that computes nothing with tensors) gets no
  device line and never imports torch. A page in :data:`TORCH_LATE_PAGES` (the Intuition
  landing page) draws its text and its torch-free charts first and then imports torch
  itself. For every other page, torch is imported in a background thread
  (:func:`dashboard.data.serving.preload_torch`) while the page draws its title and
  explainer; the sidebar's device line (listing the devices needs torch) keeps its place
  under the language switch and is drawn by the page's first
  :func:`dashboard.controls.current_device` call. Each run is counted by
  :func:`dashboard.data.serving.script_run`, which shares the cores between concurrent runs.
"""

from __future__ import annotations

import gc
from pathlib import Path
from urllib.parse import urlencode

import streamlit as st

from dashboard import controls, state
from dashboard.data import serving
from dashboard.i18n import LANG_KEY, LANG_NAMES, LANGS, t
from dashboard.views import PAGES, default_page

VIEWS_DIR = Path(__file__).parent / "views"
DEFAULT_BASE_URL = "http://localhost:8501/"
# (a comment, not a docstring: Streamlit's magic would draw a bare string in this script)
# Pages (file stems in :data:`dashboard.views.PAGES`) that compute nothing with torch: no
# device line, no torch import, no profiler warm-up for them. A page listed here must reach
# :mod:`dashboard.data` only for names whose modules need no torch.
TORCH_FREE_PAGES: frozenset[str] = frozenset()
# Pages that draw their torch-free charts first and import torch themselves afterwards: no
# background import competing for the GIL with their pandas and Altair imports.
TORCH_LATE_PAGES: frozenset[str] = frozenset({"intuition"})


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
    """Return the full URL of the current view: the page address plus the query string."""
    base = st.context.url or DEFAULT_BASE_URL
    base = base.split("?", 1)[0]
    query = urlencode(st.query_params.to_dict())
    return f"{base}?{query}" if query else base


@st.cache_resource(show_spinner=False)
def freeze_startup_objects() -> int:
    """Once per process, after the first page that computes with torch (so torch, pandas
    and Altair are imported): move the objects alive after the imports (their schemas and
    modules, about 270k) into the permanent generation, so that Python's own full
    collections skip them (0.15 s each otherwise, holding the GIL in the middle of a rerun).
    Streamlit's extra ``gc.collect(2)`` after every run is off in ``.streamlit/config.toml``.
    No collection first: it would cost a run those 0.15 s, and the imports leave little
    cyclic garbage to keep.

    Returns:
        The number of frozen objects.
    """
    gc.freeze()
    return gc.get_freeze_count()


def navigation_pages() -> dict[str, st.Page]:
    """Every page of :data:`dashboard.views.PAGES` by name, with its translated title (the
    first is the default: what the root URL opens)."""
    return {
        name: st.Page(
            VIEWS_DIR / f"{name}.py",
            title=t(f"common.page_{name}"),
            icon=icon,
            url_path=name,
            default=(i == 0),
        )
        for i, (name, icon) in enumerate(PAGES)
    }


def main() -> None:
    """Draw the shared sidebar and run the selected page."""
    serving.pin_when_large()  # past PIN_ABOVE_BYTES, large arrays get their own mappings
    st.set_page_config(page_title="Attention Lab", page_icon=":material/visibility:", layout="wide")
    state.begin_run()
    language_switch()
    pages = navigation_pages()
    page = st.navigation(list(pages.values()))
    legacy = default_page(list(st.query_params.keys()))
    if page is pages[PAGES[0][0]] and legacy != PAGES[0][0]:
        # a root link made when the Playground was the landing page (/?playground.…)
        st.switch_page(pages[legacy], query_params=st.query_params.to_dict())
    needs_torch = not any(page is pages.get(name) for name in TORCH_FREE_PAGES)
    late_torch = any(page is pages.get(name) for name in TORCH_LATE_PAGES)
    if needs_torch and not late_torch:
        serving.preload_torch()  # imported in the background while the page draws its title
    if needs_torch:
        controls.reserve_device_line()  # drawn when the page first asks for the device
    notice_box = st.container()
    page.run()
    if needs_torch:
        controls.current_device()  # the device line, if the page did not ask for it
        freeze_startup_objects()
    state.render_notices(notice_box)
    state.finish_run()
    with st.sidebar:
        st.divider()
        st.caption(t("common.copy_link_label"))
        st.code(current_url(), language=None, wrap_lines=True)
        st.caption(t("common.copy_link_note"))
    # once per process, after the first page is on its way: the profiler's start-up is not
    # on the first visitor's path to the first chart
    if needs_torch:
        from dashboard import data

        data.warm_up_profiler()
    serving.release_memory()  # what this run freed, back to the system


with serving.script_run():
    main()
