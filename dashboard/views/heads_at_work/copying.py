"""Section 2 of Heads at work: the copy test (a random sequence said twice; the loss of its
second half) with heads turned off, by the top k of a score or by name, against as many of
the weakest heads turned off."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from dashboard import charts, data, presentation, state
from dashboard.i18n import t
from dashboard.views.heads_at_work.common import (
    PAGE,
    ModelChoice,
    group_header,
    heads_off_controls,
    score_name,
    section_intro,
)

DEFAULT_SCORE = "induction"
DEFAULT_TOP_K, MAX_TOP_K = 5, 15
DEFAULT_SEED = 0
CONTROL_SHARE = 2  # at most 1/2 of the heads off by rank, so as many are left as a control


@dataclass(frozen=True)
class CopyConfig:
    """The copy test: sequence length and seed, which heads are off, and the model (its
    listed name) and the top k slider's top."""

    length: int
    seed: int
    rank_score: str
    top_k: int
    picked: tuple[tuple[int, int], ...]
    model: str
    max_top_k: int = MAX_TOP_K


def copy_controls(page: str, model: ModelChoice) -> CopyConfig:
    """The copy test group: length and seed, the top k by a score (at most half the model's
    heads), and heads picked by name."""
    group_header(t("heads.copy_header"))
    length = state.slider_int(
        page,
        "length",
        t("heads.ctl_length"),
        data.HEADS_COPY_MIN,
        data.HEADS_COPY_MAX,
        data.HEADS_COPY_DEFAULT,
    )
    seed = state.slider_int(page, "seed", t("heads.ctl_seed"), 0, data.HEADS_MAX_SEED, DEFAULT_SEED)
    rank_score = state.select(
        page,
        "rank_score",
        t("heads.ctl_rank_score"),
        data.HEADS_SCORES,
        DEFAULT_SCORE,
        format_func=score_name,
    )
    max_top_k = min(MAX_TOP_K, model.layers * model.heads // CONTROL_SHARE)
    top_k = state.slider_int(
        page, "top_k", t("heads.ctl_top_k"), 0, max_top_k, min(DEFAULT_TOP_K, max_top_k)
    )
    picked = heads_off_controls(page, "off", "ctl_off", model.layers, model.heads)
    return CopyConfig(length, seed, rank_score, top_k, picked, model.name, max_top_k)


def versus(change: float, reference: str) -> str:
    """A metric's change as the page shows it: signed, and what it is relative to."""
    return t("common.delta_vs", delta=f"{change:+.2f}", reference=reference)


def copy_metrics(intact, ablated, control, off: tuple, weakest: tuple) -> None:
    """The copy test's four losses as metrics."""
    cols = st.columns(4)
    cols[0].metric(t("heads.metric_first"), f"{intact.first:.2f}")
    cols[1].metric(t("heads.metric_second"), f"{intact.second:.2f}")
    cols[2].metric(
        t("heads.metric_second_off", n=len(off)),
        f"{ablated.second:.2f}",
        delta=versus(ablated.second - intact.second, t("heads.delta_ref_intact")),
        delta_color="inverse",
    )
    cols[3].metric(
        t("heads.metric_second_weakest", n=len(weakest)),
        f"{control.second:.2f}",
        delta=versus(control.second - intact.second, t("heads.delta_ref_intact")),
        delta_color="inverse",
    )


def copy_chart(ctl: CopyConfig, intact, ablated) -> None:
    """The loss of every token, all heads on and the chosen heads off."""
    series = {
        t("heads.series_intact"): intact.losses,
        t("heads.series_off"): ablated.losses,
    }
    frame = pd.concat(
        pd.DataFrame({"position": range(1, len(v) + 1), "loss": v, "series": name})
        for name, v in series.items()
    )
    chart = charts.layered_line_chart(
        frame,
        x="position",
        y="loss",
        color="series",
        title=t("heads.copy_chart_title", length=ctl.length),
        x_title=t("heads.chart_position"),
        y_title=t("heads.chart_loss"),
        color_title=t("heads.chart_setting"),
        height=260,
    )
    presentation.show_chart(st, chart, theme=None, key=f"{PAGE}.copy_chart")


def draw_copy(ctl: CopyConfig) -> None:
    """Section 2: the copy test with heads turned off, and its control."""
    section_intro(t("heads.copy_title"), t("heads.copy_intro"))
    off, weakest = data.copy_heads(
        ctl.length, ctl.seed, ctl.rank_score, ctl.top_k, ctl.picked, ctl.model
    )
    intact = data.copy_run(ctl.length, ctl.seed, (), ctl.model)
    ablated, control = data.copy_pair(ctl.length, ctl.seed, off, weakest, ctl.model)
    copy_metrics(intact, ablated, control, off, weakest)
    copy_chart(ctl, intact, ablated)
    names = ", ".join(data.head_name(p) for p in off) or "—"
    control = ", ".join(data.head_name(p) for p in weakest) or "—"
    st.caption(t("heads.copy_caption", off=names, weakest=control))
    borrowed = borrowed_line(off, weakest)
    if borrowed:
        st.caption(borrowed)


def borrowed_line(off: tuple, control: tuple) -> str:
    """One line saying how many control heads come from other layers than the heads off
    (their own layers had too few left), or "" when none do."""
    layers = sorted({layer for layer, _ in off})
    own = sum(1 for layer, _ in control if layer in layers)
    if own == len(control):
        return ""
    names = ", ".join(str(layer) for layer in layers)
    return t("heads.control_borrowed", layers=names, own=own, rest=len(control) - own)


def copy_moves(ctl: CopyConfig) -> data.Job:
    """What to fill in the background after the page is drawn: the copy test of every
    top k."""
    return data.copy_job(
        ctl.length,
        ctl.seed,
        ctl.rank_score,
        ctl.top_k,
        ctl.picked,
        range(ctl.max_top_k + 1),
        model=ctl.model,
    )
