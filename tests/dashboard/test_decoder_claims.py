"""Every figure the decoder page's texts quote about its exactness checks, measured with the
library on the page's own 4-bit model (``DECODER_WEIGHTS_DTYPE``) and on the float32 one,
and found in the texts of both languages: the cached-step difference, the RoPE shift
difference, the permutation's, the causal maps' upper triangle, the grouped heads and the
cache's bytes per token. (The sink and window figures are measured in
``test_decoder_page.py``.)

Measured here (2 CPU threads): cached − recomputed logits 0.125–0.44 on the 4-bit model and
1.4e-5–4.5e-5 in float32; the RoPE shift 9.4e-3–3.0e-2 on the 4-bit model (the page has
shown 3.4e-2 for the emoji preset) and 1.9e-6–4.8e-6 in float32; shuffling changes a map by
1.0; heads of one group are closer in 22–28 of the 30 layers."""

from __future__ import annotations

import itertools
import json
import math

import pytest
import torch

from attention_core.experiments import decoding
from dashboard.data.decoder import (
    DECODER_KV_HEADS,
    DECODER_MAX_STEPS,
    DECODER_PRESETS,
)
from dashboard.numbers import SUPERSCRIPT
from tests.core.references import needs_smollm2
from tests.dashboard.conftest import APP_PATH

LANGS = ("en", "zh")
SHIFTS = (1000, 4000)  # the page's default and the slider's largest shift
CACHED_RANGE = (0.1, 0.5)  # "between 0.1 and 0.5"
CACHED_FLOAT32_BELOW = 1e-4
SHIFT_AT_MOST = 0.04
SHIFT_FLOAT32_BELOW = 1e-5
PERMUTED_NEAR_ONE = 0.9
GROUPED_LAYERS_AT_LEAST = 20
CACHE_BYTES_PER_TOKEN = "46,080"
SHORT_STEPS = 2  # the other presets' cached steps (the first preset runs all 16)

pytestmark = needs_smollm2


@pytest.fixture(scope="module")
def float32_model(decoder32):
    return decoder32


def _texts(lang: str) -> dict[str, str]:
    path = APP_PATH.parent / "locales" / lang / "decoder.json"
    return json.loads(path.read_text(encoding="utf-8"))


def _quoted(value: float) -> str:
    """A power of ten as the texts write it: 10⁻⁴ (the notation of dashboard.numbers),
    never 1e-04."""
    exponent = round(math.log10(value))
    assert value == pytest.approx(10.0**exponent), f"{value} is not a power of ten"
    return f"10{str(exponent).translate(SUPERSCRIPT)}"


def _ids(model, text: str) -> torch.Tensor:
    return torch.tensor([model.tokenize(text).input_ids])  # (1, L)


def test_cached_step_differences_are_the_quoted_ones(page_model, float32_model):
    steps = {name: SHORT_STEPS for name in DECODER_PRESETS} | {"capital": DECODER_MAX_STEPS}
    page = [
        d
        for name, text in DECODER_PRESETS.items()
        for d in decoding.compare_cached_decoding(
            page_model, text, steps[name]
        ).max_logit_difference
    ]
    low, high = CACHED_RANGE
    assert low <= min(page) and max(page) <= high, (min(page), max(page))
    exact = decoding.compare_cached_decoding(float32_model, DECODER_PRESETS["capital"], SHORT_STEPS)
    assert max(exact.max_logit_difference) < CACHED_FLOAT32_BELOW
    for lang in LANGS:
        look_for = _texts(lang)["look_for_answers"]
        between = {"en": f"between {low} and {high}", "zh": f"介于 {low} 与 {high} 之间"}[lang]
        assert between in look_for and _quoted(CACHED_FLOAT32_BELOW) in look_for


def test_rope_shift_differences_are_the_quoted_ones(page_model, float32_model):
    page = {
        (name, shift): decoding.check_rope_shift(page_model, text, shift)
        for name, text in DECODER_PRESETS.items()
        for shift in SHIFTS
    }
    exact = [
        decoding.check_rope_shift(float32_model, text, shift).shifted_difference
        for text in DECODER_PRESETS.values()
        for shift in SHIFTS
    ]
    assert max(r.shifted_difference for r in page.values()) <= SHIFT_AT_MOST
    first = page["capital", 1000].shifted_difference  # the page's default view
    assert f"{first:.0e}" == "1e-02", first
    assert max(exact) < SHIFT_FLOAT32_BELOW
    assert min(r.permuted_difference for r in page.values()) > PERMUTED_NEAR_ONE
    for lang in LANGS:
        texts = _texts(lang)
        for key in ("look_for_answers", "rope_caption"):
            assert f"{SHIFT_AT_MOST}" in texts[key] and _quoted(SHIFT_FLOAT32_BELOW) in texts[key]
        answers = texts["look_for_answers"]
        assert _quoted(1e-2) in answers and "1000" in answers
        assert {"en": "near 1", "zh": "接近 1"}[lang] in answers


def _grouped_layers(attentions: torch.Tensor) -> int:
    """Layers whose heads differ less within a key/value group than across groups (mean
    |A_h − A_g| over pairs); attentions (N, H, L, L)."""
    n_layers, n_heads = attentions.shape[:2]
    size = n_heads // DECODER_KV_HEADS
    count = 0
    for layer in attentions:  # (H, L, L)
        within, across = [], []
        for h, g in itertools.combinations(range(n_heads), 2):
            distance = float((layer[h] - layer[g]).abs().mean())
            (within if h // size == g // size else across).append(distance)
        count += sum(within) / len(within) < sum(across) / len(across)
    return count


def test_causal_maps_and_grouped_heads_are_as_quoted(page_model):
    for text in DECODER_PRESETS.values():
        out = page_model(_ids(page_model, text), need_weights=True)
        maps = torch.stack([a[0] for a in out.attentions])  # (N, H, L, L)
        assert float(maps.triu(diagonal=1).abs().max()) == 0.0  # "exactly 0"
        assert _grouped_layers(maps) >= GROUPED_LAYERS_AT_LEAST
        assert out.cache.nbytes // out.cache.length == int(CACHE_BYTES_PER_TOKEN.replace(",", ""))
    for lang in LANGS:
        look_for = _texts(lang)["look_for_answers"]
        assert f"{GROUPED_LAYERS_AT_LEAST}" in look_for and CACHE_BYTES_PER_TOKEN in look_for
        assert {"en": "exactly 0", "zh": "恰好为 0"}[lang] in look_for
