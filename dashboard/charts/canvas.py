"""The canvas heatmap component: Streamlit's mount of ``heatmap_canvas.js``.

Vega draws one mark per heatmap cell, about 10 µs each in Streamlit's browser: a grid of
4 heads × 64² cells took 0.17 s to repaint, most of the slider → repaint budget. This
component (a Streamlit components-v2 module, inline in the page, no iframe) draws each panel
as one image of cell-sized pixels and finds the hovered cell by arithmetic, so it repaints in
milliseconds with the same tooltips. Its data is :func:`dashboard.charts.heatmap_canvas_spec`.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboard.charts.heatmaps import HeatmapSpec, heatmap_canvas_spec
from dashboard.presentation import chart_look

COMPONENT_NAME = "attention_lab.heatmap"
PRESENT_COLUMNS = 2
_ASSETS = Path(__file__).parent
_HEATMAP = st.components.v2.component(
    COMPONENT_NAME,
    js=(_ASSETS / "heatmap_canvas.js").read_text(encoding="utf-8"),
    css=(_ASSETS / "heatmap_canvas.css").read_text(encoding="utf-8"),
    isolate_styles=False,
)


def heatmap(spec: dict, *, key: str) -> None:
    """Draw a heatmap from :func:`dashboard.charts.heatmap_canvas_spec` on a canvas.

    Args:
        spec: the heatmap's data and labels (its text drawn at the tab's font scale: larger
            in the presentation view).
        key: a unique, stable key per chart on a page (e.g. ``"playground.grid"``): the
            component keeps its canvas across reruns and redraws it, instead of remounting.
    """
    look = chart_look()
    shown = {"font_scale": look.font_scale, "title_scale": look.title_scale}
    if look.present and not spec.get("grid"):  # two panels a row at most: cells to read
        shown["columns"] = min(spec["columns"], PRESENT_COLUMNS)
    _HEATMAP(data={**spec, **shown}, key=f"_canvas.{key}")


def draw_heatmaps(grid, spec: HeatmapSpec, *, key: str) -> None:
    """Draw the matrices of a :class:`dashboard.data.Heatmap` (``values``, ``scores``,
    ``panels``) with the look ``spec`` on a canvas.

    Raises:
        ValueError: when the matrices do not match the spec's axis orders.
    """
    heatmap(heatmap_canvas_spec(grid.values, spec, scores=grid.scores, panels=grid.panels), key=key)
