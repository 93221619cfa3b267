"""Section 3 of Heads at work: every head's effect on the loss estimated from one backward
pass, on the copy test or the prompt, and checked against true effects (each head turned off
in turn) for a few heads, with Spearman's rank correlation."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from dashboard import data, presentation, state
from dashboard.charts.head_grid import effect_scatter_chart
from dashboard.i18n import t
from dashboard.progress import PassProgress, confirm_long_run
from dashboard.views.heads_at_work.common import (
    PAGE,
    ModelChoice,
    cost_words,
    draw_grid,
    grid_chart,
    grid_titles,
    group_header,
    section_intro,
)
from dashboard.views.heads_at_work.copying import CopyConfig

PICKS = ("layers", "top")
DEFAULT_PICK = "layers"
DEFAULT_COUNT, MIN_COUNT = 12, 2
LAYERS_PICKED = 3  # the "layers" pick: every head of 3 layers (27 heads in SmolLM2)
DEFAULT_FIRST_LAYER = 16


@dataclass(frozen=True)
class AttributionConfig:
    """Attribution: its text, the heads whose true effects are measured, and whether to; the
    model (listed name), how many layers the "layers" pick takes, whether the model has a
    backward pass (``gradients``) and whether it is SmolLM2 (the text about its twin)."""

    source: str
    pick: str
    count: int
    first_layer: int
    measure: bool
    model: str
    layers_picked: int = LAYERS_PICKED
    gradients: bool = True
    smollm2: bool = True


def attribution_controls(page: str, model: ModelChoice) -> AttributionConfig:
    """The attribution group: which text, which heads' true effects (over the model's layers
    and heads), and whether to measure."""
    picked = min(LAYERS_PICKED, model.layers)
    group_header(t("heads.attr_header"))
    source = state.radio(
        page,
        "source",
        t("heads.ctl_source"),
        data.HEADS_SOURCES,
        "copy",
        format_func=lambda s: t(f"heads.source_{s}"),
    )
    pick = state.radio(
        page,
        "pick",
        t("heads.ctl_pick"),
        PICKS,
        DEFAULT_PICK,
        format_func=lambda p: t(f"heads.pick_{p}", n=picked),
    )
    most = max(min(data.HEADS_MAX_OFF, model.layers * model.heads), MIN_COUNT)
    count = state.slider_int(page, "count", t("heads.ctl_count"), MIN_COUNT, most, DEFAULT_COUNT)
    first = state.slider_int(
        page,
        "first_layer",
        t("heads.ctl_first_layer", n=picked),
        0,
        model.layers - picked,
        DEFAULT_FIRST_LAYER,
    )
    measure = state.checkbox(
        page, "measure", t("heads.ctl_measure"), False, help=t("heads.ctl_measure_help")
    )
    return AttributionConfig(
        source, pick, count, first, measure, model.name, picked, model.gradients, model.smollm2
    )


def draw_effects(ids, positions, estimates, pairs, model: str) -> None:
    """The scatter of estimated against true effects, with Spearman's number."""
    cost = data.effects_estimate(ids, positions, pairs, model)
    if not confirm_long_run("effects", cost.calls, cost.seconds, cost.long):
        return
    with PassProgress("heads.progress_effects") as on_pass:
        effects = data.measured_head_effects(ids, positions, pairs, on_pass, model=model)
    table, rho = data.effect_table(estimates, pairs, effects)
    st.metric(t("heads.metric_spearman", n=len(pairs)), "—" if rho != rho else f"{rho:.2f}")
    chart = effect_scatter_chart(
        table,
        title=t("heads.scatter_title"),
        x_title=t("heads.chart_estimate"),
        y_title=t("heads.chart_effect"),
        head_title=t("common.chart_head"),
    )
    presentation.show_chart(st, chart, theme=None, key=f"{PAGE}.scatter")
    st.caption(t("heads.scatter_caption"))


def draw_attribution(ctl: AttributionConfig, census_text: str, copy: CopyConfig) -> None:
    """Section 3: the one-backward estimate of every head's effect, and its check."""
    intro = "heads.attr_intro" if ctl.smollm2 else "heads.attr_intro_own"
    section_intro(t("heads.attr_title"), t(intro, most=data.HEADS_MAX_OFF))
    if not ctl.gradients:
        st.info(t("heads.needs_float"))
        return
    try:
        ids, positions = data.attribution_ids(
            ctl.source, census_text, copy.length, copy.seed, ctl.model
        )
    except data.TooFewTokens as short:
        st.info(t("heads.attr_too_short", need=short.need, got=short.got))
        return
    estimates = data.head_attribution(ids, positions, ctl.model)
    if ctl.source == "copy":
        labels = data.copy_census(copy.length, copy.seed, ctl.model).labels
    else:
        labels = data.prompt_census(census_text, ctl.model).head_labels
    per_layer = estimates.shape[1]
    table = pd.DataFrame(
        {
            "layer": [i // per_layer for i in range(estimates.size)],
            "head": [i % per_layer for i in range(estimates.size)],
            "score": estimates.ravel(),
            "label": labels.ravel(),
        }
    )
    left, right = st.columns([2, 3])
    with left:
        titles = grid_titles(t("heads.chart_estimate"), t("heads.attr_grid_title"))
        draw_grid(grid_chart(table, titles, ".3f", label_set=data.HEADS_LABELS), "attr_grid")
    with right:
        layers = range(ctl.first_layer, ctl.first_layer + ctl.layers_picked)
        pairs = data.measured_heads(ctl.pick, estimates, layers, ctl.count)
        if ctl.measure:
            draw_effects(ids, positions, estimates, pairs, ctl.model)
        else:
            cost = cost_words(data.effects_estimate(ids, positions, pairs, ctl.model))
            st.info(t("heads.measure_off", n=len(pairs), cost=cost))
