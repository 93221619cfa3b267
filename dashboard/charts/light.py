"""Charts as plain Vega-Lite dicts, for the first charts a fresh server draws (no pandas, no
Altair, no Streamlit, no torch).

``st.altair_chart`` needs Altair and pandas (about 0.35 s to import on a fresh server) and
sends its data as Arrow; ``st.vega_lite_chart`` given a dict spec whose data sits inline
*inside a layer* sends the spec as it is (Streamlit moves only top-level data to Arrow, which
would import pandas). The start page's meeting and library bars are drawn this way, so they
reach the browser before pandas and Altair are loaded; the Real model page draws its row of
weights with the same builder, so the bars look alike everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dashboard.charts.title_wrap import TITLE_WRAP_UNITS, wrap_title

FONT_SIZE = 13
TITLE_FONT_SIZE = FONT_SIZE + 3
TOKEN_ROW_PX = 22  # one bar per row, the head view's row spacing
TOKEN_BAR_COLOR = "#0B3D91"
TOKEN_LABEL_LIMIT_PX = 140
MAX_TOKEN_BARS = 512
WEIGHT_FORMAT = ".3f"


def _lines(text: str, units: int | None) -> str | list[str]:
    """``text``, or its lines of at most ``units`` (:func:`wrap_title`) when it is longer."""
    lines = wrap_title(text, units) if units is not None and text else [text]
    return lines[0] if len(lines) == 1 else lines


def title_spec(
    title: str,
    subtitle: str | None = None,
    *,
    wrap: int | None = None,
    subtitle_wrap: int | None = None,
) -> dict:
    """The house chart title: left-aligned, a little larger than the axis text; the title
    and subtitle broken into lines of at most ``wrap`` and ``subtitle_wrap`` units
    (:func:`wrap_title`) when given."""
    return {
        "text": _lines(title, wrap),
        "subtitle": _lines(subtitle or "", subtitle_wrap),
        "fontSize": TITLE_FONT_SIZE,
        "anchor": "start",
    }


def _check_bars(keys: Sequence[str], weights: Sequence[float]) -> list[float]:
    """The weights as floats, after checking they pair up with unique keys.

    Raises:
        ValueError: for no bars, more than :data:`MAX_TOKEN_BARS`, a length mismatch,
            repeated keys (their bars would merge) or a weight that is not finite.
    """
    keys, values = list(keys), [float(w) for w in weights]
    if not 1 <= len(keys) <= MAX_TOKEN_BARS:
        raise ValueError(f"a bar chart takes 1 to {MAX_TOKEN_BARS} bars, got {len(keys)}")
    if len(values) != len(keys):
        raise ValueError(f"{len(keys)} keys but {len(values)} weights")
    if len(set(keys)) != len(keys):
        raise ValueError(f"bar keys must be unique, got {keys!r}")
    bad = [w for w in values if not math.isfinite(w)]
    if bad:
        raise ValueError(f"bar weights must be finite, got {bad[0]!r}")
    return values


def token_bars_spec(
    keys: Sequence[str],
    weights: Sequence[float],
    *,
    title: str,
    token_title: str,
    weight_title: str,
    width: int | None = None,
) -> dict:
    """Horizontal bars of one weight per key, top to bottom in the given order, on [0, 1].

    Rows have the head view's spacing, so the Real model page's bars line up with its key
    column. The title wraps at :data:`TITLE_WRAP_UNITS` (these charts sit in narrow
    columns).

    Args:
        keys: n unique labels, top to bottom. weights: n finite numbers (shares in [0, 1]).
        title, token_title, weight_title: translated labels.
        width: pixels of the bar area; ``None`` fits the container's width (show it with
            ``st.vega_lite_chart(spec, width="stretch")``).

    Returns:
        A Vega-Lite spec (dict) with its data inline in its one layer.

    Raises:
        ValueError: as :func:`_check_bars`.
    """
    values = _check_bars(keys, weights)
    rows = [{"key": str(key), "weight": w} for key, w in zip(keys, values, strict=True)]
    bars = {
        "data": {"values": rows},  # inside the layer: sent as JSON, no Arrow conversion
        "mark": {"type": "bar", "color": TOKEN_BAR_COLOR},
        "encoding": {
            "y": {
                "field": "key",
                "type": "nominal",
                "sort": [row["key"] for row in rows],
                "title": token_title,
                "axis": {"labelLimit": TOKEN_LABEL_LIMIT_PX},
            },
            "x": {
                "field": "weight",
                "type": "quantitative",
                "title": weight_title,
                "scale": {"domain": [0, 1]},
            },
            "tooltip": [
                {"field": "key", "type": "nominal", "title": token_title},
                {
                    "field": "weight",
                    "type": "quantitative",
                    "title": weight_title,
                    "format": WEIGHT_FORMAT,
                },
            ],
        },
    }
    # a step per row: a fixed pixel height on a nominal axis collapses the bands in
    # Streamlit 1.67's "content" height
    spec: dict = {
        "layer": [bars],
        "height": {"step": TOKEN_ROW_PX},
        "title": title_spec(title, wrap=TITLE_WRAP_UNITS),
    }
    if width is None:
        spec["autosize"] = {"type": "fit-x", "contains": "padding"}
    else:
        spec["width"] = width
    return spec
