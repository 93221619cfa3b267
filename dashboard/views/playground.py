"""Playground: any variant, size, mask and input; every head's weights on one colour scale."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, controls, data, exports, presentation, refusals
from dashboard.charts import canvas
from dashboard.config import LayerConfig
from dashboard.i18n import t
from dashboard.lesson_figures import headline_metric

PAGE = "playground"
GRID_COLUMNS = 4
SIDE_BY_SIDE_WIDTH = 420  # px per heatmap when the averaged map and the output share a row


def playground_controls(page: str) -> LayerConfig:
    """The sidebar: one layer run (variant, input, sizes, mask, dropout, seed)."""
    return controls.layer_controls(page)


def render(ctl: LayerConfig) -> None:
    """Compute and draw the page (returns early, without st.stop, on refusal)."""
    try:
        with st.spinner(t("playground.computing")):
            run = data.attention_run(ctl)
    except ValueError as err:
        refusals.show_error(err)
        return

    cols = st.columns(6)
    cols[0].metric(t("common.metric_seq_len"), len(run.tokens))
    cols[1].metric(t("common.metric_d_k"), run.d_k)
    cols[2].metric(t("common.metric_device"), run.device)
    cols[3].metric(t("common.metric_time"), data.describe_seconds(run.seconds))
    sparsity_text = "—" if run.weights is None else f"{run.sparsity:.1%}"
    headline_metric(cols[5], t("common.metric_sparsity"), sparsity_text)  # masks: what is cut
    # the peak-memory run comes last, so the heatmaps are on their way to the browser first
    memory_slot = cols[4].empty()
    draw_maps(ctl, run)
    try:
        peak = data.attention_peak(ctl)
    except ValueError as err:  # the same config just ran, so this is not expected
        refusals.show_error(err)
        return
    memory_label = (
        t("common.metric_memory_measured") if peak.measured else t("common.metric_memory_estimate")
    )
    memory_slot.metric(memory_label, data.describe_bytes(peak.bytes))
    notes = [t("common.time_note", device=run.device)]
    note = "common.memory_measured_note" if peak.measured else "common.memory_estimate_note"
    notes.append(t("common.memory_busy_note" if peak.busy else note))  # busy: not measured
    if ctl.input_kind != "random":
        notes.append(t("common.embedding_note"))
    st.caption(" ".join(notes))  # after the maps: the picture first


def draw_maps(ctl: LayerConfig, run: data.AttentionRun) -> None:
    """Every head's weights, the head average, the output and the export buttons."""
    labels = data.axis_labels(run.tokens)
    if run.weights is None:
        st.warning(t("playground.weights_skipped"))
        st.metric(t("playground.output_stats"), f"{run.output_mean:.4f} ± {run.output_std:.4f}")
        return

    heads = run.weights.shape[0]
    head_names = [t("playground.head_name", h=h) for h in range(heads)]
    grid = data.heatmap_grid(run.weights, labels, labels, scores=run.scores, panels=head_names)
    title = t("playground.grid_title", heads=heads)
    grid_spec = charts.head_grid_spec(grid, title, columns=min(heads, GRID_COLUMNS))
    canvas.draw_heatmaps(grid, grid_spec, key="playground.grid")

    left, right = presentation.side_by_side(2)
    with left:
        avg = data.heatmap_grid(run.mean_weights, labels, labels, scores=run.mean_scores)
        avg_spec = charts.weights_spec(avg, t("playground.avg_title"), width=SIDE_BY_SIDE_WIDTH)
        canvas.draw_heatmaps(avg, avg_spec, key="playground.avg")
        st.metric(
            t("common.metric_row_sums"),
            t(
                "common.metric_row_sums_value",
                low=float(run.row_sums.min()),
                high=float(run.row_sums.max()),
            ),
        )
        if ctl.mask_kind == "padding" or ctl.dropout > 0:
            st.caption(t("playground.row_sums_note"))
    with right:
        dims = [str(d) for d in range(run.output.shape[1])]
        out = data.heatmap_grid(run.output, labels, dims)
        out_spec = charts.HeatmapSpec(
            title=t("playground.output_title"),
            subtitle=charts.pooled_note(out),
            x_title=t("playground.output_dim"),
            y_title=t("common.chart_query"),
            value_title=t("common.chart_value"),
            row_order=out.row_order,
            col_order=out.col_order,
            diverging=True,
            width=SIDE_BY_SIDE_WIDTH,
        )
        canvas.draw_heatmaps(out, out_spec, key="playground.output")
        st.caption(t("playground.output_stats_caption", mean=run.output_mean, std=run.output_std))

    exports.export_buttons(
        "playground_weights",
        weights=run.weights,
        csv_text=lambda: data.weights_table(run.weights, labels, labels),
        chart=lambda: charts.heatmap_chart(grid.frame, grid_spec),
    )


controls.page_intro(PAGE)
ctl = playground_controls(PAGE)
render(ctl)
