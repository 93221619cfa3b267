"""How a chart reads where it is shown, applied to every chart a page draws
(:func:`dashboard.presentation.show_chart`), on a copy (no Streamlit, no torch):

* **upright Chinese.** Vega turns a y axis title −90°, which leaves CJK text lying on its side;
  in Chinese every y title stands upright above its axis (:data:`UPRIGHT_Y_TITLE`);
* **the presentation view.** Axis and legend text of at least :data:`PRESENT_LABEL_PX` and
  titles of at least :data:`PRESENT_TITLE_PX`, readable from the back of a room on a
  1280×720 projector at 150 % (853×480 CSS pixels).

Altair is imported only for an Altair chart: the first page's light charts are plain dicts,
drawn before Altair is loaded (:mod:`dashboard.charts.light`).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass

PRESENT_LABEL_PX = 16
PRESENT_TITLE_PX = 22
PRESENT_SUBTITLE_PX = 16
PRESENT_TEXT_PX = 14  # text marks without a size of their own (printed cell values keep theirs)
UPRIGHT_Y_TITLE = {
    "titleAngle": 0,
    "titleAlign": "left",
    "titleAnchor": "end",
    "titleBaseline": "bottom",
    "titleX": 0,
    "titleY": -8,
}
"""A y title drawn horizontally, above the top of its axis, starting at the axis line."""
CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")


@dataclass(frozen=True)
class ChartLook:
    """How charts read in this tab: ``upright_y`` for a language written in CJK characters,
    ``present`` for the presentation view."""

    upright_y: bool = False
    present: bool = False

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
    if look.present:
        sizes = {"labelFontSize": PRESENT_LABEL_PX, "titleFontSize": PRESENT_LABEL_PX}
        for part in ("axis", "legend", "header"):
            out[part] = {**out.get(part, {}), **sizes}
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


def readable_title(title, look: ChartLook) -> dict:
    """A chart's title (text, dict or ``alt.TitleParams``) as a dict, with the presentation
    view's sizes when presenting (a title's own ``fontSize`` wins over the config's)."""
    if not look.present:
        return _title_dict(title)
    return {
        **_title_dict(title),
        "fontSize": PRESENT_TITLE_PX,
        "subtitleFontSize": PRESENT_SUBTITLE_PX,
    }


def readable_spec(spec: dict, look: ChartLook) -> dict:
    """A Vega-Lite dict spec drawn with ``look`` (a shallow copy: data is shared)."""
    if look.plain:
        return spec
    out = dict(spec)
    out["config"] = readable_config(spec.get("config", {}), look)
    if "title" in spec and look.present:
        out["title"] = readable_title(spec["title"], look)
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
    return out
