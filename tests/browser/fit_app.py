"""A Streamlit app of small Vega-Lite charts for tests/browser/test_chart_fit.py: one that
fits, one whose title is wider than its chart, one whose legend runs past its right edge (a
long title in a narrow column, as Vega draws them: clipped, not wrapped), one whose level
tick labels run into each other, and one whose tilted tick labels stand side by side (their
upright boxes meet, the labels do not)."""

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


def bars(angle: int) -> dict:
    """Six long category names in 22 px bands, their labels at ``angle`` degrees."""
    names = [f"category number {i}" for i in range(6)]
    return {
        "data": {"values": [{"name": n, "v": i} for i, n in enumerate(names)]},
        "mark": "bar",
        "width": {"step": 22},
        "height": 100,
        "autosize": {"type": "pad"},
        "title": f"ticks at {angle}",
        "encoding": {
            # Vega would hide level labels that meet: this chart asks it not to
            "x": {
                "field": "name",
                "type": "nominal",
                "axis": {"labelAngle": angle, "labelOverlap": False},
            },
            "y": {"field": "v", "type": "quantitative"},
        },
    }


st.vega_lite_chart(bars(0), width="content")
st.vega_lite_chart(bars(-60), width="content")
