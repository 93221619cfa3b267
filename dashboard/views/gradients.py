"""Gradient flow: norms of the gradients of W_Q, W_K, W_V and the input, per variant, with
and without the 1/√d_k scale, and against d_k."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from dashboard import charts, controls, data, presentation, state
from dashboard.i18n import t
from dashboard.literal import DETAIL_MAX_LEN, literal
from dashboard.replay import replayed
from dashboard.views import section_anchor

PAGE = "gradients"
EMBED_DIMS = (4, 8, 16, 32, 64, 128, 256)
INITS = ("scaled", "randn")
DEFAULT_D_KS = "16,32,64,128,256"
D_KS_MAX_CHARS = 60
MAX_D_KS = 8
MAX_TRIALS = 16
TENSORS = ("W_Q", "W_K", "W_V", "input")


def scaling_label(name: str) -> str:
    """Translated name of a scaling series ("scaled"/"unscaled")."""
    return t(f"gradients.scaling_{name}")


def tensor_label(name: str) -> str:
    """Display name of a tensor: W_Q, W_K, W_V, or the translated "input"."""
    return t("gradients.tensor_input") if name == "input" else name


@dataclass(frozen=True)
class DkSweep:
    """The d_k section's choices: one variant, the d_k values, trials per d_k, and the
    warning to show when the typed list was refused (then ``d_ks`` holds the default)."""

    variant: str
    d_ks: tuple[int, ...]
    trials: int
    bad_d_ks: str | None = None


@dataclass(frozen=True)
class GradientsConfig:
    """The layers whose gradients are measured: width, tokens, initialisation and seed, and
    the d_k sweep."""

    embed_dim: int
    seq_len: int
    init: str
    seed: int
    dk: DkSweep


def gradients_controls(page: str) -> GradientsConfig:
    """The sidebar: embedding width, sequence length, initialisation, seed, then the d_k
    sweep's own controls."""
    return GradientsConfig(
        embed_dim=state.select(page, "embed_dim", t("gradients.ctl_embed_dim"), EMBED_DIMS, 16),
        seq_len=state.slider_int(page, "seq_len", t("gradients.ctl_seq_len"), 2, 32, 4),
        init=state.radio(
            page,
            "init",
            t("gradients.ctl_init"),
            INITS,
            "scaled",
            format_func=lambda i: t(f"gradients.init_{i}"),
            help=t("gradients.ctl_init_help"),
        ),
        seed=state.slider_int(page, "seed", t("common.ctl_seed"), 0, controls.MAX_SEED, 0),
        dk=dk_controls(page),
    )


def dk_controls(page: str) -> DkSweep:
    """The d_k section's controls, under its heading in the sidebar: variant, the typed d_k
    list (a bad one falls back to the default, with the warning kept for the section) and
    the trials per d_k."""
    state.controls_box().markdown(f"**{t('gradients.dk_header')}**")
    variant = state.select(
        page,
        "dk_variant",
        t("common.ctl_variant"),
        list(data.variant_catalogue()),
        "scaled",
        format_func=controls.variant_label,
    )
    raw_d_ks = state.text(
        page,
        "d_ks",
        t("gradients.ctl_d_ks"),
        DEFAULT_D_KS,
        D_KS_MAX_CHARS,
        help=t("gradients.ctl_d_ks_help", high=data.LAB_MAX_D_K, n=MAX_D_KS),
    )
    trials = state.slider_int(page, "trials", t("gradients.ctl_trials"), 1, MAX_TRIALS, 8)
    try:
        d_ks = state.parse_int_list(raw_d_ks, 1, data.LAB_MAX_D_K, MAX_D_KS)
        bad = None
    except ValueError as err:
        detail = literal(err, DETAIL_MAX_LEN)
        bad = t("gradients.bad_d_ks", value=literal(raw_d_ks), detail=detail)
        d_ks = state.parse_int_list(DEFAULT_D_KS, 1, data.LAB_MAX_D_K, MAX_D_KS)
    return DkSweep(variant=variant, d_ks=tuple(sorted(set(d_ks))), trials=trials, bad_d_ks=bad)


def variant_tables(ctl: GradientsConfig) -> tuple[list[pd.DataFrame], list[tuple[str, str]]]:
    """Every registered variant's gradient norms (cached), and ``(variant, why)`` for each
    that failed."""
    tables, failed = [], []
    for name in data.variant_catalogue():
        try:
            tables.append(
                data.gradient_by_variant((name,), ctl.embed_dim, ctl.seq_len, ctl.init, ctl.seed)
            )
        except (ValueError, RuntimeError) as err:
            failed.append((name, str(err).splitlines()[0]))
    return tables, failed


def dk_table(ctl: GradientsConfig) -> pd.DataFrame:
    """The d_k sweep's gradient norms (cached).

    Raises:
        ValueError, RuntimeError: when the variant refuses the settings.
    """
    sweep = ctl.dk
    return data.gradient_by_dk(
        sweep.d_ks, sweep.variant, ctl.seq_len, ctl.init, ctl.seed, sweep.trials
    )


@replayed
def variant_section(ctl: GradientsConfig) -> None:
    """Gradient norms of every registered variant, scaled and unscaled (drawn once per values
    and language, then replayed: :mod:`dashboard.replay`)."""
    st.header(t("gradients.variant_header"), anchor=section_anchor(PAGE, "variant"))
    st.caption(t("gradients.variant_caption", embed_dim=ctl.embed_dim, seq_len=ctl.seq_len))
    tables, failed = variant_tables(ctl)
    for name, detail in failed:
        st.warning(
            t("gradients.variant_failed", variant=controls.variant_label(name), detail=detail)
        )
    if not tables:
        return
    by_variant = pd.concat(tables, ignore_index=True)
    by_variant = by_variant.assign(
        label=[controls.variant_label(v) for v in by_variant["variant"]],
        scaling_label=[scaling_label(s) for s in by_variant["scaling"]],
        tensor_label=[tensor_label(x) for x in by_variant["tensor"]],
    )
    scaled_loss = by_variant[by_variant["scaling"] == "scaled"]
    reference = scaled_loss[scaled_loss["variant"] == "scaled"].set_index("tensor")["grad_norm"]
    if not reference.empty:
        cols = presentation.in_rows(len(TENSORS))
        unscaled_ref = by_variant[
            (by_variant["variant"] == "scaled") & (by_variant["scaling"] == "unscaled")
        ].set_index("tensor")["grad_norm"]
        for col, name in zip(cols, TENSORS, strict=True):
            col.metric(
                t("gradients.metric_norm", tensor=tensor_label(name)),
                f"{reference[name]:.3g}",
                delta=t("gradients.metric_unscaled", value=f"{unscaled_ref[name]:.3g}"),
                delta_color="off",
            )
    positive = by_variant[by_variant["grad_norm"] > 0]
    presentation.show_chart(
        st,
        charts.grouped_bar_chart(
            positive,
            x="label",
            y="grad_norm",
            color="scaling_label",
            facet="tensor_label",
            facet_columns=1 if presentation.presenting() else 2,  # a projector's page: one
            title=t("gradients.chart_variants"),
            x_title=t("gradients.axis_variant"),
            y_title=t("gradients.axis_norm"),
            color_title=t("gradients.axis_scaling"),
            log_y=True,
            color_sort=[scaling_label("scaled"), scaling_label("unscaled")],
            width=420,
            height=260,
        ),
        theme=None,
    )
    st.caption(t("gradients.variants_note"))


@replayed
def dk_section(ctl: GradientsConfig) -> None:
    """Gradient norms of one variant against d_k, scaled and unscaled (drawn once per values
    and language, then replayed)."""
    st.header(t("gradients.dk_header"), anchor=section_anchor(PAGE, "dk"))
    presentation.explain(t("gradients.dk_intro"))
    sweep = ctl.dk
    if sweep.bad_d_ks is not None:
        st.warning(sweep.bad_d_ks)
    try:
        vs_dk = dk_table(ctl)
    except (ValueError, RuntimeError) as err:
        st.warning(
            t(
                "gradients.variant_failed",
                variant=controls.variant_label(sweep.variant),
                detail=str(err).splitlines()[0],
            )
        )
        return
    vs_dk = vs_dk.assign(scaling_label=[scaling_label(s) for s in vs_dk["scaling"]])
    dk_charts(vs_dk)
    with st.expander(t("gradients.spread_header")):
        st.dataframe(spread_table(vs_dk), hide_index=True, width="stretch")
    with st.expander(t("common.how_it_works")):
        st.markdown(t("gradients.how_it_works"))


def dk_charts(vs_dk: pd.DataFrame) -> None:
    """One log-log chart per tensor: the gradient norm against d_k, scaled and unscaled."""
    chart_cols = presentation.in_rows(len(TENSORS))
    for col, name in zip(chart_cols, TENSORS, strict=True):
        part = vs_dk[(vs_dk["tensor"] == name) & (vs_dk["grad_norm"] > 0)]
        presentation.show_chart(
            col,
            charts.layered_line_chart(
                part,
                x="d_k",
                y="grad_norm",
                color="scaling_label",
                title=tensor_label(name),
                x_title="d_k",
                y_title=t("gradients.axis_norm"),
                color_title=t("gradients.axis_scaling"),
                color_sort=[scaling_label("scaled"), scaling_label("unscaled")],
                log_x=True,
                log_y=True,
                height=260,
            ),
            theme=None,
            width="stretch",
        )


def spread_table(vs_dk: pd.DataFrame) -> pd.DataFrame:
    """The trials' spread per d_k, scaling and tensor, with translated column names."""
    return vs_dk.assign(tensor=[tensor_label(x) for x in vs_dk["tensor"]])[
        ["d_k", "scaling_label", "tensor", "grad_norm", "grad_norm_std", "grad_norm_min"]
    ].rename(
        columns={
            "scaling_label": t("gradients.axis_scaling"),
            "tensor": t("gradients.col_tensor"),
            "grad_norm": t("gradients.col_mean"),
            "grad_norm_std": t("gradients.col_std"),
            "grad_norm_min": t("gradients.col_min"),
        }
    )


def render(ctl: GradientsConfig) -> None:
    """Gradient norms per variant, then against d_k for one variant (computed first, under
    one spinner; the sections then draw from the caches)."""
    with st.spinner(t("gradients.computing")):
        variant_tables(ctl)
        with contextlib.suppress(ValueError, RuntimeError):  # dk_section says why
            dk_table(ctl)
    variant_section(ctl)
    dk_section(ctl)


controls.page_intro(PAGE)
ctl = gradients_controls(PAGE)
render(ctl)
