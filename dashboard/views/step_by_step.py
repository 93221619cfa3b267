"""Step by step: Q = XW_Q, K = XW_K, V = XW_V, scores, scaling, mask, softmax, output."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import streamlit as st

from dashboard import charts, controls, data, exports, presentation, refusals, state
from dashboard.config import StepConfig
from dashboard.i18n import t
from dashboard.lesson_figures import headline_metric
from dashboard.numbers import plain_number
from dashboard.replay import replayed
from dashboard.views import PAGE_SECTIONS, section_anchor

if TYPE_CHECKING:  # the library is imported by the data layer, after the torch thread's imports
    from attention_core.experiments import CellBreakdown, Walkthrough

PAGE = "step_by_step"
SECTIONS = PAGE_SECTIONS[PAGE]  # the scores (scaled beside them) and the masked scores
SENTENCES = ("preset_en", "preset_zh")
SIGNED = ("X", "W_Q", "W_K", "W_V", "Q", "K", "V", "scores", "scaled", "masked", "output")
# one row of charts per stage, three columns a row: X (up to 8 × 8) has half the page, the
# three projections a third each, so no matrix's cells are squeezed under its printed values
MATRIX_ROWS = (
    ("X", None),
    ("W_Q", "W_K", "W_V"),
    ("Q", "K", "V"),
    ("scores", "scaled", "mask"),
    ("weights", "output", None),
)
# with the causal mask: the scores after the mask (−∞ where it blocks) beside the mask
CAUSAL_MATRIX_ROWS = (
    ("X", None),
    ("W_Q", "W_K", "W_V"),
    ("Q", "K", "V"),
    ("scores", "scaled", "mask"),
    ("masked", "weights", "output"),
)
# the cells' width: 32 px cells at d_k = 8 in a third of the page, with the row labels; X
# (up to 8 columns) has half the page
PRESENT_PER_ROW = 2  # the presentation view's larger text: two matrices a row


def matrix_rows(per_row: int, causal: bool = False) -> list[tuple[str | None, ...]]:
    """:data:`MATRIX_ROWS` (:data:`CAUSAL_MATRIX_ROWS` under the causal mask), each stage's
    row cut into rows of at most ``per_row`` columns (padded with None, so a matrix keeps its
    column width)."""
    rows = []
    for group in CAUSAL_MATRIX_ROWS if causal else MATRIX_ROWS:
        if len(group) <= per_row:
            rows.append(group)
            continue
        for start in range(0, len(group), per_row):
            part = group[start : start + per_row]
            if any(name is not None for name in part):
                rows.append(part + (None,) * (per_row - len(part)))
    return rows


CHART_WIDTH = 256
WIDE_CHART_WIDTH = 352
CELL_MATRICES = ("scores", "scaled", "mask", "masked", "weights")
MINUS_INFINITY = "−∞"  # printed in a cell the mask removed  # n × n: where the cell (i, j) is
TWO_DECIMALS_CELL_PX = 36  # "−1.32" is 29 px at 10 px: narrower cells print one decimal


@dataclass(frozen=True)
class StepPageConfig:
    """The walkthrough, and the cell (query i, key j) whose numbers are taken apart."""

    walk: StepConfig
    query: int = 0
    key: int = 0


def step_controls(page: str) -> StepPageConfig:
    """The sidebar: sentence, number of tokens, d_k, causal mask, seed, then the cell."""
    sentence = state.select(
        page,
        "sentence",
        t("step_by_step.sentence"),
        SENTENCES,
        "preset_zh",
        format_func=lambda k: t(f"common.input_{k}"),
    )
    walk = StepConfig(
        sentence=sentence,
        n_tokens=state.slider_int(page, "tokens", t("step_by_step.tokens"), 4, 8, 6),
        d_k=state.slider_int(page, "d_k", t("step_by_step.d_k"), 1, data.STEP_D_MODEL, 4),
        causal=state.checkbox(page, "causal", t("step_by_step.causal"), False),
        seed=state.slider_int(page, "seed", t("common.ctl_seed"), 0, controls.MAX_SEED, 0),
    )
    query, key = cell_controls(page, walk)
    return StepPageConfig(walk=walk, query=query, key=key)


def cell_controls(page: str, walk: StepConfig) -> tuple[int, int]:
    """The query and key of the cell taken apart, named by their tokens (the walkthrough is
    cached, so :func:`render` gets the same one; on refusal the positions are shown bare and
    :func:`render` reports the error)."""
    state.controls_box().markdown(f"**{t('step_by_step.cell_header')}**")
    try:
        labels = data.axis_labels(data.step_by_step(walk).tokens)
    except ValueError:
        labels = [str(p) for p in range(walk.n_tokens)]
    positions = list(range(len(labels)))
    picks = [
        state.select(
            page, name, t(f"step_by_step.pick_{name}"), positions, 0, format_func=labels.__getitem__
        )
        for name in ("query", "key")
    ]
    return picks[0], picks[1]


def matrix_axes(tokens: tuple[str, ...], d_k: int) -> dict[str, tuple[list[str], list[str]]]:
    """Row and column labels of every intermediate matrix, by name."""
    labels = data.axis_labels(tokens)
    model = [f"d{i}" for i in range(data.STEP_D_MODEL)]
    head = [f"k{i}" for i in range(d_k)]
    by_shape = (  # the matrices of each shape: n × D, D × d_k, n × d_k, n × n
        (("X",), (labels, model)),
        (("W_Q", "W_K", "W_V"), (model, head)),
        (("Q", "K", "V", "output"), (labels, head)),
        (("scores", "scaled", "mask", "masked", "weights"), (labels, labels)),
    )
    return {name: axes for names, axes in by_shape for name in names}


def shown_matrix(result: Walkthrough, name: str):
    """The values of the matrix ``name`` as drawn: a matrix of the walkthrough, or
    ``"masked"``, the scaled scores after the mask (:func:`dashboard.data.masked_scores`)."""
    return data.masked_scores(result) if name == "masked" else result.matrices[name]


def matrix_chart(result: Walkthrough, axes: dict, name: str, cell: tuple[int, int] = (0, 0)):
    """Annotated heatmap of one intermediate matrix; on the n × n matrices, the cell
    ``cell`` = (query i, key j) taken apart below is outlined. A score the mask removed
    (``-inf``) is an unpainted cell that reads "−∞"."""
    rows, cols = axes[name]
    outlined = (rows[cell[0]], cols[cell[1]]) if name in CELL_MATRICES else None
    values = shown_matrix(result, name)
    heat = data.heatmap_grid(np.where(np.isfinite(values), values, np.nan), rows, cols)
    shape = "×".join(str(s) for s in values.shape)
    width = WIDE_CHART_WIDTH if name == "X" else CHART_WIDTH
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
        value_format=".2f" if width // len(cols) >= TWO_DECIMALS_CELL_PX else ".1f",
        width=width,
        highlight=outlined,
        missing_text=MINUS_INFINITY,
    )
    return charts.heatmap_chart(heat.frame, spec)


@replayed
def draw_matrices(walk: StepConfig, cell: tuple[int, int], per_row: int) -> None:
    """Every intermediate matrix, one row of charts per stage of the computation (at most
    ``per_row`` a row), the cell (i, j) taken apart outlined (drawn once per values and
    language, then replayed: :mod:`dashboard.replay`)."""
    result = data.step_by_step(walk)
    axes = matrix_axes(result.tokens, walk.d_k)
    for group in matrix_rows(per_row, walk.causal):
        cols = st.columns(len(group))
        for col, name in zip(cols, group, strict=True):
            if name is None:
                continue
            # a matrix a lesson step may name (PAGE_SECTIONS) is a keyed box: its anchor
            with col.container(key=section_anchor(PAGE, name)) if name in SECTIONS else col:
                if name == "mask" and charts.flat_value(result.matrices[name]) is not None:
                    st.info(t("step_by_step.mask_flat"))  # a block of 1s says nothing
                    continue
                # at its own size: stretched to the column, Vega would squeeze the rows
                presentation.show_chart(
                    st, matrix_chart(result, axes, name, cell), theme=None, width="content"
                )


def cell_table(cell: CellBreakdown, i: int, j: int) -> pd.DataFrame:
    """The steps from q_i·k_j to the weight, one row each, with their values."""
    allowed = t("step_by_step.allowed_yes") if cell.allowed else t("step_by_step.allowed_no")
    names = ("s_sqrt", "s_scaled", "s_mask", "s_max", "s_exp", "s_sum", "s_weight")
    return pd.DataFrame(
        {
            t("step_by_step.col_step"): [
                t("step_by_step.s_dot", i=i, j=j),
                *(t(f"step_by_step.{name}") for name in names),
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


def draw_cell(result: Walkthrough, i: int, j: int) -> None:
    """One weight taken apart: the steps, and the weight recomputed from them."""
    st.subheader(t("step_by_step.cell_header"))
    cell = data.cell_breakdown(result, i, j)
    st.dataframe(cell_table(cell, i, j), hide_index=True)
    metric_cols = st.columns(3)
    headline_metric(metric_cols[0], t("step_by_step.metric_weight"), f"{cell.weight:.4f}")
    metric_cols[1].metric(
        t("step_by_step.metric_recomputed"),
        f"{(cell.exp / cell.row_sum):.4f}",
    )
    metric_cols[2].metric(
        t("step_by_step.metric_row_sum", i=i),
        f"{result.matrices['weights'][i].sum():.4f}",
    )


def render(ctl: StepPageConfig) -> None:
    """Compute and draw the page (returns early, without st.stop, on refusal): the matrices
    first, then the analogy and the one weight taken apart."""
    try:
        result = data.step_by_step(ctl.walk)
    except ValueError as err:
        refusals.show_error(err)
        return
    axes = matrix_axes(result.tokens, ctl.walk.d_k)
    per_row = PRESENT_PER_ROW if presentation.presenting() else len(MATRIX_ROWS[1])
    draw_matrices(ctl.walk, (ctl.query, ctl.key), per_row)
    st.info(t("step_by_step.analogy"))
    st.caption(t("step_by_step.library_check", diff=plain_number(result.library_max_diff)))
    draw_cell(result, ctl.query, ctl.key)
    labels = data.axis_labels(result.tokens)
    exports.export_buttons(
        "step_by_step_weights",
        weights=result.matrices["weights"],
        csv_text=lambda: data.weights_table(result.matrices["weights"], labels, labels),
        chart=matrix_chart(result, axes, "weights"),
    )


controls.page_intro(PAGE)
ctl = step_controls(PAGE)
render(ctl)
