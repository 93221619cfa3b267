"""How a page says that it cannot compute what was asked: one notice that names the cause in
plain words, in the page's language, never a traceback (:func:`show_error`, chosen by the
exception's type), the pip line for a missing model (:func:`show_install_hint`), and how a
peak memory was obtained (:func:`memory_method_text`).

Importing this module imports neither torch nor the library (each function imports what it
needs once the torch thread has imported torch).
"""

from __future__ import annotations

import streamlit as st

from dashboard.i18n import current_lang, t
from dashboard.model_choices import unreadable_line
from dashboard.runtime import threads


def show_error(err: Exception) -> None:
    """The one way a page shows a refused computation, chosen by the exception's type.

    * :class:`~attention_core.pretrained.model_files.ModelFileError` — an own model file
      that cannot be read: one line naming it and why
      (:func:`dashboard.model_choices.unreadable_line`);
    * :class:`~attention_core.device.MemoryBudgetError` — over the memory budget, with what
      to lower;
    * :class:`~attention_core.pretrained.ModelNotInstalledError` — the model package is
      missing, with that model's own pip line (the error's ``install_line``);
    * any other ``ValueError`` — invalid settings, with the library's message;
    * a ``RuntimeError`` from torch — invalid settings, with its first line.

    Raises:
        Exception: ``err`` itself when it is none of these (a bug, not bad input).
    """
    threads.import_torch()  # the library only after the torch thread's imports
    from attention_core.device import MemoryBudgetError
    from attention_core.pretrained import ModelNotInstalledError
    from attention_core.pretrained.model_files import ModelFileError

    if isinstance(err, ModelFileError):
        st.error(unreadable_line(err))
    elif isinstance(err, MemoryBudgetError):
        _refusal("common.error_budget", str(err), t("common.error_budget_lower"))
    elif isinstance(err, ModelNotInstalledError):
        show_install_hint(t("common.error_model_missing"), err.install_line, detail=str(err))
    elif isinstance(err, ValueError):
        _refusal("common.error_invalid", str(err))
    elif isinstance(err, RuntimeError):  # torch's own refusals: the first line says why
        _refusal("common.error_invalid", str(err).splitlines()[0])
    else:
        raise err


def _refusal(key: str, detail: str, advice: str = "") -> None:
    """A refusal in the page's language: the library's English ``detail`` inline on an
    English page; on any other, a translated summary with the detail in an expander."""
    if current_lang() == "en":
        st.error(" ".join(filter(None, (t(key, detail=detail), advice))))
        return
    st.error(" ".join(filter(None, (t(f"{key}_short"), advice))))
    with st.expander(t("common.error_detail")):
        st.code(detail, language=None, wrap_lines=True)


def show_install_hint(message: str, pip_line: str, *, detail: str | None = None) -> None:
    """Say that a model's package is missing, with the pip line that installs it.

    Args:
        message: translated explanation. pip_line: the command, shown as code.
        detail: an optional caption (e.g. the error that found the package missing).
    """
    st.warning(message)
    st.code(pip_line, language="bash")
    if detail:
        st.caption(detail)


def memory_method_text(method: str) -> str:
    """Translated description of how a peak memory was obtained, from the method label of
    :func:`attention_core.experiments.measure_peak_bytes` (an unknown label reads as "not
    measurable")."""
    threads.import_torch()  # the library only after the torch thread's imports
    from attention_core import experiments

    code = experiments.PEAK_METHODS.get(method, "none")
    return t(f"common.memory_method_{code}")
