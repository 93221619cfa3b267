"""Heads at work: what each head of SmolLM2 does, and what the model loses without it."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dashboard import charts, controls, data, state
from dashboard.charts import canvas
from dashboard.charts.head_grid import (
    PICK,
    HeadGridTitles,
    effect_scatter_chart,
    head_score_chart,
    picked_head,
)
from dashboard.heads_e5 import E5Config, draw_e5, e5_controls
from dashboard.i18n import t

PAGE = "heads"
CUSTOM = "custom"
DEFAULT_PRESET = "repeat"
DEFAULT_SCORE = "induction"
DEFAULT_LAYER, DEFAULT_HEAD = 18, 6
DEFAULT_TOP_K, MAX_TOP_K, MAX_PICKED = 5, 15, 15
DEFAULT_SEED = 0
PICKS = ("layers", "top")
DEFAULT_PICK = "layers"
DEFAULT_COUNT, MIN_COUNT = 12, 2
LAYERS_PICKED = 3  # the "layers" pick: every head of 3 layers (27 heads)
DEFAULT_FIRST_LAYER = 16
MAX_WINDOW, MAX_SINKS, MAX_PREFIX = 64, 8, 32
WINDOW_STEP = 2
STRIDES = (0, 2, 3, 4, 6, 8, 12, 16)
DEFAULT_WINDOW, DEFAULT_SINKS = 16, 4
SCORE_FORMATS = {"entropy": ".2f", "mean_distance": ".1f"}
LINKS = ("watch", "multihead", "decoder")
UNMARKED = "mixed"  # the label drawn without a letter


@dataclass(frozen=True)
class CensusConfig:
    """The census: the prompt, the score drawn and the head whose map is shown (0-based)."""

    text: str
    score: str
    layer: int
    head: int


@dataclass(frozen=True)
class CopyConfig:
    """The copy test: sequence length and seed, and which heads are off."""

    length: int
    seed: int
    rank_score: str
    top_k: int
    picked: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class AttributionConfig:
    """Attribution: its text, the heads whose true effects are measured, and whether to."""

    source: str
    pick: str
    count: int
    first_layer: int
    measure: bool


@dataclass(frozen=True)
class MaskConfig:
    """The mask composer's parts (0 = off) and whether each layer is measured alone."""

    window: int
    sinks: int
    prefix: int
    stride: int
    per_layer: bool


@dataclass(frozen=True)
class HeadsConfig:
    """The page's input (only ``installed`` when the model is missing)."""

    installed: bool
    census: CensusConfig | None = None
    copy: CopyConfig | None = None
    attribution: AttributionConfig | None = None
    mask: MaskConfig | None = None
    census_view: CensusView | None = None
    e5: E5Config | None = None


def score_name(score: str) -> str:
    """The translated name of a census score."""
    return t(f"heads.score_{score}")


def prompt_controls(page: str) -> str:
    """A preset prompt or typed text (an empty one: a warning and the default preset)."""
    presets = data.HEADS_PRESETS
    preset = state.select(
        page,
        "preset",
        t("heads.ctl_preset"),
        [*presets, CUSTOM],
        DEFAULT_PRESET,
        format_func=lambda k: t(f"heads.preset_{k}"),
    )
    if preset != CUSTOM:
        return presets[preset]
    text = state.text(
        page,
        "text",
        t("heads.ctl_text"),
        presets[DEFAULT_PRESET],
        data.DECODER_TEXT_MAX_CHARS,
        help=t("heads.ctl_text_help", n=data.DECODER_MAX_TOKENS),
    )
    if not text.strip():
        st.warning(t("heads.text_blank"))
        return presets[DEFAULT_PRESET]
    return text


def census_controls(page: str) -> CensusConfig:
    """The census group: prompt, score, and the head whose map is shown."""
    st.sidebar.markdown(f"**{t('heads.census_header')}**")
    text = prompt_controls(page)
    score = state.select(
        page,
        "score",
        t("heads.ctl_score"),
        data.HEADS_SCORES,
        DEFAULT_SCORE,
        format_func=score_name,
    )
    last_layer, last_head = data.DECODER_LAYERS - 1, data.DECODER_HEADS - 1
    layer = state.slider_int(
        page, "layer", t("heads.ctl_layer", last=last_layer), 0, last_layer, DEFAULT_LAYER
    )
    head = state.slider_int(
        page, "head", t("heads.ctl_head", last=last_head), 0, last_head, DEFAULT_HEAD
    )
    return CensusConfig(text, score, layer, head)


def copy_controls(page: str) -> CopyConfig:
    """The copy test group: length and seed, the top k by a score, and heads picked by name."""
    st.sidebar.markdown(f"**{t('heads.copy_header')}**")
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
    top_k = state.slider_int(page, "top_k", t("heads.ctl_top_k"), 0, MAX_TOP_K, DEFAULT_TOP_K)
    picked = state.multiselect(
        page,
        "off",
        t("heads.ctl_off", n=MAX_PICKED),
        data.head_names(data.DECODER_LAYERS, data.DECODER_HEADS),
        [],
        MAX_PICKED,
        help=t("heads.ctl_off_help"),
    )
    pairs = tuple(data.parse_head(name) for name in picked)
    return CopyConfig(length, seed, rank_score, top_k, pairs)


def attribution_controls(page: str) -> AttributionConfig:
    """The attribution group: which text, which heads' true effects, and whether to measure."""
    st.sidebar.markdown(f"**{t('heads.attr_header')}**")
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
        format_func=lambda p: t(f"heads.pick_{p}"),
    )
    count = state.slider_int(
        page, "count", t("heads.ctl_count"), MIN_COUNT, data.HEADS_MAX_OFF, DEFAULT_COUNT
    )
    last = data.DECODER_LAYERS - LAYERS_PICKED
    first = state.slider_int(
        page, "first_layer", t("heads.ctl_first_layer"), 0, last, DEFAULT_FIRST_LAYER
    )
    measure = state.checkbox(
        page, "measure", t("heads.ctl_measure"), False, help=t("heads.ctl_measure_help")
    )
    return AttributionConfig(source, pick, count, first, measure)


def mask_controls(page: str) -> MaskConfig:
    """The mask composer group: window, sinks, prefix, stride, and the per-layer switch."""
    st.sidebar.markdown(f"**{t('heads.mask_header')}**")
    window = state.slider_int(
        page, "window", t("heads.ctl_window"), 0, MAX_WINDOW, DEFAULT_WINDOW, step=WINDOW_STEP
    )
    sinks = state.slider_int(page, "sinks", t("heads.ctl_sinks"), 0, MAX_SINKS, DEFAULT_SINKS)
    prefix = state.slider_int(page, "prefix", t("heads.ctl_prefix"), 0, MAX_PREFIX, 0)
    stride = state.select(page, "stride", t("heads.ctl_stride"), STRIDES, 0)
    per_layer = state.checkbox(
        page, "per_layer", t("heads.ctl_per_layer"), False, help=t("heads.ctl_per_layer_help")
    )
    return MaskConfig(window, sinks, prefix, stride, per_layer)


def heads_controls(page: str) -> HeadsConfig:
    """The sidebar, one group per section of the page."""
    if not data.decoder_installed():
        return HeadsConfig(installed=False)
    census = census_controls(page)
    return HeadsConfig(
        True,
        census,
        copy_controls(page),
        attribution_controls(page),
        mask_controls(page),
        census_grid_controls(census),
        e5_controls(page),
    )


def label_name(label: str) -> str:
    """The translated name of a census label (``previous-token`` -> key ``label_previous``)."""
    return t(f"heads.label_{label.split('-')[0]}")


def grid_titles(value_title: str, title: str) -> HeadGridTitles:
    """The translated titles of a layers × heads grid."""
    return HeadGridTitles(
        title=title,
        x_title=t("common.chart_head"),
        y_title=t("heads.chart_layer"),
        value_title=value_title,
        label_title=t("heads.chart_label"),
    )


def grid_chart(table: pd.DataFrame, titles: HeadGridTitles, fmt: str, chosen=None):
    """A layers × heads grid, each head lettered with its label (``chosen`` outlined)."""
    labels = {name: label_name(name) for name in data.HEADS_LABELS}
    shown = table.assign(label=table["label"].map(labels))
    marks = {
        labels[name]: t(f"heads.mark_{name.split('-')[0]}")
        for name in data.HEADS_LABELS
        if name != UNMARKED
    }
    return head_score_chart(shown, titles, marks=marks, value_format=fmt, chosen=chosen)


def head_grid(table: pd.DataFrame, titles: HeadGridTitles, key: str, fmt: str) -> None:
    """Draw a layers × heads grid, each head lettered with its label."""
    st.altair_chart(grid_chart(table, titles, fmt), theme=None, key=f"{PAGE}.{key}")


def pick_head(key: str) -> None:
    """The grid's click callback (before the rerun): the clicked head becomes the layer and
    head controls' value, so the sliders, the map and the URL follow."""
    event = st.session_state.get(key)
    points = event.selection.get(PICK) if event is not None else None
    pair = picked_head(points, data.DECODER_LAYERS, data.DECODER_HEADS)
    if pair is not None:
        st.session_state[f"{PAGE}.layer"], st.session_state[f"{PAGE}.head"] = pair


def grid_pick_controls(chart, chosen: tuple[int, int]) -> None:
    """The census grid as a control: a click on a cell chooses that head. The key names the
    chosen head, so the grid starts with no selection after every change of head (a click
    on the same cell again still counts)."""
    key = f"{PAGE}.grid.{chosen[0]}.{chosen[1]}"
    st.altair_chart(
        chart,
        theme=None,
        key=key,
        on_select=functools.partial(pick_head, key),
        selection_mode=PICK,
    )


@dataclass(frozen=True)
class CensusView:
    """Section 1 as drawn by :func:`census_grid_controls`: the census, and the column the
    head's map goes in."""

    census: data.PromptCensus
    map_column: DeltaGenerator


def census_grid_controls(ctl: CensusConfig) -> CensusView | None:
    """Section 1's title and its grid of one score with every head's label. The grid is a
    control (a click chooses the head), so it is drawn here, before the rest of the page.

    Returns:
        The census and the map's column, or None when the prompt cannot run (the notice is
        shown).
    """
    st.header(t("heads.census_title"))
    st.markdown(t("heads.census_intro"))
    try:
        with st.spinner(t("heads.loading")):
            census = data.prompt_census(ctl.text)
    except FileNotFoundError:
        show_install_hint()
        return None
    except ValueError as err:
        controls.show_error(err)
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
            grid_pick_controls(grid_chart(table, titles, fmt, chosen), chosen)
        st.caption(t("heads.label_rule"))
    return CensusView(census, right)


def draw_head_map(view: CensusView, ctl: CensusConfig) -> None:
    """Section 1, right: the chosen head's map on the prompt and its scores."""
    census = view.census
    with view.map_column:
        label = label_name(census.head_labels[ctl.layer, ctl.head])
        labels = list(census.labels)
        grid = data.heatmap_grid(census.maps[ctl.layer, ctl.head], labels, labels)
        title = t("heads.map_title", layer=ctl.layer, head=ctl.head, label=label)
        canvas.heatmap_grid(grid, charts.weights_spec(grid, title), key=f"{PAGE}.map")
        values = {name: census.scores[name][ctl.layer, ctl.head] for name in data.HEADS_SCORES}
        st.caption(
            " · ".join(
                f"{score_name(name)} {value:{SCORE_FORMATS.get(name, '.2f')}}"
                for name, value in values.items()
            )
        )


def copy_metrics(intact, ablated, control, off: tuple, weakest: tuple) -> None:
    """The copy test's four losses as metrics."""
    cols = st.columns(4)
    cols[0].metric(t("heads.metric_first"), f"{intact.first:.2f}")
    cols[1].metric(t("heads.metric_second"), f"{intact.second:.2f}")
    cols[2].metric(
        t("heads.metric_second_off", n=len(off)),
        f"{ablated.second:.2f}",
        delta=f"{ablated.second - intact.second:+.2f}",
        delta_color="inverse",
    )
    cols[3].metric(
        t("heads.metric_second_weakest", n=len(weakest)),
        f"{control.second:.2f}",
        delta=f"{control.second - intact.second:+.2f}",
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
    st.altair_chart(chart, theme=None, key=f"{PAGE}.copy_chart")


def draw_copy(ctl: CopyConfig) -> None:
    """Section 2: the copy test with heads turned off, and its control."""
    st.header(t("heads.copy_title"))
    st.markdown(t("heads.copy_intro"))
    off, weakest = data.copy_heads(ctl.length, ctl.seed, ctl.rank_score, ctl.top_k, ctl.picked)
    intact = data.copy_run(ctl.length, ctl.seed)
    ablated, control = data.copy_pair(ctl.length, ctl.seed, off, weakest)
    copy_metrics(intact, ablated, control, off, weakest)
    copy_chart(ctl, intact, ablated)
    names = ", ".join(data.head_name(p) for p in off) or "—"
    control = ", ".join(data.head_name(p) for p in weakest) or "—"
    st.caption(t("heads.copy_caption", off=names, weakest=control))


def draw_effects(ids, positions, estimates, pairs) -> None:
    """The scatter of estimated against true effects, with Spearman's number."""
    effects = data.head_effects(ids, positions, pairs)
    table, rho = data.effect_table(estimates, pairs, effects)
    st.metric(t("heads.metric_spearman", n=len(pairs)), "—" if rho != rho else f"{rho:.2f}")
    chart = effect_scatter_chart(
        table,
        title=t("heads.scatter_title"),
        x_title=t("heads.chart_estimate"),
        y_title=t("heads.chart_effect"),
        head_title=t("common.chart_head"),
    )
    st.altair_chart(chart, theme=None, key=f"{PAGE}.scatter")
    st.caption(t("heads.scatter_caption"))


def draw_attribution(ctl: AttributionConfig, census_text: str, copy: CopyConfig) -> None:
    """Section 3: the one-backward estimate of every head's effect, and its check."""
    st.header(t("heads.attr_title"))
    st.markdown(t("heads.attr_intro", most=data.HEADS_MAX_OFF))
    ids, positions = data.attribution_ids(ctl.source, census_text, copy.length, copy.seed)
    estimates = data.head_attribution(ids, positions)
    if ctl.source == "copy":
        labels = data.copy_census(copy.length, copy.seed).labels
    else:
        labels = data.prompt_census(census_text).head_labels
    table = pd.DataFrame(
        {
            "layer": [i // data.DECODER_HEADS for i in range(estimates.size)],
            "head": [i % data.DECODER_HEADS for i in range(estimates.size)],
            "score": estimates.ravel(),
            "label": labels.ravel(),
        }
    )
    left, right = st.columns([2, 3])
    with left:
        titles = grid_titles(t("heads.chart_estimate"), t("heads.attr_grid_title"))
        head_grid(table, titles, "attr_grid", ".3f")
    with right:
        layers = range(ctl.first_layer, ctl.first_layer + LAYERS_PICKED)
        pairs = data.measured_heads(ctl.pick, estimates, layers, ctl.count)
        if ctl.measure:
            draw_effects(ids, positions, estimates, pairs)
        else:
            st.info(t("heads.measure_off", n=len(pairs)))


def draw_explanation(text: str) -> None:
    """Section 4: saliency, last-layer attention and rollout, and their rank agreement."""
    st.header(t("heads.explain_title"))
    labels, result, target = data.explanation(text)
    st.markdown(t("heads.explain_intro", target=target))
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
    st.altair_chart(chart, theme=None, key=f"{PAGE}.explain_chart")
    st.caption(t("heads.explain_caption"))


def draw_mask(ctl: MaskConfig) -> None:
    """Section 5: the composed mask's cost in every layer and in each alone."""
    st.header(t("heads.mask_title"))
    st.markdown(t("heads.mask_intro"))
    with st.expander(t("heads.mask_paragraph")):
        st.code(data.MASK_TEXT, language=None, wrap_lines=True)
    effect = data.mask_effect(
        data.mask_parts(ctl.window, ctl.sinks, ctl.prefix, ctl.stride), ctl.per_layer
    )
    cols = st.columns(4)
    cols[0].metric(t("heads.metric_kept"), f"{effect.kept:.0%}")
    cols[1].metric(t("heads.metric_full_ppl"), f"{effect.full_perplexity:.2f}")
    cols[2].metric(t("heads.metric_masked_ppl"), f"{effect.all_layers_perplexity:.2f}")
    cols[3].metric(t("heads.metric_kl"), f"{effect.all_layers_kl:.3f}")
    if not ctl.per_layer:
        st.caption(t("heads.per_layer_off"))
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
    st.altair_chart(chart, theme=None, key=f"{PAGE}.mask_chart")
    worst = int(effect.layer_kl.argmax())
    st.caption(t("heads.mask_caption", layer=worst, ppl=f"{effect.layer_perplexity[worst]:.2f}"))


def draw_links() -> None:
    """Links to the pages this one continues."""
    lang = st.query_params.get("lang", "en")
    for page in LINKS:
        st.page_link(
            f"views/{page}.py",
            label=t(f"heads.link_{page}"),
            icon=":material/arrow_forward:",
            query_params={"lang": lang},
        )


def show_install_hint() -> None:
    """Say that the decoder's package is missing, with its pip line."""
    controls.show_install_hint(t("heads.missing"), data.DECODER_INSTALL_HINT)


def section(draw, *args) -> None:
    """Run one section's drawing; a refusal shows the one error notice, not a traceback."""
    try:
        with st.spinner(t("heads.loading")):
            draw(*args)
    except FileNotFoundError:  # the package was removed while the app ran
        show_install_hint()
    except ValueError as err:
        controls.show_error(err)


def render(ctl: HeadsConfig) -> None:
    """Draw the page (returns early, without st.stop, when the model cannot run)."""
    if not ctl.installed:
        show_install_hint()
        return
    if ctl.census_view is None:  # the census section said why
        return
    draw_head_map(ctl.census_view, ctl.census)
    section(draw_copy, ctl.copy)
    section(draw_attribution, ctl.attribution, ctl.census.text, ctl.copy)
    section(draw_explanation, ctl.census.text)
    section(draw_mask, ctl.mask)
    draw_e5(ctl.e5, ctl.census.text)
    draw_links()
    section(prefetch_moves, ctl)


def prefetch_moves(ctl: HeadsConfig) -> None:
    """After the page is drawn: fill, in the background, what the next slider moves need."""
    copy, mask = ctl.copy, ctl.mask
    data.prefetch_copy(
        copy.length, copy.seed, copy.rank_score, copy.top_k, copy.picked, range(MAX_TOP_K + 1)
    )
    if not mask.per_layer:  # 30 forward passes a value: not guessed ahead
        parts = data.mask_parts(mask.window, mask.sinks, mask.prefix, mask.stride)
        windows = data.window_neighbours(mask.window, WINDOW_STEP, MAX_WINDOW)
        data.prefetch_masks(parts, range(MAX_SINKS + 1), windows)


controls.page_intro(PAGE)
ctl = heads_controls(PAGE)
render(ctl)
