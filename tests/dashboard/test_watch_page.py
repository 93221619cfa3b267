"""The Watch-it-learn page: train, stream, compare, in both languages; links reproduce runs."""

from __future__ import annotations

import numpy as np

from attention_core.experiments import train_task as _train_task
from dashboard.data.training import TRAINING_THREADS
from tests.dashboard.conftest import assert_clean, canvas_heatmaps, metrics, open_app

FAST = {"watch.steps": "100", "watch.d_model": "16"}


def train_task(task: str, **options):
    """The reference run, on the page's thread count: on more threads torch sums in another
    order, and a chaotic run (unscaled scores at d_k 64) ends elsewhere."""
    return _train_task(task, threads=TRAINING_THREADS, **options)


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
    assert at.query_params["watch.b.local.window_size"] == "3"
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
