"""Download buttons for the current weights (CSV, .npy) and the current chart (PNG, SVG).

Figures are rendered server-side with ``vl-convert`` from the chart's Vega-Lite spec, only
when a button is clicked.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable

import altair as alt
import numpy as np
import streamlit as st

from dashboard.i18n import t

PNG_SCALE = 2.0
MIME_TYPES = {
    "csv": "text/csv",
    "npy": "application/octet-stream",
    "png": "image/png",
    "svg": "image/svg+xml",
}
"""The media type of each file the export buttons offer, by its extension."""
_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_filename(stem: str) -> str:
    """Return ``stem`` reduced to letters, digits, ``_``, ``.`` and ``-`` (never empty)."""
    return _SAFE_NAME.sub("_", stem).strip("_.") or "attention"


def npy_bytes(array: np.ndarray) -> bytes:
    """Serialise an array in NumPy's ``.npy`` format."""
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array), allow_pickle=False)
    return buffer.getvalue()


def chart_spec(chart: alt.TopLevelMixin) -> dict:
    """Return the Vega-Lite spec of ``chart`` with its data inlined (no row limit)."""
    with alt.data_transformers.disable_max_rows():
        return chart.to_dict()


def chart_svg(chart: alt.TopLevelMixin) -> str:
    """Render ``chart`` to SVG text with vl-convert.

    Raises:
        ValueError: when the renderer fails.
    """
    import vl_convert as vlc

    try:
        return vlc.vegalite_to_svg(chart_spec(chart))
    except Exception as err:  # vl-convert raises plain Exceptions on bad specs
        raise ValueError(f"could not render SVG: {err}") from err


def chart_png(chart: alt.TopLevelMixin, scale: float = PNG_SCALE) -> bytes:
    """Render ``chart`` to PNG bytes with vl-convert.

    Raises:
        ValueError: when the renderer fails.
    """
    import vl_convert as vlc

    try:
        return vlc.vegalite_to_png(chart_spec(chart), scale=scale)
    except Exception as err:  # vl-convert raises plain Exceptions on bad specs
        raise ValueError(f"could not render PNG: {err}") from err


def export_buttons(
    name: str,
    *,
    weights: np.ndarray | None = None,
    csv_text: str | Callable[[], str] | None = None,
    chart: alt.TopLevelMixin | Callable[[], alt.TopLevelMixin] | None = None,
    key: str | None = None,
) -> None:
    """Draw download buttons in one row: weights CSV/.npy and the chart as PNG/SVG.

    Every file is produced only when its button is clicked (deferred downloads), so the
    page pays nothing for exports on a rerun.

    Args:
        name: file name stem, e.g. ``"playground_weights"``.
        weights: array saved as ``.npy`` (and as CSV when ``csv_text`` is not given).
        csv_text: CSV text to offer, or a function producing it on click (e.g.
            :func:`dashboard.data.weights_table` with token labels); default from ``weights``.
        chart: the Altair chart to offer as PNG and SVG, or a function building it on click
            (for a figure the page draws another way, e.g. on the canvas heatmap).
        key: unique widget key prefix (defaults to ``name``).
    """
    stem = safe_filename(name)
    prefix = f"_export.{key or stem}"
    st.markdown(f"**{t('common.export_header')}**")
    cols = st.columns(4)
    array = None if weights is None else np.asarray(weights)
    if array is not None or csv_text is not None:
        _download(cols[0], "csv", _csv_source(csv_text, array), stem, prefix)
    if array is not None:
        _download(cols[1], "npy", lambda: npy_bytes(array), stem, prefix)
    if chart is None:
        return
    build = chart if callable(chart) else lambda: chart
    _download(cols[2], "png", lambda: chart_png(build()), stem, prefix)
    _download(cols[3], "svg", lambda: chart_svg(build()), stem, prefix)


def _download(
    column, kind: str, content: Callable[[], str | bytes], stem: str, prefix: str
) -> None:
    """One file's download button in ``column``: labelled ``common.export_<kind>``, the file
    ``<stem>.<kind>`` made by ``content`` on click (``on_click="ignore"``: no rerun), the
    widget key ``<prefix>.<kind>``."""
    column.download_button(
        t(f"common.export_{kind}"),
        content,
        file_name=f"{stem}.{kind}",
        mime=MIME_TYPES[kind],
        key=f"{prefix}.{kind}",
        on_click="ignore",
    )


def _csv_source(csv_text: str | Callable[[], str] | None, array: np.ndarray | None):
    if csv_text is None:
        return lambda: array_csv(array)
    if callable(csv_text):
        return csv_text
    return lambda: csv_text


def array_csv(array: np.ndarray) -> str:
    """CSV text of an array: 2-D as is, higher dimensions flattened to (rows, last axis)."""
    flat = np.atleast_2d(array).reshape(-1, np.shape(array)[-1])
    buffer = io.StringIO()
    np.savetxt(buffer, flat, delimiter=",", fmt="%.6g")
    return buffer.getvalue()
