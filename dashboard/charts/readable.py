"""How a chart reads where it is shown, applied to every chart a page draws
(:func:`dashboard.presentation.show_chart`), on a copy (no Streamlit, no torch):

* **upright Chinese.** Vega turns a y axis title −90°, which leaves CJK text lying on its side;
  in Chinese every y title stands upright above its axis (:data:`UPRIGHT_Y_TITLE`);
* **the presentation view.** Axis and legend text of at least :data:`PRESENT_LABEL_PX` and
  titles of at least :data:`PRESENT_TITLE_PX`, readable from the back of a room on a
  1280×720 projector at 150 % (853×480 CSS pixels); the canvas heatmap scales its own text
  by :attr:`ChartLook.font_scale`.

Altair is imported only for an Altair chart: the first page's light charts are plain dicts,
drawn before Altair is loaded (:mod:`dashboard.charts.light`).
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass

from dashboard.charts.light import TITLE_FONT_SIZE
from dashboard.charts.title_wrap import display_units, wrap_title

PRESENT_LABEL_PX = 16
PRESENT_TITLE_PX = 22
PRESENT_SUBTITLE_PX = 16
PRESENT_TEXT_PX = 14  # text marks without a size of their own (printed cell values keep theirs)
VEGA_SUBTITLE_PX = 10  # Vega's subtitle size, which the house title keeps
MIN_WRAP_UNITS = 8
LINE_SPACING = 1.25
FIT_WIDTH = {"type": "fit-x", "contains": "padding"}
"""The presentation view's autosize for a chart that names none: the width fits the column,
the height grows with the larger text instead of squeezing the plot (Streamlit's default
"fit" takes a taller title's room from the plot)."""
COMPOSED = ("facet", "concat", "hconcat", "vconcat", "repeat")  # Vega-Lite cannot fit these
CELL_LETTER_PX = 10  # letters printed in a heatmap's cells, outside the presentation view
CANVAS_LABEL_PX = 10  # the canvas heatmap's tick labels at font scale 1 (heatmap_canvas.js)
CANVAS_TITLE_PX = 16  # and its title
UPRIGHT_Y_TITLE = {
    "titleAngle": 0,
    "titleAlign": "left",
    "titleAnchor": "end",
    "titleBaseline": "bottom",
    "titleX": 0,
    "titleY": -8,
}
"""A y title drawn horizontally, above the top of its axis, starting at the axis line."""
UPRIGHT_LEGEND_OFFSET = 40
"""Pixels between a plot and its legend when y titles stand upright: room for the upright
title (up to :data:`PRESENT_LABEL_PX` tall, 8 px above the axis) under a legend on top."""
CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")


@dataclass(frozen=True)
class ChartLook:
    """How charts read in this tab: ``upright_y`` for a language written in CJK characters,
    ``present`` for the presentation view."""

    upright_y: bool = False
    present: bool = False

    @property
    def font_scale(self) -> float:
        """The canvas heatmap's text scale: its 10 px tick labels drawn at
        :data:`PRESENT_LABEL_PX` when presenting."""
        return PRESENT_LABEL_PX / CANVAS_LABEL_PX if self.present else 1.0

    @property
    def title_scale(self) -> float:
        """The canvas heatmap's title scale: its 16 px title drawn at
        :data:`PRESENT_TITLE_PX` when presenting."""
        return PRESENT_TITLE_PX / CANVAS_TITLE_PX if self.present else 1.0

    @property
    def letter_px(self) -> int:
        """The size of a few letters printed in a heatmap's cells (the head census's labels):
        :data:`PRESENT_LABEL_PX` when presenting, else :data:`CELL_LETTER_PX`."""
        return PRESENT_LABEL_PX if self.present else CELL_LETTER_PX

    @property
    def plain(self) -> bool:
        """Whether charts are drawn as built (nothing to change)."""
        return not (self.upright_y or self.present)


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a Chinese, Japanese or Korean character or punctuation mark."""
    return bool(CJK.search(text))


def readable_config(config: dict, look: ChartLook) -> dict:
    """A chart's top-level Vega-Lite ``config`` with the look's settings over its own.

    Args:
        config: the chart's config (not changed).
        look: what to change.

    Returns:
        A new config dict.
    """
    out = copy.deepcopy(config)
    if look.upright_y:
        out["axisY"] = {**out.get("axisY", {}), **UPRIGHT_Y_TITLE}
        # a legend above the plot stands clear of the upright title between them
        out["legend"] = {**out.get("legend", {}), "offset": UPRIGHT_LEGEND_OFFSET}
    if look.present:
        sizes = {"labelFontSize": PRESENT_LABEL_PX, "titleFontSize": PRESENT_LABEL_PX}
        for part in ("axis", "legend", "header"):
            out[part] = {**out.get(part, {}), **sizes}
        # larger tick labels than the bands were laid out for: Vega hides the ones that
        # would overlap (every other one, then every fourth, …) rather than stack them
        out["axis"]["labelOverlap"] = "parity"
        # a legend that names no place goes under its chart: the plot keeps the width
        out["legend"]["orient"] = "bottom"
        out["title"] = {
            **out.get("title", {}),
            "fontSize": PRESENT_TITLE_PX,
            "subtitleFontSize": PRESENT_SUBTITLE_PX,
        }
        out["text"] = {**out.get("text", {}), "fontSize": PRESENT_TEXT_PX}
    return out


def _title_dict(title) -> dict:
    """A chart title (text, dict or ``alt.TitleParams``) as a Vega-Lite title dict."""
    if isinstance(title, str | list):
        return {"text": title}
    if isinstance(title, dict):
        return dict(title)
    return title.to_dict()


def _rewrapped(text, scale: float):
    """A title's text broken into lines no wider, at a font ``scale`` times larger, than its
    widest line was at its own size (so a title that fitted its chart still does): a string
    or lines already wrapped by its builder; one line stays a string."""
    lines = text if isinstance(text, list) else [text]
    if not any(lines):
        return text
    units = max(display_units(str(line)) for line in lines)
    joined = ("" if has_cjk("".join(map(str, lines))) else " ").join(map(str, lines))
    wrapped = wrap_title(joined, max(MIN_WRAP_UNITS, math.floor(units / scale)))
    return wrapped[0] if len(wrapped) == 1 else wrapped


def readable_title(title, look: ChartLook) -> dict:
    """A chart's title (text, dict or ``alt.TitleParams``) as a dict; when presenting, with
    the presentation view's sizes (a title's own ``fontSize`` wins over the config's) and
    wrapped again for them."""
    out = _title_dict(title)
    if not look.present:
        return out
    own_px = out.get("fontSize", TITLE_FONT_SIZE)
    out["text"] = _rewrapped(out.get("text", ""), PRESENT_TITLE_PX / own_px)
    if "subtitle" in out:
        own_sub_px = out.get("subtitleFontSize", VEGA_SUBTITLE_PX)
        out["subtitle"] = _rewrapped(out["subtitle"], PRESENT_SUBTITLE_PX / own_sub_px)
    return {
        **out,
        "fontSize": PRESENT_TITLE_PX,
        "subtitleFontSize": PRESENT_SUBTITLE_PX,
        # explicit line heights: Vega then lays out several lines as tall as it draws them
        "lineHeight": round(PRESENT_TITLE_PX * LINE_SPACING),
        "subtitleLineHeight": round(PRESENT_SUBTITLE_PX * LINE_SPACING),
    }


def readable_spec(spec: dict, look: ChartLook) -> dict:
    """A Vega-Lite dict spec drawn with ``look`` (a shallow copy: data is shared)."""
    if look.plain:
        return spec
    out = dict(spec)
    out["config"] = readable_config(spec.get("config", {}), look)
    if look.present:
        if "title" in spec:
            out["title"] = readable_title(spec["title"], look)
        if "autosize" not in spec and not any(key in spec for key in COMPOSED):
            out["autosize"] = dict(FIT_WIDTH)
    return out


def readable_chart(chart, look: ChartLook):
    """An Altair chart drawn with ``look`` (a shallow copy: data and layers are shared).

    Args:
        chart: any top-level Altair chart (``alt.Chart``, ``alt.LayerChart``, …).
        look: what to change.

    Returns:
        ``chart`` itself for the plain look, else a copy with its config and title set.
    """
    if look.plain:
        return chart
    import altair as alt

    out = chart.copy(deep=False)
    own = chart.config.to_dict() if chart.config is not alt.Undefined else {}
    out.config = alt.Config.from_dict(readable_config(own, look))
    if chart.title is not alt.Undefined:
        out.title = alt.TitleParams.from_dict(readable_title(chart.title, look))
    composed = isinstance(chart, alt.FacetChart | alt.ConcatChart | alt.HConcatChart)
    composed = composed or isinstance(chart, alt.VConcatChart | alt.RepeatChart)
    if look.present and chart.autosize is alt.Undefined and not composed:
        out.autosize = alt.AutoSizeParams(**FIT_WIDTH)
    return out
