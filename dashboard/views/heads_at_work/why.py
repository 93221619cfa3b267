"""Section 2b of Heads at work, "Why this head looks there": one cell (query, key) of a head's
map on the copy test's sequence, its score split into the parts of the model that made it,
each head-part named with its census label; the key side of the contrast (what makes this key
win over the query's other keys) as a ranked bar, the largest query part × key part terms,
and, when asked, the top key part turned off: predicted against measured attention and the
parts that changed most (self-repair)."""

from __future__ import annotations

from dataclasses import dataclass

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import charts, data, presentation, state
from dashboard.exports import export_buttons
from dashboard.i18n import t
from dashboard.lesson_figures import headline_metric
from dashboard.literal import literal
from dashboard.views import section_anchor
from dashboard.views.heads_at_work.common import (
    PAGE,
    ModelChoice,
    group_header,
    label_name,
    section_intro,
)
from dashboard.views.heads_at_work.copying import CopyConfig

PART_SEP = " · "
TOKEN_MAX_LEN = 24  # a token shown in a sentence, as literal text
SCORE_FORMAT = ".2f"
WEIGHT_FORMAT = ".3f"  # attention: the direct path's prediction can fall to a few thousandths
SHARE_FORMAT = ".0%"
CHANGE_FORMAT = "+.2f"


@dataclass(frozen=True)
class WhyConfig:
    """The cell split into parts: the copy sequence (``length``, ``seed``), the head and the
    cell (0-based), whether the top key part is turned off, the model (listed name) and
    whether it has float matrices to split with (``gradients``: not an own 4-bit model)."""

    length: int
    seed: int
    layer: int
    head: int
    query: int
    key: int
    off: bool
    model: str
    gradients: bool = True


def why_controls(page: str, model: ModelChoice, copy: CopyConfig) -> WhyConfig:
    """The "Why this head looks there" group: the head (by default the strongest induction
    head of the copy sequence's census), the query (by default in the middle of the second
    copy), the key (by default where an induction head should look) and the switch that
    turns the top key part off."""
    group_header(t("heads.why_header"))
    try:
        pair = data.strongest_induction_head(copy.length, copy.seed, model.name)
    except ValueError:  # the section says why when it draws
        pair = (0, 0)
    strongest = data.head_name(pair)
    name = state.select(
        page,
        "why_head",
        t("heads.ctl_why_head"),
        data.head_names(model.layers, model.heads),
        strongest,
        help=t("heads.ctl_why_head_help", head=strongest),
    )
    layer, head = data.parse_head(name)
    last = 2 * copy.length
    query = state.slider_int(
        page,
        "why_query",
        t("heads.ctl_why_query", last=last),
        1,
        last,
        data.default_query(copy.length),
    )
    target = data.induction_key(query, copy.length)
    key = state.slider_int(
        page,
        "why_key",
        t("heads.ctl_why_key", last=last),
        0,
        last,
        target,
        help=t("heads.ctl_why_key_help", key=target),
    )
    off = state.checkbox(
        page, "why_off", t("heads.ctl_why_off"), False, help=t("heads.ctl_why_off_help")
    )
    return WhyConfig(
        copy.length, copy.seed, layer, head, query, key, off, model.name, model.gradients
    )


def part_label(name: str, labels) -> str:
    """A part as the page names it: ``"L16H0 · previous-token"`` (the head's census label),
    ``"emb · token embedding"``, or the MLP's name as it is."""
    pair = data.part_head(name)
    if pair is not None:
        return f"{name}{PART_SEP}{label_name(labels[pair])}"
    if name in ("emb", "bias"):
        return f"{name}{PART_SEP}{t(f'heads.why_part_{name}')}"
    return name


def shares_text(cell: data.WhyCell, labels) -> str:
    """The sentence stating the top key parts' shares of the contrast, filled from ``cell``."""
    first = part_label(cell.names[0], labels)
    others = t("heads.why_others_one") if cell.others == 1 else t("heads.why_others", n=cell.others)
    common = {"key": cell.key, "others": others, "first": first}
    if cell.contributions.sum() <= 0:
        return t(
            "heads.why_loses",
            difference=f"{-cell.difference:{SCORE_FORMAT}}",
            first_value=f"{cell.contributions[0]:{SCORE_FORMAT}}",
            **common,
        )
    shares = cell.shares
    difference = f"{cell.difference:{SCORE_FORMAT}}"
    if len(cell.names) == 1:
        first_share = f"{shares[0]:{SHARE_FORMAT}}"
        return t("heads.why_shares_one", difference=difference, first_share=first_share, **common)
    return t(
        "heads.why_shares",
        difference=difference,
        first_share=f"{shares[0]:{SHARE_FORMAT}}",
        second=part_label(cell.names[1], labels),
        second_share=f"{shares[1]:{SHARE_FORMAT}}",
        **common,
    )


def parts_chart(parts: pd.DataFrame, value: str, title: str, labels) -> alt.Chart:
    """A bar per row of ``parts`` (its ``part`` named by :func:`part_label`) of height its
    ``value`` column, titled ``title``; the y axis is ``heads.chart_why_<value>``."""
    frame = pd.DataFrame(
        {"part": [part_label(n, labels) for n in parts["part"]], value: parts[value]}
    )
    return charts.bar_chart(
        frame,
        x="part",
        y=value,
        title=title,
        x_title=t("heads.chart_why_part"),
        y_title=t(f"heads.chart_why_{value}"),
    )


def draw_parts(cell: data.WhyCell, labels):
    """The ranked bar of the key side of the contrast, and the top terms table.

    Returns:
        The bar chart (offered as PNG and SVG with the parts' CSV).
    """
    top = cell.parts.reindex(cell.parts["contrast"].abs().nlargest(data.WHY_TOP_PARTS).index)
    top = top.sort_values("contrast", ascending=False)
    chart = parts_chart(top, "contrast", t("heads.why_bar_title", key=cell.key), labels)
    presentation.show_chart(st, chart, theme=None, key=f"{PAGE}.why_chart")
    st.markdown(f"**{t('heads.why_terms_title')}**")
    terms = cell.terms
    shown = pd.DataFrame(
        {
            t("heads.col_why_query_part"): [part_label(n, labels) for n in terms["query_part"]],
            t("heads.col_why_key_part"): [part_label(n, labels) for n in terms["key_part"]],
            t("heads.col_why_value"): terms["value"].round(3),
        }
    )
    st.dataframe(shown, hide_index=True, key=f"{PAGE}.why_terms")
    return chart


def draw_without(ctl: WhyConfig, ids: tuple[int, ...], cell: data.WhyCell, labels) -> None:
    """The top key part turned off: attention predicted and measured, and the parts that
    changed most (self-repair)."""
    part = cell.top_part
    shown = part_label(part, labels)
    if not ctl.off:
        st.info(t("heads.why_off_hint", part=shown))
        return
    without = data.why_without(ids, ctl.layer, ctl.head, ctl.query, part, ctl.model)
    numbers = {
        name: f"{float(getattr(without, name)[ctl.key]):{WEIGHT_FORMAT}}"
        for name in ("clean", "predicted", "measured")
    }
    cols = st.columns(3)
    cols[0].metric(t("heads.metric_why_clean", key=ctl.key), numbers["clean"])
    cols[1].metric(t("heads.metric_why_predicted", part=part), numbers["predicted"])
    measured = t("heads.metric_why_measured", part=part)
    headline_metric(cols[2], measured, numbers["measured"], section="why")
    repair = data.repair_table(without)
    st.markdown(
        t(
            "heads.why_without",
            part=shown,
            key=ctl.key,
            repair=part_label(repair["part"][0], labels),
            change=f"{repair['change'][0]:{CHANGE_FORMAT}}",
            **numbers,
        )
    )
    chart = parts_chart(repair, "change", t("heads.why_repair_title", part=part), labels)
    presentation.show_chart(st, chart, theme=None, key=f"{PAGE}.why_repair")


def draw_why(ctl: WhyConfig) -> None:
    """Section 2b: the chosen cell's score split into parts, and the top part turned off."""
    section_intro(t("heads.why_title"), t("heads.why_intro"), anchor=section_anchor("heads", "why"))
    if not ctl.gradients:
        st.info(t("heads.why_needs_float"))
        return
    if ctl.key > ctl.query:
        st.warning(t("heads.why_causal", key=ctl.key, query=ctl.query))
        return
    ids = data.copy_ids(ctl.length, ctl.seed, ctl.model)
    labels = data.copy_census(ctl.length, ctl.seed, ctl.model).labels
    cell = data.why_cell(ids, ctl.layer, ctl.head, ctl.query, ctl.key, ctl.model)
    tokens = data.copy_tokens(ctl.length, ctl.seed, ctl.model)
    st.markdown(
        t(
            "heads.why_cell_line",
            head=data.head_name((ctl.layer, ctl.head)),
            label=label_name(labels[ctl.layer, ctl.head]),
            query=ctl.query,
            query_token=literal(tokens[ctl.query], TOKEN_MAX_LEN),
            key=ctl.key,
            key_token=literal(tokens[ctl.key], TOKEN_MAX_LEN),
            score=f"{cell.score:{SCORE_FORMAT}}",
            weight=f"{cell.weight:{WEIGHT_FORMAT}}",
        )
    )
    st.markdown(shares_text(cell, labels))
    chart = draw_parts(cell, labels)
    export_buttons(
        f"why_L{ctl.layer}H{ctl.head}_q{ctl.query}_k{ctl.key}",
        csv_text=lambda: cell.parts.assign(
            label=[part_label(n, labels) for n in cell.parts["part"]]
        ).to_csv(index=False),
        chart=chart,
        key=f"{PAGE}.why",
    )
    draw_without(ctl, ids, cell, labels)
