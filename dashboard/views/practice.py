"""In practice: the tutorial's stability and memory strategies, with live numbers."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from dashboard import charts, controls, data, presentation, refusals, state
from dashboard.i18n import t
from dashboard.numbers import plain_number
from dashboard.replay import replayed

PAGE = "practice"
D_MODEL_OPTIONS = (32, 64, 128, 256)
MEMORY_LENGTHS = (512, 1024, 2048, 4096, 8192, 16384)
MEASURED_LENGTHS = (256, 512, 1024)
MEMORY_HEADS = 8
MEMORY_HEAD_DIM = 64
CHUNK_SIZES = (32, 64, 128, 256, 512)
CHECKPOINT_LENGTHS = (512, 1024, 2048, 4096, 8192)
CLIP_MAX_NORM = 1.0
CLIP_EMBED_DIM = 64
CLIP_SEQ_LEN = 8
SWEEP_DTYPES = ("float16", "bfloat16", "float32")
MIB = 2**20


@dataclass(frozen=True)
class PracticeConfig:
    """The live numbers' settings: a layer (L, width, heads, seed) for the precision check,
    the chunk size of the memory comparison, and the checkpointing example's depth and L."""

    seq_len: int
    d_model: int
    heads: int
    seed: int
    chunk_size: int
    layers: int
    ckpt_len: int


def practice_controls(page: str) -> PracticeConfig:
    """The sidebar: layer sizes, seed, chunk size and the checkpointing example."""
    seq_len = state.slider_int(page, "seq_len", t("common.ctl_seq_len"), 8, 512, 128)
    d_model, heads = controls.width_controls(page, 64, 4, d_model_options=D_MODEL_OPTIONS)
    seed = state.slider_int(page, "seed", t("common.ctl_seed"), 0, controls.MAX_SEED, 0)
    return PracticeConfig(
        seq_len=seq_len,
        d_model=d_model,
        heads=heads,
        seed=seed,
        chunk_size=state.select(page, "chunk_size", t("common.param_chunk_size"), CHUNK_SIZES, 256),
        layers=state.slider_int(page, "layers", t("practice.ctl_layers"), 1, 48, 12),
        ckpt_len=state.select(
            page, "ckpt_len", t("practice.ctl_ckpt_len"), CHECKPOINT_LENGTHS, 2048
        ),
    )


def topic(key: str) -> None:
    """One topic's title and explanation (``practice.<key>_title``, ``practice.<key>_body``)."""
    st.subheader(t(f"practice.{key}_title"))
    st.markdown(t(f"practice.{key}_body"))


def naive_series(dtype: str) -> str:
    """The translated legend name of the naive softmax's curve in ``dtype``."""
    return t("practice.series_method", method=t("practice.method_naive"), dtype=dtype)


def overflow_chart(ctl: PracticeConfig) -> None:
    """The max trick: the share of non-finite weights of the naive softmax against the logit
    scale, one curve per dtype (bfloat16 dashed, on top of float32's)."""
    topic("s_max")
    try:
        sweep = data.softmax_sweep(SWEEP_DTYPES, ctl.seed)
    except ValueError as err:
        refusals.show_error(err)
    else:
        sweep = sweep.assign(
            series=[
                t("practice.series_method", method=t(f"practice.method_{m}"), dtype=d)
                for m, d in zip(sweep["method"], sweep["dtype"], strict=True)
            ]
        )
        naive = sweep[sweep["method"] == "naive"]
        stable_ok = bool((sweep[sweep["method"] == "stable"]["nonfinite_fraction"] == 0).all())
        presentation.show_chart(
            st,
            charts.layered_line_chart(
                naive,
                x="logit_scale",
                y="nonfinite_fraction",
                color="series",
                title=t("practice.chart_overflow"),
                x_title=t("practice.axis_logit"),
                y_title=t("practice.axis_nonfinite"),
                color_title=t("practice.axis_method"),
                dashed=[naive_series("bfloat16")],
                log_x=True,
                height=300,
            ),
            theme=None,
            width="stretch",
        )
        st.caption(
            t("practice.overflow_caption_ok" if stable_ok else "practice.overflow_caption_bad")
            + " "
            + t("practice.overflow_bfloat16")
        )


@replayed
def stability_section(ctl: PracticeConfig) -> None:
    """Numerical stability: the max trick, scaling, clipping, and the other practices."""
    st.header(t("practice.stability_header"))

    overflow_chart(ctl)

    st.subheader(t("practice.s_scale_title"))
    try:
        scale_row = data.scaling_table((64,), 10, ctl.seed, 100).iloc[0]
    except ValueError as err:
        refusals.show_error(err)
    else:
        st.markdown(
            t(
                "practice.s_scale_body",
                std=f"{scale_row['std_unscaled']:.2f}",
                std_scaled=f"{scale_row['std_scaled']:.2f}",
                max_w=f"{scale_row['max_weight_unscaled']:.2f}",
                max_w_scaled=f"{scale_row['max_weight_scaled']:.2f}",
            )
        )

    st.subheader(t("practice.s_clip_title"))
    try:
        grads = data.gradient_by_variant(
            ("scaled",), CLIP_EMBED_DIM, CLIP_SEQ_LEN, "randn", ctl.seed
        )
    except (ValueError, RuntimeError) as err:
        refusals.show_error(err)
    else:
        weights_only = grads[(grads["scaling"] == "unscaled") & (grads["tensor"] != "input")]
        total = math.sqrt(float((weights_only["grad_norm"] ** 2).sum()))
        factor = min(1.0, CLIP_MAX_NORM / total) if total > 0 else 1.0
        st.markdown(
            t(
                "practice.s_clip_body",
                total=f"{total:.3g}",
                max_norm=f"{CLIP_MAX_NORM:g}",
                factor=f"{factor:.3g}",
                d=CLIP_EMBED_DIM,
            )
        )

    for key in ("s_norm", "s_residual", "s_init"):
        topic(key)


def memory_section(ctl: PracticeConfig) -> None:
    """Memory: chunking, precision, checkpointing, and the strategies without a live number."""
    st.header(t("practice.memory_header"))
    chunk_estimates(ctl)
    chunk_measured(ctl)
    precision_metrics(ctl)
    checkpoint_metrics(ctl)
    for key in ("m_sparse", "m_shard", "m_batch"):
        topic(key)


@replayed
def chunk_estimates(ctl: PracticeConfig) -> None:
    """Chunking: the estimated memory of full weights against chunks, against L."""
    topic("m_chunk")
    try:
        estimates = data.chunk_memory_estimates(
            MEMORY_LENGTHS, MEMORY_HEADS, MEMORY_HEAD_DIM, ctl.chunk_size
        )
    except ValueError as err:
        refusals.show_error(err)
    else:
        estimates = estimates.assign(
            mib=estimates["estimated_bytes"] / MIB,
            series=[t(f"practice.strategy_{s.replace(' ', '_')}") for s in estimates["strategy"]],
        )
        presentation.show_chart(
            st,
            charts.layered_line_chart(
                estimates,
                x="L",
                y="mib",
                color="series",
                title=t("practice.chart_memory", heads=MEMORY_HEADS, head_dim=MEMORY_HEAD_DIM),
                x_title=t("practice.axis_l"),
                y_title=t("practice.axis_mib"),
                color_title=t("practice.axis_strategy"),
                dashed=[t("practice.strategy_fused")],
                log_x=True,
                log_y=True,
                height=320,
            ),
            theme=None,
            width="stretch",
        )
        longest = estimates[estimates["L"] == MEMORY_LENGTHS[-1]].set_index("strategy")["mib"]
        st.caption(
            t(
                "practice.memory_caption",
                L=MEMORY_LENGTHS[-1],
                full=f"{longest['full weights']:.0f}",
                chunked=f"{longest['chunked']:.0f}",
            )
        )


def chunk_measured(ctl: PracticeConfig) -> None:
    """Chunking, measured: the peak memory of full and chunked attention at a few L."""
    with st.spinner(t("practice.measuring")):
        try:
            measured = data.chunk_memory_measured(
                MEASURED_LENGTHS, MEMORY_HEADS // 2, MEMORY_HEAD_DIM, ctl.chunk_size
            )
        except (ValueError, RuntimeError) as err:
            refusals.show_error(err)
            measured = None
    if measured is not None:
        ok = measured[measured["status"] == "ok"]
        pivot = ok.pivot_table(index="L", columns="variant", values="peak_bytes_measured") / MIB
        table = pd.DataFrame(
            {
                "L": pivot.index,
                t("practice.col_full_measured"): pivot.get("stable"),
                t("practice.col_chunked_measured"): pivot.get("chunked"),
            }
        )
        st.dataframe(table.round(2), hide_index=True, width="stretch")
        method = ok["memory_method"].iloc[0] if len(ok) else ""
        st.caption(
            t(
                "practice.measured_caption",
                heads=MEMORY_HEADS // 2,
                head_dim=MEMORY_HEAD_DIM,
                chunk=ctl.chunk_size,
                method=refusals.memory_method_text(method),
            )
        )


@replayed
def precision_metrics(ctl: PracticeConfig) -> None:
    """Precision: each half type's largest difference from float32 on the page's layer."""
    topic("m_precision")
    try:
        precision = data.precision_table(ctl.seq_len, ctl.d_model, ctl.heads, ctl.seed)
    except ValueError as err:
        refusals.show_error(err)
    else:
        cols = st.columns(len(precision))
        for col, (_, row) in zip(cols, precision.iterrows(), strict=True):
            col.metric(
                t("practice.metric_precision", dtype=row["dtype"]),
                plain_number(row["max_abs_diff_vs_fp32"]),
                help=t(
                    "practice.metric_precision_help",
                    bits=int(row["bits"]),
                    nbytes=int(row["bytes_per_element"]),
                    rel=plain_number(row["max_rel_diff_vs_fp32"]),
                ),
            )
        st.caption(
            t(
                "practice.precision_caption",
                seq_len=ctl.seq_len,
                d_model=ctl.d_model,
                heads=ctl.heads,
            )
        )


@replayed
def checkpoint_metrics(ctl: PracticeConfig) -> None:
    """Checkpointing: the activations stored with and without it."""
    topic("m_ckpt")
    try:
        ckpt = data.checkpoint_table(
            ctl.layers, MEMORY_HEADS, ctl.ckpt_len, MEMORY_HEADS * MEMORY_HEAD_DIM
        )
    except ValueError as err:
        refusals.show_error(err)
    else:
        stored = ckpt.set_index("strategy")["stored_bytes"]
        c1, c2 = st.columns(2)
        c1.metric(t("practice.metric_store_all"), data.describe_bytes(int(stored["store all"])))
        c2.metric(
            t("practice.metric_checkpoint"),
            data.describe_bytes(int(stored["checkpoint"])),
            delta=t(
                "common.delta_vs",
                delta=f"{stored['checkpoint'] / stored['store all'] - 1:+.0%}",
                reference=t("practice.delta_ref_store_all"),
            ),
            delta_color="inverse",
        )
        st.caption(
            t(
                "practice.ckpt_caption",
                layers=ctl.layers,
                L=ctl.ckpt_len,
                heads=MEMORY_HEADS,
                d_model=MEMORY_HEADS * MEMORY_HEAD_DIM,
            )
        )


def render(ctl: PracticeConfig) -> None:
    """The stability practices, then the memory strategies, each with live numbers."""
    stability_section(ctl)
    memory_section(ctl)


controls.page_intro(PAGE)
ctl = practice_controls(PAGE)
render(ctl)
