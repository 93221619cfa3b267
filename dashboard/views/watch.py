"""Watch it learn: train a tiny attention-only model in seconds and see its heads form."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import streamlit as st

from dashboard import charts, controls, data, state
from dashboard.charts import canvas
from dashboard.config import ParamPairs
from dashboard.i18n import t

PAGE = "watch"
OTHER = "watch.b"  # key prefix of the second run's own controls
TRAINED = "watch.trained"  # URL flag: a run was asked for, so a link trains it again
D_MODELS = (8, 16, 32, 64, 128, 256)
LEARNING_RATES = (0.001, 0.003, 0.01, 0.03, 0.1)
SCALINGS = ("default", "scaled", "unscaled")
MAX_LAYERS = 4
WATCH_MAX_LEN = 32
MIN_STEPS, MAX_STEPS, STEPS_STEP = 50, 2000, 50
MIN_SNAPSHOT_EVERY = 10
SNAPSHOTS_PER_RUN = 50
HEAD_COLUMNS = 4
PLAY_DELAY_S = 0.12
LIVE_REDRAW_S = 0.25  # while training, the heads are redrawn at most this often
# a line chart's height (Streamlit fits the whole chart into it): plot, title and axis, legend rows
PLOT_PX, CHART_CHROME_PX, LEGEND_ROW_PX = 150, 95, 20
LEGEND_COLUMNS_WIDE, LEGEND_COLUMNS_NARROW = 4, 2  # one run across the page; two side by side
MAX_LEGEND_SERIES = 10  # Vega's palette has 10 colours: more lines share them; no legend then
READY_ACCURACY = 0.99


@dataclass(frozen=True)
class RunChoice:
    """What may differ between the two runs: the variant, its parameters, the scaling."""

    variant: str
    params: ParamPairs
    scaling: str


@dataclass(frozen=True)
class WatchConfig:
    """The page's settings, as plain values; :meth:`configs` builds the training runs.

    Attributes:
        train: training was asked for (the Train button, a preset, or a link's flag).
        step: the snapshot shown (the last one unless the step slider moved).
        play: the Play button was pressed: step through the snapshots once.
    """

    task: str
    seq_len: int
    steps: int
    lr: float
    d_model: int
    heads: int
    layers: int
    positions: bool
    seed: int
    first: RunChoice
    second: RunChoice | None
    train: bool = False
    step: int = 0
    play: bool = False

    @property
    def snapshot_every(self) -> int:
        """Steps between snapshots: about 50 snapshots per run, at least every 10 steps."""
        return max(MIN_SNAPSHOT_EVERY, self.steps // SNAPSHOTS_PER_RUN)

    def configs(self) -> tuple[data.TrainingConfig, ...]:
        """One training configuration per run.

        Raises:
            ValueError: naming a value the trainer refuses.
        """
        choices = (self.first,) if self.second is None else (self.first, self.second)
        scaled = {"default": None, "scaled": True, "unscaled": False}
        return tuple(
            data.TrainingConfig(
                task=self.task,
                variant=c.variant,
                variant_params=c.params,
                scaled=scaled[c.scaling],
                layers=self.layers,
                heads=self.heads,
                d_model=self.d_model,
                seq_len=self.seq_len,
                steps=self.steps,
                lr=self.lr,
                positions=self.positions,
                seed=self.seed,
                snapshot_every=self.snapshot_every,
            )
            for c in choices
        )


# ---------------------------------------------------------------- controls


def run_controls(page: str, seq_len: int, label: str) -> RunChoice:
    """A variant with its own parameters, and the score scaling, under the key prefix ``page``."""
    variant = controls.variant_controls(page, seq_len, label=label)
    scaling = state.radio(
        page,
        "scaling",
        t("watch.ctl_scaling"),
        SCALINGS,
        "default",
        format_func=lambda s: t(f"watch.scaling_{s}"),
        help=t("watch.ctl_scaling_help"),
    )
    return RunChoice(variant.variant, variant.params, scaling)


def watch_controls(page: str) -> WatchConfig:
    """The sidebar: task and sizes shared by both runs, then each run's variant and scaling."""
    task = state.select(
        page,
        "task",
        t("watch.ctl_task"),
        data.TASKS,
        "shift",
        format_func=lambda k: t(f"watch.task_{k}"),
    )
    seq_len = state.slider_int(page, "seq_len", t("common.ctl_seq_len"), 4, WATCH_MAX_LEN, 8)
    steps = state.slider_int(
        page, "steps", t("watch.ctl_steps"), MIN_STEPS, MAX_STEPS, 300, step=STEPS_STEP
    )
    lr = state.select(page, "lr", t("watch.ctl_lr"), LEARNING_RATES, 0.01)
    d_model = state.select(page, "d_model", t("common.ctl_d_model"), D_MODELS, 32)
    heads = state.select(page, "heads", t("common.ctl_heads"), controls.head_options(d_model), 1)
    st.sidebar.caption(t("common.ctl_d_k", d_k=d_model // heads))
    layers = state.slider_int(page, "layers", t("watch.ctl_layers"), 1, MAX_LAYERS, 1)
    positions = state.checkbox(
        page, "positions", t("watch.ctl_positions"), True, help=t("watch.ctl_positions_help")
    )
    seed = state.slider_int(page, "seed", t("common.ctl_seed"), 0, controls.MAX_SEED, 0)
    first = run_controls(page, seq_len, t("watch.ctl_variant_a"))
    compare = state.checkbox(page, "compare", t("watch.ctl_compare"), False)
    second = run_controls(OTHER, seq_len, t("watch.ctl_variant_b")) if compare else None
    settings = WatchConfig(
        task=task,
        seq_len=seq_len,
        steps=steps,
        lr=lr,
        d_model=d_model,
        heads=heads,
        layers=layers,
        positions=positions,
        seed=seed,
        first=first,
        second=second,
    )
    train = train_controls()
    step, play = replay_controls(page, settings, train)
    return replace(settings, train=train, step=step, play=play)


def train_controls() -> bool:
    """The top of the page: Train and the two preset comparisons.

    Returns:
        True when training is asked for: pressed now, or the link's flag (then kept there).
    """
    buttons = st.columns(3)
    pressed = buttons[0].button(t("watch.train"), type="primary")
    buttons[1].button(t("watch.preset_scaling"), on_click=apply_preset, args=("scaling",))
    buttons[2].button(t("watch.preset_window"), on_click=apply_preset, args=("window",))
    wanted = state.url_bool(TRAINED, False) or pressed
    if pressed:
        state.write(TRAINED, True)
    return wanted


def replay_controls(page: str, settings: WatchConfig, train: bool) -> tuple[int, bool]:
    """Under the buttons, once training is asked for or its runs are kept: the snapshot
    slider and Play.

    Returns:
        The step shown (the last one without the slider) and whether Play was pressed.
    """
    if not replay_wanted(settings, train):
        return settings.steps, False
    top = st.columns([4, 1])
    step = state.slider_int(
        page,
        "step",
        t("watch.ctl_step"),
        0,
        settings.steps,
        settings.steps,
        step=settings.snapshot_every,
        where=top[0],
    )
    return step, top[1].button(t("watch.play"))


def replay_wanted(settings: WatchConfig, train: bool) -> bool:
    """Training is asked for, or every run is already kept on this server (valid settings)."""
    try:
        configs = settings.configs()
    except ValueError:
        return False
    return train or all(data.finished_run(c) is not None for c in configs)


PRESETS = {
    "scaling": {
        "watch.task": "shift",
        "watch.d_model": 256,
        "watch.heads": 1,
        "watch.seq_len": 8,
        "watch.lr": 0.01,
        "watch.variant": "scaled",
        "watch.scaling": "scaled",
        "watch.compare": True,
        "watch.b.variant": "scaled",
        "watch.b.scaling": "unscaled",
    },
    "window": {
        "watch.task": "reverse",
        "watch.d_model": 32,
        "watch.heads": 1,
        "watch.seq_len": 8,
        "watch.lr": 0.01,
        "watch.variant": "scaled",
        "watch.scaling": "default",
        "watch.compare": True,
        "watch.b.variant": "local",
        "watch.b.local.window_size": 3,
        "watch.b.scaling": "default",
    },
}


def apply_preset(name: str) -> None:
    """Button callback: set the controls of a side-by-side comparison and ask for training."""
    for key, value in PRESETS[name].items():
        st.session_state[key] = value
    state.write(TRAINED, True)


# ---------------------------------------------------------------- drawing


def head_maps(weights: np.ndarray, target: np.ndarray) -> data.Heatmap:
    """Every head's weights (layers, heads, L, L) and the target (L, L) as one heatmap grid."""
    layers, heads, L, _ = weights.shape
    names = [
        t("watch.head_name", layer=layer + 1, head=head + 1)
        for layer in range(layers)
        for head in range(heads)
    ]
    stack = np.concatenate([weights.reshape(layers * heads, L, L), target[None]])  # (P, L, L)
    labels = [str(i) for i in range(L)]
    return data.heatmap_grid(stack, labels, labels, panels=[*names, t("watch.target_name")])


def draw_heads(snapshot: data.Snapshot, target: np.ndarray, key: str) -> None:
    """The heads at one snapshot beside the task's target pattern."""
    grid = head_maps(snapshot.weights, target)
    title = t("watch.heads_title", step=snapshot.step, acc=f"{snapshot.accuracy:.1%}")
    spec = charts.weights_spec(
        grid,
        title,
        panel_title=t("common.chart_head"),
        domain=(0.0, 1.0),
        columns=min(len(grid.panels), HEAD_COLUMNS),
    )
    canvas.draw_heatmaps(grid, spec, key=key)


def draw_target(config: data.TrainingConfig) -> None:
    """The task's correct attention on its own, before anything is trained."""
    target = data.training_target(config)
    labels = [str(i) for i in range(config.seq_len)]
    grid = data.heatmap_grid(target, labels, labels)
    title = t("watch.target_title", task=t(f"watch.task_{config.task}"))
    spec = charts.weights_spec(grid, title, domain=(0.0, 1.0))
    canvas.draw_heatmaps(grid, spec, key="watch.target")


def line_chart(
    frame: pd.DataFrame, *, y: str, titles: tuple[str, str], log_y: bool, columns: int, key: str
) -> None:
    """One line per ``series`` against the step, tall enough for its legend: the plot keeps
    :data:`PLOT_PX` however many series (heads, projections) the legend lists.

    Args:
        frame: columns ``step``, ``y`` and ``series``. titles: the chart's and the y axis's.
        log_y: a log y axis. columns: the legend's columns. key: the element key.
    """
    series = frame["series"].nunique()
    legend = series <= MAX_LEGEND_SERIES
    rows = math.ceil(series / columns) if legend else 0
    st.altair_chart(
        charts.layered_line_chart(
            frame,
            x="step",
            y=y,
            color="series",
            title=titles[0],
            x_title=t("watch.axis_step"),
            y_title=titles[1],
            color_title="",
            log_y=log_y,
            height=PLOT_PX + CHART_CHROME_PX + rows * LEGEND_ROW_PX,
            legend_columns=columns,
            show_legend=legend,
        ),
        theme=None,
        key=key,
        width="stretch",
    )
    if not legend:
        st.caption(t("watch.legend_hidden", n=series))


def curve_series(curves: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One metric's rows of :func:`data.curves_table`, its ``series`` the metric's name."""
    return curves[curves["metric"] == metric].assign(series=t(f"watch.metric_{metric}"))


def match_series(run) -> pd.DataFrame:
    """Weight on the correct key per head and step, a ``series`` per head ("L1 H2")."""
    match = data.match_table(run.snapshots)
    names = [
        t("watch.head_name", layer=a + 1, head=b + 1)
        for a, b in zip(match["layer"], match["head"], strict=True)
    ]
    return match.assign(series=names)


def grad_series(run) -> pd.DataFrame:
    """Gradient norms per projection, layer and step, a ``series`` per projection and layer;
    zero and non-finite norms left out (a log axis)."""
    grads = data.grad_table(run.snapshots)
    norms = grads["grad_norm"]
    grads = grads[np.isfinite(norms) & (norms > 0)]
    names = [
        f"{n} · {t('watch.layer_name', layer=a + 1)}"
        for n, a in zip(grads["tensor"], grads["layer"], strict=True)
    ]
    return grads.assign(series=names)


def run_title(config: data.TrainingConfig) -> str:
    """ "Scaled attention · unscaled scores" and the like."""
    scaling = {None: "default", True: "scaled", False: "unscaled"}[config.scaled]
    params = ", ".join(f"{controls.param_label(k)} {v}" for k, v in config.variant_params)
    name = controls.variant_label(config.variant) + (f" ({params})" if params else "")
    return f"{name} · {t(f'watch.scaling_{scaling}')}"


def summary(run, where, narrow: bool = False) -> None:
    """Final accuracy, loss, best head match and the first step at 99 % accuracy; for a run
    that diverged, first the divergence, and the figures labelled as where it stopped."""
    final = run.final
    ready = next((s.step for s in run.snapshots if s.accuracy >= READY_ACCURACY), None)
    end = "final" if run.divergence is None else "stopped"
    if run.divergence is not None:
        where.warning(divergence_text(run.divergence, run.config))
    cols = where.columns(2) + where.columns(2) if narrow else where.columns(4)  # labels whole
    cols[0].metric(t(f"watch.metric_{end}_accuracy"), f"{final.accuracy:.1%}")
    loss = f"{final.loss:.3f}" if run.divergence is None else f"{final.loss:.4g}"
    cols[1].metric(t(f"watch.metric_{end}_loss"), loss)
    cols[2].metric(t("watch.metric_match"), f"{final.match.max():.2f}")
    cols[3].metric(t("watch.metric_ready"), "—" if ready is None else str(ready))


def divergence_text(divergence: data.Divergence, config: data.TrainingConfig) -> str:
    """Where and why the run diverged, and what usually helps, in the page's language."""
    reason = "exploded" if divergence.reason == data.LOSS_EXPLODED else "not_finite"
    said = t(
        f"watch.diverged_{reason}",
        step=divergence.step,
        loss=f"{divergence.loss:.4g}",
        factor=f"{data.DIVERGENCE_FACTOR:g}",
        start=f"{divergence.start_loss:.3f}",
        last=f"{divergence.last_finite_loss:.4g}",
    )
    smaller = max((lr for lr in LEARNING_RATES if lr < config.lr), default=None)
    lr = f"{config.lr:g}"
    lr_advice = (
        t("watch.diverged_lr", lr=lr)
        if smaller is None
        else t("watch.diverged_lr_try", lr=lr, smaller=f"{smaller:g}")
    )
    scaling = t("watch.diverged_scaling") if data.unscaled_scores(config) else None
    helps = (
        t("watch.diverged_helps", lr_advice=lr_advice)
        if scaling is None
        else t("watch.diverged_helps_unscaled", lr_advice=lr_advice, scaling=scaling)
    )
    return f"{said}\n\n{helps}"


def show_run(run, step: int, index: int, narrow: bool) -> None:
    """One run: summary, heads at ``step``, curves, match and gradient norms; ``narrow``
    (one of two side by side) lays the figures and the legends out in fewer columns."""
    config = run.config
    st.subheader(run_title(config))
    summary(run, st, narrow)
    shown = max((s for s in run.snapshots if s.step <= step), key=lambda s: s.step)
    draw_heads(shown, run.target, key=f"watch.heads.{index}")
    columns = LEGEND_COLUMNS_NARROW if narrow else LEGEND_COLUMNS_WIDE
    curves = data.curves_table(run.snapshots)
    figures = [  # (table, its y column, the chart's name, the y title's key, log y)
        (curve_series(curves, "loss"), "value", "loss", "metric_loss", False),
        (curve_series(curves, "accuracy"), "value", "accuracy", "metric_accuracy", False),
        (match_series(run), "match", "match", "axis_match", False),
        (grad_series(run), "grad_norm", "grads", "axis_grads", True),
    ]
    for frame, y, name, y_title, log_y in figures:
        titles = (t(f"watch.chart_{name}"), t(f"watch.{y_title}"))
        key = f"watch.{name}.{index}"
        line_chart(frame, y=y, titles=titles, log_y=log_y, columns=columns, key=key)


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
        controls.show_error(err)
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
        controls.show_error(err)
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
            controls.show_error(err)
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


def duration(seconds: float) -> str:
    """ "under 1 s", "8 s", "2 min 30 s" in the page's language."""
    if seconds < 1:
        return t("watch.duration_under_second")
    if seconds < 90:
        return t("watch.duration_seconds", s=round(seconds))
    minutes, rest = divmod(round(seconds), 60)
    if rest == 0:
        return t("watch.duration_whole_minutes", m=minutes)
    return t("watch.duration_minutes", m=minutes, s=rest)


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
