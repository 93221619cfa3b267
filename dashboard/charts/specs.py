"""The pages' standard heatmap looks, with translated titles: a weight map (raw scores in its
tooltips) and a per-head grid of weight maps.

The one chart module that reads the language (through :func:`dashboard.i18n.t`); every other
chart module takes its titles ready-made. Reached as ``charts.weights_spec`` and
``charts.head_grid_spec`` (it imports :mod:`~dashboard.charts.heatmaps`, hence Altair).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dashboard.charts.heatmaps import HeatmapSpec
from dashboard.i18n import t

if TYPE_CHECKING:
    from dashboard.data import Heatmap


def pooled_note(heatmap: Heatmap) -> str | None:
    """The chart subtitle "pooled to r×c" for a pooled heatmap, else ``None``.

    Args:
        heatmap: a :func:`dashboard.data.heatmap_grid`.

    Returns:
        The translated note, or ``None`` when the heatmap shows every cell.
    """
    if not heatmap.pooled:
        return None
    return t("common.chart_pooled", rows=heatmap.shape[0], cols=heatmap.shape[1])


def weights_spec(grid: Heatmap, title: str, **options) -> HeatmapSpec:
    """The look of a weight heatmap with raw-score tooltips: translated titles, the pooled
    note, the grid's axis orders.

    Args:
        grid: a :func:`dashboard.data.heatmap_grid` of weights (scores optional).
        title: the chart title.
        **options: any other :class:`HeatmapSpec` field (``width``, ``domain``, …); they
            override the defaults above.

    Returns:
        The spec for :func:`dashboard.charts.canvas.draw_heatmaps` or the Altair export.
    """
    fields = {
        "title": title,
        "subtitle": pooled_note(grid),
        "x_title": t("common.chart_key"),
        "y_title": t("common.chart_query"),
        "value_title": t("common.chart_weight"),
        "sqrt_note": t("common.chart_sqrt_scale"),
        "score_title": t("common.chart_score") if grid.scores is not None else None,
        "row_order": grid.row_order,
        "col_order": grid.col_order,
    }
    return HeatmapSpec(**{**fields, **options})


def head_grid_spec(grid: Heatmap, title: str, columns: int) -> HeatmapSpec:
    """The look of a per-head weight grid: :func:`weights_spec` with one panel per head and
    one colour scale from 0 to the largest weight shown, shared by every head.

    Args:
        grid: the heads' :func:`dashboard.data.heatmap_grid`, with scores and panels.
        title: the chart title. columns: panels per row.

    Returns:
        The spec for :func:`dashboard.charts.canvas.draw_heatmaps`.
    """
    return weights_spec(
        grid,
        title,
        panel_title=t("common.chart_head"),
        domain=(0.0, float(grid.values.max()) or 1.0),
        columns=columns,
    )
