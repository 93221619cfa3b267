"""Heads at work: what each head of SmolLM2 (or a GGUF model of the server's own) does, and
what the model loses without it; then the same census on multilingual e5-small. One module
per section: :mod:`.heads_at_work`."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from dashboard import controls, data, lesson_focus, refusals, state
from dashboard.i18n import t
from dashboard.lesson_focus import SectionBox
from dashboard.views.heads_at_work.attribution import (
    AttributionConfig,
    attribution_controls,
    draw_attribution,
)
from dashboard.views.heads_at_work.census import (
    CensusConfig,
    CensusView,
    census_controls,
    census_grid_controls,
    draw_head_map,
)
from dashboard.views.heads_at_work.common import (
    PAGE,
    ModelChoice,
    loading_text,
    model_choice,
    model_controls,
    own_models,
    show_install_hint,
    shown_name,
)
from dashboard.views.heads_at_work.copying import (
    CopyConfig,
    copy_controls,
    copy_moves,
    draw_copy,
)
from dashboard.views.heads_at_work.e5 import E5Config, draw_e5, e5_controls
from dashboard.views.heads_at_work.explanation import draw_explanation
from dashboard.views.heads_at_work.mask import (
    MaskConfig,
    draw_mask,
    mask_controls,
    mask_moves,
)
from dashboard.views.heads_at_work.qk_map import QKMapConfig, draw_qk_map, qk_map_controls
from dashboard.views.heads_at_work.why import WhyConfig, draw_why, why_controls

LINKS = ("watch", "multihead", "decoder")


@dataclass(frozen=True)
class HeadsConfig:
    """The page's input (only ``installed`` when SmolLM2 is missing, and no ``model`` when the
    chosen model cannot load)."""

    installed: bool
    model: ModelChoice | None = None
    census: CensusConfig | None = None
    copy: CopyConfig | None = None
    attribution: AttributionConfig | None = None
    mask: MaskConfig | None = None
    census_view: CensusView | None = None
    e5: E5Config | None = None
    why: WhyConfig | None = None
    qk_map: QKMapConfig | None = None


def heads_controls(page: str) -> HeadsConfig:
    """The sidebar: the model first, then one group per section of the page."""
    name = model_controls(page)
    if name == own_models().SMOLLM2_CHOICE and not data.decoder_installed():
        return HeadsConfig(installed=False)
    model = model_choice(name)
    if model is None:  # the notice is shown
        return HeadsConfig(installed=True)
    census = census_controls(page, model)
    copy = copy_controls(page, model)
    why = why_controls(page, model, copy)
    return HeadsConfig(
        True,
        model,
        census,
        copy,
        attribution_controls(page, model),
        mask_controls(page, model),
        census_grid_controls(census),
        e5_controls(page),
        why,
        qk_map_controls(page),
    )


def draw_links() -> None:
    """Links to the pages this one continues."""
    lang = st.query_params.get("lang", "en")
    for page in LINKS:
        st.page_link(
            f"views/{page}.py",
            label=t(f"heads.link_{page}"),
            icon=":material/arrow_forward:",
            query_params={"lang": lang},
        )


def section(model: ModelChoice, box: SectionBox, draw, *args) -> None:
    """Run one section's drawing on ``model`` in its box (nothing in a fold left closed); a
    refusal shows the one error notice, not a traceback."""
    if not box.shown:
        return
    try:
        with box.box, st.spinner(loading_text(model.name)):
            draw(*args)
    except FileNotFoundError:  # the package was removed while the app ran
        show_install_hint()
    except ValueError as err:
        refusals.show_error(err)


def section_titles() -> dict[str, str]:
    """The page's sections below the census, top to bottom, with their titles (a lesson
    step's folds are labelled with them, :mod:`dashboard.lesson_focus`)."""
    return {
        "copy": t("heads.copy_title"),
        "why": t("heads.why_title"),
        "attribution": t("heads.attr_title"),
        "explanation": t("heads.explain_title"),
        "mask": t("heads.mask_title"),
        "e5": t("heads.e5_title"),
        "qk_map": t("qk_map.title"),
    }


def render(ctl: HeadsConfig) -> None:
    """Draw the page (returns early, without st.stop, when the model cannot run)."""
    if not ctl.installed:
        show_install_hint()
        return
    if ctl.census_view is None:  # the model choice or the census section said why
        return
    model = ctl.model
    if not model.smollm2:
        st.info(t("heads.own_model_note", name=shown_name(model.name)))
    draw_head_map(ctl.census_view, ctl.census)
    boxes = lesson_focus.section_boxes(PAGE, section_titles(), above=("census",))
    section(model, boxes["copy"], draw_copy, ctl.copy)
    section(model, boxes["why"], draw_why, ctl.why)
    section(
        model, boxes["attribution"], draw_attribution, ctl.attribution, ctl.census.text, ctl.copy
    )
    section(model, boxes["explanation"], draw_explanation, ctl.census.text, model)
    section(model, boxes["mask"], draw_mask, ctl.mask)
    if boxes["e5"].shown:
        with boxes["e5"].box:
            draw_e5(ctl.e5, ctl.census.text)
    section(model, boxes["qk_map"], draw_qk_map, ctl.qk_map)
    draw_links()
    if model.smollm2 and not state.locked(f"{PAGE}.top_k"):  # see prefetch_moves
        section(model, SectionBox(st.container(), True), prefetch_moves, ctl, boxes["mask"].shown)


def prefetch_moves(ctl: HeadsConfig, mask_shown: bool) -> None:
    """After the page is drawn: fill, in the background, what the next slider moves need, as
    one unit in this order (the copy test one length away first: a length move redraws
    three sections; then every top k; then the masks, when their section is drawn).

    Only the moves this learner can make: not for a follower, whose controls are locked
    (the presenter's session fills the same shared caches), nor an own model's (computed
    when asked); and not for a section folded in a lesson, whose moves draw nothing. The
    filler computes only between runs, but a forward pass it has started shares the cores
    with the next run: Next to Heads at work's first lesson step took 1.31 s (median) with
    the filler still at work and 0.97 s without it (``python -m bench.lesson_next --lesson
    inside-a-real-model``)."""
    length = data.length_job(ctl.copy.length, copy_view(ctl))
    masks = mask_moves(ctl.mask) if mask_shown else ()
    data.prefetch_all((length, copy_moves(ctl.copy), *masks))


def copy_view(ctl: HeadsConfig) -> data.CopyView:
    """What the sections drawn from the copy sequence show besides its length, as the
    prefetch of a length move needs it."""
    why = ctl.why
    return data.CopyView(
        ctl.copy.seed,
        ctl.copy.rank_score,
        ctl.copy.top_k,
        ctl.copy.picked,
        ctl.attribution.gradients and ctl.attribution.source == "copy",
        (why.layer, why.head, why.query, why.key) if why.gradients else None,
        ctl.copy.model,
    )


controls.page_intro(PAGE)
ctl = heads_controls(PAGE)
render(ctl)
