"""Variants side by side on one input, and their measured cost against sequence length."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pandas as pd
import streamlit as st

from dashboard import charts, controls, data, presentation, refusals, state
from dashboard.charts import canvas
from dashboard.config import LayerConfig
from dashboard.i18n import t
from dashboard.numbers import plain_number
from dashboard.replay import replayed
from dashboard.views import section_anchor

PAGE = "variants"
EXACT_TOLERANCE = 1e-5  # float32 round-off of a different but exact order of sums
DEFAULT_VARIANTS = ("scaled", "local", "linear")
REFERENCE = "scaled"
MASK_KINDS = ("none", "causal")
COMPLEXITY_VARIANTS = ("scaled", "local", "linear", "chunked")
COMPLEXITY_MAX_L = (256, 512, 1024, 2048, 4096, 8192, 16384)
COMPLEXITY_MIN_L = 64
FIRST_LOOK_MAX_L = 256  # measured before any press: 12 cells, about 1 s on a fresh server
COMPLEXITY_HEADS = 4
COMPLEXITY_HEAD_DIM = 32
COMPLEXITY_REPEATS = 3
HEATMAP_WIDTH = 260
MAX_COLUMNS = 4
_MEASURED = "variants._complexity_requested"


@dataclass(frozen=True)
class VariantsConfig:
    """Variants compared side by side on one shared input.

    Attributes:
        base: the shared layer (input, sizes, mask, seed, device); its variant is unused.
        chosen: the variants compared, with their own parameters.
        max_l: the longest sequence the cost section measures.
        measure: the cost was asked for (the Measure button, pressed in this session).
    """

    base: LayerConfig
    chosen: tuple[controls.VariantChoice, ...]
    max_l: int = 1024
    measure: bool = False

    def layer(self, choice: controls.VariantChoice) -> LayerConfig:
        """The shared layer with ``choice``'s variant and parameters."""
        return replace(self.base, variant=choice.variant, params=choice.params)


def variants_controls(page: str) -> VariantsConfig:
    """The sidebar: up to four variants, then the shared input and each variant's params."""
    chosen = state.multiselect(
        page,
        "variants",
        t("variants.ctl_variants"),
        list(data.variant_catalogue()),
        DEFAULT_VARIANTS,
        MAX_COLUMNS,
        format_func=controls.variant_label,
        help=t("variants.ctl_variants_help", n=MAX_COLUMNS),
        where=state.controls_box(),
    )
    source, seq_len = controls.input_length_controls(page, 32, 128, min_len=4)
    projections = controls.projection_controls(page)
    d_model, heads = controls.width_controls(page, 64, 4)
    state.controls_box().caption(t("common.ctl_d_k", d_k=d_model // heads))
    mask_kind = state.select(
        page,
        "mask",
        t("common.ctl_mask"),
        MASK_KINDS,
        "none",
        format_func=lambda k: t(f"common.mask_{k}"),
    )
    seed = state.slider_int(page, "seed", t("common.ctl_seed"), 0, controls.MAX_SEED, 0)
    choices = tuple(
        controls.VariantChoice(name, controls.variant_params_controls(page, name, seq_len))
        for name in chosen
    )
    base = LayerConfig(
        variant=REFERENCE,
        seq_len=seq_len,
        d_model=d_model,
        heads=heads,
        mask_kind=mask_kind,
        pad_len=seq_len,
        seed=seed,
        input_kind=source.input_kind,
        sentence=source.sentence,
        device=controls.current_device(),
        projections=projections,
    )
    max_l, measure = cost_controls(page)
    return VariantsConfig(base=base, chosen=choices, max_l=max_l, measure=measure)


def cost_controls(page: str) -> tuple[int, bool]:
    """The cost section's controls, under its heading in the sidebar: the longest L, and the
    Measure button (once pressed, the cost stays on while other controls change)."""
    state.controls_box().markdown(f"**{t('variants.cost_header')}**")
    max_l = state.select(
        page,
        "max_l",
        t("variants.ctl_max_l"),
        COMPLEXITY_MAX_L,
        1024,
        help=t("variants.ctl_max_l_help"),
    )
    if state.controls_box().button(t("variants.measure_button"), type="primary"):
        st.session_state[_MEASURED] = True
    return max_l, bool(st.session_state.get(_MEASURED))


def compare_section(ctl: VariantsConfig) -> None:
    """Run the chosen variants on the shared input and draw one column each."""
    base = ctl.base
    try:
        with st.spinner(t("variants.computing")):
            reference = data.attention_run(ctl.layer(controls.VariantChoice(REFERENCE)))
            runs = [data.attention_run(ctl.layer(choice)) for choice in ctl.chosen]
    except ValueError as err:
        refusals.show_error(err)
        return
    summary = []
    columns = st.columns(len(ctl.chosen))
    for col, choice, result in zip(columns, ctl.chosen, runs, strict=True):
        diff = data.max_output_difference(result, reference)
        with col:
            summary.append(variant_column(base, choice, result, diff))
    st.caption(
        t(
            "variants.shared_input",
            input=t(f"common.input_{base.input_kind}"),
            seq_len=base.seq_len,
            d_model=base.d_model,
            heads=base.heads,
            projections=t(f"common.qk_{base.projections}"),
        )
    )
    st.dataframe(pd.DataFrame(summary), hide_index=True, width="stretch")
    st.caption(t("variants.time_note"))


def shown_value(value: object) -> str:
    """A parameter's value as the page shows it: a flag as a translated yes or no."""
    if isinstance(value, bool):
        return t("variants.yes") if value else t("variants.no")
    return str(value)


def variant_column(
    base: LayerConfig, choice: controls.VariantChoice, result: data.AttentionRun, diff: float
) -> dict:
    """One variant's column: its name, cost, pattern, weights and metrics.

    Returns:
        Its row of the summary table.
    """
    name, params = choice.variant, choice.params
    info = data.variant_catalogue()[name]
    estimate = data.memory_estimate(name, params, base.heads, base.seq_len, base.d_k, False)
    st.subheader(controls.variant_label(name))
    labels = data.axis_labels(result.tokens)
    draw_pattern(base, choice, labels)
    sparsity_text = draw_weights(name, result, labels)
    st.caption(controls.variant_explanation(name))
    memory = controls.translated(f"variants.memory_{name}", info.memory_complexity)
    st.markdown(t("variants.complexity_line", time=info.time_complexity, memory=memory))
    if params:
        st.caption(", ".join(f"{controls.param_label(k)} = {shown_value(v)}" for k, v in params))
    st.metric(t("variants.metric_diff"), plain_number(diff), help=t("variants.metric_diff_help"))
    st.metric(t("common.metric_sparsity"), sparsity_text)
    st.metric(
        t("variants.metric_memory"),
        data.describe_bytes(estimate),
        help=t("variants.metric_memory_help"),
    )
    st.metric(t("common.metric_time"), data.describe_seconds(result.seconds))
    return {
        t("variants.col_variant"): controls.variant_label(name),
        # measured, with its tolerance: a learner reads "yes" only beside a difference of 0
        t("variants.col_exact", tol=plain_number(EXACT_TOLERANCE, 1)): (
            t("variants.yes") if diff <= EXACT_TOLERANCE else t("variants.no")
        ),
        t("variants.metric_diff"): diff,
        t("common.metric_sparsity"): result.sparsity,
        t("variants.metric_memory"): data.describe_bytes(estimate),
        t("variants.col_time_ms"): round(result.seconds * 1000, 3),
    }


def draw_pattern(base: LayerConfig, choice: controls.VariantChoice, labels: list[str]) -> None:
    """The keys each query may attend to under the variant and the shared mask, on the
    input's token ``labels``."""
    pattern = data.allowed_pattern(choice.variant, choice.params, base.seq_len, base.mask_kind)
    if charts.flat_value(pattern) == 1.0:  # one block of colour: say it instead
        st.info(t("variants.pattern_all"))
        return
    pattern_map = data.heatmap_grid(pattern, labels, labels)
    pattern_spec = charts.HeatmapSpec(
        title=t("variants.pattern_title"),
        subtitle=t("variants.pattern_density", share=float(pattern.mean())),
        x_title=t("common.chart_key"),
        y_title=t("common.chart_query"),
        value_title=t("variants.pattern_value"),
        row_order=pattern_map.row_order,
        col_order=pattern_map.col_order,
        domain=(0.0, 1.0),
        width=HEATMAP_WIDTH,
    )
    canvas.draw_heatmaps(pattern_map, pattern_spec, key=f"variants.{choice.variant}.pattern")


def draw_weights(name: str, result: data.AttentionRun, labels: list[str]) -> str:
    """The head-averaged weights on the input's token ``labels`` (or a note when they were
    skipped).

    Returns:
        The sparsity as text ("—" without weights).
    """
    if result.weights is None:
        st.warning(t("playground.weights_skipped"))
        return "—"
    weight_map = data.heatmap_grid(result.mean_weights, labels, labels)
    weight_spec = charts.weights_spec(
        weight_map, t("variants.weights_title"), subtitle=None, width=HEATMAP_WIDTH
    )
    canvas.draw_heatmaps(weight_map, weight_spec, key=f"variants.{name}.weights")
    return f"{result.sparsity:.1%}"


def cost_lengths(ctl: VariantsConfig) -> tuple[int, ...]:
    """The lengths L measured, doubling from :data:`COMPLEXITY_MIN_L`: up to the chosen
    longest L once Measure was pressed, up to :data:`FIRST_LOOK_MAX_L` before (a first look
    that costs about a second once per server: the cells are cached)."""
    top = ctl.max_l if ctl.measure else min(ctl.max_l, FIRST_LOOK_MAX_L)
    return tuple(2**p for p in range(int(math.log2(COMPLEXITY_MIN_L)), int(math.log2(top)) + 1))


def cost_section(ctl: VariantsConfig) -> None:
    """Time and peak memory against L with a progress bar: at small lengths on arrival, up to
    the chosen longest L once measuring was asked for."""
    st.header(t("variants.cost_header"), anchor=section_anchor(PAGE, "cost"))
    presentation.explain(t("variants.cost_intro"))
    if not ctl.measure:
        st.info(t("variants.measure_hint", L=FIRST_LOOK_MAX_L))
    lengths, device = cost_lengths(ctl), ctl.base.device
    if measure_cost(lengths, device):
        long_note = ctl.measure and ctl.max_l > data.QUADRATIC_MAX_L
        cost_figures(lengths, device, long_note, data.band_kernel_info())


@replayed
def cost_figures(
    lengths: tuple[int, ...], device: str, long_note: bool, kernel: data.KernelInfo
) -> None:
    """The cost section's charts, captions and table for the lengths ``lengths`` on
    ``device`` (measured once per server, then replayed: a room's thirty followers arriving
    at the step rebuild none of it); ``long_note`` says which variants ran past the
    quadratic ones' longest L, ``kernel`` whether local ran the C band kernel."""
    cost = cost_cells(lengths, device)  # measured above: cached
    if long_note:
        long_ones = sorted(set(cost.loc[cost["L"] > data.QUADRATIC_MAX_L, "variant"]))
        st.caption(
            t(
                "variants.long_note",
                L=data.QUADRATIC_MAX_L,
                variants=", ".join(controls.variant_label(v) for v in long_ones) or "—",
            )
        )
    cost = cost.assign(
        label=[controls.variant_label(v) for v in cost["variant"]],
        peak_kib=cost["peak_bytes_measured"] / 1024,
        estimate_kib=cost["peak_bytes_estimated"] / 1024,
    )
    ok = cost[cost["status"] == "ok"]
    cost_charts(ok)
    cost_captions(ok, device, kernel)
    skipped = cost[cost["status"] != "ok"]
    for _, row in skipped.iterrows():
        st.warning(t("variants.skipped", variant=row["label"], L=int(row["L"]), note=row["note"]))
    st.dataframe(cost_table(cost).round(2), hide_index=True, width="stretch")


def cost_cell_list(lengths: tuple[int, ...]) -> data.CostCells:
    """(variant, L, repeats) of every cell measured for ``lengths`` (:func:`cost_lengths`):
    the variants that can run at each L, timed :data:`COMPLEXITY_REPEATS` times up to the
    quadratic ones' longest L, once above."""
    return tuple(
        (v, n, COMPLEXITY_REPEATS if n <= data.QUADRATIC_MAX_L else 1)
        for n in lengths
        for v in data.measurable_variants(
            COMPLEXITY_VARIANTS, n, COMPLEXITY_HEADS, COMPLEXITY_HEAD_DIM
        )
    )


def cost_cells(lengths: tuple[int, ...], device: str) -> pd.DataFrame:
    """Every (variant, L) cell for ``lengths`` on ``device`` in one table, each measured once
    per server (cached by the data layer).

    Raises:
        ValueError: when a cell cannot be measured here.
    """
    cells = cost_cell_list(lengths)
    return data.complexity_table(cells, COMPLEXITY_HEADS, COMPLEXITY_HEAD_DIM, device)


def measure_cost(lengths: tuple[int, ...], device: str) -> bool:
    """Measure every cell of :func:`cost_cells` with a progress bar, one cell at a time; no
    bar when the whole table is already measured (a room's followers arriving at the step).

    Returns:
        True when every cell was measured (False after showing a refusal).
    """
    cells = cost_cell_list(lengths)
    table = (cells, COMPLEXITY_HEADS, COMPLEXITY_HEAD_DIM, device)
    if data.complexity_table.cached(*table) is not None:
        return True
    bar = st.progress(0.0, text=t("variants.measuring"))
    try:
        for done, (name, n, repeats) in enumerate(cells, start=1):
            data.complexity_cell(name, n, COMPLEXITY_HEADS, COMPLEXITY_HEAD_DIM, repeats, device)
            bar.progress(done / len(cells), text=t("variants.measuring"))
        data.complexity_table(*table)
    except ValueError as err:
        bar.empty()
        refusals.show_error(err)
        return False
    bar.empty()
    return True


def cost_charts(ok: pd.DataFrame) -> None:
    """Time and peak memory against L, log-log, one line per variant."""
    left, right = st.columns(2)
    for col, y, frame, name in (
        (left, "time_ms", ok, "time"),
        (right, "peak_kib", ok[ok["peak_kib"] > 0], "memory"),
    ):
        presentation.show_chart(
            col,
            charts.layered_line_chart(
                frame,
                x="L",
                y=y,
                color="label",
                title=t(f"variants.chart_{name}"),
                x_title=t("variants.axis_l"),
                y_title=t(f"variants.axis_{name}"),
                color_title=t("variants.col_variant"),
                log_x=True,
                log_y=True,
                value_format=".3g",
            ),
            theme=None,
            width="stretch",
        )


def cost_captions(ok: pd.DataFrame, device: str, kernel: data.KernelInfo) -> None:
    """How the cost was measured, and whether local ran the C band kernel (on a CPU)."""
    method = ok["memory_method"].iloc[0] if len(ok) else ""
    st.caption(
        t(
            "variants.cost_caption",
            heads=COMPLEXITY_HEADS,
            head_dim=COMPLEXITY_HEAD_DIM,
            repeats=COMPLEXITY_REPEATS,
            method=refusals.memory_method_text(method),
        )
    )
    if data.device_for(device).type == "cpu":
        if kernel.available:
            st.caption(t("variants.kernel_on", isa=kernel.isa))
        else:
            st.caption(t("variants.kernel_off", reason=kernel.reason))


def cost_table(cost: pd.DataFrame) -> pd.DataFrame:
    """Every measured cell with translated column names."""
    return cost[["label", "L", "time_ms", "peak_kib", "estimate_kib"]].rename(
        columns={
            "label": t("variants.col_variant"),
            "L": "L",
            "time_ms": t("variants.col_time_ms"),
            "peak_kib": t("variants.col_peak_measured"),
            "estimate_kib": t("variants.col_peak_estimated"),
        }
    )


def render(ctl: VariantsConfig) -> None:
    """The side-by-side comparison (when variants are chosen), then the cost against L."""
    if not ctl.chosen:
        st.warning(t("variants.none_chosen"))
    else:
        if len(ctl.chosen) == 1:
            st.info(t("variants.one_chosen"))
        compare_section(ctl)
    cost_section(ctl)


controls.page_intro(PAGE)
ctl = variants_controls(PAGE)
render(ctl)
