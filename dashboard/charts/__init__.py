"""Every chart the pages draw (no torch, and no Streamlit except :mod:`.canvas` and the
language that :mod:`.specs` reads).

Modules, by job:

* :mod:`~dashboard.charts.base` — the shared look: sizes, fonts, titles, the row limit.
* :mod:`~dashboard.charts.builders` — DataFrame -> Altair line and bar charts.
* :mod:`~dashboard.charts.heatmaps` — :class:`HeatmapSpec` and the data of the canvas
  heatmap; :mod:`~dashboard.charts.heatmap_altair` — the Altair heatmap (small annotated
  matrices, PNG/SVG exports).
* :mod:`~dashboard.charts.canvas` — the canvas heatmap component (``heatmap_canvas.js`` and
  ``.css``, mounted with ``st.components.v2``) for the big grids.
* :mod:`~dashboard.charts.model_views` — the real models' every-head view and head view.
* :mod:`~dashboard.charts.specs` — the pages' standard heatmap looks (a weight map, a per-head
  grid, the "pooled" note) with translated titles: the one chart module that reads the
  language.
* :mod:`~dashboard.charts.light` — plain Vega-Lite dicts for the first charts a fresh server
  draws: they need neither pandas nor Altair.
* :mod:`~dashboard.charts.title_wrap` — titles broken into lines that fit their chart.
* :mod:`~dashboard.charts.readable` — how a chart reads where it is shown: upright Chinese
  y titles, the presentation view's text sizes.

Importing this package imports nothing else, so ``from dashboard.charts import light`` stays
free of pandas and Altair. ``charts.<name>`` finds a builder of the Altair modules
(:data:`ALTAIR_MODULES`) on first use, so pages write ``charts.line_chart``,
``charts.heatmap_chart``, ``charts.HeatmapSpec`` and ``charts.weights_spec`` without knowing
which module holds them.
"""

from __future__ import annotations

import importlib
from types import ModuleType

ALTAIR_MODULES = ("builders", "heatmaps", "heatmap_altair", "model_views", "base", "specs")
"""The modules whose public names ``charts.<name>`` reaches (each imports Altair)."""
SUBMODULES = (*ALTAIR_MODULES, "canvas", "light", "readable", "title_wrap")


def _submodule(name: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{name}")


def __getattr__(name: str) -> object:
    """A submodule by name, else the public name of the first Altair module that has it."""
    if name in SUBMODULES:
        return _submodule(name)
    if not name.startswith("_"):
        for module_name in ALTAIR_MODULES:
            module = _submodule(module_name)
            if hasattr(module, name):
                return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
