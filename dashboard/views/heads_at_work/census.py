"""Section 1 of Heads at work: every head's census score and label on the prompt (SmolLM2's or
an own model's), as a grid that is also a control (a click chooses the head), and the chosen
head's map."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dashboard import charts, data, model_choices, presentation, refusals, state
from dashboard.charts import canvas
from dashboard.charts.head_grid import PICK
from dashboard.i18n import t
from dashboard.views import section_anchor
from dashboard.views.heads_at_work.common import (
    PAGE,
    SCORE_FORMATS,
    ModelChoice,
    grid_chart,
    grid_titles,
    group_header,
    label_name,
    loading_text,
    pick_head,
    score_name,
    score_text,
    show_install_hint,
)

DEFAULT_PRESET = "repeat"
DEFAULT_SCORE = "induction"
DEFAULT_LAYER, DEFAULT_HEAD = 18, 6  # SmolLM2's top induction head (clamped for a smaller model)


@dataclass(frozen=True)
class CensusConfig:
    """The census: the prompt, the score drawn and the head whose map is shown (0-based), on
    the model of listed name ``model`` with ``layers`` × ``heads`` heads."""

    text: str
    score: str
    layer: int
    head: int
    model: str
    layers: int
    heads: int


@dataclass(frozen=True)
class CensusView:
    """Section 1 as drawn by :func:`census_grid_controls`: the census, and the column the
    head's map goes in."""

    census: data.PromptCensus
    map_column: DeltaGenerator


def prompt_controls(page: str) -> str:
    """A preset prompt or typed text (an empty one: a warning and the default preset)."""
    _, text = model_choices.preset_text_controls(page, "heads", data.HEADS_PRESETS, DEFAULT_PRESET)
    return text


def census_controls(page: str, model: ModelChoice) -> CensusConfig:
    """The census group: prompt, score, and the head whose map is shown (sliders over the
    model's layers and heads)."""
    group_header(t("heads.census_header"))
    text = prompt_controls(page)
    score = state.select(
        page,
        "score",
        t("heads.ctl_score"),
        data.HEADS_SCORES,
        DEFAULT_SCORE,
        format_func=score_name,
    )
    last_layer, last_head = model.layers - 1, model.heads - 1
    layer = state.slider_int(
        page, "layer", t("heads.ctl_layer", last=last_layer), 0, last_layer, DEFAULT_LAYER
    )
    head = state.slider_int(
        page, "head", t("heads.ctl_head", last=last_head), 0, last_head, DEFAULT_HEAD
    )
    return CensusConfig(text, score, layer, head, model.name, model.layers, model.heads)


def grid_pick_controls(chart, chosen: tuple[int, int], shape: tuple[int, int]) -> None:
    """The census grid as a control: a click on a cell chooses that head (of ``shape``,
    layers × heads). The key names the chosen head, so the grid starts with no selection
    after every change of head (a click on the same cell again still counts)."""
    key = f"{PAGE}.grid.{chosen[0]}.{chosen[1]}"
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


def census_grid_controls(ctl: CensusConfig) -> CensusView | None:
    """Section 1's title and its grid of one score with every head's label. The grid is a
    control (a click chooses the head), so it is drawn here, before the rest of the page.

    Returns:
        The census and the map's column, or None when the prompt cannot run (the notice is
        shown).
    """
    st.header(
        t("heads.census_title"), anchor=section_anchor("heads", "census")
    )  # the page's first picture: its paragraph follows
    try:
        with st.spinner(loading_text(ctl.model)):
            census = data.prompt_census(ctl.text, ctl.model)
    except FileNotFoundError:
        show_install_hint()
        return None
    except ValueError as err:
        refusals.show_error(err)
        return None
    if census.truncated:
        st.warning(t("heads.truncated", n=len(census.tokens)))
    table = data.census_table(census, ctl.score)
    left, right = st.columns([2, 3])
    with left:
        if table["score"].isna().all():
            st.info(t("heads.no_repeat"))
        else:
            titles = grid_titles(
                score_name(ctl.score), t("heads.grid_title", score=score_name(ctl.score))
            )
            chosen = (ctl.layer, ctl.head)
            fmt = SCORE_FORMATS.get(ctl.score, ".2f")
            grid_pick_controls(
                grid_chart(table, titles, fmt, label_set=data.HEADS_LABELS, chosen=chosen),
                chosen,
                (ctl.layers, ctl.heads),
            )
        st.caption(t("heads.label_rule"))
    presentation.explain(t("heads.census_intro", maps=ctl.layers * ctl.heads))
    return CensusView(census, right)


def draw_head_map(view: CensusView, ctl: CensusConfig) -> None:
    """Section 1, right: the chosen head's map on the prompt and its scores."""
    census = view.census
    with view.map_column:
        label = label_name(census.head_labels[ctl.layer, ctl.head])
        labels = list(census.labels)
        grid = data.heatmap_grid(census.maps[ctl.layer, ctl.head], labels, labels)
        title = t("heads.map_title", layer=ctl.layer, head=ctl.head, label=label)
        canvas.draw_heatmaps(grid, charts.weights_spec(grid, title), key=f"{PAGE}.map")
        values = {name: census.scores[name][ctl.layer, ctl.head] for name in data.HEADS_SCORES}
        st.caption(
            " · ".join(
                f"{score_name(name)} {score_text(value, SCORE_FORMATS.get(name, '.2f'))}"
                for name, value in values.items()
            )
        )
        undefined = [name for name, value in values.items() if value != value]
        if undefined:
            st.caption(undefined_scores_line(undefined, len(census.tokens)))


def undefined_scores_line(undefined: list[str], tokens: int) -> str:
    """One line saying why the scores shown as "—" are undefined for a prompt of ``tokens``
    tokens: the row scores need a second token (the first query has no earlier key),
    induction a repeated token."""
    reason = "heads.undefined_short" if tokens < 2 else "heads.undefined_no_repeat"
    names = t("common.list_sep").join(score_name(name) for name in undefined)
    return t(reason, scores=names)
