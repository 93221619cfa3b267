"""Widget groups shared by the pages; each returns a frozen config of plain values.

Every widget goes through :mod:`dashboard.state`, so its value lives in the URL under
``"<page>.<name>"``. Variant parameters are built from the registry's own
:class:`~attention_core.VariantSpec` (via :func:`dashboard.data.variant_catalogue`) under
``"<page>.<variant>.<param>"``, so a new variant appears here without UI code.

The groups:

* :func:`layer_controls` — one multi-head layer run: variant, input, sizes, mask, dropout,
  seed → a :class:`~dashboard.config.LayerConfig`;
* :func:`variant_controls` (:func:`variant_select` + :func:`variant_params_controls`) — a
  variant and its own parameters → a :class:`VariantChoice`;
* :func:`input_controls` — random vectors, a preset or a typed sentence → an
  :class:`InputChoice`;

The real-model pages' own choices (which model, which text) are in
:mod:`dashboard.model_choices`. Also here: the page header (:func:`page_intro`) and variant
and parameter labels and tooltips; a refused computation is shown by
:func:`dashboard.refusals.show_error`. The
heatmap looks the pages share (``weights_spec``, ``head_grid_spec``, ``pooled_note``) are
in :mod:`dashboard.charts.specs`.

Importing this module imports neither torch, the library nor Altair (each is imported by
the function that needs it), so a page that needs no tensor can draw its header with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import streamlit as st

from dashboard import data, presentation, state
from dashboard.config import LayerConfig, ParamPairs
from dashboard.i18n import t
from dashboard.model_choices import runs_own_model

if TYPE_CHECKING:
    from streamlit.delta_generator import DeltaGenerator

    from attention_core import Param
DEVICE_KEY = "device"
_DEVICE_STATE = "_app.device"
_DEVICE_BOX = "_app.device_box"
D_MODEL_OPTIONS = (8, 16, 32, 48, 64, 96, 128, 256, 384, 512, 768)
MAX_HEADS = 16
MAX_SEED = 10_000
MAX_DROPOUT = 0.9
DROPOUT_STEP = 0.05
SENTENCE_MAX_CHARS = 200
DEFAULT_SENTENCE = "the cat sat on the mat because it was comfortable"
TUTORIAL_INPUT = "preset_zh"  # the tutorial's own sentence: 那只猫坐在垫子上…
MIN_LAYER_LEN = 4
STRUCTURED = "identity"  # a fresh page's query and key projections: a map with structure
DEFAULT_LAYER = LayerConfig(projections=STRUCTURED)


@dataclass(frozen=True)
class VariantChoice:
    """A variant and its own parameters, as chosen in the sidebar.

    Attributes:
        variant: registry name. params: its ``(name, value)`` pairs in registry order.
    """

    variant: str
    params: ParamPairs = ()


@dataclass(frozen=True)
class InputChoice:
    """What goes into a layer: ``input_kind`` (one of :data:`dashboard.data.INPUT_KINDS`) and
    the typed ``sentence`` (empty unless ``input_kind == "typed"``)."""

    input_kind: str
    sentence: str = ""


# ---------------------------------------------------------------- labels and page parts


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


def variant_explanation(name: str) -> str:
    """Translated one-line explanation of a variant (the registry's English one when
    untranslated)."""
    catalogue = data.variant_catalogue()
    fallback = catalogue[name].explanation if name in catalogue else ""
    return translated(f"common.variant_{name}_explain", fallback)


def param_label(name: str) -> str:
    """Translated label of a variant parameter (its name when untranslated)."""
    return translated(f"common.param_{name}", name.replace("_", " "))


def param_help(variant: str, param: Param) -> str | None:
    """Translated tooltip of a variant's parameter: ``common.param_<variant>_<name>_help``
    where the locale has it (Chinese), else the registry's English ``param.help`` (English,
    and any variant registered at run time); ``None`` when there is none."""
    return translated(f"common.param_{variant}_{param.name}_help", param.help) or None


def page_intro(namespace: str) -> None:
    """Draw a page's title and its purpose in a line or two: the picture comes next, the
    longer explanation after it (:func:`page_notes`).

    Uses the keys ``<namespace>.title`` and ``<namespace>.purpose``, or their ``_own`` forms
    when the page runs one of the server's own models (:func:`runs_own_model`).
    """
    suffix = _own_suffix(namespace)
    st.title(t(f"{namespace}.title{suffix}"))
    st.markdown(t(f"{namespace}.purpose{suffix}"))
    presentation.controls_here()  # the presentation view's box for the page's controls


def page_notes(namespace: str) -> None:
    """Draw what follows a page's pictures, folded: "What to look for" asks its questions
    (the answers behind one more click), "About this page" holds the full explanation and
    "Glossary" the words a learner may not know (logits, softmax, entropy, nats,
    perplexity, Spearman, KV cache, RoPE).

    Uses ``<namespace>.look_for``, ``.look_for_answers`` and ``.intro`` (``_own`` forms as
    :func:`page_intro`).
    """
    suffix = _own_suffix(namespace)
    with st.expander(t("common.what_to_look_for"), expanded=False):
        st.markdown(t(f"{namespace}.look_for{suffix}"))
        with st.popover(t("common.show_answers")):
            st.markdown(t(f"{namespace}.look_for_answers{suffix}"))
    with st.expander(t("common.about_this_page"), expanded=False):
        st.markdown(t(f"{namespace}.intro{suffix}"))
    with st.expander(t("common.glossary_title"), expanded=False):
        st.markdown(t("common.glossary"))


def _own_suffix(namespace: str) -> str:
    """``"_own"`` when the page runs one of the server's own models, else ``""``."""
    return "_own" if runs_own_model(namespace) else ""


# ---------------------------------------------------------------- device


def device_controls(where: DeltaGenerator | None = None) -> str:
    """Sidebar device line: a selectbox (URL key ``device``) when several devices exist.

    Args:
        where: the container to draw in (default: the sidebar).

    Returns:
        The device name in use; also stored for :func:`current_device`.
    """
    where = st.sidebar if where is None else where
    default, available = data.device_options()
    if len(available) > 1:
        device = state.select(
            "",
            DEVICE_KEY,
            t("common.device_label"),
            list(available),
            default,
            help=t("common.device_help"),
            where=where,
        )
    else:
        device = default
    where.caption(f"{t('common.metric_device')}: **{device}**")
    st.session_state[_DEVICE_STATE] = device
    return device


def reserve_device_line() -> None:
    """Keep the device line's place in the sidebar for this run (``dashboard/app.py`` calls
    it under the language switch): listing the devices imports torch, so the line is drawn
    there by the run's first :func:`current_device` call (or by the app after the page),
    and the page's title and explainer go out before torch's import."""
    st.session_state[_DEVICE_BOX] = st.sidebar.container()


def current_device() -> str:
    """The device chosen in the sidebar this run; draws the device line into its reserved
    place on the run's first call (``"auto"`` when no place was reserved and none drawn)."""
    box = st.session_state.pop(_DEVICE_BOX, None)
    if box is not None:
        return device_controls(box)
    return st.session_state.get(_DEVICE_STATE, "auto")


# ---------------------------------------------------------------- variant, input, layer


def head_options(d_model: int) -> list[int]:
    """Numbers of heads (up to 16) that divide ``d_model``."""
    return [h for h in range(1, MAX_HEADS + 1) if d_model % h == 0]


def variant_select(
    page: str, default: str = "scaled", *, explain: bool = True, label: str | None = None
) -> str:
    """The variant selectbox (URL key ``"<page>.variant"``), with its explanation below.

    Args:
        page: key prefix. default: the variant a fresh page shows.
        explain: draw the variant's one-line explanation under the box.
        label: the box's label (default "Variant", translated).

    Returns:
        The registry name chosen.
    """
    variant = state.select(
        page,
        "variant",
        label or t("common.ctl_variant"),
        list(data.variant_catalogue()),
        default,
        format_func=variant_label,
    )
    if explain:
        state.controls_box().caption(variant_explanation(variant))
    return variant


def variant_params_controls(page: str, variant: str, seq_len: int) -> ParamPairs:
    """Sliders/checkboxes for a variant's own parameters, built from its registry entry.

    Widget keys are ``"<page>.<variant>.<param>"``. Integer sliders stop at
    ``max(default, seq_len, 16)`` (capped by the parameter's own high) so they stay usable.

    Returns:
        The ``(name, value)`` pairs in registry order.
    """
    info = data.variant_catalogue()[variant]
    if not info.params:
        return ()
    state.controls_box().markdown(
        f"**{t('common.ctl_params_header', variant=variant_label(variant))}**"
    )
    values = []
    for p in info.params:
        name = f"{variant}.{p.name}"
        label = param_label(p.name)
        hint = param_help(variant, p)
        if p.kind == "bool":
            value = state.checkbox(page, name, label, bool(p.default), help=hint)
        elif p.kind == "int":
            high = int(min(p.high, max(p.default, seq_len, 16, p.low + 1)))
            value = state.slider_int(
                page, name, label, int(p.low), high, int(p.default), step=int(p.step), help=hint
            )
        else:
            value = state.float_input(
                page,
                name,
                label,
                float(p.low),
                float(p.high),
                float(p.default),
                step=float(p.step),
                help=hint,
            )
        values.append((p.name, value))
    return tuple(values)


def variant_controls(
    page: str, seq_len: int, default: str = "scaled", *, label: str | None = None
) -> VariantChoice:
    """A variant, its explanation and its own parameters (sized for ``seq_len`` tokens)."""
    variant = variant_select(page, default, label=label)
    return VariantChoice(variant, variant_params_controls(page, variant, seq_len))


def input_controls(page: str, default_kind: str = TUTORIAL_INPUT) -> InputChoice:
    """Input choice: the tutorial's sentence by default, random vectors or a typed sentence
    one choice away (with a warning when the typed text has no word, a note when it is cut).

    A link that sets the random input's length (``<page>.seq_len``) and names no input opens
    random vectors, as it did when they were the default.
    """
    if f"{page}.seq_len" in st.query_params and f"{page}.input" not in st.query_params:
        default_kind = "random"
    kind = state.select(
        page,
        "input",
        t("common.ctl_input"),
        data.INPUT_KINDS,
        default_kind,
        format_func=lambda k: t(f"common.input_{k}"),
    )
    if kind != "typed":
        return InputChoice(kind)
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
    return InputChoice(kind, sentence)


def input_length_controls(
    page: str, default_len: int, max_len: int, *, min_len: int = MIN_LAYER_LEN
) -> tuple[InputChoice, int]:
    """The input (:func:`input_controls`) and its length: a slider for random vectors, the
    sentence's own token count (shown as a caption) otherwise.

    Returns:
        ``(input choice, L)``.
    """
    source = input_controls(page)
    if source.input_kind == "random":
        seq_len = state.slider_int(
            page, "seq_len", t("common.ctl_seq_len"), min_len, max_len, default_len
        )
    else:
        seq_len = len(data.input_tokens(source.input_kind, source.sentence, default_len))
        state.controls_box().caption(f"{t('common.metric_seq_len')}: {seq_len}")
    return source, seq_len


def width_controls(
    page: str,
    default_d_model: int,
    default_heads: int,
    *,
    d_model_options: tuple[int, ...] = D_MODEL_OPTIONS,
) -> tuple[int, int]:
    """The model width d_model and the number of heads (only those that divide it).

    Returns:
        ``(d_model, heads)``.
    """
    d_model = state.select(
        page, "d_model", t("common.ctl_d_model"), d_model_options, default_d_model
    )
    heads = state.select(
        page,
        "heads",
        t("common.ctl_heads"),
        head_options(d_model),
        default_heads,
        help=t("common.ctl_heads_help"),
    )
    return d_model, heads


def projection_controls(page: str, default: str = STRUCTURED) -> str:
    """The query and key projections: the identity (each head compares its own slice of the
    token vectors: a map with structure) or seeded random ones (an untrained layer's nearly
    even map), one choice away."""
    return state.select(
        page,
        "qk",
        t("common.ctl_qk"),
        data.PROJECTIONS,
        default,
        format_func=lambda k: t(f"common.qk_{k}"),
        help=t("common.ctl_qk_help"),
    )


def _mask_controls(page: str, seq_len: int) -> tuple[str, int]:
    """The mask kind and, for padding, how many tokens are real."""
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
    return mask_kind, pad_len


def _dropout_control(page: str, variant: str) -> float:
    """The dropout slider, or a note when the variant takes none (then 0)."""
    if data.variant_catalogue()[variant].supports_dropout:
        return state.float_input(
            page, "dropout", t("common.ctl_dropout"), 0.0, MAX_DROPOUT, 0.0, step=DROPOUT_STEP
        )
    state.controls_box().caption(t("common.ctl_dropout_unsupported"))
    return 0.0


def layer_controls(
    page: str, defaults: LayerConfig = DEFAULT_LAYER, *, max_seq_len: int | None = None
) -> LayerConfig:
    """The full set of sidebar controls for one multi-head attention computation.

    Args:
        page: page name (key prefix).
        defaults: the values a fresh page shows (``variant``, ``seq_len``, ``d_model``,
            ``heads`` and ``projections`` are read from it).
        max_seq_len: the largest L offered (default :data:`dashboard.data.MAX_INPUT_LEN`).

    Returns:
        A :class:`~dashboard.config.LayerConfig` on the sidebar's device.
    """
    max_seq_len = data.MAX_INPUT_LEN if max_seq_len is None else max_seq_len
    variant = variant_select(page, defaults.variant)
    source, seq_len = input_length_controls(page, defaults.seq_len, max_seq_len)
    projections = projection_controls(page, defaults.projections)
    params = variant_params_controls(page, variant, seq_len)
    d_model, heads = width_controls(page, defaults.d_model, defaults.heads)
    state.controls_box().caption(t("common.ctl_d_k", d_k=d_model // heads))
    mask_kind, pad_len = _mask_controls(page, seq_len)
    dropout = _dropout_control(page, variant)
    seed = state.slider_int(page, "seed", t("common.ctl_seed"), 0, MAX_SEED, 0)
    return LayerConfig(
        variant=variant,
        params=params,
        seq_len=seq_len,
        d_model=d_model,
        heads=heads,
        mask_kind=mask_kind,
        pad_len=pad_len,
        dropout=dropout,
        seed=seed,
        input_kind=source.input_kind,
        sentence=source.sentence,
        device=current_device(),
        projections=projections,
    )
