"""The model view's caption on "A real model" names the dark columns by the page's own model's
special tokens (e5: ``<s>`` and ``</s>``; all-MiniLM: [CLS] and [SEP]), in both languages.

The reference is the page's own token list (its first section shows the tokens the model
reads): the caption must name the first and the last of them, and not the other model's."""

from __future__ import annotations

import pytest

from attention_core.pretrained import default_model_folder, e5_available
from tests.dashboard.conftest import assert_clean, open_app

GRID_CAPTION_START = {"en": "Each small square", "zh": "每个小方块"}
OTHER_SPECIALS = {"e5": ("[CLS]", "[SEP]"), "minilm": ("<s>", "</s>")}
INSTALLED = {"e5": e5_available(), "minilm": default_model_folder() is not None}


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("model", ["e5", "minilm"])
def test_grid_caption_names_the_model_s_own_special_tokens(model, lang):
    if not INSTALLED[model]:
        pytest.skip(f"the {model} package is not installed")
    at = open_app("real_model", lang=lang, **{"real_model.model": model})
    assert_clean(at)
    tokens = at.code[0].value.split(" ")  # the tokens the page shows, specials included
    first, last = tokens[0], tokens[-1]
    (caption,) = [c.value for c in at.caption if c.value.startswith(GRID_CAPTION_START[lang])]
    assert first in caption and last in caption, (first, last, caption)
    assert not any(token in caption for token in OTHER_SPECIALS[model])
