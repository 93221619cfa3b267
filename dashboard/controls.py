"""Widget groups that return frozen dataclasses of plain values.

Every widget goes through :mod:`dashboard.state`, so its value lives in the URL under
``"<page>.<name>"``. Variant parameters are built from the registry entry (via
:func:`dashboard.data.variant_catalogue`) under ``"<page>.<variant>.<param>"``, so a new
variant appears here without UI code.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from dashboard import data, state
from dashboard.i18n import t

DEVICE_KEY = "device"
_DEVICE_STATE = "_app.device"
D_MODEL_OPTIONS = (8, 16, 32, 48, 64, 96, 128, 256, 384, 512, 768)
MAX_HEADS = 16
MAX_SEED = 10_000
MAX_DROPOUT = 0.9
DROPOUT_STEP = 0.05
SENTENCE_MAX_CHARS = 200
DEFAULT_SENTENCE = "the cat sat on the mat because it was comfortable"


@dataclass(frozen=True)
class AttentionControls:
    """Everything that defines one multi-head self-attention computation.

    Attributes:
        variant: registry name.
        params: the variant's ``(name, value)`` pairs, in registry order.
        seq_len: L for random input (sentences use their own length).
        d_model, heads: model width and number of heads (heads divides d_model).
        mask_kind: ``"none"``, ``"causal"`` or ``"padding"``; pad_len: real tokens for padding.
        dropout: dropout probability on the weights (0 when unsupported).
        seed: seeds input, projections and dropout.
        input_kind: one of :data:`dashboard.data.INPUT_KINDS`; sentence: typed text.
        device: device name chosen in the sidebar.
    """

    variant: str
    params: tuple[tuple[str, int | float | bool], ...]
    seq_len: int
    d_model: int
    heads: int
    mask_kind: str
    pad_len: int
    dropout: float
    seed: int
    input_kind: str
    sentence: str
    device: str

    @property
    def d_k(self) -> int:
        """Per-head width d_model / heads."""
        return self.d_model // self.heads

    def as_args(self) -> dict[str, object]:
        """Keyword arguments for :func:`dashboard.data.attention_run`."""
        return {
            "variant": self.variant,
            "params": self.params,
            "seq_len": self.seq_len,
            "d_model": self.d_model,
            "heads": self.heads,
            "mask_kind": self.mask_kind,
            "pad_len": self.pad_len,
            "dropout": self.dropout,
            "seed": self.seed,
            "input_kind": self.input_kind,
            "sentence": self.sentence,
            "device": self.device,
        }


def translated(key: str, fallback: str) -> str:
    """Return ``t(key)`` when the key exists in the current language, else ``fallback``."""
    try:
        return t(key)
    except KeyError:
        return fallback


def variant_label(name: str) -> str:
    """Translated label of a variant (the registry's English label when untranslated)."""
    catalogue = data.variant_catalogue()
    fallback = catalogue[name].label if name in catalogue else name
    return translated(f"common.variant_{name}", fallback)


def param_label(name: str) -> str:
    """Translated label of a variant parameter (its name when untranslated)."""
    return translated(f"common.param_{name}", name.replace("_", " "))


def page_intro(namespace: str) -> None:
    """Draw a page's title, explainer and "what to look for" note.

    Uses the keys ``<namespace>.title``, ``<namespace>.intro`` and ``<namespace>.look_for``.
    """
    st.title(t(f"{namespace}.title"))
    st.markdown(t(f"{namespace}.intro"))
    with st.expander(t("common.what_to_look_for"), expanded=True):
        st.markdown(t(f"{namespace}.look_for"))


def show_compute_error(err: ValueError) -> None:
    """Show a refused computation as st.error: over budget (with what to lower) or invalid."""
    if type(err).__name__ == "MemoryBudgetError":
        st.error(t("common.error_budget", detail=str(err)) + " " + t("common.error_budget_lower"))
    else:
        st.error(t("common.error_invalid", detail=str(err)))


def pooled_note(heatmap: data.Heatmap) -> str | None:
    """The chart subtitle "pooled to r×c" for a pooled heatmap, else ``None``."""
    if not heatmap.pooled:
        return None
    return t("common.chart_pooled", rows=heatmap.shape[0], cols=heatmap.shape[1])


def head_grid_args(grid: data.Heatmap, title: str, columns: int) -> dict:
    """Keyword arguments of :func:`dashboard.charts.heatmap_canvas_spec` (and of
    ``heatmap_chart``, for the export) for a per-head weight grid with raw-score tooltips:
    translated titles, the pooled note, and one colour scale from 0 to the largest weight
    shown, shared by every head.

    Args:
        grid: the heads' :func:`dashboard.data.heatmap_frame`, with scores and panels.
        title: the chart title; columns: panels per row.
    """
    return {
        "title": title,
        "subtitle": pooled_note(grid),
        "x_title": t("common.chart_key"),
        "y_title": t("common.chart_query"),
        "value_title": t("common.chart_weight"),
        "score_title": t("common.chart_score"),
        "panel_title": t("common.chart_head"),
        "row_order": grid.row_order,
        "col_order": grid.col_order,
        "domain": (0.0, float(grid.frame["value"].max()) or 1.0),
        "columns": columns,
    }


def device_controls() -> str:
    """Sidebar device line: a selectbox (URL key ``device``) when several devices exist.

    Returns:
        The device name in use; also stored for :func:`current_device`.
    """
    default, available = data.device_options()
    if len(available) > 1:
        device = state.select(
            "",
            DEVICE_KEY,
            t("common.device_label"),
            list(available),
            default,
            help=t("common.device_help"),
        )
    else:
        device = default
    st.sidebar.caption(f"{t('common.metric_device')}: **{device}**")
    st.session_state[_DEVICE_STATE] = device
    return device


def current_device() -> str:
    """The device chosen in the sidebar this run (``"auto"`` before the sidebar is drawn)."""
    return st.session_state.get(_DEVICE_STATE, "auto")


def head_options(d_model: int) -> list[int]:
    """Numbers of heads (up to 16) that divide ``d_model``."""
    return [h for h in range(1, MAX_HEADS + 1) if d_model % h == 0]


def variant_params_controls(page: str, variant: str, seq_len: int) -> tuple:
    """Sliders/checkboxes for a variant's own parameters, built from its registry entry.

    Widget keys are ``"<page>.<variant>.<param>"``. Integer sliders stop at
    ``max(default, seq_len, 16)`` (capped by the parameter's own high) so they stay usable.

    Returns:
        The ``(name, value)`` pairs in registry order.
    """
    info = data.variant_catalogue()[variant]
    if not info.params:
        return ()
    st.sidebar.markdown(f"**{t('common.ctl_params_header', variant=variant_label(variant))}**")
    values = []
    for p in info.params:
        name = f"{variant}.{p.name}"
        label = param_label(p.name)
        if p.kind == "bool":
            value = state.checkbox(page, name, label, bool(p.default), help=p.help or None)
        elif p.kind == "int":
            high = int(min(p.high, max(p.default, seq_len, 16, p.low + 1)))
            value = state.slider_int(
                page, name, label, int(p.low), high, int(p.default), int(p.step), p.help or None
            )
        else:
            value = state.slider_float(
                page,
                name,
                label,
                float(p.low),
                float(p.high),
                float(p.default),
                float(p.step),
                p.help or None,
            )
        values.append((p.name, value))
    return tuple(values)


def input_controls(page: str, default_kind: str = "random") -> tuple[str, str]:
    """Input choice: random vectors, a preset sentence or a typed sentence.

    Returns:
        ``(input_kind, sentence)``; sentence is the typed text (empty unless ``"typed"``).
    """
    kind = state.select(
        page,
        "input",
        t("common.ctl_input"),
        data.INPUT_KINDS,
        default_kind,
        format_func=lambda k: t(f"common.input_{k}"),
    )
    sentence = ""
    if kind == "typed":
        sentence = state.text(
            page,
            "sentence",
            t("common.ctl_sentence"),
            DEFAULT_SENTENCE,
            SENTENCE_MAX_CHARS,
            help=t("common.ctl_sentence_help"),
        )
        tokens = data.tokens_for(sentence)
        if not data.has_words(tokens):
            st.warning(t("common.sentence_empty"))
        elif len(tokens) > data.MAX_SENTENCE_TOKENS:
            st.info(t("common.sentence_truncated", n=data.MAX_SENTENCE_TOKENS))
    return kind, sentence


def attention_controls(
    page: str,
    default_variant: str = "scaled",
    default_seq_len: int = 16,
    default_d_model: int = 64,
    default_heads: int = 4,
    max_seq_len: int = data.MAX_SEQ_LEN,
) -> AttentionControls:
    """The full set of sidebar controls for one multi-head attention computation.

    Args:
        page: page name (key prefix).
        default_variant, default_seq_len, default_d_model, default_heads: defaults.
        max_seq_len: the largest L offered.

    Returns:
        An :class:`AttentionControls`.
    """
    catalogue = data.variant_catalogue()
    variant = state.select(
        page,
        "variant",
        t("common.ctl_variant"),
        list(catalogue),
        default_variant,
        format_func=variant_label,
    )
    st.sidebar.caption(
        translated(f"common.variant_{variant}_explain", catalogue[variant].explanation)
    )
    input_kind, sentence = input_controls(page)
    if input_kind == "random":
        seq_len = state.slider_int(
            page, "seq_len", t("common.ctl_seq_len"), 4, max_seq_len, default_seq_len
        )
    else:
        seq_len = len(data.input_tokens(input_kind, sentence, default_seq_len))
        st.sidebar.caption(f"{t('common.metric_seq_len')}: {seq_len}")
    params = variant_params_controls(page, variant, seq_len)
    d_model = state.select(
        page, "d_model", t("common.ctl_d_model"), D_MODEL_OPTIONS, default_d_model
    )
    heads = state.select(
        page,
        "heads",
        t("common.ctl_heads"),
        head_options(d_model),
        default_heads,
        help=t("common.ctl_heads_help"),
    )
    st.sidebar.caption(t("common.ctl_d_k", d_k=d_model // heads))
    mask_kind = state.select(
        page,
        "mask",
        t("common.ctl_mask"),
        data.MASK_KINDS,
        "none",
        format_func=lambda k: t(f"common.mask_{k}"),
    )
    pad_len = seq_len
    if mask_kind == "padding" and seq_len > 1:
        pad_len = state.slider_int(
            page, "pad_len", t("common.ctl_pad_len"), 1, seq_len, max(1, (3 * seq_len) // 4)
        )
    dropout = 0.0
    if catalogue[variant].supports_dropout:
        dropout = state.slider_float(
            page, "dropout", t("common.ctl_dropout"), 0.0, MAX_DROPOUT, 0.0, DROPOUT_STEP
        )
    else:
        st.sidebar.caption(t("common.ctl_dropout_unsupported"))
    seed = state.slider_int(page, "seed", t("common.ctl_seed"), 0, MAX_SEED, 0)
    return AttentionControls(
        variant=variant,
        params=params,
        seq_len=seq_len,
        d_model=d_model,
        heads=heads,
        mask_kind=mask_kind,
        pad_len=pad_len,
        dropout=dropout,
        seed=seed,
        input_kind=input_kind,
        sentence=sentence,
        device=current_device(),
    )
