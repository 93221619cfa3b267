"""Section 4 of Heads at work: which tokens explain the next one, by saliency, by the last
layer's attention and by attention rollout, and how well their rankings agree."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, data, presentation
from dashboard.i18n import t
from dashboard.views.heads_at_work.common import PAGE, ModelChoice


def draw_explanation(text: str, model: ModelChoice) -> None:
    """Section 4: saliency, last-layer attention and rollout, and their rank agreement (an
    info instead when the model's 4-bit weights have no backward pass)."""
    st.header(t("heads.explain_title"))
    if not model.gradients:
        st.info(t("heads.needs_float"))
        return
    labels, result, target = data.explanation(text, model.name)
    presentation.explain(t("heads.explain_intro", target=target, heads=model.heads))
    cols = st.columns(3)
    for col, name in zip(
        cols, ("attention_vs_saliency", "rollout_vs_saliency", "attention_vs_rollout"), strict=True
    ):
        value = getattr(result, name)
        col.metric(t(f"heads.metric_{name}"), "—" if value != value else f"{value:.2f}")
    table = data.explanation_table(labels, result)
    kinds = {kind: t(f"heads.kind_{kind}") for kind in ("saliency", "attention", "rollout")}
    chart = charts.grouped_bar_chart(
        table.assign(kind=table["kind"].map(kinds)),
        x="token",
        y="share",
        color="kind",
        title=t("heads.explain_chart_title", target=target),
        x_title=t("heads.chart_token"),
        y_title=t("heads.chart_share"),
        color_title=t("heads.chart_kind"),
        sort=list(labels),
        value_format=".3f",
        width=max(360, 18 * len(labels)),
    )
    presentation.show_chart(st, chart, theme=None, key=f"{PAGE}.explain_chart")
    st.caption(t("heads.explain_caption"))
