"""Who a word looks at in a real-model run: heads ranked against the uniform level, the weight
resting on special tokens, and the cosine between a sentence and its translation."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd
import torch

from attention_core import pretrained
from dashboard.data.model import (
    MODEL_PREFIXES,
    MODEL_PRESETS,
    MODEL_SINK_TOKENS,
    TRANSLATIONS,
    UNRELATED_TEXT,
    ModelRun,
    embedding_cosine,
    model_run,
)

PRONOUN_TOP_HEADS = 5
ZH_WORDS = ("它", ("猫", "垫子"))
PRESET_WORDS = {
    "zh_cat": ZH_WORDS,
    "zh_tired": ZH_WORDS,
    "zh_soft": ZH_WORDS,
    "en_comfortable": ("It", ("cat", "mat")),
    "en_tired": ("It", ("cat", "mat")),
    "en_soft": ("It", ("cat", "mat")),
    "cat_comfortable": ("it", ("cat", "mat")),
    "cat_soft": ("it", ("cat", "mat")),
    "bank": ("She", ("bank", "river")),
}
"""Preset -> (the pronoun, the nouns it might refer to)."""
CJK = re.compile(r"[\u3400-\u9fff]")


def default_words(preset: str, text: str) -> tuple[str, tuple[str, ...]]:
    """The pronoun and nouns to probe: the preset's, or a guess by script for typed text."""
    if preset in PRESET_WORDS:
        return PRESET_WORDS[preset]
    return ZH_WORDS if CJK.search(text) else ("it", ("cat", "mat"))


@dataclass(frozen=True)
class WordLink:
    """The heads that send a pronoun to one word.

    Attributes:
        word: the word as typed; tokens: the model tokens covering it; covered: the text
            those tokens span (因为它 when the word is 它 and the model reads 因为它 as one).
        heads: the top heads: columns ``layer``, ``head`` (from 1), ``weight``, ``uniform``
            and ``ratio`` (weight / uniform).
    """

    word: str
    tokens: tuple[str, ...]
    covered: str
    heads: pd.DataFrame


def _word_tokens(run: ModelRun, word: str) -> list[int]:
    """Token indices covering the first ``word`` after the model's prefix."""
    start = len(MODEL_PREFIXES[run.model])
    found = run.text.find(word, start) if word else -1
    if found < 0:
        raise ValueError(f"{word!r} is not in the sentence {run.text[start:]!r}")
    return pretrained.tokens_in_span(run.offsets, found, found + len(word))


def word_link(run: ModelRun, pronoun: str, word: str, top: int = PRONOUN_TOP_HEADS) -> WordLink:
    """Rank every head by the weight from ``pronoun``'s tokens to ``word``'s tokens.

    Args:
        run: a :class:`ModelRun` with offsets.
        pronoun, word: substrings of the sentence (the first occurrence counts).
        top: how many heads to keep.

    Returns:
        A :class:`WordLink`.

    Raises:
        ValueError: when either word is not in the sentence.
    """
    queries, keys = _word_tokens(run, pronoun), _word_tokens(run, word)
    ranked = pretrained.rank_heads(torch.from_numpy(run.attentions.copy()), queries, keys)
    heads = pd.DataFrame(
        {
            "layer": [link.layer + 1 for link in ranked[:top]],
            "head": [link.head + 1 for link in ranked[:top]],
            "weight": [link.weight for link in ranked[:top]],
            "uniform": [link.uniform for link in ranked[:top]],
            "ratio": [link.ratio for link in ranked[:top]],
        }
    )
    first, last = run.offsets[keys[0]][0], run.offsets[keys[-1]][1]
    return WordLink(word, tuple(run.tokens[k] for k in keys), run.text[first:last], heads)


def sink_share(run: ModelRun) -> tuple[float, float]:
    """Mean weight, over every layer, head and row, on the model's special tokens.

    Returns:
        ``(share, uniform)``: the share and what a uniform row would give them.
    """
    specials = MODEL_SINK_TOKENS[run.model]
    share = pretrained.special_share(
        torch.from_numpy(run.attentions.copy()), run.tokens, specials
    )  # (N, H)
    count = sum(token in specials for token in run.tokens)
    return float(share.mean()), count / len(run.tokens)


def translation_of(preset: str) -> str | None:
    """The preset paired with ``preset`` in the other language, or None."""
    back = {english: chinese for chinese, english in TRANSLATIONS.items()}
    return TRANSLATIONS.get(preset) or back.get(preset)


@dataclass(frozen=True)
class PairCosine:
    """A sentence, its translation, and their sentence-embedding cosines.

    Attributes:
        run, other: the two runs (exact attention); cosine: between their embeddings;
        unrelated: between ``run`` and :data:`UNRELATED_TEXT`, the level of "unrelated".
    """

    run: ModelRun
    other: ModelRun
    cosine: float
    unrelated: float


def pair_cosine(preset: str, model: str) -> PairCosine | None:
    """Encode a preset and its translation with the exact model; None when it has none."""
    partner = translation_of(preset)
    if partner is None:
        return None
    run = model_run(MODEL_PRESETS[preset], "scaled", (), model)
    other = model_run(MODEL_PRESETS[partner], "scaled", (), model)
    unrelated = model_run(UNRELATED_TEXT, "scaled", (), model)
    return PairCosine(run, other, embedding_cosine(run, other), embedding_cosine(run, unrelated))
