"""A page's first attention map has structure: the layer pages (Intuition's dance,
Playground, Multi-head's real layer, Variants) open with queries and keys equal to the token
vectors (``projections="identity"``), whose rows are far from even, and random projections
(an untrained layer's nearly even map) are one choice away (``<page>.qk=random``).

Structure is measured on the weights the page drew: the mean row entropy −Σ w ln w, against
ln L, the entropy of an even row."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from dashboard.i18n import t_in
from tests.dashboard.conftest import assert_clean, canvas_heatmaps, chart_tables, open_app

STRUCTURE_BELOW_EVEN = 0.5  # nats under ln L: rows clearly uneven
NOISE_WITHIN_EVEN = 0.2  # nats under ln L: a nearly even map


def mean_row_entropy(weights: np.ndarray) -> float:
    """−Σ_j w_ij ln w_ij, averaged over every row of (…, L) weights (0 ln 0 = 0)."""
    w = np.asarray(weights, dtype=np.float64)
    terms = np.where(w > 0, w * np.log(np.where(w > 0, w, 1.0)), 0.0)
    return float(-terms.sum(axis=-1).mean())


def dance_weights(at: AppTest) -> np.ndarray:
    """The Intuition dance's (L, L) weights, from the chart's own data."""
    kind = at.selectbox(key="intuition.qk").value
    title = t_in("en", f"intuition.dance_chart_{kind}")
    for chart in at.get("vega_lite_chart"):
        text = json.loads(chart.proto.spec).get("title", {})
        text = text.get("text", "") if isinstance(text, dict) else text
        if (" ".join(text) if isinstance(text, list) else str(text)) == title:
            table = max((t.to_pandas() for t in chart_tables(chart)), key=len)
            values = table[t_in("en", "common.chart_weight")].to_numpy(dtype=float)
            n = math.isqrt(len(values))
            return values.reshape(n, n)
    raise AssertionError("no dance chart on the page")


def canvas_weights(title_key: str, **values):
    """A reader of the first canvas heatmap whose title holds ``title_key``'s text (its
    longest part between values)."""
    part = max(t_in("en", title_key, **values).split("\0"), key=len)

    def read(at: AppTest) -> np.ndarray:
        for heatmap in canvas_heatmaps(at):
            if part in heatmap["title"]:
                return heatmap["values"]
        raise AssertionError(f"no heatmap titled with {part!r}")

    return read


FIRST_MAPS = {
    "intuition": dance_weights,
    "playground": canvas_weights("playground.grid_title", heads="\0"),
    "multihead": canvas_weights("multihead.real_title", heads="\0", d_k="\0"),
    "variants": canvas_weights("variants.weights_title"),
}


@pytest.mark.parametrize("page", sorted(FIRST_MAPS))
def test_the_first_map_has_structure_and_random_is_one_choice_away(page):
    read = FIRST_MAPS[page]
    structured = open_app(page)
    assert_clean(structured)
    assert structured.selectbox(key=f"{page}.qk").value == "identity"
    weights = read(structured)
    even = math.log(weights.shape[-1])
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-3)
    assert mean_row_entropy(weights) < even - STRUCTURE_BELOW_EVEN
    untrained = open_app(page, **{f"{page}.qk": "random"})
    assert_clean(untrained)
    noise = read(untrained)
    assert noise.shape == weights.shape
    assert mean_row_entropy(noise) > even - NOISE_WITHIN_EVEN
