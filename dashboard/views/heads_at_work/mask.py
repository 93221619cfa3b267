"""Section 5 of Heads at work: a mask composed of a sliding window, sink tokens, a prefix and
a stride, and what it costs the model (SmolLM2 or an own one) on the tutorial's paragraph
(perplexity and KL), in every layer at once and in each layer alone."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from dashboard import charts, data, presentation, state
from dashboard.i18n import t
from dashboard.progress import PassProgress, confirm_long_run
from dashboard.views.heads_at_work.common import (
    PAGE,
    ModelChoice,
    cost_words,
    group_header,
    section_intro,
)

MAX_WINDOW, MAX_SINKS, MAX_PREFIX = 64, 8, 32
WINDOW_STEP = 2
STRIDES = (0, 2, 3, 4, 6, 8, 12, 16)
DEFAULT_WINDOW, DEFAULT_SINKS = 16, 4


@dataclass(frozen=True)
class MaskConfig:
    """The mask composer's parts (0 = off), whether each layer is measured alone, and the
    model (its listed name)."""

    window: int
    sinks: int
    prefix: int
    stride: int
    per_layer: bool
    model: str


def mask_controls(page: str, model: ModelChoice) -> MaskConfig:
    """The mask composer group: window, sinks, prefix, stride, and the per-layer switch."""
    group_header(t("heads.mask_header"))
    window = state.slider_int(
        page, "window", t("heads.ctl_window"), 0, MAX_WINDOW, DEFAULT_WINDOW, step=WINDOW_STEP
    )
    sinks = state.slider_int(page, "sinks", t("heads.ctl_sinks"), 0, MAX_SINKS, DEFAULT_SINKS)
    prefix = state.slider_int(page, "prefix", t("heads.ctl_prefix"), 0, MAX_PREFIX, 0)
    stride = state.select(page, "stride", t("heads.ctl_stride"), STRIDES, 0)
    per_layer = state.checkbox(
        page,
        "per_layer",
        t("heads.ctl_per_layer"),
        False,
        help=t("heads.ctl_per_layer_help", layers=model.layers),
    )
    return MaskConfig(window, sinks, prefix, stride, per_layer, model.name)


def draw_mask(ctl: MaskConfig) -> None:
    """Section 5: the composed mask's cost in every layer and in each alone."""
    section_intro(t("heads.mask_title"), t("heads.mask_intro"))
    with st.expander(t("heads.mask_paragraph")):
        st.code(data.MASK_TEXT, language=None, wrap_lines=True)
    parts = data.mask_parts(ctl.window, ctl.sinks, ctl.prefix, ctl.stride)
    if data.mask_kept(parts, ctl.model) == 1.0:
        st.info(t("heads.mask_nothing_cut"))
        return
    cost = data.mask_estimate(parts, ctl.per_layer, ctl.model)
    if not confirm_long_run("mask", cost.calls, cost.seconds, cost.long):
        return
    with PassProgress("heads.progress_mask") as on_pass:
        effect = data.measured_mask_effect(parts, ctl.per_layer, on_pass, model=ctl.model)
    cols = st.columns(4)
    cols[0].metric(t("heads.metric_kept"), f"{effect.kept:.0%}")
    cols[1].metric(t("heads.metric_full_ppl"), f"{effect.full_perplexity:.2f}")
    cols[2].metric(t("heads.metric_masked_ppl"), f"{effect.all_layers_perplexity:.2f}")
    cols[3].metric(t("heads.metric_kl"), f"{effect.all_layers_kl:.3f}")
    if not ctl.per_layer:
        all_alone = data.mask_estimate(parts, True, ctl.model)
        st.caption(t("heads.per_layer_off", cost=cost_words(all_alone)))
        return
    frame = pd.DataFrame(
        {"layer": [str(i) for i in range(len(effect.layer_kl))], "kl": effect.layer_kl}
    )
    chart = charts.bar_chart(
        frame,
        x="layer",
        y="kl",
        title=t("heads.mask_chart_title"),
        x_title=t("heads.chart_layer"),
        y_title=t("heads.chart_kl"),
        value_format=".4f",
    )
    presentation.show_chart(st, chart, theme=None, key=f"{PAGE}.mask_chart")
    worst = int(effect.layer_kl.argmax())
    st.caption(t("heads.mask_caption", layer=worst, ppl=f"{effect.layer_perplexity[worst]:.2f}"))


def mask_moves(ctl: MaskConfig) -> tuple[data.Job, ...]:
    """What to fill in the background after the page is drawn: the masks one move of the
    sinks or the window away (none with every layer measured alone: 30 forward passes a
    value, nor when the mask cuts nothing)."""
    parts = data.mask_parts(ctl.window, ctl.sinks, ctl.prefix, ctl.stride)
    if ctl.per_layer or data.mask_kept(parts, ctl.model) == 1.0:
        return ()
    windows = data.window_neighbours(ctl.window, WINDOW_STEP, MAX_WINDOW)
    return (data.mask_job(parts, range(MAX_SINKS + 1), windows, ctl.model),)
