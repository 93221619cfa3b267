"""What the sections of Heads at work share: the page's name, the model choice (SmolLM2 or a
GGUF file of the server's own, with its shape), the names of scores and labels in the
session's language, the layers × heads grid, the heads-off picker and the install hint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

import pandas as pd
import streamlit as st

from dashboard import data, model_choices, presentation, refusals, state
from dashboard.charts.head_grid import PICK, HeadGridTitles, head_score_chart, picked_head
from dashboard.i18n import t
from dashboard.progress import duration
from dashboard.runtime import threads

PAGE = "heads"
SCORE_FORMATS = {"entropy": ".2f", "mean_distance": ".1f"}
UNMARKED = "mixed"  # the label drawn without a letter
MAX_PICKED = 15  # heads picked by name, per model
NO_GRADIENT_DTYPE = "int4"  # weights kept as 4-bit codes: torch's kernel has no derivative


@dataclass(frozen=True)
class ModelChoice:
    """The model the page runs, as plain values.

    Attributes:
        name: its listed name (the cached calls' ``model``).
        layers, heads: its N layers and H query heads.
        smollm2: True for the shipped model (its measured figures are quoted, its moves
            prefetched).
        gradients: whether attribution and saliency can run (a backward pass: SmolLM2's
            bfloat16 twin, or an own model without 4-bit codes).
    """

    name: str
    layers: int
    heads: int
    smollm2: bool
    gradients: bool


def own_models() -> ModuleType:
    """:mod:`dashboard.data.own_models`, imported once the runtime's torch thread has
    imported torch (as the data package's names are)."""
    threads.import_torch()
    from dashboard.data import own_models as models

    return models


def model_controls(page: str) -> str:
    """The model choice at the top of the sidebar
    (:func:`dashboard.model_choices.model_select`).

    Returns:
        The chosen model's listed name.
    """
    return model_choices.model_select(
        page, header_key="heads.model_header", label_key="heads.ctl_model"
    )


def shown_name(name: str) -> str:
    """A model's name for markdown (:func:`dashboard.model_choices.own_model_name`)."""
    return model_choices.own_model_name("heads", name)


def loading_text(name: str | None = None) -> str:
    """The spinner's words while the model called ``name`` runs (SmolLM2's when None)."""
    if name is None or name == own_models().SMOLLM2_CHOICE:
        return t("heads.loading")
    return t("heads.loading_own", name=shown_name(name))


def model_choice(name: str) -> ModelChoice | None:
    """The model called ``name`` with its shape (loaded once per server).

    Returns:
        The :class:`ModelChoice`, or None when the model cannot load (its one-line notice
        shown: a file refused, over the memory budget, SmolLM2's package missing).
    """
    models = own_models()
    try:
        with st.spinner(loading_text(name)):
            shape = models.decoder_shape(name)
            weights = models.loaded_model(name).decoder.weights_dtype
    except FileNotFoundError:  # SmolLM2's package removed while the app ran
        show_install_hint()
        return None
    except ValueError as err:  # a bad file, or over the memory budget
        refusals.show_error(err)
        return None
    smollm2 = name == models.SMOLLM2_CHOICE
    gradients = smollm2 or weights != NO_GRADIENT_DTYPE
    return ModelChoice(name, shape.layers, shape.heads, smollm2, gradients)


def score_name(score: str) -> str:
    """The translated name of a census score (SmolLM2's or e5's)."""
    return t(f"heads.score_{score}")


def score_text(value: float, fmt: str) -> str:
    """A census score as the page shows it: "—" when it is undefined for this input (NaN),
    and never a negative zero ("-0.00" for an entropy rounded from a tiny negative)."""
    if value != value:
        return "—"
    shown = f"{value:{fmt}}"
    return shown.lstrip("-") if float(shown) == 0 else shown


def cost_words(estimate: data.RunEstimate) -> str:
    """A long computation's cost before it starts: "32 forward passes, about 5 s on this
    server", or that it is measured already."""
    if estimate.calls == 0:
        return t("heads.cost_ready")
    return t("heads.cost_to_run", calls=estimate.calls, time=duration(estimate.seconds))


def label_name(label: str) -> str:
    """The translated name of a census label (``previous-token`` -> key ``label_previous``)."""
    return t(f"heads.label_{label.split('-')[0]}")


def grid_titles(value_title: str, title: str) -> HeadGridTitles:
    """The translated titles of a layers × heads grid."""
    return HeadGridTitles(
        title=title,
        x_title=t("common.chart_head"),
        y_title=t("heads.chart_layer"),
        value_title=value_title,
        label_title=t("heads.chart_label"),
    )


def grid_chart(
    table: pd.DataFrame,
    titles: HeadGridTitles,
    fmt: str,
    *,
    label_set: Sequence[str],
    chosen: tuple[int, int] | None = None,
    diverging: bool = False,
):
    """A layers × heads grid, each head lettered with its label (``chosen`` outlined).

    Args:
        table: one row per head (``layer``, ``head``, ``score``, ``label``).
        titles: from :func:`grid_titles`.
        fmt: the scores' number format.
        label_set: every label the model's census gives (``data.HEADS_LABELS``,
            ``data.E5_LABELS``).
        chosen: the ``(layer, head)`` outlined, if any.
        diverging: a signed score (red below 0, blue above).
    """
    labels = {name: label_name(name) for name in label_set}
    shown = table.assign(label=table["label"].map(labels))
    marks = {
        labels[name]: t(f"heads.mark_{name.split('-')[0]}")
        for name in label_set
        if name != UNMARKED
    }
    letter_px = presentation.chart_look().letter_px
    return head_score_chart(
        shown,
        titles,
        marks=marks,
        value_format=fmt,
        chosen=chosen,
        letter_px=letter_px,
        diverging=diverging,
    )


def heads_off_controls(
    page: str, key: str, model: str, layers: int, heads: int
) -> tuple[tuple[int, int], ...]:
    """The heads turned off by name: a multiselect of ``L<layer>H<head>`` (0-based).

    Args:
        page: the page's name (the URL key is ``<page>.<key>``).
        key: the control's own name.
        model: ``"ctl_off"`` or ``"ctl_e5_off"``, the locale key of its label and help.
        layers, heads: the model's shape.

    Returns:
        The ``(layer, head)`` pairs picked, at most :data:`MAX_PICKED`.
    """
    picked = state.multiselect(
        page,
        key,
        t(f"heads.{model}", n=MAX_PICKED),
        data.head_names(layers, heads),
        [],
        MAX_PICKED,
        help=t(f"heads.{model}_help", last_layer=layers - 1, last_head=heads - 1),
    )
    return tuple(data.parse_head(name) for name in picked)


def show_install_hint() -> None:
    """Say that the decoder's package is missing, with its pip line."""
    refusals.show_install_hint(t("heads.missing"), data.DECODER_INSTALL_HINT)


def group_header(text: str) -> None:
    """A group of controls' header in the sidebar: ``text`` (translated) in bold."""
    state.controls_box().markdown(f"**{text}**")


def section_intro(title: str, intro: str, anchor: str | None = None) -> None:
    """A section's opening: its header ``title`` (with the HTML id ``anchor``, when given) and
    the paragraph ``intro`` (translated; folded in the presentation view)."""
    st.header(title, anchor=anchor)
    presentation.explain(intro)


def draw_grid(chart, key: str) -> None:
    """Draw a grid chart from :func:`grid_chart` under the page's key ``heads.<key>``."""
    presentation.show_chart(st, chart, theme=None, key=f"{PAGE}.{key}")


def pick_head(page: str, key: str, layers: int, heads: int) -> None:
    """A head grid's click callback (before the rerun): the clicked head (of ``layers`` ×
    ``heads``) becomes page ``page``'s layer and head controls' value, so its sliders, its
    pictures and the URL follow."""
    event = st.session_state.get(key)
    pair = picked_head(event.selection.get(PICK) if event is not None else None, layers, heads)
    if pair is not None:
        st.session_state[f"{page}.layer"], st.session_state[f"{page}.head"] = pair
