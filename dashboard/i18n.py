"""Every user-facing string, in English and Chinese.

Strings live in ``dashboard/locales/<lang>/<namespace>.json`` (one namespace per page plus
``common``); a key is ``"<namespace>.<name>"``, e.g. ``t("playground.title")``. The current
language is the sidebar widget ``"lang"`` (mirrored in the URL query parameter ``lang``).

A key missing in the current language falls back to English with a warning; a key missing in
English raises ``KeyError``. ``tests/dashboard/test_i18n.py`` fails when a key exists in one
language and not the other, or when code asks for a literal key that no locale defines.
"""

from __future__ import annotations

import json
import warnings
from functools import lru_cache
from pathlib import Path

import streamlit as st

LANGS = ("en", "zh")
DEFAULT_LANG = "en"
LANG_KEY = "lang"
LANG_NAMES = {"en": "English", "zh": "中文"}
LOCALES_DIR = Path(__file__).parent / "locales"


@lru_cache(maxsize=64)
def load_namespace(lang: str, namespace: str) -> dict[str, str]:
    """Return the ``{name: text}`` table of one locale file.

    Args:
        lang: a language in :data:`LANGS`.
        namespace: the file stem, e.g. ``"common"`` or ``"playground"``.

    Returns:
        The parsed JSON object (empty when the file does not exist).

    Raises:
        ValueError: for an unknown language, or a file that is not a JSON object of strings.
    """
    if lang not in LANGS:
        raise ValueError(f"unknown language {lang!r}; valid: {', '.join(LANGS)}")
    path = LOCALES_DIR / lang / f"{namespace}.json"
    if not path.exists():
        return {}
    table = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
        raise ValueError(f"{path} must be a JSON object of strings")
    return table


def current_lang() -> str:
    """Return the language of this run: the sidebar choice, else the URL, else English."""
    lang = st.session_state.get(LANG_KEY)
    if lang in LANGS:
        return lang
    from_url = st.query_params.get(LANG_KEY)
    return from_url if from_url in LANGS else DEFAULT_LANG


def lookup(key: str, lang: str) -> str | None:
    """Return the raw text of ``key`` in ``lang``, or ``None`` when it is missing.

    Raises:
        ValueError: when ``key`` is not of the form ``"<namespace>.<name>"``.
    """
    namespace, sep, name = key.partition(".")
    if not sep or not namespace or not name:
        raise ValueError(f"i18n key must look like 'namespace.name', got {key!r}")
    return load_namespace(lang, namespace).get(name)


def t(key: str, /, **fmt: object) -> str:
    """Translate ``key`` into the current language and fill ``{placeholders}``.

    Args:
        key: ``"<namespace>.<name>"`` (positional, so ``key`` may also be a placeholder).
        **fmt: values for ``str.format`` placeholders in the text.

    Returns:
        The translated, formatted text.

    Raises:
        KeyError: when the key exists in no language, or a placeholder has no value.
        ValueError: for a malformed key.
    """
    return t_in(current_lang(), key, **fmt)


def t_in(lang: str, key: str, /, **fmt: object) -> str:
    """Translate ``key`` into ``lang`` and fill ``{placeholders}``.

    Args:
        lang: a language in :data:`LANGS`.
        key: ``"<namespace>.<name>"``.
        **fmt: values for ``str.format`` placeholders in the text.

    Returns:
        The translated, formatted text.

    Raises:
        KeyError: when the key exists in no language, or a placeholder has no value.
        ValueError: for a malformed key or unknown language.
    """
    text = lookup(key, lang)
    if text is None:
        text = lookup(key, DEFAULT_LANG)
        if text is None:
            raise KeyError(f"missing i18n key {key!r} in every language")
        warnings.warn(f"i18n key {key!r} missing in {lang!r}; using English", stacklevel=3)
    return text.format(**fmt) if fmt else text


def namespaces(lang: str) -> list[str]:
    """Return the sorted locale file stems present for ``lang``."""
    return sorted(p.stem for p in (LOCALES_DIR / lang).glob("*.json"))
