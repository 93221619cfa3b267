"""About this model: the Decoder page's model choice in the sidebar (SmolLM2 as shipped, or a
file of the server's own, by its listed name), the model's card and its one-click check.

A link names a model by its listed name only (``?decoder.model=llama3.2:1b``): ``state.select``
compares it with the list the server made and falls back to SmolLM2 with the link notice
for anything else (a path, ``..``, a name not listed); nothing is opened for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import streamlit as st

from dashboard import data, model_choices, refusals, state
from dashboard.i18n import t
from dashboard.literal import DETAIL_MAX_LEN, literal
from dashboard.numbers import plain_number

PAGE = "decoder"
CHECKED_KEY = f"_{PAGE}.checked"
"""Session state: the names of the models this session asked to check (their results are
cached per server, so they stay shown while the learner moves other controls)."""
DIFFERENCE_DIGITS = 2  # significant digits of a difference: 3.0 × 10⁻⁸


@dataclass(frozen=True)
class ModelChoice:
    """The sidebar's model part as plain values.

    Attributes:
        name: the listed name of the chosen model (:data:`dashboard.data.SMOLLM2_CHOICE` or
            a name of ``data.decoder_choices()``).
        check: whether this session asked to check it.
    """

    name: str
    check: bool = False

    @property
    def shipped(self) -> bool:
        """Whether the choice is SmolLM2 as shipped (whose measured figures the texts quote)."""
        return self.name == data.SMOLLM2_CHOICE


def shown_name(name: str) -> str:
    """A model's name for markdown (:func:`dashboard.model_choices.own_model_name`)."""
    return model_choices.own_model_name("decoder", name)


def model_controls(page: str) -> ModelChoice:
    """The sidebar's model part: the choice, the how-to line when the server names no folder
    of its own models, and the "Check this model" button."""
    name = model_choices.model_select(
        page, header_key="decoder.ctl_model_header", label_key="decoder.ctl_model"
    )
    checked = st.session_state.get(CHECKED_KEY, frozenset())
    pressed = state.controls_box().button(
        t("decoder.ctl_check"), key=f"{page}.check", help=t("decoder.ctl_check_help")
    )
    if pressed:
        checked = checked | {name}
        st.session_state[CHECKED_KEY] = checked
    return ModelChoice(name, name in checked)


def _difference(value: float) -> str:
    return plain_number(value, DIFFERENCE_DIGITS) if math.isfinite(value) else "∞"


def card_lines(card: data.ModelCard) -> list[str]:
    """The card as markdown list items, label then value (the file's own name as literal
    text)."""
    file = card.card
    storage = ", ".join(f"{kind} × {count}" for kind, count in file.storage_types)
    rows = [
        ("card_architecture", file.architecture),
        ("card_layers", f"{file.layers}"),
        ("card_heads", f"{file.heads} / {file.kv_heads}"),
        ("card_head_dim", f"{file.head_dim}"),
        ("card_context", f"{file.context_length:,}"),
        ("card_vocab", f"{file.vocab_size:,}"),
        ("card_storage", storage),
        ("card_parameters", f"{file.parameters:,}"),
        ("card_file", data.describe_bytes(file.file_bytes)),
        ("card_load", data.describe_seconds(card.load_seconds)),
    ]
    name = literal(file.name or "—", model_choices.MODEL_NAME_MAX_LEN)
    name_key = "decoder.card_name_hf" if card.source in ("hf", "hub") else "decoder.card_name"
    detail = {key: literal(value, DETAIL_MAX_LEN) for key, value in card.source_detail}
    source = t(f"decoder.source_{card.source}", **detail)
    lines = [f"- **{t('decoder.card_source')}:** {source}"]
    lines.append(f"- **{t(name_key)}:** {name}")
    lines += [f"- **{t(f'decoder.{key}')}:** {value}" for key, value in rows]
    weights = t("decoder.card_weights", dtype=card.weights_dtype)
    lines.append(f"- **{weights}:** {data.describe_bytes(card.weights_bytes)}")
    return lines


def draw_check(outcome: data.CheckOutcome) -> None:
    """The check's three results: cache, weights against float32, perplexity."""
    check = outcome.check
    st.markdown(f"**{t('decoder.check_header')}**")
    cols = st.columns(2)
    cols[0].metric(
        t("decoder.metric_check_cache_logits"), _difference(check.cache.logit_difference)
    )
    cols[1].metric(
        t("decoder.metric_check_cache_attention"), _difference(check.cache.attention_difference)
    )
    st.caption(t("decoder.check_cache_caption", tokens=check.cache.tokens))
    weights = check.weights
    if weights is None:
        key = "check_weights_refused" if outcome.reference_refused else "check_weights_float32"
        st.info(t(f"decoder.{key}"))
    else:
        cols = st.columns(2)
        dtype = weights.weights_dtype
        cols[0].metric(
            t("decoder.metric_check_weights_logits", dtype=dtype),
            _difference(weights.logit_difference),
        )
        cols[1].metric(
            t("decoder.metric_check_weights_attention", dtype=dtype),
            _difference(weights.attention_difference),
        )
        same = t("decoder.check_yes" if weights.same_next_token else "decoder.check_no")
        st.caption(t("decoder.check_weights_caption", same=same))
    ppl = check.perplexity
    st.metric(t("decoder.metric_check_ppl"), f"{ppl.perplexity:.1f}")
    threshold = f"{ppl.threshold:g}"
    if ppl.suspicious:
        st.warning(t("decoder.check_ppl_warning", ppl=f"{ppl.perplexity:.1f}", threshold=threshold))
    else:
        st.success(t("decoder.check_ppl_ok", threshold=threshold, tokens=ppl.tokens))


def draw_note(choice: ModelChoice, card: data.ModelCard, shipped_note: str) -> None:
    """What the page runs: SmolLM2's tested bounds (``shipped_note``), or which own model
    runs, how its weights are held, and that the texts above describe SmolLM2."""
    if choice.shipped:
        st.caption(shipped_note)
        return
    st.info(t("decoder.own_model_note", name=shown_name(choice.name)))
    size = data.describe_bytes(card.weights_bytes)
    st.caption(t("decoder.weights_note_own", dtype=card.weights_dtype, size=size))


def draw_about(choice: ModelChoice, shipped_note: str) -> None:
    """The note on the model (:func:`draw_note`) and the "About this model" expander: the
    card, then the check when this session asked for it (computed once per server and
    model), else how to ask. A card or check that cannot be made is one notice.

    Args:
        choice: the sidebar's model part. shipped_note: the caption shown for SmolLM2 (its
            tested bounds against float32).
    """
    try:
        card = data.model_card(choice.name)
    except ValueError as err:
        refusals.show_error(err)
        return
    draw_note(choice, card, shipped_note)
    with st.expander(t("decoder.about_header"), expanded=choice.check or not choice.shipped):
        st.markdown("\n".join(card_lines(card)))
        if not choice.check:
            st.caption(t("decoder.check_hint"))
            return
        try:
            with st.spinner(t("decoder.check_running", name=shown_name(choice.name))):
                outcome = data.run_model_check(choice.name)
        except ValueError as err:
            refusals.show_error(err)
            return
        draw_check(outcome)
