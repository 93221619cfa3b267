"""Heads at work: one head's queries and keys on one map (AttentionViz's joint view)
of the preset sentences (English and Chinese on e5, English on SmolLM2) plus the learner's
own: PCA live, t-SNE on request, coloured by query/key, position or language, the token on
hover, a click showing that point's attention row; the trust figure (Spearman of 2-D
distance against −q·k), the normalisation's largest row change and, on e5, the translation
pairs against random English–Chinese pairs. Indices are 0-based, as on the rest of the page.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from dashboard import data, presentation, refusals, state
from dashboard.charts.qk_map import (
    POINT,
    QKMapTitles,
    attention_row_chart,
    picked_point,
    qk_map_chart,
)
from dashboard.exports import export_buttons
from dashboard.i18n import t
from dashboard.numbers import plain_number
from dashboard.views.heads_at_work.common import group_header, section_intro

DEFAULT_MODEL = "e5"
DEFAULT_LAYER, DEFAULT_HEAD = 5, 2
DEFAULT_METHOD, DEFAULT_COLOUR = "pca", "kind"
PICKED_KEY = "qk_map.picked"


@dataclass(frozen=True)
class QKMapConfig:
    """The map section: model, head (0-based), the learner's own sentence, projection and
    colouring."""

    page: str
    model: str
    layer: int
    head: int
    own: str
    method: str
    colour: str


def qk_map_controls(page: str) -> QKMapConfig:
    """The map's group of the sidebar: model, layer, head, own sentence, projection, colour."""
    group_header(t("qk_map.header"))
    model = state.radio(
        page,
        "qk_model",
        t("qk_map.ctl_model"),
        data.QK_MODELS,
        DEFAULT_MODEL,
        format_func=lambda m: t(f"qk_map.model_{m}"),
    )
    layers, heads = data.QK_SHAPES[model]
    layer = state.slider_int(
        page, "qk_layer", t("qk_map.ctl_layer", last=layers - 1), 0, layers - 1, DEFAULT_LAYER
    )
    head = state.slider_int(
        page, "qk_head", t("qk_map.ctl_head", last=heads - 1), 0, heads - 1, DEFAULT_HEAD
    )
    own = state.text(page, "qk_own", t("qk_map.ctl_own"), "", data.OWN_MAX_CHARS)
    method = state.radio(
        page,
        "qk_method",
        t("qk_map.ctl_method"),
        data.QK_METHODS,
        DEFAULT_METHOD,
        format_func=lambda m: t(f"qk_map.method_{m}"),
        horizontal=True,
    )
    colour = state.radio(
        page,
        "qk_colour",
        t("qk_map.ctl_colour"),
        data.QK_COLOURS,
        DEFAULT_COLOUR,
        format_func=lambda c: t(f"qk_map.colour_{c}"),
    )
    return QKMapConfig(page, model, layer, head, own, method, colour)


def map_titles(found: data.QKMapData) -> QKMapTitles:
    """The chart's translated titles."""
    return QKMapTitles(
        title=t(
            "qk_map.chart_title",
            layer=found.layer,
            head=found.head,
            method=t(f"qk_map.method_{found.method}"),
        ),
        subtitle=t(
            "qk_map.chart_subtitle", points=len(found.tokens), sentences=len(found.sentences)
        ),
        x_title=t("qk_map.x_title"),
        y_title=t("qk_map.y_title"),
        kind_title=t("qk_map.kind"),
        position_title=t("qk_map.position"),
        language_title=t("qk_map.language"),
        token_title=t("qk_map.token"),
        sentence_title=t("qk_map.sentence"),
    )


def keep_pick(key: str, count: int) -> None:
    """The map's click callback: the clicked point's row kept for this session."""
    event = st.session_state.get(key)
    points = event.selection.get(POINT) if event is not None else None
    st.session_state[PICKED_KEY] = picked_point(points, count)


def translation_table(found: data.QKMapData) -> pd.DataFrame:
    """The translation pairs' distances and the share of random pairs closer, as a table."""
    kinds = {"query": t("qk_map.query"), "key": t("qk_map.key")}
    rows = zip(found.translation.pairs, found.translation.share_closer, strict=True)
    return pd.DataFrame(
        [
            {
                t("qk_map.col_pair"): f"{en} ↔ {zh}",
                t("qk_map.col_kind"): kinds[kind],
                t("qk_map.col_distance"): round(distance, 2),
                t("qk_map.col_closer"): f"{closer:.0%}",
            }
            for (en, zh, kind, distance), closer in rows
        ]
    )


def draw_figures(found: data.QKMapData) -> None:
    """The trust figure, the pairs it is over and the normalisation's row change."""
    cols = st.columns(3)
    trust = "—" if math.isnan(found.spearman) else f"{found.spearman:.3f}"
    cols[0].metric(t("qk_map.metric_trust"), trust, help=t("qk_map.trust_help"))
    cols[1].metric(t("qk_map.metric_pairs"), f"{found.pairs:,}")
    cols[2].metric(t("qk_map.metric_rows"), plain_number(found.row_change))
    if found.method == "pca":
        first, second = found.explained
        st.caption(t("qk_map.explained", first=first, second=second))


def draw_row(found: data.QKMapData, index: int | None) -> None:
    """The attention row of the clicked point, or a line asking for a click."""
    if index is None:
        st.caption(t("qk_map.no_pick"))
        return
    token = found.tokens[index]
    name = "qk_map.row_title_key" if found.is_key[index] else "qk_map.row_title_query"
    chart = attention_row_chart(
        data.attention_row(found, index), t(name, token=token), t("qk_map.weight")
    )
    presentation.show_chart(st, chart, theme=None)


def draw_qk_map(ctl: QKMapConfig) -> None:
    """The map section: the joint map of one head, its figures, a clicked point's row and
    (e5) the translation pairs."""
    section_intro(t("qk_map.title"), t("qk_map.intro"))
    try:
        with st.spinner(t("qk_map.loading")):
            sentences = data.qk_sentences(ctl.model, ctl.own)
            found = data.qk_map_data(ctl.model, sentences, ctl.layer, ctl.head, ctl.method)
    except (ValueError, FileNotFoundError) as err:  # ModelNotInstalledError is one
        refusals.show_error(err)
        return
    kinds = (t("qk_map.query"), t("qk_map.key"))
    table = data.qk_map_table(found, kinds)
    chart = qk_map_chart(table, map_titles(found), colour=ctl.colour)
    key = f"{ctl.page}.qk_map.{ctl.model}.{ctl.layer}.{ctl.head}.{ctl.method}"
    presentation.show_chart(
        st,
        chart,
        theme=None,
        key=key,
        on_select=functools.partial(keep_pick, key, len(found.tokens)),
        selection_mode=POINT,
    )
    draw_figures(found)
    export_buttons(
        f"qk_map_{ctl.model}_L{ctl.layer}H{ctl.head}_{ctl.method}",
        csv_text=lambda: table.to_csv(index=False),
        chart=chart,
        key=f"{ctl.page}.qk_map",
    )
    picked = st.session_state.get(PICKED_KEY)
    draw_row(found, picked if picked is not None and picked < len(found.tokens) else None)
    if found.translation is not None:
        st.subheader(t("qk_map.translation_title"))
        st.dataframe(translation_table(found), hide_index=True)
        st.caption(t("qk_map.translation_caption", median=found.translation.random_median))
