"""Step by step: Q = XW_Q, K = XW_K, V = XW_V, scores, scaling, mask, softmax, output."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, controls, data, exports, state
from dashboard.config import StepConfig
from dashboard.i18n import t

PAGE = "step_by_step"
SENTENCES = ("preset_en", "preset_zh")
SIGNED = ("X", "W_Q", "W_K", "W_V", "Q", "K", "V", "scores", "scaled", "output")
MATRIX_ROWS = (
    ("X", "W_Q", "W_K", "W_V"),
    ("Q", "K", "V"),
    ("scores", "scaled", "mask"),
    ("weights", "output"),
)
CHART_WIDTH = 240


def step_controls(page: str) -> StepConfig:
    """The sidebar: sentence, number of tokens, d_k, causal mask, seed."""
    sentence = state.select(
        page,
        "sentence",
        t("step_by_step.sentence"),
        SENTENCES,
        "preset_zh",
        format_func=lambda k: t(f"common.input_{k}"),
    )
    return StepConfig(
        sentence=sentence,
        n_tokens=state.slider_int(page, "tokens", t("step_by_step.tokens"), 4, 8, 6),
        d_k=state.slider_int(page, "d_k", t("step_by_step.d_k"), 1, data.STEP_D_MODEL, 4),
        causal=state.checkbox(page, "causal", t("step_by_step.causal"), False),
        seed=state.slider_int(page, "seed", t("common.ctl_seed"), 0, controls.MAX_SEED, 0),
    )


def render(ctl: StepConfig) -> None:
    """Compute and draw the page (returns early, without st.stop, on refusal)."""
    st.info(t("step_by_step.analogy"))
    try:
        result = data.step_by_step(ctl)
    except ValueError as err:
        controls.show_error(err)
        return

    labels = data.axis_labels(result.tokens)
    dims = {
        "model": [f"d{i}" for i in range(data.STEP_D_MODEL)],
        "head": [f"k{i}" for i in range(ctl.d_k)],
    }
    axes = {
        "X": (labels, dims["model"]),
        "W_Q": (dims["model"], dims["head"]),
        "W_K": (dims["model"], dims["head"]),
        "W_V": (dims["model"], dims["head"]),
        "Q": (labels, dims["head"]),
        "K": (labels, dims["head"]),
        "V": (labels, dims["head"]),
        "scores": (labels, labels),
        "scaled": (labels, labels),
        "mask": (labels, labels),
        "weights": (labels, labels),
        "output": (labels, dims["head"]),
    }

    def matrix_chart(name: str):
        """Annotated heatmap of one intermediate matrix."""
        rows, cols = axes[name]
        heat = data.heatmap_grid(result.matrices[name], rows, cols)
        shape = "×".join(str(s) for s in result.matrices[name].shape)
        spec = charts.HeatmapSpec(
            title=f"{t(f'step_by_step.m_{name}')} ({shape})",
            subtitle=t(f"step_by_step.f_{name}"),
            x_title="",
            y_title="",
            value_title=t("common.chart_value"),
            row_order=heat.row_order,
            col_order=heat.col_order,
            diverging=name in SIGNED,
            domain=(0.0, 1.0) if name in ("mask", "weights") else None,
            annotate=True,
            value_format=".2f",
            width=CHART_WIDTH,
        )
        return charts.heatmap_chart(heat.frame, spec)

    for group in MATRIX_ROWS:
        widths = [len(axes[name][1]) + 2 for name in group]  # wider matrices get wider columns
        cols = st.columns(widths)
        for col, name in zip(cols, group, strict=True):
            with col:
                st.altair_chart(matrix_chart(name), theme=None)

    st.caption(t("step_by_step.library_check", diff=result.library_max_diff))

    st.subheader(t("step_by_step.cell_header"))
    positions = list(range(len(result.tokens)))
    left, right = st.columns(2)
    i = state.select(
        PAGE,
        "query",
        t("step_by_step.pick_query"),
        positions,
        0,
        format_func=lambda p: labels[p],
        where=left,
    )
    j = state.select(
        PAGE,
        "key",
        t("step_by_step.pick_key"),
        positions,
        0,
        format_func=lambda p: labels[p],
        where=right,
    )
    cell = data.cell_breakdown(result, i, j)
    allowed = t("step_by_step.allowed_yes") if cell.allowed else t("step_by_step.allowed_no")
    steps = pd.DataFrame(
        {
            t("step_by_step.col_step"): [
                t("step_by_step.s_dot", i=i, j=j),
                t("step_by_step.s_sqrt"),
                t("step_by_step.s_scaled"),
                t("step_by_step.s_mask"),
                t("step_by_step.s_max"),
                t("step_by_step.s_exp"),
                t("step_by_step.s_sum"),
                t("step_by_step.s_weight"),
            ],
            t("step_by_step.col_value"): [
                f"{cell.dot:.4f}",
                f"{cell.sqrt_d_k:.4f}",
                f"{cell.scaled:.4f}",
                allowed,
                f"{cell.row_max:.4f}",
                f"{cell.exp:.4f}",
                f"{cell.row_sum:.4f}",
                f"{cell.weight:.4f}",
            ],
        }
    )
    st.dataframe(steps, hide_index=True)
    metric_cols = st.columns(3)
    metric_cols[0].metric(t("step_by_step.metric_weight"), f"{cell.weight:.4f}")
    metric_cols[1].metric(
        t("step_by_step.metric_recomputed"),
        f"{(cell.exp / cell.row_sum):.4f}",
    )
    metric_cols[2].metric(
        t("step_by_step.metric_row_sum", i=i),
        f"{result.matrices['weights'][i].sum():.4f}",
    )

    exports.export_buttons(
        "step_by_step_weights",
        weights=result.matrices["weights"],
        csv_text=lambda: data.weights_table(result.matrices["weights"], labels, labels),
        chart=matrix_chart("weights"),
    )


controls.page_intro(PAGE)
ctl = step_controls(PAGE)
render(ctl)
