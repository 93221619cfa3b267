"""Properties of self-attention, checked live: equivariance, row sums, causality, exactness,
and the overflow of a naive float16 softmax."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from dashboard import charts, controls, data, presentation, refusals, state
from dashboard.config import LayerConfig
from dashboard.i18n import t
from dashboard.lesson_figures import headline_metric
from dashboard.literal import DETAIL_MAX_LEN, literal
from dashboard.numbers import plain_number
from dashboard.replay import replayed
from dashboard.views import section_anchor

PAGE = "properties"
TOLERANCE = 1e-5
TUTORIAL_PERM = "2,0,4,1,3"
PERM_MAX_CHARS = 120
PERM_MODES = ("typed", "random")
D_MODEL_OPTIONS = (8, 16, 32, 64)
LOGIT_SCALES = (5.0, 10.0, 20.0, 100.0, 1000.0, 10000.0)
SOFTMAX_DTYPES = ("float16", "bfloat16", "float32")


def verdict(diff: float) -> str:
    """A pass (green) or fail (red) line for a difference measured against the tolerance."""
    tol = plain_number(TOLERANCE, 1)
    if diff < TOLERANCE:
        return f":green[:material/check_circle: {t('properties.verdict_holds', tol=tol)}]"
    return f":red[:material/cancel: {t('properties.verdict_broken', tol=tol)}]"


def show_with_and_without_mask(
    results: list[tuple[str, str, dict]],
    value_key: str,
    seq_len: int,
    title: str,
    y_title: str,
    section: str,
) -> None:
    """Two metrics with their verdicts and a per-position bar chart, for one check run with
    and without the causal mask.

    Args:
        results: ``(metric label, series label, result)`` for each of the two runs; each
            result holds ``value_key`` and ``per_position_diff`` (L values).
        section: the page section drawing them (its step's headline figure is the first).
        value_key: the result's headline difference.
        seq_len: L. title, y_title: translated chart labels.
    """
    for column, (label, _series, result) in zip(st.columns(2), results, strict=True):
        headline_metric(column, label, plain_number(result[value_key]), section=section)
        column.markdown(verdict(result[value_key]))
    per_position = pd.DataFrame(
        {
            "position": [str(i) for i in range(seq_len)] * len(results),
            "diff": [d for _label, _series, r in results for d in r["per_position_diff"]],
            "mask": [series for _label, series, _r in results for _ in range(seq_len)],
        }
    )
    presentation.show_chart(
        st,
        charts.grouped_bar_chart(
            per_position,
            x="position",
            y="diff",
            color="mask",
            title=title,
            x_title=t("properties.axis_position"),
            y_title=y_title,
            color_title=t("common.ctl_mask"),
            color_sort=[t("properties.series_no_mask"), t("properties.series_causal")],
            value_format=".2e",
            width=480,
            height=200,
        ),
        theme=None,
    )


@dataclass(frozen=True)
class PermChoice:
    """The permutation the equivariance check uses.

    Attributes:
        mode: ``"typed"``, ``"random"`` or ``"invalid"`` (a bad typed list: no check runs).
        perm: the typed permutation, or ``None`` for a random one.
        positional: add positional encodings (which break equivariance).
        warning: a translated note to show (a typed list for another length), or ``None``.
        error: a translated error to show (a bad typed list), or ``None``.
    """

    mode: str
    perm: tuple[int, ...] | None
    positional: bool
    warning: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class PropertiesConfig:
    """The layer every check runs, and each section's own values."""

    layer: LayerConfig
    perm: PermChoice
    cutoff: int
    chunk_len: int
    chunk_size: int
    key_chunk: int
    logit_scale: float
    dtype: str


def properties_controls(page: str) -> PropertiesConfig:
    """The sidebar: the layer every check runs (variant and its parameters, L, width,
    heads, seed), then each check's own controls under its heading."""
    layer = check_layer_controls(page)
    perm = equivariance_controls(page, layer.seq_len)
    cutoff = leak_controls(page, layer.seq_len)
    chunk_len, chunk_size, key_chunk = chunked_controls(page)
    logit_scale, dtype = softmax_controls(page)
    return PropertiesConfig(
        layer=layer,
        perm=perm,
        cutoff=cutoff,
        chunk_len=chunk_len,
        chunk_size=chunk_size,
        key_chunk=key_chunk,
        logit_scale=logit_scale,
        dtype=dtype,
    )


def check_layer_controls(page: str) -> LayerConfig:
    """The layer every check runs: variant and its parameters, L, width, heads, seed."""
    variant = controls.variant_select(page, explain=False)
    seq_len = state.slider_int(page, "seq_len", t("common.ctl_seq_len"), 3, 16, 5)
    params = controls.variant_params_controls(page, variant, seq_len)
    d_model, heads = controls.width_controls(page, 8, 2, d_model_options=D_MODEL_OPTIONS)
    seed = state.slider_int(page, "seed", t("common.ctl_seed"), 0, controls.MAX_SEED, 0)
    state.controls_box().caption(t("properties.layer_caption", d_model=d_model, heads=heads))
    return LayerConfig(
        variant=variant,
        params=params,
        seq_len=seq_len,
        d_model=d_model,
        heads=heads,
        pad_len=seq_len,
        seed=seed,
        device=controls.current_device(),
    )


def section_heading(key: str) -> None:
    """A section's name over its controls in the sidebar."""
    state.controls_box().markdown(f"**{t(f'properties.{key}')}**")


def equivariance_controls(page: str, seq_len: int) -> PermChoice:
    """Typed or random permutation (the typed text only for a typed one), and positions."""
    section_heading("eq_header")
    mode = state.radio(
        page,
        "perm_mode",
        t("properties.ctl_perm_mode"),
        PERM_MODES,
        "typed",
        format_func=lambda m: t(f"properties.perm_{m}"),
        horizontal=True,
    )
    positional = state.checkbox(
        page,
        "positional",
        t("properties.ctl_positional"),
        False,
        help=t("properties.ctl_positional_help"),
    )
    if mode != "typed":
        return PermChoice(mode=mode, perm=None, positional=positional)
    raw = state.text(
        page,
        "perm",
        t("properties.ctl_perm"),
        TUTORIAL_PERM,
        PERM_MAX_CHARS,
        help=t("properties.ctl_perm_help", last=seq_len - 1),
    )
    return typed_perm(raw, seq_len, positional)


def typed_perm(raw: str, seq_len: int, positional: bool) -> PermChoice:
    """The typed permutation, read: a well-formed list for another length (e.g. after moving
    L) falls back to a random one with a note; a bad list is an error and runs no check."""
    typed_len = len([part for part in raw.split(",") if part.strip()])
    if typed_len != seq_len and raw.replace(",", "").replace(" ", "").isdigit():
        warning = t("properties.perm_length_mismatch", n=typed_len, L=seq_len)
        return PermChoice(mode="random", perm=None, positional=positional, warning=warning)
    try:
        perm = tuple(state.parse_int_list(raw, 0, seq_len - 1, seq_len))
        if sorted(perm) != list(range(seq_len)):
            raise ValueError(t("properties.perm_not_each_once"))
    except ValueError as err:
        detail = literal(err, DETAIL_MAX_LEN)
        error = t("properties.bad_perm", value=literal(raw), n=seq_len, detail=detail)
        return PermChoice(mode="invalid", perm=None, positional=positional, error=error)
    return PermChoice(mode="typed", perm=perm, positional=positional)


def leak_controls(page: str, seq_len: int) -> int:
    """The cutoff position whose later tokens are changed."""
    section_heading("leak_header")
    return state.slider_int(
        page,
        "cutoff",
        t("properties.ctl_cutoff"),
        0,
        seq_len - 2,
        max(0, seq_len // 2 - 1),
        help=t("properties.ctl_cutoff_help"),
    )


def chunked_controls(page: str) -> tuple[int, int, int]:
    """L of the chunked check, and the query and key chunk sizes."""
    section_heading("chunk_header")
    chunk_len = state.slider_int(page, "chunk_len", t("properties.ctl_chunk_len"), 8, 512, 100)
    chunk_size = state.slider_int(page, "chunk_size", t("common.param_chunk_size"), 1, 128, 16)
    key_chunk = state.slider_int(
        page, "key_chunk_size", t("common.param_key_chunk_size"), 1, 128, 24
    )
    return chunk_len, chunk_size, key_chunk


def softmax_controls(page: str) -> tuple[float, str]:
    """The logits' scale and the dtype of the naive and stable softmax."""
    section_heading("softmax_header")
    logit_scale = state.select(
        page,
        "logit_scale",
        t("properties.ctl_logit_scale"),
        LOGIT_SCALES,
        10000.0,
        format_func=lambda v: f"{v:g}",
    )
    dtype = state.select(page, "dtype", t("properties.ctl_dtype"), SOFTMAX_DTYPES, "float16")
    return logit_scale, dtype


@replayed
def equivariance_section(ctl: PropertiesConfig) -> None:
    """Permutation equivariance: f(Px) = P f(x), with and without a causal mask (the page's
    first picture, so its explanation follows it)."""
    st.header(t("properties.eq_header"), anchor=section_anchor(PAGE, "equivariance"))
    choice, layer = ctl.perm, ctl.layer
    if choice.warning is not None:
        st.warning(choice.warning)
    if choice.error is not None:
        st.error(choice.error)
    if choice.mode == "invalid":
        return
    options = {"perm": choice.perm, "positional": choice.positional}
    try:
        plain = data.equivariance_check(layer, causal=False, **options)
        masked = data.equivariance_check(layer, causal=True, **options)
    except ValueError as err:
        refusals.show_error(err)
        return
    show_with_and_without_mask(
        [
            (t("properties.metric_eq_plain"), t("properties.series_no_mask"), plain),
            (t("properties.metric_eq_causal"), t("properties.series_causal"), masked),
        ],
        "max_abs_diff",
        layer.seq_len,
        t("properties.chart_eq"),
        t("properties.axis_diff"),
        "equivariance",
    )
    presentation.explain(t("properties.eq_intro"))
    st.caption(t("properties.perm_used", perm=", ".join(map(str, plain["perm"]))))
    st.caption(t("properties.eq_note"))


@replayed
def row_sums_section(ctl: LayerConfig) -> None:
    """Every row of weights sums to 1 (or 0 for a query with no key)."""
    st.header(t("properties.rows_header"), anchor=section_anchor(PAGE, "rows"))
    presentation.explain(t("properties.rows_intro"))
    try:
        sums_plain = data.row_sum_table(ctl, causal=False)
        sums_causal = data.row_sum_table(ctl, causal=True)
    except ValueError as err:
        refusals.show_error(err)
    else:
        c1, c2 = st.columns(2)
        for col, table, key in (
            (c1, sums_plain, "metric_rows_plain"),
            (c2, sums_causal, "metric_rows_causal"),
        ):
            low, high = float(table["row_sum"].min()), float(table["row_sum"].max())
            col.metric(
                t(f"properties.{key}"), t("common.metric_row_sums_value", low=low, high=high)
            )
            col.markdown(verdict(max(abs(low - 1.0), abs(high - 1.0))))


@replayed
def leak_section(ctl: PropertiesConfig) -> None:
    """A causal mask never lets a position see a later one."""
    st.header(t("properties.leak_header"), anchor=section_anchor(PAGE, "leak"))
    presentation.explain(t("properties.leak_intro"))
    layer, cutoff = ctl.layer, ctl.cutoff
    try:
        kept = data.causal_leak(layer, cutoff=cutoff, causal=True)
        leaked = data.causal_leak(layer, cutoff=cutoff, causal=False)
    except ValueError as err:
        refusals.show_error(err)
    else:
        show_with_and_without_mask(
            [
                (t("properties.metric_leak_causal"), t("properties.series_causal"), kept),
                (t("properties.metric_leak_plain"), t("properties.series_no_mask"), leaked),
            ],
            "past_max_abs_diff",
            layer.seq_len,
            t("properties.chart_leak", cutoff=cutoff),
            t("properties.axis_change"),
            "leak",
        )


@replayed
def chunked_section(ctl: PropertiesConfig) -> None:
    """Chunked attention equals exact attention."""
    st.header(t("properties.chunk_header"), anchor=section_anchor(PAGE, "chunk"))
    presentation.explain(t("properties.chunk_intro"))
    chunk_len, chunk_size, key_chunk = ctl.chunk_len, ctl.chunk_size, ctl.key_chunk
    try:
        exact_plain = data.chunked_exact_diff(
            chunk_len, 16, 2, chunk_size, key_chunk, causal=False, seed=ctl.layer.seed
        )
        exact_causal = data.chunked_exact_diff(
            chunk_len, 16, 2, chunk_size, key_chunk, causal=True, seed=ctl.layer.seed
        )
    except ValueError as err:
        refusals.show_error(err)
    else:
        c1, c2 = st.columns(2)
        with c1:
            st.metric(t("properties.metric_chunk_plain"), plain_number(exact_plain))
            st.markdown(verdict(exact_plain))
        with c2:
            st.metric(t("properties.metric_chunk_causal"), plain_number(exact_causal))
            st.markdown(verdict(exact_causal))


@replayed
def softmax_section(ctl: PropertiesConfig) -> None:
    """A naive float16 softmax overflows; the stable one does not."""
    st.header(t("properties.softmax_header"), anchor=section_anchor(PAGE, "softmax"))
    presentation.explain(t("properties.softmax_intro"))
    try:
        stability = data.softmax_stability(ctl.logit_scale, ctl.dtype, ctl.layer.seed)
    except ValueError as err:
        refusals.show_error(err)
    else:
        shown = stability.assign(
            method=[t(f"properties.method_{m}") for m in stability["method"]],
            all_finite=[
                t("properties.yes") if f else t("properties.no") for f in stability["all_finite"]
            ],
            max_abs_err=[plain_number(e) for e in stability["max_abs_err"]],
        )[["method", "n_nan", "n_inf", "all_finite", "max_abs_err"]].rename(
            columns={
                "method": t("properties.col_method"),
                "n_nan": "NaN",
                "n_inf": "inf",
                "all_finite": t("properties.col_finite"),
                "max_abs_err": t("properties.col_err"),
            }
        )
        st.dataframe(shown, hide_index=True, width="stretch")
        naive_ok = bool(stability.loc[stability["method"] == "naive", "all_finite"].iloc[0])
        stable_ok = bool(stability.loc[stability["method"] == "stable", "all_finite"].iloc[0])
        st.markdown(
            t("properties.softmax_naive_ok" if naive_ok else "properties.softmax_naive_bad")
            + " "
            + t("properties.softmax_stable_ok" if stable_ok else "properties.softmax_stable_bad")
        )


def render(ctl: PropertiesConfig) -> None:
    """The five checks, each with and without the mask that should break it (each section
    drawn once per values and language, then replayed: :mod:`dashboard.replay`)."""
    equivariance_section(ctl)
    row_sums_section(ctl.layer)
    leak_section(ctl)
    chunked_section(ctl)
    softmax_section(ctl)


controls.page_intro(PAGE)
ctl = properties_controls(PAGE)
render(ctl)
