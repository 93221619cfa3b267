"""Why scale by √d_k: the tutorial's table and plots, plus softmax saturation and gradients."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import charts, controls, data, presentation, refusals, state
from dashboard.config import ScalingConfig
from dashboard.i18n import t
from dashboard.lesson_figures import headline_metric
from dashboard.literal import DETAIL_MAX_LEN, literal
from dashboard.numbers import plain_number
from dashboard.replay import replayed
from dashboard.views import section_anchor

PAGE = "scaling"
DEFAULT_D_KS = "32,64,128,256"
MAX_D_KS = 12
D_KS_MAX_CHARS = 60
MAX_TRIALS = 500
CHART_COLUMNS = 3
SPREAD_HEIGHT, SATURATION_HEIGHT = 320, 300  # px: the std and mean charts, the saturation row
ROW_WIDTH, ROW_HEIGHT = 520, 220  # px: one query's weights, scaled and unscaled


def parse_d_ks(raw: str) -> list[int]:
    """Parse the typed d_k list; show a warning and return the default on bad input."""
    try:
        return state.parse_int_list(raw, 1, data.LAB_MAX_D_K, MAX_D_KS)
    except ValueError as err:
        detail = literal(err, DETAIL_MAX_LEN)
        st.warning(t("scaling.bad_d_ks", value=literal(raw), detail=detail))
        return state.parse_int_list(DEFAULT_D_KS, 1, data.LAB_MAX_D_K, MAX_D_KS)


def series_frame(table: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    """Long table (d_k, series, value) from ``{column: translated series name}``."""
    parts = [
        pd.DataFrame({"d_k": table["d_k"], "series": name, "value": table[column]})
        for column, name in columns.items()
    ]
    return pd.concat(parts, ignore_index=True)


def d_k_chart(
    table: pd.DataFrame,
    name: str,
    series: dict[str, str],
    dashed: Sequence[str] = (),
    *,
    height: int = SPREAD_HEIGHT,
) -> alt.Chart:
    """A line chart of the table's ``series`` (``{column: translated series name}``) against
    d_k on a log axis, titled ``scaling.chart_<name>`` with y axis ``scaling.axis_<name>``;
    the series named in ``dashed`` (a theory curve) drawn dashed."""
    return charts.layered_line_chart(
        series_frame(table, series),
        x="d_k",
        y="value",
        color="series",
        title=t(f"scaling.chart_{name}"),
        x_title="d_k",
        y_title=t(f"scaling.axis_{name}"),
        color_title=t("scaling.axis_series"),
        dashed=dashed,
        log_x=True,
        height=height,
    )


def scaling_controls(page: str) -> ScalingConfig:
    """The sidebar: the d_k list (a bad one falls back with a warning), L, trials, seed."""
    raw_d_ks = state.text(
        page,
        "d_ks",
        t("scaling.ctl_d_ks"),
        DEFAULT_D_KS,
        D_KS_MAX_CHARS,
        help=t("scaling.ctl_d_ks_help", high=data.LAB_MAX_D_K, n=MAX_D_KS),
    )
    return ScalingConfig(
        d_ks=tuple(sorted(set(parse_d_ks(raw_d_ks)))),
        seq_len=state.slider_int(page, "seq_len", t("scaling.ctl_seq_len"), 2, 64, 10),
        trials=state.slider_int(
            page,
            "trials",
            t("scaling.ctl_trials"),
            1,
            MAX_TRIALS,
            200,
            help=t("scaling.ctl_trials_help"),
        ),
        seed=state.slider_int(page, "seed", t("common.ctl_seed"), 0, controls.MAX_SEED, 0),
    )


def render(ctl: ScalingConfig) -> None:
    """Compute the table, then draw the metrics, the tutorial's table and the charts."""
    try:
        with st.spinner(t("scaling.computing")):
            table = data.scaling_table(ctl.d_ks, ctl.seq_len, ctl.seed, ctl.trials)
    except ValueError as err:
        refusals.show_error(err)
        return
    draw(ctl)
    # a download button with on_click="ignore" is output: it never reruns the page; the
    # CSV is written when it is clicked, not on every run (a follower's run is short)
    st.download_button(
        t("scaling.download_csv"),
        functools.partial(table.to_csv, index=False),
        file_name="scaling_table.csv",
        mime="text/csv",
        on_click="ignore",
    )


@replayed
def draw(ctl: ScalingConfig) -> None:
    """Metrics, the tutorial's table, and the std/mean and saturation charts (drawn once
    per values and language, then replayed: :mod:`dashboard.replay`)."""
    table = data.scaling_table(ctl.d_ks, ctl.seq_len, ctl.seed, ctl.trials)
    draw_metrics(table)
    draw_row(ctl)
    draw_table(ctl, table)
    draw_spread(table)
    draw_saturation(table)
    with st.expander(t("common.how_it_works")):
        st.markdown(t("scaling.how_it_works"))


def draw_metrics(table: pd.DataFrame) -> None:
    """The largest d_k's spread and largest weight, unscaled against scaled."""
    largest = table.iloc[-1]
    cols = st.columns(4)
    cols[0].metric(t("scaling.metric_largest_d_k"), int(largest["d_k"]))
    headline_metric(
        cols[1],
        t("scaling.metric_std_unscaled"),
        f"{largest['std_unscaled']:.2f}",
        help=t("scaling.metric_theory", value=f"{largest['theory_std_unscaled']:.2f}"),
        section="table",
    )
    cols[2].metric(t("scaling.metric_std_scaled"), f"{largest['std_scaled']:.3f}")
    headline_metric(
        cols[3],
        t("scaling.metric_max_weight_unscaled"),
        f"{largest['max_weight_unscaled']:.3f}",
        delta=t(
            "common.delta_vs",
            delta=f"{largest['max_weight_unscaled'] - largest['max_weight_scaled']:+.3f}",
            reference=t("scaling.delta_ref_scaled"),
        ),
        delta_color="off",
        help=t("scaling.metric_max_weight_help", value=f"{largest['max_weight_scaled']:.3f}"),
        section="saturation",
    )


def row_frame(row: pd.DataFrame, series: dict[str, str]) -> pd.DataFrame:
    """Long table (key, series, weight) of :func:`dashboard.data.scaling_row`'s columns
    ``{column: translated series name}``, the keys as text labels."""
    parts = [
        pd.DataFrame({"key": row["key"].astype(str), "series": name, "weight": row[column]})
        for column, name in series.items()
    ]
    return pd.concat(parts, ignore_index=True)


def draw_row(ctl: ScalingConfig) -> None:
    """One query's weights over the keys, unscaled and scaled, two bars per key, at the
    largest d_k of the list."""
    d_k = ctl.d_ks[-1]
    row = data.scaling_row(d_k, ctl.seq_len, ctl.seed)
    series = {"unscaled": t("scaling.series_unscaled"), "scaled": t("scaling.series_scaled")}
    st.subheader(t("scaling.row_header"))
    chart = charts.grouped_bar_chart(
        row_frame(row, series),
        x="key",
        y="weight",
        color="series",
        title=t("scaling.chart_row", keys=ctl.seq_len, d_k=d_k),
        x_title=t("scaling.axis_key"),
        y_title=t("common.chart_weight"),
        color_title=t("scaling.axis_row_series"),
        color_sort=list(series.values()),
        value_format=".3f",
        width=ROW_WIDTH,
        height=ROW_HEIGHT,
    )
    presentation.show_chart(st, chart, theme=None)
    st.caption(
        t(
            "scaling.row_caption",
            d_k=d_k,
            top_unscaled=plain_number(float(row["unscaled"].max())),
            top_scaled=plain_number(float(row["scaled"].max())),
        )
    )


def draw_table(ctl: ScalingConfig, table: pd.DataFrame) -> None:
    """The tutorial's table: mean and std of the scores per d_k, with the theory."""
    st.subheader(t("scaling.table_header"), anchor=section_anchor(PAGE, "table"))
    st.caption(t("scaling.table_caption", trials=ctl.trials, seq_len=ctl.seq_len))
    shown = table[
        ["d_k", "mean_unscaled", "std_unscaled", "mean_scaled", "std_scaled", "theory_std_unscaled"]
    ].rename(
        columns={
            "d_k": "d_k",
            "mean_unscaled": t("scaling.col_mean_unscaled"),
            "std_unscaled": t("scaling.col_std_unscaled"),
            "mean_scaled": t("scaling.col_mean_scaled"),
            "std_scaled": t("scaling.col_std_scaled"),
            "theory_std_unscaled": t("scaling.col_theory"),
        }
    )
    st.dataframe(shown, hide_index=True, width="stretch")


def draw_spread(table: pd.DataFrame) -> None:
    """The scores' std and mean against d_k, unscaled and scaled."""
    unscaled, scaled = t("scaling.series_unscaled"), t("scaling.series_scaled")
    theory = t("scaling.series_theory")
    left, right = presentation.side_by_side(2)
    std = {"std_unscaled": unscaled, "std_scaled": scaled, "theory_std_unscaled": theory}
    presentation.show_chart(
        left, d_k_chart(table, "std", std, [theory]), theme=None, width="stretch"
    )
    mean = {"mean_unscaled": unscaled, "mean_scaled": scaled}
    presentation.show_chart(right, d_k_chart(table, "mean", mean), theme=None, width="stretch")


def draw_saturation(table: pd.DataFrame) -> None:
    """Softmax saturation: entropy, largest weight and Jacobian norm against d_k."""
    unscaled, scaled = t("scaling.series_unscaled"), t("scaling.series_scaled")
    st.subheader(t("scaling.saturation_header"), anchor=section_anchor(PAGE, "saturation"))
    presentation.explain(t("scaling.saturation_intro"))
    saturation = (
        (
            "entropy",
            {
                "entropy_unscaled": unscaled,
                "entropy_scaled": scaled,
                "max_entropy": t("scaling.series_uniform"),
            },
            [t("scaling.series_uniform")],
        ),
        ("max_weight", {"max_weight_unscaled": unscaled, "max_weight_scaled": scaled}, []),
        ("jacobian", {"jacobian_norm_unscaled": unscaled, "jacobian_norm_scaled": scaled}, []),
    )
    sat_cols = presentation.side_by_side(CHART_COLUMNS)
    for col, (name, columns, dashed) in zip(sat_cols, saturation, strict=True):
        chart = d_k_chart(table, name, columns, dashed, height=SATURATION_HEIGHT)
        presentation.show_chart(col, chart, theme=None, width="stretch")
        col.caption(t(f"scaling.caption_{name}"))


controls.page_intro(PAGE)
ctl = scaling_controls(PAGE)
render(ctl)
