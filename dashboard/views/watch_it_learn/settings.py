"""Watch it learn's settings: the sidebar's task, sizes and the two runs' variants, the Train
and preset buttons, the snapshot slider and Play, as one frozen :class:`WatchConfig` that
builds the training runs (:meth:`WatchConfig.configs`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import streamlit as st

from dashboard import controls, data, state
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
    state.controls_box().caption(t("common.ctl_d_k", d_k=d_model // heads))
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
    locked = state.locked(TRAINED)  # a follower's: the room trains and sets the presets
    pressed = buttons[0].button(t("watch.train"), type="primary", disabled=locked)
    for column, preset in zip(buttons[1:], ("scaling", "window"), strict=True):
        column.button(
            t(f"watch.preset_{preset}"), on_click=apply_preset, args=(preset,), disabled=locked
        )
    wanted = state.read(TRAINED, False, state.parse_bool) or pressed
    state.write(TRAINED, wanted)
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
