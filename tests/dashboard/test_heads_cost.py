"""The Heads page's cost estimates (dashboard.data.heads_cost): the true effects' forward call
is timed at two lengths once per model, and any other length is read off the line through
the two timings; the count of calls is the library's."""

from __future__ import annotations

import pytest

from attention_core.experiments import head_ablation
from dashboard.data import heads_cost


def test_line_through_two_timings_and_its_refusals():
    pace = heads_cost.line_through((16, 0.05), (128, 0.33))
    assert pace.per_token == pytest.approx(0.28 / 112)
    assert pace.seconds(16) == pytest.approx(0.05)
    assert pace.seconds(128) == pytest.approx(0.33)
    assert pace.seconds(72) == pytest.approx(0.19)
    flat = heads_cost.line_through((16, 0.2), (128, 0.1))  # noise: the longer call was faster
    assert (flat.fixed, flat.per_token) == (0.2, 0.0)
    with pytest.raises(ValueError, match="128 and 16"):
        heads_cost.line_through((128, 0.1), (16, 0.2))


def test_the_true_effects_estimate_times_two_lengths_once_then_reads_the_line(monkeypatch):
    """A stand-in decoder whose call costs 10 ms + 1 ms per token and batch item: the first
    estimate times the four (batch, length) calls, a second one at another length times
    nothing, and each equals the library's call count times the cost at its length."""
    shapes: list[tuple[int, int]] = []

    def decoder(ids):
        shapes.append(tuple(ids.shape))

    def timed(run):
        run()
        batch, length = shapes[-1]
        return 0.010 + 0.001 * batch * length

    monkeypatch.setattr(heads_cost, "_float_decoder", lambda model: decoder)
    monkeypatch.setattr(heads_cost, "_timed_call", timed)
    pairs = tuple((0, h) for h in range(6))
    calls = head_ablation.ablation_forward_calls(len(pairs))
    for length in (49, 21):
        estimate = heads_cost.effects_estimate(tuple(range(length)), None, pairs, "pace-test")
        batch = head_ablation.ATTRIBUTION_BATCH
        single, batched = 0.010 + 0.001 * length, 0.010 + 0.001 * batch * length
        assert estimate.calls == calls
        assert estimate.seconds == pytest.approx(single + (calls - 1) * batched)
    short, long = heads_cost.PACE_LENGTHS
    assert shapes == [(1, short), (1, long), (batch, short), (batch, long)]
