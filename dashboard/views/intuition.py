"""Intuition: the tutorial's first section (the dance, reading, the meeting, the library), each
analogy beside a small live element and a link to the page that goes deeper.

The start page: the meeting and library bars are plain Vega-Lite dicts
(:mod:`dashboard.charts.light`), so they reach the browser before pandas, Altair and torch are
imported; the dance's heatmap imports them afterwards (see ``TORCH_LATE_PAGES`` in
:mod:`dashboard.runtime.startup`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dashboard import charts, controls, data, presentation, refusals, state
from dashboard.charts import light
from dashboard.charts.readable import PRESENT_LABEL_PX
from dashboard.config import LayerConfig
from dashboard.i18n import t
from dashboard.lesson_figures import headline_metric
from dashboard.numbers import plain_number
from dashboard.replay import replayed
from dashboard.runtime import threads
from dashboard.views import section_anchor

PAGE = "intuition"
DANCE_D_MODEL = 16
DANCE_HEADS = 1
BOSS_LOW, BOSS_HIGH, BOSS_DEFAULT, BOSS_STEP = -2.0, 6.0, 3.0, 0.5
TOPIC_DEFAULT, TOPIC_STEP = 0.2, 0.05
READING_PRESET = "zh_cat"
DANCE_MAP_WIDTH = 374  # 22 px a cell for the sentence's 17 tokens: room for a CJK glyph
TICK_FONT_PX = 12  # Vega's default 10 px squeezes a CJK glyph
TICK_PADDING_PX = 3
VEGA_PADDING_PX = 5  # Vega's own padding on each side
TITLE_ROOM_PX = 8  # Vega measures a vertical CJK axis title short: keep it off the left edge
TEXT_COLUMN, LIVE_COLUMN = 3, 2
DANCE_COLUMNS = (1, 1)  # the dance's map needs a wider column than the bars


@dataclass(frozen=True)
class IntuitionConfig:
    """The page's live elements: the dance's seed and query/key projections, the boss's
    relevance, the reader's topic."""

    seed: int
    boss: float
    topic: float
    projections: str = controls.STRUCTURED


def intuition_controls(page: str) -> IntuitionConfig:
    """Sidebar: one control per live element (every value is in the link)."""
    state.controls_box().markdown(f"**{t('intuition.ctl_header')}**")
    projections = controls.projection_controls(page)
    seed = state.slider_int(page, "seed", t("intuition.ctl_seed"), 0, 99, 0)
    boss = state.float_input(
        page, "boss", t("intuition.ctl_boss"), BOSS_LOW, BOSS_HIGH, BOSS_DEFAULT, step=BOSS_STEP
    )
    topic = state.float_input(
        page, "topic", t("intuition.ctl_topic"), 0.0, 1.0, TOPIC_DEFAULT, step=TOPIC_STEP
    )
    return IntuitionConfig(seed=seed, boss=boss, topic=topic, projections=projections)


def analogy(
    name: str, target: str, columns: tuple[int, int] = (TEXT_COLUMN, LIVE_COLUMN)
) -> DeltaGenerator:
    """One analogy's text and its link to the deeper page; returns the live element's column."""
    st.header(t(f"intuition.{name}_header"), anchor=section_anchor("intuition", name))
    text, live = st.columns(list(columns))
    with text:
        st.markdown(t(f"intuition.{name}_text"))
        st.page_link(
            f"views/{target}.py",
            label=t("intuition.go_deeper", page=t(f"common.page_{target}")),
            icon=":material/arrow_forward:",
            query_params={"lang": st.query_params.get("lang", "en")},
        )
    return live


def bars(keys: list[str], weights, title: str) -> None:
    """A small bar chart of one weight per key (a dict spec: no pandas, no Altair)."""
    spec = light.token_bars_spec(
        keys,
        weights,
        title=title,
        token_title=t("intuition.chart_who"),
        weight_title=t("common.chart_weight"),
    )
    presentation.show_chart(st, spec, theme=None, width="stretch")


def waiting_slot(live: DeltaGenerator) -> DeltaGenerator:
    """A place in a live column that says it is computing until the element replaces it."""
    with live:
        slot = st.empty()
    slot.caption(t("intuition.computing"))
    return slot


def dance_config(seed: int, projections: str) -> LayerConfig:
    """The dance's layer: one head on the tutorial's sentence."""
    return LayerConfig(
        d_model=DANCE_D_MODEL,
        heads=DANCE_HEADS,
        seed=seed,
        input_kind="preset_zh",
        projections=projections,
    )


def draw_dance(live: DeltaGenerator, seed: int, projections: str) -> None:
    """Every token watches every token: one head on the tutorial's sentence, in ``live``
    (:func:`dance_section`)."""
    with live.container():
        dance_section(seed, projections)


@replayed
def dance_section(seed: int, projections: str) -> None:
    """The dance's heatmap, its smallest weight and its row sums (drawn once per values,
    language and look, then replayed: :mod:`dashboard.replay`)."""
    run = data.attention_run(dance_config(seed, projections))
    weights = run.weights[0]  # (L, L)
    labels = token_labels(run.tokens)
    grid = data.heatmap_grid(weights, labels, labels)
    spec = charts.weights_spec(
        grid,
        t(f"intuition.dance_chart_{projections}"),
        domain=(0.0, float(weights.max())),
        width=DANCE_MAP_WIDTH,
    )
    upright = all(len(label) == 1 for label in labels)
    font_px = PRESENT_LABEL_PX if presentation.presenting() else TICK_FONT_PX
    chart = readable_ticks(charts.heatmap_chart(grid.frame, spec), upright=upright, font_px=font_px)
    presentation.show_chart(st, chart, theme=None)
    smallest, sums = st.columns(2)
    # a power of ten for a tiny weight: above zero, never printed as 0.0000
    smallest.metric(t("intuition.metric_smallest"), plain_number(float(weights.min())))
    headline_metric(
        sums,
        t("intuition.metric_row_sums"),
        sum_range(float(run.row_sums.min()), float(run.row_sums.max())),
        section="dance",
    )


def sum_range(low: float, high: float) -> str:
    """Row sums as four decimals: one number when every row prints the same ("1.0000"),
    else ``"low – high"`` (the metric sits in a narrow column)."""
    low_text, high_text = f"{low:.4f}", f"{high:.4f}"
    return low_text if low_text == high_text else f"{low_text} – {high_text}"


def token_labels(tokens: tuple[str, ...]) -> list[str]:
    """The dance's tick labels: each token alone (one character of the tutorial's sentence),
    or ``"<position> <token>"`` when a token repeats (an axis needs distinct labels)."""
    if len(set(tokens)) == len(tokens):
        return list(tokens)
    return data.axis_labels(tokens)


def readable_ticks(chart, *, upright: bool, font_px: int = TICK_FONT_PX) -> dict:
    """The heatmap's Vega-Lite spec with its tick labels a little larger and off the cells,
    the key axis's level when each label is one character: at 17 tokens, "0 那" at Vega's
    default 10 px and tilted by 60° crowd into their neighbours; a padding keeps the
    vertical axis title inside the frame.

    Args:
        chart: a single-panel :func:`dashboard.charts.heatmap_chart` (an ``alt.Chart``).
        upright: draw the key (x) labels level.
        font_px: the tick labels' size (larger in the presentation view).

    Returns:
        The chart's Vega-Lite spec (a dict, for ``st.vega_lite_chart``).
    """
    spec = chart.to_dict()
    for channel in ("x", "y"):
        spec["encoding"][channel]["axis"].update(
            labelFontSize=font_px, labelPadding=TICK_PADDING_PX
        )
    if upright:
        spec["encoding"]["x"]["axis"]["labelAngle"] = 0
    # an object, not a number: Streamlit's frontend sets its padding.bottom
    spec["padding"] = {side: VEGA_PADDING_PX for side in ("top", "right", "bottom")}
    spec["padding"]["left"] = TITLE_ROOM_PX
    return spec


def draw_reading(live: DeltaGenerator, caveat: DeltaGenerator) -> None:
    """它 -> 猫 on the multilingual model in ``live`` (:func:`reading_section`), with the
    honest caveat in ``caveat`` when the model is there."""
    with live.container():
        reading_section()
    if data.model_installed(data.E5):
        caveat.info(t("intuition.reading_caveat"))


@replayed
def reading_section() -> None:
    """The reading's figures: the head that links 它 to 猫 most, and 舒服's best heads
    (replayed)."""
    if not data.model_installed(data.E5):
        st.caption(t("intuition.reading_missing", hint=data.MODEL_INSTALL_HINTS[data.E5]))
        return
    try:
        run = data.model_run(data.MODEL_PRESETS[READING_PRESET], "scaled", (), data.E5)
        link = data.word_link(run, "它", "猫")
        comfort = [data.word_link(run, "舒服", word) for word in ("坐在", "垫子")]
    except ValueError as err:
        refusals.show_error(err)
        return
    top = link.heads.iloc[0]
    st.metric(
        t("intuition.metric_it_cat", layer=int(top["layer"]), head=int(top["head"])),
        f"{top['weight']:.2f}",
        help=t("intuition.uniform_help", uniform=f"{top['uniform']:.3f}"),
    )
    best = [(word.word, word.heads.iloc[0]) for word in comfort]
    for word, head in best:
        st.metric(
            t("intuition.metric_comfort", word=word),
            f"{head['weight']:.2f}",
            help=t("intuition.uniform_help", uniform=f"{head['uniform']:.3f}"),
        )


def draw_meeting(boss: float) -> None:
    """The boss's relevance score goes up; the softmax shares follow."""
    live = analogy("meeting", "scaling")
    weights = data.meeting_weights(boss)
    names = [t(f"intuition.person_{person}") for person in data.MEETING_PEOPLE]
    with live:
        bars(names, weights, t("intuition.meeting_chart"))
        boss, total = st.columns(2)
        headline_metric(boss, t("intuition.metric_boss"), f"{weights[0]:.3f}", section="meeting")
        total.metric(t("intuition.metric_shares_total"), f"{math.fsum(weights):.3f}")


def draw_library(topic: float) -> None:
    """A query against three catalogue entries: scores, softmax, what you take home."""
    live = analogy("library", "step_by_step")
    lookup = data.library_lookup(topic)
    names = [t(f"intuition.shelf_{shelf}") for shelf in lookup.shelves]
    with live:
        bars(names, lookup.weights, t("intuition.library_chart"))
        st.caption(
            t(
                "intuition.library_scores",
                scores=", ".join(
                    f"{name} {score:.2f}" for name, score in zip(names, lookup.scores, strict=True)
                ),
            )
        )


def render(ctl: IntuitionConfig) -> None:
    """Draw the four analogies in the tutorial's order. Every text and the two charts that
    need no torch (the meeting, the library) come first; the dance and the reading then
    fill their columns, so on a fresh server the page reads while torch and e5 load."""
    dance = waiting_slot(analogy("dance", "playground", DANCE_COLUMNS))
    reading = waiting_slot(analogy("reading", "real_model"))
    caveat = st.empty()
    draw_meeting(ctl.boss)
    draw_library(ctl.topic)
    threads.import_torch()  # in the torch thread, where its profiler must start later
    try:
        draw_dance(dance, ctl.seed, ctl.projections)
    except ValueError as err:
        with dance.container():
            refusals.show_error(err)
    draw_reading(reading, caveat)


controls.page_intro(PAGE)
ctl = intuition_controls(PAGE)
render(ctl)
