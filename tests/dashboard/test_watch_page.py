"""The Watch-it-learn page: train, stream, compare, in both languages; links reproduce runs."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from attention_core.experiments import train_task as _train_task
from dashboard.runtime import threads
from tests.dashboard.conftest import assert_clean, canvas_heatmaps, link_params, metrics, open_app

FAST = {"watch.steps": "100", "watch.d_model": "16"}


def train_task(task: str, **options):
    """The reference run, on the page's thread count (one: the page trains under
    ``runtime.threads.single_threaded``, as this does): on more threads torch sums in another
    order, and a chaotic run (unscaled scores at d_k 64) ends elsewhere."""
    with threads.single_threaded():
        return _train_task(task, **options)


def _train(at):
    train = next(b for b in at.button if b.label in ("Train", "训练"))
    return train.click().run()


def test_default_english_waits_for_train_then_learns_shift():
    at = open_app("watch", **FAST)
    assert_clean(at)
    assert at.title[0].value == "Watch it learn"
    assert any("Press **Train**" in i.value for i in at.info)
    (target,) = canvas_heatmaps(at)  # the task's target pattern before training
    np.testing.assert_array_equal(target["values"][0], np.eye(8, k=-1))  # key i - 1
    at = _train(at)
    assert_clean(at)
    assert at.query_params["watch.trained"] == "true"
    reference = train_task("shift", d_model=16, steps=100, snapshot_every=10)
    shown = metrics(at)
    assert shown["Final accuracy"] == f"{reference.final.accuracy:.1%}"
    assert shown["Final loss"] == f"{reference.final.loss:.3f}"
    (heads,) = canvas_heatmaps(at)
    assert heads["panels"][-1] == "target"
    np.testing.assert_allclose(heads["values"][0], reference.final.weights[0, 0], atol=1e-6)
    np.testing.assert_allclose(heads["values"][-1], reference.target, atol=1e-6)
    assert len(at.get("vega_lite_chart")) + len(at.get("arrow_vega_lite_chart")) == 4


def test_step_slider_shows_an_earlier_snapshot_chinese():
    params = {**FAST, "watch.trained": "true", "watch.step": "0"}
    at = open_app("watch", lang="zh", **params)
    assert_clean(at)
    assert at.title[0].value == "看它学习"
    reference = train_task("shift", d_model=16, steps=100, snapshot_every=10)
    (heads,) = canvas_heatmaps(at)
    np.testing.assert_allclose(heads["values"][0], reference.snapshots[0].weights[0, 0], atol=1e-6)
    assert "最终准确率" in metrics(at)


def test_link_with_trained_flag_trains_without_a_click_and_is_kept():
    params = {**FAST, "watch.task": "reverse", "watch.seed": "3", "watch.trained": "true"}
    first = open_app("watch", **params)
    assert_clean(first)
    again = open_app("watch", **params)  # a second session: fetched from the store
    assert metrics(again) == metrics(first)


def test_window_preset_compares_full_and_local_on_reverse():
    at = open_app("watch", **{"watch.steps": "150"})
    preset = next(b for b in at.button if b.label.startswith("Compare: full"))
    at = preset.click().run()
    assert_clean(at)
    assert at.query_params["watch.task"] == "reverse"
    assert link_params(at)["watch.b.local.window_size"] == "3"
    finals = [float(m.value.rstrip("%")) for m in at.metric if m.label == "Final accuracy"]
    assert len(finals) == 2
    assert finals[0] >= 95 and finals[1] <= 50  # a window of 3 cannot reverse
    assert any("Measured" in i.value for i in at.info)
    assert len(canvas_heatmaps(at)) == 2


def test_scaling_choice_reaches_the_trainer_chinese():
    params = {
        **FAST,
        "watch.scaling": "unscaled",
        "watch.d_model": "64",
        "watch.trained": "true",
    }
    at = open_app("watch", lang="zh", **params)
    assert_clean(at)
    reference = train_task("shift", d_model=64, steps=100, snapshot_every=10, scaled=False)
    assert metrics(at)["最终损失"] == f"{reference.final.loss:.3f}"


def test_bad_url_values_fall_back_with_a_notice():
    at = open_app("watch", **{"watch.task": "copy", "watch.lr": "5", "watch.heads": "3"})
    assert not at.exception
    notice = " ".join(w.value for w in at.warning)
    assert "watch.task" in notice and "watch.lr" in notice and "watch.heads" in notice


def test_stream_yields_before_training_ends_and_keeps_the_finished_run():
    from dashboard import data

    config = data.TrainingConfig(task="sort", steps=30, snapshot_every=10, seed=11, d_model=16)
    stream = data.stream_run(config)
    first = next(stream)
    assert first.step == 0
    assert data.finished_run(config) is None  # not kept until the last snapshot
    rest = list(stream)
    assert [s.step for s in rest] == [10, 20, 30]
    kept = data.finished_run(config)
    assert [s.loss for s in kept.snapshots] == [s.loss for s in (first, *rest)]
    assert not kept.final.weights.flags.writeable
    reference = train_task("sort", steps=30, snapshot_every=10, seed=11, d_model=16)
    assert [s.loss for s in kept.snapshots] == [s.loss for s in reference.snapshots]


def test_each_step_holds_one_thread_and_each_draw_none():
    from dashboard.data import training as training_data

    computed_on = []

    def run():
        computed_on.append(torch.get_num_threads())
        yield "step 0"
        computed_on.append(torch.get_num_threads())
        yield "step 10"
        computed_on.append(torch.get_num_threads())
        return "divergence"

    drawn_on = []
    with threads.script_run():  # a page's run, alone on the server: every core
        cores = torch.get_num_threads()
        steps = training_data.single_threaded_steps(run())
        while True:
            try:
                snapshot = next(steps)
            except StopIteration as stop:
                returned = stop.value
                break
            drawn_on.append((snapshot, torch.get_num_threads()))  # the page draws it
    assert cores == threads.usable_cores()
    assert computed_on == [1, 1, 1]
    assert drawn_on == [("step 0", cores), ("step 10", cores)]
    assert returned == "divergence"  # what the run returns is passed on


def test_the_cost_is_measured_on_one_thread(monkeypatch):
    from dashboard.data import training as training_data

    measured_on = []

    def measure(shape):
        measured_on.append(torch.get_num_threads())
        return training_data.StepCost(0.01, 0.02)

    monkeypatch.setattr(training_data, "measure_step_cost", measure)
    shape = training_data.TrainingConfig(task="sort", d_model=36, heads=3, seq_len=7)
    assert training_data.step_cost(shape) == training_data.StepCost(0.01, 0.02)
    assert measured_on == [1]


def test_play_steps_through_the_snapshots():
    at = open_app("watch", **FAST, **{"watch.trained": "true", "watch.step": "0"})
    play = next(b for b in at.button if b.label == "▶ Play")
    at = play.click().run()
    assert_clean(at)
    assert len(canvas_heatmaps(at)) == 1  # the frames are gone; the chosen step is drawn


def test_scaling_preset_trains_scaled_and_unscaled_side_by_side_chinese():
    at = open_app("watch", lang="zh", **{"watch.steps": "50"})
    preset = next(b for b in at.button if b.label.startswith("对比：d_k 256"))
    at = preset.click().run()
    assert_clean(at)
    assert at.query_params["watch.b.scaling"] == "unscaled"
    titles = [h.value for h in at.subheader]
    assert len(titles) == 2 and "不缩放" in titles[1] and "不缩放" not in titles[0]
    assert any("实测" in i.value for i in at.info)
    first = train_task("shift", d_model=256, steps=50, snapshot_every=10, scaled=True)
    second = train_task("shift", d_model=256, steps=50, snapshot_every=10, scaled=False)
    losses = [m.value for m in at.metric if m.label == "最终损失"]
    assert losses == [f"{first.final.loss:.3f}", f"{second.final.loss:.3f}"]


# --- D1/D2: a run that diverges is named, in both languages ---------------------------------

D1_LINK = {
    "watch.task": "reverse",
    "watch.lr": "0.1",
    "watch.d_model": "64",
    "watch.layers": "2",
    "watch.seq_len": "16",
    "watch.trained": "true",
}


@pytest.mark.parametrize(
    ("lang", "diverged", "final_loss", "stopped_loss", "advice"),
    [
        ("en", "diverged at step {step}", "Final loss", "Loss when stopped", "try 0.03"),
        ("zh", "在第 {step} 步发散", "最终损失", "停止时的损失", "可以试试 0.03"),
    ],
)
def test_d1_link_trains_to_a_named_divergence(lang, diverged, final_loss, stopped_loss, advice):
    at = open_app("watch", lang=lang, **D1_LINK)
    assert_clean(at)  # no traceback, no "cannot be computed" blaming the settings
    (warning,) = [w.value for w in at.warning]  # before: none, "Final loss 782.019"
    reference = train_task("reverse", lr=0.1, d_model=64, layers=2, seq_len=16, steps=300)
    assert reference.divergence is not None
    assert diverged.format(step=reference.divergence.step) in warning
    assert f"{reference.divergence.loss:.4g}" in warning and advice in warning
    if lang == "zh":  # no English left in the Chinese notice
        assert re.search(r"[A-Za-z]{2,}", warning) is None, warning
    shown = metrics(at)
    assert final_loss not in shown  # never shown as a plain result
    assert shown[stopped_loss] == f"{reference.final.loss:.4g}"
    (heads,) = canvas_heatmaps(at)  # the heads where it stopped, finite
    np.testing.assert_allclose(heads["values"][0], reference.final.weights[0, 0], atol=1e-6)


def test_unscaled_divergence_also_suggests_scaling():
    params = {**D1_LINK, "watch.scaling": "unscaled", "watch.steps": "50"}
    at = open_app("watch", **params)
    assert_clean(at)
    (warning,) = [w.value for w in at.warning]
    assert "diverged at step" in warning and "1/√d_k" in warning


# --- D9: the time of a run, estimated before Train from a measured cost per step -------------


def _cost(monkeypatch, train_step_s: float, snapshot_s: float):
    """Inject the cost per step the page would measure (the page's arithmetic is tested, not
    this machine's speed)."""
    from dashboard.data import training as training_data

    cost = training_data.StepCost(train_step_s=train_step_s, snapshot_s=snapshot_s)
    monkeypatch.setattr(training_data, "step_cost", lambda config: cost)


def test_estimate_is_the_sum_of_each_runs_steps_and_snapshots():
    from dashboard import data

    a = data.TrainingConfig(task="shift", steps=300, snapshot_every=10)  # 31 snapshots
    b = data.TrainingConfig(task="shift", steps=100, snapshot_every=10)  # 11 snapshots
    costs = [data.StepCost(0.02, 0.1), data.StepCost(0.5, 1.0)]
    estimate = data.estimate_time([a, b], costs)
    assert estimate.seconds == pytest.approx(300 * 0.02 + 31 * 0.1 + 100 * 0.5 + 11 * 1.0)
    assert estimate.train_step_s == (0.02, 0.5)
    assert estimate.limit_s == data.MAX_TRAINING_SECONDS
    assert not estimate.over  # 70.1 s
    assert data.estimate_time([a], [data.StepCost(0.5, 1.0)]).over  # 150 + 31 = 181 s
    with pytest.raises(ValueError, match="2 runs but 1 costs"):
        data.estimate_time([a, b], costs[:1])


def test_estimate_shown_before_train_from_the_measured_cost(monkeypatch):
    _cost(monkeypatch, train_step_s=0.05, snapshot_s=0.2)  # 100 × 0.05 + 11 × 0.2 = 7.2 s
    fresh = {**FAST, "watch.seed": "41"}  # a configuration no other test trains (kept runs
    at = open_app("watch", **fresh)  # are shown without an estimate)
    assert_clean(at)
    (info,) = [i.value for i in at.info]
    assert "Press **Train**" in info and "about 7 s" in info and "50 ms per training step" in info
    zh = open_app("watch", lang="zh", **fresh)
    (info,) = [i.value for i in zh.info]
    assert "约 7 秒" in info and "每个训练步 50 毫秒" in info


@pytest.mark.parametrize(
    ("lang", "refusal", "limit"),
    [
        ("en", "Too long for this shared server", "120 s"),
        ("zh", "对这台共享服务器来说太久了", "120 秒"),
    ],
)
def test_a_run_over_the_time_limit_is_refused_even_from_a_link(monkeypatch, lang, refusal, limit):
    # 300 steps × 0.35 s + 31 snapshots × 0.5 s = 120.5 s: just over the limit
    _cost(monkeypatch, train_step_s=0.35, snapshot_s=0.5)
    link = {"watch.seed": "42", "watch.trained": "true"}  # trained by no other test
    at = open_app("watch", lang=lang, **link, **{"watch.steps": "300"})
    assert not at.exception
    (error,) = [e.value for e in at.error]
    assert refusal in error and limit in error and ("about 2 min" in error or "约 2 分钟" in error)
    assert metrics(at) == {}  # nothing trained
    # 250 steps: 87.5 + 26 × 0.5 = 100.5 s, under the limit: trains
    at = open_app("watch", lang=lang, **link, **{"watch.steps": "250"})
    assert_clean(at)
    assert metrics(at)
