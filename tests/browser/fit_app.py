"""A Streamlit app of three small Vega-Lite charts for tests/browser/test_chart_fit.py: one
that fits, one whose title is wider than its chart, one whose legend runs past its right
edge (a long title in a narrow column, as Vega draws them: clipped, not wrapped)."""

from __future__ import annotations

import streamlit as st

POINTS = [{"x": i, "y": i * i % 7, "series": "a" if i % 2 else "b"} for i in range(8)]
LONG_LABEL = "a legend label far too long to fit beside a narrow chart, on purpose"


def line(title: str, series: list[str], width: int) -> dict:
    """A small line chart of :data:`POINTS` with a legend of ``series`` names."""
    rows = [{**p, "series": series[i % len(series)]} for i, p in enumerate(POINTS)]
    return {
        "data": {"values": rows},
        "mark": "line",
        "width": width,
        "height": 120,
        "title": title,
        "encoding": {
            "x": {"field": "x", "type": "quantitative", "title": "x"},
            "y": {"field": "y", "type": "quantitative", "title": "y"},
            "color": {
                "field": "series",
                "type": "nominal",
                "legend": {"labelLimit": 0},
            },
        },
    }


st.vega_lite_chart(line("fits", ["a", "b"], 300), width="content")
st.vega_lite_chart(line("T" * 120, ["a", "b"], 200), width="content")
st.vega_lite_chart(
    {**line("legend", ["a", LONG_LABEL], 200), "autosize": {"type": "fit", "contains": "padding"}},
    width=420,
)
