"""What every chart builder shares: sizes, fonts, titles, the row limit, and how a
table's columns become display names and rounded values (no Streamlit, no torch)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd
from altair.utils.schemapi import debug_mode

from dashboard.charts.light import FONT_SIZE, title_spec

MAX_CHART_ROWS = 128 * 128
SEQUENTIAL_SCHEME = "yellowgreenblue"
DIVERGING_SCHEME = "redblue"
# Vega's colour schemes as evenly spaced RGB stops, interpolated linearly in between (how Vega
# samples them); the canvas heatmap draws with these so it matches the Altair heatmaps, and
# tests/dashboard/test_canvas_spec.py checks them against vl-convert's rendering.
SCHEME_STOPS = {
    "yellowgreenblue": "eff9bddbf1b4bde5b594d5b969c5be45b4c22c9ec02182b82163aa23479c1c3185",
    "redblue": "8c0d25bf363adf745ef4ae91fbdbc9f2efeed2e5ef9dcae15da2cb2f78b3134b85",
}
CHOSEN_STROKE = "#e4572e"  # the outline of the cell or head a page takes apart
PANEL_WIDTH = 220
SINGLE_WIDTH = 520
MIN_CELL_PX = 3
MAX_CELL_PX = 44
LABEL_LIMIT_PX = 90
MAX_TICK_LABELS = 40


def check_rows(df: pd.DataFrame, needed: Sequence[str]) -> None:
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise ValueError(f"chart data lacks columns {missing}; has {list(df.columns)}")
    if len(df) > MAX_CHART_ROWS:
        raise ValueError(
            f"chart data has {len(df)} rows, over the limit of {MAX_CHART_ROWS}; pool it first"
        )


FORMAT_PRECISION = re.compile(r"\.(\d+)([efg])$")


def display_names(titles: dict[str, str]) -> dict[str, str]:
    """Map source columns to unique, non-empty display names (their translated titles)."""
    names: dict[str, str] = {}
    for column, title in titles.items():
        name = title.strip() or column
        base, n = name, 2
        while name in names.values():
            name, n = f"{base} ({n})", n + 1
        names[column] = name
    return names


def field_name(name: str) -> str:
    """``name`` escaped as a Vega-Lite field (``.``, ``[`` and ``]`` mean nesting there)."""
    return re.sub(r"([\\.\[\]])", r"\\\1", name)


def display_table(df: pd.DataFrame, names: dict[str, str], value_format: str) -> pd.DataFrame:
    """The columns a heatmap shows, renamed to ``names``; numbers rounded as displayed.

    Rounding follows ``value_format`` (one more decimal for ``.Nf`` so colours stay exact to
    the eye; N significant digits for ``.Ne``/``.Ng``), because the tooltip shows the raw
    cell values. Unused columns (e.g. ``row_index``) are left out: the browser decodes
    every column of every cell.
    """
    shown = df[list(names)].set_axis(list(names.values()), axis=1)
    for column in ("value", "score"):
        if column in names:
            shown[names[column]] = rounded(df[column].to_numpy(dtype=float), value_format)
    return shown


def without_index(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with a blank one-category index: Streamlit adds a numeric index to every
    chart datum as ``(index)``, which a whole-row tooltip would then show."""
    frame.index = pd.CategoricalIndex(
        pd.Categorical.from_codes(np.zeros(len(frame), dtype=np.int8), categories=[""])
    )
    return frame


def rounded(values: np.ndarray, value_format: str) -> np.ndarray:
    """``values`` rounded to the precision of a d3 format such as ``.3f`` or ``.2e``."""
    match = FORMAT_PRECISION.search(value_format)
    if match is None:
        return values
    digits, kind = int(match.group(1)), match.group(2)
    if kind == "f":
        return np.round(values, digits + 1)
    significant = digits + 1 if kind == "e" else max(digits, 1)
    return np.array([float(f"{v:.{significant - 1}e}") for v in values.tolist()])


def ordered_scale(labels: Sequence[str]) -> alt.Scale:
    """A nominal scale whose domain is ``labels`` in order (built without Altair's check at
    construction, which costs about 4 ms for 64 labels; ``to_dict`` still validates the spec).

    Ordering with ``sort=[...]`` instead makes Vega-Lite add a per-row calculate of nested
    ``datum.col === '…' ? i : …`` tests, which Streamlit's CSP-safe expression interpreter
    walks for every cell: about 0.1 s per repaint for a 64-token, 4-head grid.
    """
    with debug_mode(False):
        return alt.Scale(domain=list(labels))


def header() -> alt.Header:
    """A facet's panel headers: bold; their size comes from :func:`header_config`, so the
    presentation view's larger size can replace it (dashboard.charts.readable)."""
    return alt.Header(labelFontWeight="bold")


def header_config(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    """``chart`` with its facet headers' text at the house size, set in its config."""
    return chart.configure_header(labelFontSize=FONT_SIZE, titleFontSize=FONT_SIZE)


def flat_value(values: np.ndarray) -> float | None:
    """The one value every cell holds, or None when the cells differ: a map of one value
    is a block of one colour, which a page replaces by saying why."""
    cells = np.asarray(values, dtype=np.float64)
    if cells.size == 0 or not np.isfinite(cells).all() or cells.min() != cells.max():
        return None
    return float(cells.flat[0])


def default_domain(values: np.ndarray, diverging: bool) -> tuple[float, float]:
    """(min, max) of the finite values (0 and 1 when there are none); lo at most 0 unless
    diverging."""
    finite = np.asarray(values, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if not diverging:
        lo = min(lo, 0.0)
    return lo, hi


# Heatmaps draw on a canvas, without per-mark ARIA nodes: a heatmap has thousands of cells,
# and as SVG each becomes a DOM node the browser must build and lay out on every repaint.
FAST_RENDER_META = {"embedOptions": {"renderer": "canvas"}}


TITLE_PX_PER_UNIT = 9  # the 16 px bold title font, per Latin character
SUBTITLE_PX_PER_UNIT = 6  # Vega's smaller subtitle font
MIN_WRAP_UNITS = 12


def title_params(title: str, subtitle: str | None, width_px: int | None = None) -> alt.TitleParams:
    """The house title; with ``width_px`` (the chart's width), title and subtitle wrap to
    it instead of being clipped by Vega."""
    if width_px is None:
        return alt.TitleParams(**title_spec(title, subtitle))
    return alt.TitleParams(
        **title_spec(
            title,
            subtitle,
            wrap=max(MIN_WRAP_UNITS, width_px // TITLE_PX_PER_UNIT),
            subtitle_wrap=max(MIN_WRAP_UNITS, width_px // SUBTITLE_PX_PER_UNIT),
        )
    )


def finish(chart: alt.Chart, title: str, subtitle: str | None) -> alt.Chart:
    return chart.properties(title=title_params(title, subtitle))
