"""Multi-head: the tutorial's gallery of eight head patterns and the heads of a real layer."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pandas as pd
import streamlit as st

from dashboard import charts, controls, data, exports, presentation, refusals, state
from dashboard.charts import canvas
from dashboard.config import LayerConfig
from dashboard.i18n import t
from dashboard.lesson_figures import headline_metric
from dashboard.replay import replayed
from dashboard.views import section_anchor

PAGE = "multihead"
GALLERY_MAX_LEN = 32
GALLERY_COLUMNS = 4
REAL_DEFAULTS = LayerConfig(seq_len=12, d_model=64, heads=8, projections=controls.STRUCTURED)
REAL_MAX_SEQ_LEN = 256
# the per-head statistics charted side by side: (column, name), the name in the charts' locale
# keys (multihead.<name>_title, multihead.col_<name>) and widget keys
STATS_CHARTED = (("entropy", "entropy"), ("mean_distance", "distance"))


@dataclass(frozen=True)
class MultiheadConfig:
    """The page's input: the real layer, and the gallery's length and seed."""

    layer: LayerConfig
    gallery_len: int
    gallery_seed: int


def pattern_label(name: str) -> str:
    """Translated name of a gallery pattern (``random_3`` -> "Random 3")."""
    if name.startswith("random_"):
        return t("multihead.pattern_random", n=name.removeprefix("random_"))
    return t(f"multihead.pattern_{name}")


def stats_charts(stats: pd.DataFrame, key: str) -> None:
    """Two bar charts side by side: mean row entropy and mean attention distance."""
    for column, (stat, name) in zip(presentation.side_by_side(2), STATS_CHARTED, strict=True):
        chart = charts.bar_chart(
            stats,
            x="name",
            y=stat,
            title=t(f"multihead.{name}_title"),
            x_title=t("multihead.col_head"),
            y_title=t(f"multihead.col_{name}"),
        )
        presentation.show_chart(column, chart, theme=None, key=f"{key}.{name}")


# ---------------------------------------------------------------- gallery


@replayed
def gallery_stats_section(length: int, seed: int) -> None:
    """The gallery's entropy and distance bars (drawn once per values and language, then
    replayed: :mod:`dashboard.replay`)."""
    _gallery, gallery_stats = data.pattern_gallery(length, seed)
    table = gallery_stats.assign(name=gallery_stats["pattern"].map(pattern_label))
    stats_charts(table, "gallery")


def gallery(ctl: MultiheadConfig) -> None:
    """The eight synthetic patterns (returns early, without st.stop, on refusal)."""
    st.header(t("multihead.gallery_header"), anchor=section_anchor(PAGE, "gallery"))
    presentation.explain(t("multihead.gallery_intro"))
    try:
        gallery, gallery_stats = data.pattern_gallery(ctl.gallery_len, ctl.gallery_seed)
    except ValueError as err:
        refusals.show_error(err)
        return
    named = replace(gallery, panels=tuple(map(pattern_label, gallery.panels)))
    spec = charts.weights_spec(
        named,
        t("multihead.gallery_title"),
        panel_title=t("multihead.col_pattern"),
        domain=(0.0, 1.0),
        columns=GALLERY_COLUMNS,
    )
    canvas.draw_heatmaps(named, spec, key="multihead.gallery")
    gallery_stats_section(ctl.gallery_len, ctl.gallery_seed)
    st.page_link(
        "views/heads.py",
        label=t("heads.from_multihead"),
        icon="🔌",
        query_params={"lang": st.query_params.get("lang", "en")},
    )


# ---------------------------------------------------------------- real heads


def gallery_controls(page: str) -> tuple[int, int]:
    """The gallery's own sliders, under its heading in the sidebar: length and seed."""
    state.controls_box().markdown(f"**{t('multihead.gallery_header')}**")
    length = state.slider_int(
        page, "gallery_len", t("multihead.gallery_len"), 4, GALLERY_MAX_LEN, 10
    )
    seed = state.slider_int(
        page, "gallery_seed", t("multihead.gallery_seed"), 0, controls.MAX_SEED, 0
    )
    return length, seed


def multihead_controls(page: str) -> MultiheadConfig:
    """The sidebar in the page's order: the gallery's two sliders, then the layer whose real
    heads are drawn, each under its section's heading."""
    gallery_len, gallery_seed = gallery_controls(page)
    state.controls_box().markdown(f"**{t('multihead.real_header')}**")
    layer = controls.layer_controls(page, REAL_DEFAULTS, max_seq_len=REAL_MAX_SEQ_LEN)
    return MultiheadConfig(layer=layer, gallery_len=gallery_len, gallery_seed=gallery_seed)


@replayed
def real_stats_section(ctl: LayerConfig) -> None:
    """Each head's entropy and distance as bars and a table, and the layer's figures
    (replayed)."""
    run = data.attention_run(ctl)
    head_names = [t("multihead.head_name", h=h) for h in range(run.weights.shape[0])]
    real_stats = pd.DataFrame(
        {"name": head_names, "entropy": run.entropy, "mean_distance": run.distance}
    )
    stats_charts(real_stats, "real")
    table = real_stats.rename(
        columns={
            "name": t("multihead.col_head"),
            "entropy": t("multihead.col_entropy"),
            "mean_distance": t("multihead.col_distance"),
        }
    )
    st.dataframe(table, hide_index=True)
    metric_cols = st.columns(3)
    metric_cols[0].metric(t("multihead.metric_heads"), len(head_names))
    headline_metric(
        metric_cols[1],
        t("multihead.metric_max_entropy"),
        f"{run.entropy.max():.3f}",
        section="gallery",
    )
    metric_cols[2].metric(t("multihead.metric_uniform_entropy"), f"{math.log(len(run.tokens)):.3f}")
    st.caption(t("multihead.stats_note"))


def real_heads(ctl: LayerConfig) -> None:
    """The heads of a real layer (returns early, without st.stop, on refusal)."""
    st.header(t("multihead.real_header"), anchor=section_anchor(PAGE, "real"))
    presentation.explain(t("multihead.real_intro"))
    try:
        run = data.attention_run(ctl)
    except ValueError as err:
        refusals.show_error(err)
        return
    if run.weights is None:
        st.warning(t("playground.weights_skipped"))
        return

    labels = data.axis_labels(run.tokens)
    heads = run.weights.shape[0]
    head_names = [t("multihead.head_name", h=h) for h in range(heads)]
    grid = data.heatmap_grid(run.weights, labels, labels, scores=run.scores, panels=head_names)
    title = t("multihead.real_title", heads=heads, d_k=run.d_k)
    real_spec = charts.head_grid_spec(grid, title, columns=min(heads, GALLERY_COLUMNS))
    canvas.draw_heatmaps(grid, real_spec, key="multihead.real")
    real_stats_section(ctl)

    exports.export_buttons(
        "multihead_weights",
        weights=run.weights,
        csv_text=lambda: data.weights_table(run.weights, labels, labels),
        chart=lambda: charts.heatmap_chart(grid.frame, real_spec),
    )


def render(ctl: MultiheadConfig) -> None:
    """The gallery of synthetic patterns, then the heads of the layer ``ctl.layer``."""
    gallery(ctl)
    real_heads(ctl.layer)


controls.page_intro(PAGE)
ctl = multihead_controls(PAGE)
render(ctl)
