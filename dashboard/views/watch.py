"""Watch it learn: train a tiny attention-only model in seconds and see its heads form.

The settings are :mod:`.watch_it_learn.settings`, a finished run's figures
:mod:`.watch_it_learn.figures`; this page trains (its time estimated first, refused over the
limit), streams the heads while it trains, replays the snapshots, and draws the runs side by
side."""

from __future__ import annotations

import time

import streamlit as st

from dashboard import controls, data, refusals
from dashboard.i18n import t
from dashboard.progress import duration
from dashboard.views.watch_it_learn.figures import draw_heads, draw_target, run_title, show_run
from dashboard.views.watch_it_learn.settings import PAGE, WatchConfig, watch_controls

PLAY_DELAY_S = 0.12
LIVE_REDRAW_S = 0.25  # while training, the heads are redrawn at most this often


def train_live(config: data.TrainingConfig, index: int) -> bool:
    """Train ``config`` with a progress bar and the heads redrawn as snapshots arrive (at most
    every :data:`LIVE_REDRAW_S`).

    Returns:
        True when the run finished (it is then in the store), False when it was refused.
    """
    st.subheader(run_title(config))
    bar = st.progress(0.0, text=t("watch.starting"))
    live = st.empty()
    target = data.training_target(config)
    drawn_at = -LIVE_REDRAW_S
    try:
        for snapshot in data.stream_run(config):
            bar.progress(
                snapshot.step / config.steps,
                text=t("watch.training", step=snapshot.step, steps=config.steps),
            )
            if time.perf_counter() - drawn_at >= LIVE_REDRAW_S:  # the first, then a few a second
                drawn_at = time.perf_counter()
                with live.container():
                    draw_heads(snapshot, target, key=f"watch.live.{index}.{snapshot.step}")
    except ValueError as err:
        refusals.show_error(err)
        return False
    run = data.finished_run(config)
    if run is not None and run.divergence is not None:  # the bar says why it stopped
        bar.progress(
            run.final.step / config.steps,
            text=t("watch.training_diverged", step=run.divergence.step, steps=config.steps),
        )
    return True


def play(runs, index_step: list[int]) -> None:
    """Step through the snapshots of every run, redrawing the heads (the Play button)."""
    frames = st.empty()
    for step in index_step:
        with frames.container():
            cols = st.columns(len(runs))
            for i, (col, run) in enumerate(zip(cols, runs, strict=True)):
                with col:
                    shown = max((s for s in run.snapshots if s.step <= step), key=lambda s: s.step)
                    draw_heads(shown, run.target, key=f"watch.play.{i}.{step}")
        time.sleep(PLAY_DELAY_S)
    frames.empty()


def comparison_note(configs) -> None:
    """What was measured for the page's two suggested comparisons, when one is on screen."""
    if len(configs) != 2:
        return
    a, b = configs
    if a.variant == b.variant and a.scale != b.scale:
        st.info(t("watch.measured_scaling"))
    elif a.task == "reverse" and "local" in (a.variant, b.variant):
        st.info(t("watch.measured_window"))


def render(ctl: WatchConfig) -> None:
    """Train (streaming) or fetch the runs, then draw them side by side."""
    try:
        configs = ctl.configs()
    except ValueError as err:
        refusals.show_error(err)
        return
    runs = [data.finished_run(c) for c in configs]
    if any(r is None for r in runs):
        runs = train_when_allowed(ctl, configs, runs)
        if runs is None:
            return
    comparison_note(configs)
    if any(c.task == "induction" for c in configs):
        st.page_link(
            "views/heads.py",
            label=t("heads.from_watch"),
            icon="🔌",
            query_params={"lang": st.query_params.get("lang", "en")},
        )
    if ctl.play:
        play(runs, sorted({s.step for run in runs for s in run.snapshots}))
    cols = st.columns(len(runs))
    for i, (col, run) in enumerate(zip(cols, runs, strict=True)):
        with col:
            show_run(run, ctl.step, i, narrow=len(runs) > 1)
    with st.expander(t("common.how_it_works")):
        st.markdown(t("watch.how_it_works"))


def train_when_allowed(ctl: WatchConfig, configs, runs: list) -> list | None:
    """Estimate the time of the runs not yet kept; refuse over the limit, wait for Train, or
    train them.

    Returns:
        Every finished run, or ``None`` when nothing was trained (refused or waiting).
    """
    missing = [c for c, r in zip(configs, runs, strict=True) if r is None]
    notice = st.empty()  # filled after the measurement, above the target drawn meanwhile
    if not ctl.train:
        draw_target(configs[0])
    try:
        estimate = data.training_time(missing)
    except ValueError as err:
        with notice.container():
            refusals.show_error(err)
        return None
    if estimate.over:
        notice.error(t("watch.too_long", **time_words(estimate)))
        return None
    if not ctl.train:
        notice.info(t("watch.press_train", **time_words(estimate)))
        return None
    notice.caption(t("watch.estimate", **time_words(estimate)))
    return train_missing(configs, runs)


def time_words(estimate: data.TrainingTime) -> dict[str, str]:
    """The estimate's figures in words: ``time`` (the whole), ``step`` (a training step's
    cost, per run) and ``limit``."""
    return {
        "time": duration(estimate.seconds),
        "step": " / ".join(step_duration(s) for s in estimate.train_step_s),
        "limit": t("watch.duration_limit", s=round(estimate.limit_s)),
    }


def step_duration(seconds: float) -> str:
    """A step's cost: "21 ms", or "0.30 s" from a third of a second."""
    if seconds < 0.3:
        return t("watch.duration_ms", ms=f"{seconds * 1000:.3g}")
    return t("watch.duration_step_seconds", s=f"{seconds:.2f}")


def train_missing(configs: tuple[data.TrainingConfig, ...], runs: list) -> list | None:
    """Train the runs not yet kept, side by side with live heads, then fetch them all.

    Returns:
        Every finished run, or ``None`` after a refusal or a store that dropped one.
    """
    training_area = st.empty()  # progress and live heads, cleared for the finished runs
    with training_area.container():
        cols = st.columns(len(configs))
        for i, (col, config, run) in enumerate(zip(cols, configs, runs, strict=True)):
            if run is None:
                with col:
                    if not train_live(config, i):
                        return None
    training_area.empty()
    runs = [data.finished_run(c) for c in configs]
    if any(r is None for r in runs):  # dropped from a full store meanwhile: show what we have
        st.warning(t("watch.store_full"))
        return None
    return runs


controls.page_intro(PAGE)
ctl = watch_controls(PAGE)
render(ctl)
