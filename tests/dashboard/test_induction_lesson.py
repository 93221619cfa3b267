"""Where the induction lesson of "Watch it learn" holds, measured with the page's defaults
(d_model 32, one head, learning rate 0.01, batch 64, 300 steps, seed 0, one thread): every
figure the lesson quotes (dashboard/locales/*/watch.json, "look_for_answers") comes from one of
these runs.

The lesson quotes only what holds on every CPU: training is chaotic enough that float32 sums
in another order (another instruction set, another thread count) move these curves by a few
points. One CPU measured 97 % and a fall back to 88 %, another 98 % and 91 %: the text says
"pass 95 %" and "fall back below 95 %", and the tests check those bounds.

Measured on the first: one layer reaches 100 % at L = 4 (step 20) and L = 5 (step 40), and at
L = 6–7 by step 190 (the first part's length h takes one or two values there, so positions
give the key away); at L = 8 one layer ends at 69 % (peak 78 %) and two layers at 97 %
(99.6 % at step 180); at L = 16 one layer ends at 36 %, two at 99.8 %. Two layers trained
1,500 steps at 0.01 fall back to 88 % after their peak (and, trained 2,000 steps, to 61 %
near step 1,600); at 0.003 they stay at 97 % or more once they reach 99 %, and end at
100 %.
"""

from __future__ import annotations

import json
from contextlib import contextmanager

import pytest
import torch

from attention_core.experiments.tasks import induction_lengths
from attention_core.experiments.training import TrainingConfig, run_training
from tests.dashboard.conftest import APP_PATH

PAGE_THREADS = 1  # the page trains on one thread (dashboard/data/training.py)
LESSON_MIN_LEN = 8
LONG_STEPS = 1500
TWO_LAYERS_PASS = 0.95  # "two pass 95 %" at L = 8; trained long they "fall back below 95 %"
ONE_LAYER_L16_BELOW = 0.40  # "at L = 16, under 40 %"


@contextmanager
def page_threads():
    """torch at the page's thread count while the block runs, the count before restored
    after it (the library never sets it: the test does, as the page's runtime does)."""
    before = torch.get_num_threads()
    torch.set_num_threads(PAGE_THREADS)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _accuracies(seq_len: int, layers: int, steps: int = 300, lr: float = 0.01) -> list:
    """(step, accuracy) of every snapshot of the page's default run (about 50 snapshots)."""
    config = TrainingConfig(
        task="induction",
        layers=layers,
        seq_len=seq_len,
        steps=steps,
        lr=lr,
        snapshot_every=max(10, steps // 50),
    )
    with page_threads():
        run = run_training(config)
    return [(s.step, s.accuracy) for s in run.snapshots]


@pytest.mark.parametrize(("seq_len", "values"), [(4, 1), (5, 1), (6, 2), (7, 2), (8, 3)])
def test_the_first_part_takes_few_lengths_below_the_lesson_s_minimum(seq_len, values):
    low, high = induction_lengths(seq_len)
    assert high - low + 1 == values


@pytest.mark.parametrize(("seq_len", "steps"), [(4, 20), (5, 40)])
def test_one_layer_solves_short_sequences_quickly(seq_len, steps):
    accuracy = dict(_accuracies(seq_len, layers=1, steps=steps))
    assert accuracy[steps] == 1.0


@pytest.mark.parametrize("seq_len", [6, 7])
def test_one_layer_still_reaches_100_percent_below_l_8(seq_len):
    assert max(a for _, a in _accuracies(seq_len, layers=1)) == 1.0


def test_at_l_8_one_layer_ends_near_70_and_two_near_97_percent():
    one = _accuracies(LESSON_MIN_LEN, layers=1)
    two = _accuracies(LESSON_MIN_LEN, layers=2)
    assert round(one[-1][1], 1) == 0.7  # "near 70 %"
    assert max(a for _, a in one) < 0.8
    assert two[-1][1] > TWO_LAYERS_PASS  # "two pass 95 %"


def test_at_l_16_the_gap_grows():
    one = _accuracies(16, layers=1)[-1][1]
    two = _accuracies(16, layers=2)[-1][1]
    assert one < ONE_LAYER_L16_BELOW and two >= 0.99  # "under 40 % against nearly 100 %"


def test_two_layers_trained_long_at_0_01_do_not_stay_at_their_peak():
    history = _accuracies(LESSON_MIN_LEN, layers=2, steps=LONG_STEPS)
    peak = max(range(len(history)), key=lambda i: history[i][1])
    assert history[peak][1] >= 0.99
    low = min(a for _, a in history[peak:])
    assert low < TWO_LAYERS_PASS  # "fall back below 95 %"
    dip = next(i for i in range(peak, len(history)) if history[i][1] < TWO_LAYERS_PASS)
    assert max(a for _, a in history[dip:]) >= TWO_LAYERS_PASS  # "and climb again"


def test_two_layers_at_0_003_stay_near_100_percent():
    history = _accuracies(LESSON_MIN_LEN, layers=2, steps=LONG_STEPS, lr=0.003)
    first = next(i for i, (_, a) in enumerate(history) if a >= 0.99)
    assert min(a for _, a in history[first:]) >= 0.97  # "stays above 97 %"
    assert history[-1][1] == 1.0


QUOTED = (
    "L = 8",
    "300",
    "70%",
    "95%",
    "L = 16",
    "40%",
    "L = 4–5",
    "L = 6–7",
    "100%",
    "20",
    "1,500",
    "0.01",
    "0.003",
)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_lesson_quotes_the_measured_figures(lang):
    path = APP_PATH.parent / "locales" / lang / "watch.json"
    look_for = json.loads(path.read_text(encoding="utf-8"))["look_for_answers"]
    # the English line names the task **induction**; the Chinese one its name, then (induction)
    (induction,) = [line for line in look_for.splitlines() if "induction" in line]
    shown = induction.replace(" %", "%")  # "70 %" in English, "70%" in Chinese
    assert [figure for figure in QUOTED if figure not in shown] == []
    assert "stays low" not in induction and "很低" not in induction  # 70 % is not "low"
