"""The Intuition page's meeting and library in plain Python: against torch's softmax and
the explicit formula, bad scores rejected, and no torch import (the landing page draws them
while torch loads)."""

from __future__ import annotations

import math

import pytest
import torch

from dashboard.data import analogies
from tests.dashboard.conftest import fresh_python


@pytest.mark.parametrize(
    "scores",
    [(0.0,), (3.0, 1.0, -1.0), (800.0, 799.0, -5.0), (-1e4, -1e4 + 2.0), (0.1, 0.2, 0.3, 0.4)],
)
def test_softmax_equals_torch_softmax(scores):
    expected = torch.softmax(torch.tensor(scores, dtype=torch.float64), dim=0).tolist()
    assert analogies.softmax(scores) == pytest.approx(expected, rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("scores", [(), (math.nan, 0.0), (math.inf, 1.0), (-math.inf,)])
def test_softmax_rejects_no_or_non_finite_scores(scores):
    with pytest.raises(ValueError, match="finite"):
        analogies.softmax(scores)


@pytest.mark.parametrize("boss", [-2.0, 0.0, 3.0, 6.0])
def test_meeting_weights_are_the_written_out_softmax(boss):
    exps = [math.exp(boss), math.exp(1.0), math.exp(-1.0)]  # colleague 1, passer-by -1
    weights = analogies.meeting_weights(boss)
    assert weights == pytest.approx([e / sum(exps) for e in exps], rel=1e-12)
    assert len(weights) == len(analogies.MEETING_PEOPLE)


@pytest.mark.parametrize("topic", [0.0, 0.3, 1.0])
def test_library_lookup_is_query_dot_keys_then_softmax(topic):
    query = 4.0 * torch.tensor(
        [math.cos(topic * math.pi / 2), math.sin(topic * math.pi / 2)], dtype=torch.float64
    )  # (2,)
    keys = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]], dtype=torch.float64)  # (3, 2)
    scores = keys @ query  # (3,)
    lookup = analogies.library_lookup(topic)
    assert lookup.shelves == analogies.LIBRARY_SHELVES
    assert list(lookup.scores) == pytest.approx(scores.tolist(), abs=1e-12)
    assert list(lookup.weights) == pytest.approx(torch.softmax(scores, 0).tolist(), rel=1e-12)


def test_the_analogies_and_their_charts_import_no_torch_pandas_or_altair():
    """The start page's first charts are computed and specified before any heavy import."""
    code = (
        "import sys; from dashboard import data; from dashboard.charts import light; "
        "w = data.meeting_weights(3.0); data.library_lookup(0.5); "
        "light.token_bars_spec(['a', 'b', 'c'], w, title='t', token_title='k', "
        "weight_title='w'); "
        "print(sorted(m for m in ('torch', 'pandas', 'altair', 'numpy') if m in sys.modules))"
    )
    result = fresh_python(code)
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout + result.stderr
