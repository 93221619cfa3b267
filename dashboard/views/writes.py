"""What a head writes: the logit lens (the stream after every layer read as next-token
predictions), the answer's logit difference split into every part's exact share, one head's
write read as tokens beside where it looks, and every head's OV copying score beside Heads
at work's census, on SmolLM2 or a float GGUF model of the server's own."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import streamlit as st

from dashboard import controls, data, model_choices, presentation, refusals, state
from dashboard.charts.head_grid import PICK
from dashboard.charts.writes import LensTitles, lens_chart, signed_bar_chart
from dashboard.i18n import t
from dashboard.lesson_figures import headline_metric
from dashboard.views import section_anchor
from dashboard.views.heads_at_work.common import (
    ModelChoice,
    grid_chart,
    grid_titles,
    group_header,
    label_name,
    model_choice,
    own_models,
    pick_head,
    show_install_hint,
    shown_name,
)

PAGE = "writes"
DEFAULT_PRESET = "repeat"
DEFAULT_LAYER, DEFAULT_HEAD = 18, 6  # SmolLM2's top induction head (clamped for a smaller model)
SHARE_FORMAT = ".3f"
INDUCTION = "induction"  # the census label whose mean copying score the page shows


@dataclass(frozen=True)
class WritesConfig:
    """The page's input as plain values (no ``model`` when it cannot load; no answer when
    the prompt cannot run).

    Attributes:
        installed: False when SmolLM2 is chosen and its package is missing.
        model: the model and its shape.
        text: the prompt. frozen: the lens's final-norm scale frozen at the last layer's.
        positions: the lens's columns (the prompt's last positions).
        answer, alternative: the two token ids whose logit difference is split.
        layer, head: the head whose write is read (0-based).
    """

    installed: bool
    model: ModelChoice | None = None
    text: str = ""
    frozen: bool = False
    positions: int = data.LENS_POSITIONS_DEFAULT
    answer: int | None = None
    alternative: int | None = None
    layer: int = 0
    head: int = 0


def answer_controls(text: str, model: str) -> tuple[int, int] | None:
    """The answer and the alternative, from the model's most likely next tokens (the answer
    defaults to the most likely, the alternative to the runner-up).

    Returns:
        (answer, alternative) token ids, or None when the prompt cannot run (its notice
        shown).
    """
    try:
        found = data.next_tokens(text, model)
    except ValueError as err:
        refusals.show_error(err)
        return None
    names = dict(zip(found.ids, found.texts, strict=True))
    shown = {i: f"{names[i]} ({p:.2f})" for i, p in zip(found.ids, found.probs, strict=True)}
    answer = state.select(
        PAGE, "answer", t("writes.ctl_answer"), found.ids, found.ids[0], format_func=shown.get
    )
    others = [i for i in found.ids if i != answer]
    alternative = state.select(
        PAGE, "alternative", t("writes.ctl_alternative"), others, others[0], format_func=shown.get
    )
    return answer, alternative


def writes_controls(page: str) -> WritesConfig:
    """The sidebar: the model, the prompt, the lens, the answer, the head."""
    name = model_choices.model_select(
        page, header_key="writes.model_header", label_key="writes.ctl_model"
    )
    if name == own_models().SMOLLM2_CHOICE and not data.decoder_installed():
        return WritesConfig(installed=False)
    model = model_choice(name)
    if model is None:  # the notice is shown
        return WritesConfig(installed=True)
    group_header(t("writes.prompt_header"))
    _, text = model_choices.preset_text_controls(
        page, "writes", data.WRITES_PRESETS, DEFAULT_PRESET
    )
    group_header(t("writes.lens_header"))
    frozen = state.checkbox(
        page, "frozen", t("writes.ctl_frozen"), False, help=t("writes.ctl_frozen_help")
    )
    positions = state.slider_int(
        page,
        "positions",
        t("writes.ctl_positions"),
        2,
        data.LENS_POSITIONS_MAX,
        data.LENS_POSITIONS_DEFAULT,
    )
    group_header(t("writes.parts_header"))
    pair = answer_controls(text, model.name)
    group_header(t("writes.head_header"))
    layer = state.slider_int(
        page, "layer", t("writes.ctl_layer"), 0, model.layers - 1, DEFAULT_LAYER
    )
    head = state.slider_int(page, "head", t("writes.ctl_head"), 0, model.heads - 1, DEFAULT_HEAD)
    answer, alternative = pair if pair is not None else (None, None)
    return WritesConfig(True, model, text, frozen, positions, answer, alternative, layer, head)


def head_grid(ctl: WritesConfig, grid: str, values, labels, title: str, **look) -> None:
    """A layers × heads grid of ``values`` lettered with the census ``labels``; a click on a
    cell chooses that head (none while the head is locked to a presenter's)."""
    table = data.head_table(values, labels)
    chosen = (ctl.layer, ctl.head)
    chart = grid_chart(
        table,
        grid_titles(title, title),
        SHARE_FORMAT,
        label_set=data.HEADS_LABELS,
        chosen=chosen,
        **look,
    )
    key = f"{PAGE}.{grid}.{chosen[0]}.{chosen[1]}"  # a fresh selection after every change
    shape = (ctl.model.layers, ctl.model.heads)
    presentation.show_chart(
        st,
        chart,
        theme=None,
        key=key,
        on_select="ignore"
        if state.locked(f"{PAGE}.layer")
        else functools.partial(pick_head, PAGE, key, *shape),
        selection_mode=PICK,
    )


def row_names(layers: int, echo) -> list[str]:
    """The lens rows' names, top first: the model's output, then down to the embedding; a
    row labelled an echo says so."""
    names = []
    for row in range(layers, -1, -1):
        name = (
            t("writes.row_output", layer=row - 1)
            if row == layers
            else (t("writes.row_layer", layer=row - 1) if row else t("writes.row_embed"))
        )
        names.append(f"{name} · {t('writes.row_echo')}" if echo[row] else name)
    return names


def draw_lens(ctl: WritesConfig) -> None:
    """Section 1: the lens grid, the early rows' top probability and the echo rows."""
    st.header(t("writes.lens_title"), anchor=section_anchor(PAGE, "lens"))
    grid = data.lens_grid(ctl.text, ctl.frozen, ctl.positions, ctl.model.name)
    if grid.truncated:
        st.warning(t("writes.truncated", n=grid.length))
    layers = ctl.model.layers
    names = row_names(layers, grid.echo)
    table = data.lens_table(grid)
    table["row"] = [names[layers - layer] for layer in table["layer"]]
    early = data.early_rows(layers)
    first, last = early.start - 1, early.stop - 2  # 0-based layers of those rows
    metrics = st.columns(4)
    metrics[0].metric(t("writes.metric_output"), grid.top_text[-1, -1, 0])
    metrics[1].metric(t("writes.metric_output_prob"), f"{grid.top_probs[-1, -1, 0]:.2f}")
    settled = data.settled_layer(grid)
    figures = {  # the frozen lens's step is about the early rows, the right lens's about when
        2: (t("writes.metric_settled"), t("writes.row_embed") if settled < 0 else str(settled)),
        3: (
            t("writes.metric_early", first=first, last=last),
            f"{grid.top_probs[early, :, 0].mean():.2f}",
        ),
    }
    for column in sorted(figures, key=lambda c: c != (3 if ctl.frozen else 2)):
        headline_metric(metrics[column], *figures[column], section="lens")
    titles = LensTitles(
        title=t("writes.lens_chart_frozen" if ctl.frozen else "writes.lens_chart"),
        x_title=t("writes.chart_position"),
        y_title=t("writes.chart_row"),
        token_title=t("writes.chart_token"),
        prob_title=t("writes.chart_prob"),
        top_title=t("writes.chart_top", k=data.LENS_TOP),
    )
    look = presentation.chart_look()
    presentation.show_chart(
        st, lens_chart(table, names, titles, letter_px=look.letter_px), theme=None
    )
    rows = range(layers, -1, -1)  # names' rows, top first
    echoes = [name for row, name in zip(rows, names, strict=True) if grid.echo[row]]
    if echoes:
        st.caption(t("writes.echo_line", rows=", ".join(echoes)))
    presentation.explain(
        t("writes.lens_frozen_intro" if ctl.frozen else "writes.lens_intro", n=grid.length)
    )


def draw_parts(ctl: WritesConfig, labels) -> data.Attribution:
    """Section 2: the parts' sum beside the model's own difference, the largest parts and
    every head's share."""
    st.header(t("writes.parts_title"), anchor=section_anchor(PAGE, "parts"))
    shares = data.attribution(ctl.text, ctl.answer, ctl.alternative, ctl.model.name)
    found = data.next_tokens(ctl.text, ctl.model.name)
    names = dict(zip(found.ids, found.texts, strict=True))
    pair = {"answer": names[ctl.answer], "alternative": names[ctl.alternative]}
    metrics = st.columns(3)
    headline_metric(
        metrics[0],
        t("writes.metric_sum", count=len(shares.names)),
        f"{shares.total:.3f}",
        section="parts",
    )
    metrics[1].metric(t("writes.metric_own", **pair), f"{shares.own:.3f}")
    metrics[2].metric(t("writes.metric_gap"), f"{abs(shares.total - shares.own):.3f}")
    st.caption(t("writes.rounding_line", step=f"{shares.rounding:.3g}"))
    left, right = st.columns([2, 3])
    with left:
        top = data.parts_table(shares).rename(columns={"part": "name"})
        chart = signed_bar_chart(
            top,
            title=t("writes.parts_chart", count=len(top), **pair),
            x_title=t("writes.chart_share"),
            y_title=t("writes.chart_part"),
        )
        presentation.show_chart(st, chart, theme=None)
    with right:
        title = t("writes.heads_chart", **pair)
        head_grid(ctl, "parts", data.head_shares(shares), labels, title, diverging=True)
        st.caption(t("writes.grid_click"))
    presentation.explain(t("writes.parts_intro"))
    return shares


def draw_head(ctl: WritesConfig, shares: data.Attribution, copying) -> None:
    """Section 3: where the chosen head looks from the last position and what its write
    pushes up and down."""
    st.header(
        t("writes.head_title", layer=ctl.layer, head=ctl.head),
        anchor=section_anchor(PAGE, "head"),
    )
    written = data.head_write(ctl.text, ctl.layer, ctl.head, ctl.model.name)
    looked = int(written.row.argmax())
    metrics = st.columns(4)
    metrics[0].metric(t("writes.metric_looks"), written.texts[looked])
    metrics[1].metric(t("writes.metric_weight"), f"{written.row[looked]:.2f}")
    headline_metric(metrics[2], t("writes.metric_writes"), written.top[0], section="head")
    metrics[3].metric(
        t("writes.metric_head_share"), f"{data.head_shares(shares)[ctl.layer, ctl.head]:.3f}"
    )
    left, right = st.columns(2)
    with left:
        row = data.attention_row_table(written).rename(columns={"token": "name", "weight": "value"})
        chart = signed_bar_chart(
            row,
            title=t("writes.row_chart"),
            x_title=t("writes.chart_weight"),
            y_title=t("writes.chart_token"),
            value_format=".2f",
        )
        presentation.show_chart(st, chart, theme=None)
    with right:
        table = data.write_table(written).rename(columns={"token": "name"})
        chart = signed_bar_chart(
            table.drop(columns="side").drop_duplicates("name"),
            title=t("writes.write_chart", k=data.WRITE_TOKENS),
            x_title=t("writes.chart_logit"),
            y_title=t("writes.chart_token"),
        )
        presentation.show_chart(st, chart, theme=None)
    st.caption(t("writes.copying_of_head", value=f"{copying[ctl.layer, ctl.head]:.2f}"))
    presentation.explain(t("writes.head_intro"))


def draw_copying(ctl: WritesConfig, copying, labels) -> None:
    """Section 4: every head's OV copying score, lettered with the census labels, and the
    score's mean per label."""
    st.header(t("writes.copying_title"), anchor=section_anchor(PAGE, "copying"))
    summary = data.copying_by_label(copying, labels)
    means = dict(zip(summary["label"], summary["mean"], strict=True))
    metrics = st.columns(3)
    headline_metric(
        metrics[0],
        t("writes.metric_copying", layer=ctl.layer, head=ctl.head),
        f"{copying[ctl.layer, ctl.head]:.2f}",
        section="copying",
    )
    if INDUCTION in means:
        metrics[1].metric(t("writes.metric_copying_induction"), f"{means[INDUCTION]:.2f}")
    metrics[2].metric(t("writes.metric_copying_all"), f"{means['all']:.2f}")
    left, right = st.columns([3, 2])
    with left:
        head_grid(ctl, "copying", copying, labels, t("writes.copying_chart"))
    with right:
        shown = summary.assign(label=summary["label"].map(label_or_all)).rename(
            columns={
                "label": t("writes.col_label"),
                "heads": t("writes.col_heads"),
                "mean": t("writes.col_mean"),
                "copying": t("writes.col_share"),
            }
        )
        two_places = st.column_config.NumberColumn(format="%.2f")
        st.dataframe(
            shown,
            hide_index=True,
            width="stretch",
            column_config={t("writes.col_mean"): two_places, t("writes.col_share"): two_places},
        )
    presentation.explain(t("writes.copying_intro"))


def label_or_all(label: str) -> str:
    """A census label's name, or "every head"."""
    return t("writes.all_heads") if label == "all" else label_name(label)


def render(ctl: WritesConfig) -> None:
    """Draw the page: each section on the chosen model, a refusal as its one notice."""
    if not ctl.installed:
        show_install_hint()
        return
    if ctl.model is None or ctl.answer is None:  # the model or the prompt said why
        return
    if not ctl.model.smollm2:
        st.info(t("writes.own_model_note", name=shown_name(ctl.model.name)))
    try:
        with st.spinner(t("writes.loading")):
            draw_lens(ctl)
            labels = data.census_labels(ctl.model.name)
            copying = data.copying_scores(ctl.model.name)
            shares = draw_parts(ctl, labels)
            draw_head(ctl, shares, copying)
            draw_copying(ctl, copying, labels)
    except FileNotFoundError:  # the package was removed while the app ran
        show_install_hint()
    except ValueError as err:
        refusals.show_error(err)


controls.page_intro(PAGE)
ctl = writes_controls(PAGE)
render(ctl)
