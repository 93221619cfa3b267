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
"""

from __future__ import annotations

import gc
from pathlib import Path
from urllib.parse import urlencode

import streamlit as st

from dashboard import controls, data, state
from dashboard.i18n import LANG_KEY, LANG_NAMES, LANGS, t
from dashboard.views import PAGES

VIEWS_DIR = Path(__file__).parent / "views"
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
    """Return the full URL of the current view: the page address plus the query string."""
    base = st.context.url or DEFAULT_BASE_URL
    base = base.split("?", 1)[0]
    query = urlencode(st.query_params.to_dict())
    return f"{base}?{query}" if query else base


@st.cache_resource(show_spinner=False)
def freeze_startup_objects() -> int:
    """Once per process: move the objects alive after the imports (torch, pandas and
    Altair's schemas, about 270k) into the permanent generation, so that Python's own full
    collections skip them (0.15 s each otherwise, holding the GIL in the middle of a rerun).
    Streamlit's extra ``gc.collect(2)`` after every run is off in ``.streamlit/config.toml``.
    No collection first: it would cost the first page those 0.15 s, and the imports leave
    little cyclic garbage to keep.

    Returns:
        The number of frozen objects.
    """
    gc.freeze()
    return gc.get_freeze_count()


def main() -> None:
    """Draw the shared sidebar and run the selected page."""
    st.set_page_config(page_title="Attention Lab", page_icon=":material/visibility:", layout="wide")
    freeze_startup_objects()
    data.warm_up_profiler()
    state.begin_run()
    language_switch()
    controls.device_controls()
    pages = [
        st.Page(
            VIEWS_DIR / f"{name}.py",
            title=t(f"common.page_{name}"),
            icon=icon,
            url_path=name,
            default=(i == 0),
        )
        for i, (name, icon) in enumerate(PAGES)
    ]
    page = st.navigation(pages)
    notice_box = st.container()
    page.run()
    state.render_notices(notice_box)
    state.finish_run()
    with st.sidebar:
        st.divider()
        st.caption(t("common.copy_link_label"))
        st.code(current_url(), language=None, wrap_lines=True)
        st.caption(t("common.copy_link_note"))


main()
