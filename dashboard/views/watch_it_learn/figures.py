"""Drawing one finished run of Watch it learn: its summary (and divergence), every head at a
snapshot beside the task's target, and its curves (loss, accuracy, match, gradient norms)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import streamlit as st

from dashboard import charts, controls, data, presentation
from dashboard.charts import canvas
from dashboard.i18n import t
from dashboard.views.watch_it_learn.settings import LEARNING_RATES

HEAD_COLUMNS = 4
# a line chart's height (Streamlit fits the whole chart into it): plot, title and axis, legend rows
PLOT_PX, CHART_CHROME_PX, LEGEND_ROW_PX = 150, 95, 20
LEGEND_COLUMNS_WIDE, LEGEND_COLUMNS_NARROW = 4, 2  # one run across the page; two side by side
MAX_LEGEND_SERIES = 10  # Vega's palette has 10 colours: more lines share them; no legend then
READY_ACCURACY = 0.99


def head_maps(weights: np.ndarray, target: np.ndarray) -> data.Heatmap:
    """Every head's weights (layers, heads, L, L) and the target (L, L) as one heatmap grid."""
    layers, heads, L, _ = weights.shape
    names = [
        t("watch.head_name", layer=layer + 1, head=head + 1)
        for layer in range(layers)
        for head in range(heads)
    ]
    stack = np.concatenate([weights.reshape(layers * heads, L, L), target[None]])  # (P, L, L)
    labels = [str(i) for i in range(L)]
    return data.heatmap_grid(stack, labels, labels, panels=[*names, t("watch.target_name")])


def draw_heads(snapshot: data.Snapshot, target: np.ndarray, key: str) -> None:
    """The heads at one snapshot beside the task's target pattern."""
    grid = head_maps(snapshot.weights, target)
    title = t("watch.heads_title", step=snapshot.step, acc=f"{snapshot.accuracy:.1%}")
    spec = charts.weights_spec(
        grid,
        title,
        panel_title=t("common.chart_head"),
        domain=(0.0, 1.0),
        columns=min(len(grid.panels), HEAD_COLUMNS),
    )
    canvas.draw_heatmaps(grid, spec, key=key)


def draw_target(config: data.TrainingConfig) -> None:
    """The task's correct attention on its own, before anything is trained."""
    target = data.training_target(config)
    labels = [str(i) for i in range(config.seq_len)]
    grid = data.heatmap_grid(target, labels, labels)
    title = t("watch.target_title", task=t(f"watch.task_{config.task}"))
    spec = charts.weights_spec(grid, title, domain=(0.0, 1.0))
    canvas.draw_heatmaps(grid, spec, key="watch.target")


def line_chart(
    frame: pd.DataFrame, *, y: str, titles: tuple[str, str], log_y: bool, columns: int, key: str
) -> None:
    """One line per ``series`` against the step, tall enough for its legend: the plot keeps
    :data:`PLOT_PX` however many series (heads, projections) the legend lists.

    Args:
        frame: columns ``step``, ``y`` and ``series``. titles: the chart's and the y axis's.
        log_y: a log y axis. columns: the legend's columns. key: the element key.
    """
    series = frame["series"].nunique()
    legend = series <= MAX_LEGEND_SERIES
    rows = math.ceil(series / columns) if legend else 0
    presentation.show_chart(
        st,
        charts.layered_line_chart(
            frame,
            x="step",
            y=y,
            color="series",
            title=titles[0],
            x_title=t("watch.axis_step"),
            y_title=titles[1],
            color_title="",
            log_y=log_y,
            height=PLOT_PX + CHART_CHROME_PX + rows * LEGEND_ROW_PX,
            legend_columns=columns,
            show_legend=legend,
        ),
        theme=None,
        key=key,
        width="stretch",
    )
    if not legend:
        st.caption(t("watch.legend_hidden", n=series))


def curve_series(curves: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One metric's rows of :func:`data.curves_table`, its ``series`` the metric's name."""
    return curves[curves["metric"] == metric].assign(series=t(f"watch.metric_{metric}"))


def match_series(run) -> pd.DataFrame:
    """Weight on the correct key per head and step, a ``series`` per head ("L1 H2")."""
    match = data.match_table(run.snapshots)
    names = [
        t("watch.head_name", layer=a + 1, head=b + 1)
        for a, b in zip(match["layer"], match["head"], strict=True)
    ]
    return match.assign(series=names)


def grad_series(run) -> pd.DataFrame:
    """Gradient norms per projection, layer and step, a ``series`` per projection and layer;
    zero and non-finite norms left out (a log axis)."""
    grads = data.grad_table(run.snapshots)
    norms = grads["grad_norm"]
    grads = grads[np.isfinite(norms) & (norms > 0)]
    names = [
        f"{n} · {t('watch.layer_name', layer=a + 1)}"
        for n, a in zip(grads["tensor"], grads["layer"], strict=True)
    ]
    return grads.assign(series=names)


def run_title(config: data.TrainingConfig) -> str:
    """ "Scaled attention · unscaled scores" and the like."""
    scaling = {None: "default", True: "scaled", False: "unscaled"}[config.scaled]
    params = ", ".join(f"{controls.param_label(k)} {v}" for k, v in config.variant_params)
    name = controls.variant_label(config.variant) + (f" ({params})" if params else "")
    return f"{name} · {t(f'watch.scaling_{scaling}')}"


def summary(run, where, narrow: bool = False) -> None:
    """Final accuracy, loss, best head match and the first step at 99 % accuracy; for a run
    that diverged, first the divergence, and the figures labelled as where it stopped."""
    final = run.final
    ready = next((s.step for s in run.snapshots if s.accuracy >= READY_ACCURACY), None)
    end = "final" if run.divergence is None else "stopped"
    if run.divergence is not None:
        where.warning(divergence_text(run.divergence, run.config))
    cols = where.columns(2) + where.columns(2) if narrow else where.columns(4)  # labels whole
    cols[0].metric(t(f"watch.metric_{end}_accuracy"), f"{final.accuracy:.1%}")
    loss = f"{final.loss:.3f}" if run.divergence is None else f"{final.loss:.4g}"
    cols[1].metric(t(f"watch.metric_{end}_loss"), loss)
    cols[2].metric(t("watch.metric_match"), f"{final.match.max():.2f}")
    cols[3].metric(t("watch.metric_ready"), "—" if ready is None else str(ready))


def divergence_text(divergence: data.Divergence, config: data.TrainingConfig) -> str:
    """Where and why the run diverged, and what usually helps, in the page's language."""
    reason = "exploded" if divergence.reason == data.LOSS_EXPLODED else "not_finite"
    said = t(
        f"watch.diverged_{reason}",
        step=divergence.step,
        loss=f"{divergence.loss:.4g}",
        factor=f"{data.DIVERGENCE_FACTOR:g}",
        start=f"{divergence.start_loss:.3f}",
        last=f"{divergence.last_finite_loss:.4g}",
    )
    smaller = max((lr for lr in LEARNING_RATES if lr < config.lr), default=None)
    lr = f"{config.lr:g}"
    lr_advice = (
        t("watch.diverged_lr", lr=lr)
        if smaller is None
        else t("watch.diverged_lr_try", lr=lr, smaller=f"{smaller:g}")
    )
    scaling = t("watch.diverged_scaling") if data.unscaled_scores(config) else None
    helps = (
        t("watch.diverged_helps", lr_advice=lr_advice)
        if scaling is None
        else t("watch.diverged_helps_unscaled", lr_advice=lr_advice, scaling=scaling)
    )
    return f"{said}\n\n{helps}"


def show_run(run, step: int, index: int, narrow: bool) -> None:
    """One run: summary, heads at ``step``, curves, match and gradient norms; ``narrow``
    (one of two side by side) lays the figures and the legends out in fewer columns."""
    config = run.config
    st.subheader(run_title(config))
    summary(run, st, narrow)
    shown = max((s for s in run.snapshots if s.step <= step), key=lambda s: s.step)
    draw_heads(shown, run.target, key=f"watch.heads.{index}")
    columns = LEGEND_COLUMNS_NARROW if narrow else LEGEND_COLUMNS_WIDE
    curves = data.curves_table(run.snapshots)
    figures = [  # (table, its y column, the chart's name, the y title's key, log y)
        (curve_series(curves, "loss"), "value", "loss", "metric_loss", False),
        (curve_series(curves, "accuracy"), "value", "accuracy", "metric_accuracy", False),
        (match_series(run), "match", "match", "axis_match", False),
        (grad_series(run), "grad_norm", "grads", "axis_grads", True),
    ]
    for frame, y, name, y_title, log_y in figures:
        titles = (t(f"watch.chart_{name}"), t(f"watch.{y_title}"))
        key = f"watch.{name}.{index}"
        line_chart(frame, y=y, titles=titles, log_y=log_y, columns=columns, key=key)
