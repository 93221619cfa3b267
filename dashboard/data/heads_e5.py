"""Heads at work in e5 (multilingual e5-small, 12 layers × 12 heads): the encoder census of a
text, the pronoun → antecedent link when the text has one, and the sentence embedding with
heads turned off (cached calls of :mod:`attention_core.experiments.encoder_heads`).

The model is the Real model page's own (:func:`~dashboard.data.model.e5_encoder`): one copy in
memory. e5 reads the text after its ``"passage: "`` prefix, as on that page. Layer and head
indices are 0-based, as in the library; heads are zero-ablated (their attention output,
before the output projection, set to 0).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from attention_core import pretrained
from attention_core.experiments import encoder_heads, head_ablation
from attention_core.validation import check_choice, check_int
from dashboard.data.model import MODEL_INSTALL_HINTS, MODEL_PRESETS, e5_encoder, model_installed
from dashboard.data.probe import PRESET_WORDS, default_words

E5_LAYERS = E5_HEADS = 12
E5_LINK = "link"
E5_SCORES = (*encoder_heads.ENCODER_SCORES, E5_LINK)
"""The scores the section can draw: the encoder census's, and the pronoun's link."""
E5_LABELS = encoder_heads.ENCODER_LABELS
E5_PROMPT = "prompt"
E5_SOURCES = (
    E5_PROMPT,
    "cat_comfortable",
    "cat_soft",
    "en_comfortable",
    "en_tired",
    "zh_cat",
    "zh_tired",
)
"""Where the section's text comes from: the page's prompt, or a pronoun preset of the Real
model page (:data:`~dashboard.data.model.MODEL_PRESETS`, words from
:data:`~dashboard.data.probe.PRESET_WORDS`)."""
E5_INSTALL_HINT = MODEL_INSTALL_HINTS["e5"]
_LATIN = re.compile(r"[A-Za-z]")


@dataclass(frozen=True)
class E5Link:
    """The pronoun and the noun it refers to, and the e5 tokens covering each (0-based)."""

    pronoun: str
    noun: str
    queries: tuple[int, ...]
    keys: tuple[int, ...]


@dataclass(frozen=True)
class E5Census:
    """The e5 census of one text (read-only arrays).

    Attributes:
        text: the text as typed (without e5's prefix); tokens: the e5 tokens read.
        scores: score name -> (12, 12) float64; ``link`` only when ``link`` is not None.
        head_labels: (12, 12) labels from
            :func:`~attention_core.experiments.encoder_heads.encoder_labels`.
        link: the pronoun and its noun, or None when the text has no such pair.
        words: the pronoun and noun looked for (found or not).
    """

    text: str
    tokens: tuple[str, ...]
    scores: dict[str, np.ndarray]
    head_labels: np.ndarray
    link: E5Link | None
    words: tuple[str, str]


def e5_installed() -> bool:
    """Return True when e5's package is installed (nothing is imported)."""
    return model_installed("e5")


def e5_text(source: str, prompt: str) -> str:
    """The text the section reads: the page's prompt or a pronoun preset.

    Raises:
        ValueError: for an unknown source.
    """
    check_choice("source", source, E5_SOURCES)
    return prompt if source == E5_PROMPT else MODEL_PRESETS[source]


def link_words(source: str, text: str) -> tuple[str, str]:
    """The pronoun and the noun it should refer to: the preset's, or a guess by script
    (``it`` → ``cat``, ``它`` → ``猫``) for the page's prompt."""
    pronoun, nouns = PRESET_WORDS[source] if source in PRESET_WORDS else default_words("", text)
    return pronoun, nouns[0]


def find_word(text: str, word: str, start: int) -> int:
    """The first index of ``word`` in ``text`` from ``start``, as a whole word when it is
    written in Latin letters (``it`` is not found inside ``with``); -1 when absent."""
    if not _LATIN.search(word):
        return text.find(word, start)
    found = re.compile(rf"(?<![A-Za-z]){re.escape(word)}(?![A-Za-z])").search(text, start)
    return found.start() if found else -1


def find_link(read: str, offsets, words: tuple[str, str]) -> E5Link | None:
    """The link's tokens in the text e5 read, or None unless the noun comes before the
    pronoun (the pronoun's query rows look back at it) and both are there."""
    start = len(pretrained.PASSAGE_PREFIX)
    pronoun_at, noun_at = (find_word(read, word, start) for word in words)
    if pronoun_at < 0 or noun_at < 0 or noun_at >= pronoun_at:
        return None
    queries = pretrained.tokens_in_span(offsets, pronoun_at, pronoun_at + len(words[0]))
    keys = pretrained.tokens_in_span(offsets, noun_at, noun_at + len(words[1]))
    if not queries or not keys or set(queries) & set(keys):
        return None
    return E5Link(words[0], words[1], tuple(queries), tuple(keys))


def _frozen(array: np.ndarray) -> np.ndarray:
    array = np.array(array)
    array.setflags(write=False)
    return array


@st.cache_resource(max_entries=16, show_spinner=False)
def e5_census(source: str, text: str) -> E5Census:
    """The e5 census of ``text`` (after ``"passage: "``) from one forward pass with weights.

    Args:
        source: one of :data:`E5_SOURCES` (which words the link looks for).
        text: the text, not blank.

    Returns:
        An :class:`E5Census`.

    Raises:
        ValueError: for a blank text or an unknown source.
        ModelNotInstalledError: when e5's package is missing.
    """
    check_choice("source", source, E5_SOURCES)
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"the text for e5 is empty: {text!r}")
    model = e5_encoder()
    read = pretrained.PASSAGE_PREFIX + text
    tokenized = model.tokenize(read)
    words = link_words(source, text)
    link = find_link(read, tokenized.offsets, words)
    pair = None if link is None else (list(link.queries), list(link.keys))
    census = encoder_heads.encoder_census(model, tokenized.input_ids, link=pair)
    return E5Census(
        text=text,
        tokens=tuple(tokenized.tokens),
        scores={name: _frozen(value) for name, value in census.scores.items()},
        head_labels=_frozen(census.labels),
        link=link,
        words=words,
    )


def e5_census_table(census: E5Census, score: str) -> pd.DataFrame:
    """One row per head: ``layer``, ``head`` (0-based), ``score`` and ``label`` (the rule's).

    Raises:
        ValueError: for an unknown score, or ``link`` when the text has no link.
    """
    check_choice("score", score, E5_SCORES)
    if score not in census.scores:
        raise ValueError(f"the text {census.text!r} has no pronoun link to score")
    values = census.scores[score]  # (12, 12)
    layer, head = np.meshgrid(np.arange(E5_LAYERS), np.arange(E5_HEADS), indexing="ij")
    return pd.DataFrame(
        {
            "layer": layer.ravel(),
            "head": head.ravel(),
            "score": values.ravel(),
            "label": census.head_labels.ravel(),
        }
    )


def check_head(pair: tuple[int, int]) -> tuple[int, int]:
    """Return ``pair`` when it is an e5 head.

    Raises:
        ValueError: naming the pair when its layer or head is out of range.
    """
    layer, head = pair
    if not (0 <= layer < E5_LAYERS and 0 <= head < E5_HEADS):
        raise ValueError(
            f"e5 has layers 0-{E5_LAYERS - 1} and heads 0-{E5_HEADS - 1}: no head {layer}.{head}"
        )
    return int(layer), int(head)


def e5_off_heads(
    census: E5Census, score: str, top_k: int, picked: tuple[tuple[int, int], ...]
) -> tuple[tuple[int, int], ...]:
    """The heads turned off: the ``top_k`` with the highest ``score``, then the ``picked``.

    Raises:
        ValueError: for an unknown score, a bad count or a head out of range (named).
    """
    check_int("top_k", top_k, low=0, high=E5_LAYERS * E5_HEADS)
    chosen = tuple(check_head(pair) for pair in picked)
    check_choice("score", score, E5_SCORES)
    if not top_k:
        return tuple(dict.fromkeys(chosen))
    values = e5_census_table(census, score)["score"].to_numpy()  # (144,) layer by layer
    top = head_ablation.ranked_heads(values.reshape(E5_LAYERS, E5_HEADS), top_k)
    return tuple(dict.fromkeys((*top, *chosen)))


@st.cache_resource(max_entries=64, show_spinner=False)
def e5_ablation(
    source: str, text: str, off: tuple[tuple[int, int], ...]
) -> encoder_heads.AblationEffect:
    """Zero-ablate ``off`` in e5 on ``text``: the embedding's cosine, intact against
    ablated, and the link weight (averaged over every head) before and after.

    Raises:
        ValueError: for a bad text, source or head (named).
    """
    census = e5_census(source, text)
    link = None if census.link is None else (list(census.link.queries), list(census.link.keys))
    read = pretrained.PASSAGE_PREFIX + text
    ids = e5_encoder().tokenize(read).input_ids
    return encoder_heads.ablation_effect(
        e5_encoder(), ids, tuple(check_head(p) for p in off), link=link
    )
