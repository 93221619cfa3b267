"""Section 6 of Heads at work: the 12 × 12 census grid of multilingual e5-small on the page's
prompt or a pronoun preset, and what the sentence loses with heads turned off
(zero-ablation): the embedding's cosine and the pronoun → noun link before and after.
Indices are 0-based, as on the rest of the page.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from dashboard import data, refusals, state
from dashboard.i18n import t
from dashboard.views.heads_at_work.common import (
    SCORE_FORMATS,
    draw_grid,
    grid_chart,
    grid_titles,
    group_header,
    heads_off_controls,
    score_name,
    section_intro,
)

DEFAULT_SOURCE = "cat_comfortable"
DEFAULT_SCORE = "link"
DEFAULT_TOP_K, MAX_TOP_K = 5, 24


@dataclass(frozen=True)
class E5Config:
    """The e5 section: its text's source, the score drawn (and ranked by), the top k heads
    by it to turn off, and the heads picked by name (0-based)."""

    source: str
    score: str
    top_k: int
    picked: tuple[tuple[int, int], ...]


def source_name(source: str) -> str:
    """The page's prompt, or a preset shown as its sentence."""
    if source == data.E5_PROMPT:
        return t("heads.e5_source_prompt")
    return f"“{data.MODEL_PRESETS[source]}”"


def e5_controls(page: str) -> E5Config:
    """The e5 group of the sidebar: text, score, top k and heads picked by name."""
    group_header(t("heads.e5_header"))
    source = state.select(
        page,
        "e5_source",
        t("heads.ctl_e5_source"),
        data.E5_SOURCES,
        DEFAULT_SOURCE,
        format_func=source_name,
    )
    score = state.select(
        page,
        "e5_score",
        t("heads.ctl_e5_score"),
        data.E5_SCORES,
        DEFAULT_SCORE,
        format_func=score_name,
    )
    top_k = state.slider_int(page, "e5_top_k", t("heads.ctl_e5_top_k"), 0, MAX_TOP_K, DEFAULT_TOP_K)
    picked = heads_off_controls(page, "e5_off", "ctl_e5_off", data.E5_LAYERS, data.E5_HEADS)
    return E5Config(source, score, top_k, picked)


def e5_grid(table: pd.DataFrame, score: str) -> None:
    """The 12 × 12 grid of one score, each head lettered with its label."""
    titles = grid_titles(score_name(score), t("heads.e5_grid_title", score=score_name(score)))
    fmt = SCORE_FORMATS.get(score, ".3f")
    draw_grid(grid_chart(table, titles, fmt, label_set=data.E5_LABELS), "e5_grid")


def e5_metrics(effect, census: data.E5Census, off: tuple) -> None:
    """The cosine and the link before and after, as metrics."""
    cols = st.columns(3)
    cols[0].metric(t("heads.e5_metric_cosine", n=len(off)), f"{effect.cosine:.4f}")
    if census.link is None:
        cols[1].metric(t("heads.e5_metric_link_before"), "—")
        cols[2].metric(t("heads.e5_metric_link_after"), "—")
        return
    before, after = f"{effect.link_before:.3f}", f"{effect.link_after:.3f}"
    change = None
    if before != after:
        difference = f"{effect.link_after - effect.link_before:+.3f}"
        change = t("common.delta_vs", delta=difference, reference=t("heads.delta_ref_before"))
    cols[1].metric(t("heads.e5_metric_link_before"), before)
    cols[2].metric(t("heads.e5_metric_link_after"), after, delta=change, delta_color="off")


def e5_run(ctl: E5Config, prompt: str):
    """The census, the heads off and their effect; None (the notice shown) when refused."""
    try:
        with st.spinner(t("heads.e5_loading")):
            text = data.e5_text(ctl.source, prompt)
            census = data.e5_census(ctl.source, text)
            ranked = ctl.score in census.scores
            off = data.e5_off_heads(census, ctl.score, ctl.top_k if ranked else 0, ctl.picked)
            return census, off, data.e5_ablation(ctl.source, text, off)
    except (ValueError, FileNotFoundError) as err:  # ModelNotInstalledError is one
        refusals.show_error(err)
        return None


def draw_e5(ctl: E5Config, prompt: str) -> None:
    """The e5 section: the census grid and the heads off, on ``prompt`` or a preset."""
    section_intro(t("heads.e5_title"), t("heads.e5_intro"))
    if not data.e5_installed():
        refusals.show_install_hint(t("heads.e5_missing"), data.E5_INSTALL_HINT)
        return
    found = e5_run(ctl, prompt)
    if found is None:
        return
    census, off, effect = found
    pronoun, noun = census.words
    left, right = st.columns([2, 3])
    with left:
        if ctl.score in census.scores:
            e5_grid(data.e5_census_table(census, ctl.score), ctl.score)
        else:
            st.info(t("heads.e5_no_link_grid", pronoun=pronoun, noun=noun))
        st.caption(t("heads.e5_label_rule"))
    with right:
        e5_metrics(effect, census, off)
        names = ", ".join(data.head_name(pair) for pair in off) or "—"
        st.caption(t("heads.e5_off_caption", off=names, text=census.text))
        if census.link is None:
            st.caption(t("heads.e5_no_link", pronoun=pronoun, noun=noun))
        else:
            st.caption(t("heads.e5_link_caption", pronoun=pronoun, noun=noun))
        st.markdown(t("heads.e5_look_for"))
