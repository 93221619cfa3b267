"""Tests of the synthetic tasks and of training a tiny attention model on them."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from attention_core import VARIANTS
from attention_core.device import MemoryBudgetError
from attention_core.experiments import (
    IGNORE,
    NO_KEY,
    TASKS,
    TrainingConfig,
    iter_training,
    make_batch,
    pattern_match,
    sample_tokens,
    target_pattern,
    task_targets,
    train_task,
)
from attention_core.experiments import training as training_module
from attention_core.experiments.divergence import (
    DIVERGENCE_FACTOR,
    LOSS_EXPLODED,
    LOSS_NOT_FINITE,
    LossWatch,
    divergence_at,
    drain,
)
from attention_core.experiments.scaling import derived_seed
from attention_core.experiments.training import (
    probe_batch,
    run_training,
    take_snapshot,
    train_step,
)
from attention_core.experiments.training_cost import (
    StepCost,
    cost_config,
    estimate_training_seconds,
    measure_step_cost,
)
from attention_core.experiments.training_model import DATA_STREAM, TinyAttentionModel

# --- task generators against literal examples ---------------------------------------------


def _targets(task, rows):
    return task_targets(task, torch.tensor(rows))


def test_shift_targets_literal():
    targets, keys = _targets("shift", [[3, 1, 4, 1, 5]])
    assert targets.tolist() == [[IGNORE, 3, 1, 4, 1]]
    assert keys.tolist() == [[NO_KEY, 0, 1, 2, 3]]


def test_reverse_targets_literal():
    targets, keys = _targets("reverse", [[3, 1, 4, 1, 5]])
    assert targets.tolist() == [[5, 1, 4, 1, 3]]
    assert keys.tolist() == [[4, 3, 2, 1, 0]]


def test_sort_targets_literal():
    targets, keys = _targets("sort", [[7, 2, 9, 0], [1, 2, 3, 4]])
    assert targets.tolist() == [[0, 2, 7, 9], [1, 2, 3, 4]]
    assert keys.tolist() == [[3, 1, 0, 2], [0, 1, 2, 3]]


def test_induction_targets_literal():
    # first parts of length 4 and 5, then their repeats
    targets, keys = _targets("induction", [[5, 2, 7, 9, 5, 2, 7, 9], [4, 8, 1, 6, 3, 4, 8, 1]])
    assert targets.tolist() == [
        [IGNORE, IGNORE, IGNORE, IGNORE, 2, 7, 9, IGNORE],
        [IGNORE, IGNORE, IGNORE, IGNORE, IGNORE, 8, 1, IGNORE],
    ]
    assert keys.tolist() == [
        [NO_KEY, NO_KEY, NO_KEY, NO_KEY, 1, 2, 3, NO_KEY],
        [NO_KEY, NO_KEY, NO_KEY, NO_KEY, NO_KEY, 1, 2, NO_KEY],
    ]


def test_induction_without_repeat_is_refused():
    with pytest.raises(ValueError, match="repeat"):
        _targets("induction", [[1, 2, 3, 4, 5, 6]])


@pytest.mark.parametrize("task", TASKS)
def test_target_key_holds_the_answer(task):
    """Where a position is scored, the token at its target key is what it must output
    (for induction: the token after the earlier occurrence, which is the next token)."""
    batch = make_batch(task, 64, 10, torch.Generator().manual_seed(1))
    scored = batch.scored
    assert scored.any()
    at_key = batch.tokens.gather(1, batch.target_keys.clamp(min=0))  # (B, L)
    assert torch.equal(at_key[scored], batch.targets[scored])
    assert torch.equal(batch.target_keys == NO_KEY, ~scored)


def test_sampled_sequences_have_the_task_structure():
    g = torch.Generator().manual_seed(2)
    sort_tokens = sample_tokens("sort", 32, 12, g)
    assert all(len(set(row)) == 12 for row in sort_tokens.tolist())  # distinct: one sorted key
    induction = sample_tokens("induction", 32, 12, g)
    for row in induction.tolist():
        h = next(i for i in range(12) if row[i] in row[:i])
        assert 6 <= h <= 10  # h in [ceil(L / 2), L - 2]
        assert len(set(row[:h])) == h and row[h:] == row[: 12 - h]
    assert int(sample_tokens("shift", 64, 8, g).max()) < 16


def test_target_pattern_and_match_literal():
    keys = torch.tensor([[NO_KEY, 0, 1], [NO_KEY, 0, 0]])
    expected = np.array([[0, 0, 0], [1, 0, 0], [0.5, 0.5, 0]])
    np.testing.assert_array_equal(target_pattern(keys), expected)
    # one head, two sequences; scored queries put 0.75, 0.5, 1.0 and 0.25 on their keys
    weights = torch.tensor(
        [
            [[[1, 0, 0], [0.75, 0.25, 0], [0.5, 0.5, 0]]],
            [[[1, 0, 0], [1.0, 0, 0], [0.25, 0.75, 0]]],
        ]
    )
    np.testing.assert_allclose(pattern_match(weights, keys).numpy(), [(0.75 + 0.5 + 1 + 0.25) / 4])


# --- training ---------------------------------------------------------------------------


def test_same_seed_same_run_other_seed_other_run():
    kwargs = dict(steps=20, snapshot_every=5, heads=2, d_model=16)
    a = train_task("reverse", seed=3, **kwargs)
    b = train_task("reverse", seed=3, **kwargs)
    c = train_task("reverse", seed=4, **kwargs)
    assert [s.step for s in a.snapshots] == [0, 5, 10, 15, 20]
    assert [s.loss for s in a.snapshots] == [s.loss for s in b.snapshots]
    for sa, sb in zip(a.snapshots, b.snapshots, strict=True):
        np.testing.assert_array_equal(sa.weights, sb.weights)
        np.testing.assert_array_equal(sa.grad_norms, sb.grad_norms)
    assert a.final.loss != c.final.loss


def test_streaming_yields_the_same_snapshots():
    config = TrainingConfig(task="shift", steps=7, snapshot_every=3, d_model=16)
    streamed = list(iter_training(config))
    run = train_task("shift", steps=7, snapshot_every=3, d_model=16)
    assert [s.step for s in streamed] == [0, 3, 6, 7]
    assert [s.loss for s in streamed] == [s.loss for s in run.snapshots]


THREAD_SETTERS = ("set_num_threads", "set_num_interop_threads")


def _record_thread_setters(monkeypatch) -> list[tuple[str, int]]:
    """Replace torch's thread-count setters with recorders of this thread's calls; another
    thread of this process (one a dashboard test left running, under pytest-xdist) still
    reaches the real setter and is not counted against the library."""
    set_calls = []
    this_thread = threading.get_ident()
    for name in THREAD_SETTERS:
        real = getattr(torch, name)

        def setter(n, name=name, real=real):
            if threading.get_ident() != this_thread:
                return real(n)
            set_calls.append((name, n))

        monkeypatch.setattr(torch, name, setter)
    return set_calls


def _thread_settings_seen(monkeypatch):
    """Train a short run, recording every call that would set torch's thread counts and the
    thread count the training step itself runs with."""
    in_step = []
    real_step = training_module.train_step
    set_calls = _record_thread_setters(monkeypatch)
    monkeypatch.setattr(
        training_module,
        "train_step",
        lambda *args: (in_step.append(torch.get_num_threads()), real_step(*args))[1],
    )
    config = TrainingConfig(task="shift", steps=2, snapshot_every=1, d_model=16)
    snapshots = list(iter_training(config))
    return set_calls, in_step, snapshots


def test_training_leaves_torch_s_thread_count_alone(monkeypatch):
    before = torch.get_num_threads()
    set_calls, in_step, snapshots = _thread_settings_seen(monkeypatch)
    assert set_calls == []  # the caller owns the process (the dashboard: runtime/threads.py)
    assert in_step == [before, before]  # both steps ran on the caller's count
    assert [s.step for s in snapshots] == [0, 1, 2]


def test_training_takes_no_thread_count():
    config = TrainingConfig(task="shift")
    for call in (iter_training, run_training, measure_step_cost):
        with pytest.raises(TypeError, match="threads"):
            call(config, threads=1)
    with pytest.raises(ValueError, match="threads"):  # to train_task, an unknown parameter
        train_task("shift", threads=1)
    assert not hasattr(training_module, "intra_op_threads")


def test_snapshot_shapes_and_meaning():
    run = train_task(
        "induction", layers=2, heads=2, d_model=16, seq_len=6, steps=4, snapshot_every=4
    )
    first = run.snapshots[0]
    assert first.weights.shape == (2, 2, 6, 6)
    assert first.match.shape == (2, 2) and first.grad_norms.shape == (2, 3)
    np.testing.assert_allclose(first.weights.sum(-1), np.ones((2, 2, 6)), atol=1e-5)
    assert np.allclose(np.triu(first.weights, k=1), 0)  # induction is causal
    assert (first.grad_norms > 0).all()
    assert run.target.shape == (6, 6)
    assert 0 <= first.accuracy <= 1


def test_shift_is_learned_and_heads_look_at_the_previous_token():
    run = train_task("shift", seq_len=8, steps=300, seed=0)
    final = run.final
    assert final.accuracy >= 0.99
    weights = final.weights[0, 0]  # (L, L) averaged over the probe batch
    previous = np.array([weights[i, i - 1] for i in range(1, 8)])
    assert (previous >= 0.9).all(), previous
    assert final.match[0, 0] >= 0.9
    assert run.snapshots[0].accuracy < 0.5  # it was not there at initialisation


def test_local_window_cannot_reverse():
    full = train_task("reverse", seq_len=8, steps=200)
    local = train_task("reverse", variant="local", window_size=3, seq_len=8, steps=200)
    assert full.final.accuracy >= 0.95
    # a window of 3 sees the mirrored key only for the two middle queries
    assert local.final.accuracy <= 0.5
    assert local.final.match.max() <= 0.3


def test_scaled_flag_sets_the_scale():
    assert TrainingConfig(task="shift", d_model=64, heads=4).scale is None
    assert TrainingConfig(task="shift", d_model=64, heads=4, scaled=True).scale == 0.25
    assert TrainingConfig(task="shift", d_model=64, heads=4, scaled=False).scale == 1.0


def test_config_fills_variant_defaults():
    config = TrainingConfig(task="sort", variant="local")
    assert dict(config.variant_params) == VARIANTS["local"].defaults()
    config = TrainingConfig(task="sort", variant="combined", variant_params={"stride": 2})
    assert dict(config.variant_params) == {**VARIANTS["combined"].defaults(), "stride": 2}


# --- divergence: a run that fails says where and why ---------------------------------------

# a linked run known to diverge: reverse at learning rate 0.1, d_model 64, two layers, L = 16
D1 = dict(task="reverse", lr=0.1, d_model=64, layers=2, seq_len=16, steps=300)


def test_divergence_rule_literal():
    start = 3.0  # the limit is DIVERGENCE_FACTOR × 3.0 = 30.0
    assert DIVERGENCE_FACTOR == 10.0
    assert divergence_at(5, 29.9, start_loss=start, last_finite_loss=2.0) is None
    assert divergence_at(5, 30.0, start_loss=start, last_finite_loss=2.0) is None  # not above
    exploded = divergence_at(5, 30.5, start_loss=start, last_finite_loss=2.0)
    assert (exploded.step, exploded.reason, exploded.loss) == (5, LOSS_EXPLODED, 30.5)
    assert exploded.last_finite_loss == 30.5 and exploded.limit == 30.0
    for bad in (float("nan"), float("inf")):
        found = divergence_at(7, bad, start_loss=start, last_finite_loss=2.5)
        assert (found.step, found.reason, found.last_finite_loss) == (7, LOSS_NOT_FINITE, 2.5)
    gradient = divergence_at(8, 1.5, start_loss=start, last_finite_loss=2.5, gradient_finite=False)
    assert (gradient.reason, gradient.loss, gradient.last_finite_loss) == (
        LOSS_NOT_FINITE,
        1.5,
        1.5,
    )


def _reference_training_losses(config: TrainingConfig, steps: int) -> list[float]:
    """The training loss before each Adam step, from a loop written here: the trainer's
    model and seeds, torch's own cross-entropy and Adam, no divergence check."""
    model = TinyAttentionModel(config, torch.Generator().manual_seed(config.seed))
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    data = torch.Generator().manual_seed(derived_seed(config.seed, DATA_STREAM))
    losses = []
    for _ in range(steps):
        batch = make_batch(config.task, config.batch_size, config.seq_len, data)
        logits, _ = model(batch.tokens, None, need_weights=False)  # (B, L, V)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, config.vocab), batch.targets.reshape(-1), ignore_index=IGNORE
        )
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return losses


@pytest.fixture
def one_thread():
    """torch at one intra-op thread for the test (the summation order its figures were
    measured with), restored after it: the library never sets the count itself."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_d1_settings_diverge_and_stop_with_the_snapshots_so_far(one_thread):
    run = run_training(TrainingConfig(**D1))
    divergence = run.divergence
    assert divergence is not None and run.diverged_at == divergence.step
    start = run.snapshots[0].loss
    assert divergence.start_loss == start
    # the first training loss above 10 × the start, found by a loop without the check
    losses = _reference_training_losses(run.config, divergence.step + 1)  # on one thread too
    first_over = next(i for i, loss in enumerate(losses) if loss > DIVERGENCE_FACTOR * start)
    assert divergence.step == first_over
    assert divergence.reason == LOSS_EXPLODED
    assert divergence.loss == pytest.approx(losses[first_over], rel=1e-5)
    assert max(losses[:first_over]) <= DIVERGENCE_FACTOR * start
    # stopped there: snapshots at 0 and at the divergence (not at 300), all finite
    assert divergence.step < D1["steps"]
    assert [s.step for s in run.snapshots] == [0, divergence.step]
    for snapshot in run.snapshots:
        assert np.isfinite(snapshot.loss) and np.isfinite(snapshot.weights).all()
        assert np.isfinite(snapshot.grad_norms).all()


def test_a_run_that_learns_does_not_diverge(one_thread):
    run = run_training(TrainingConfig(**{**D1, "lr": 0.003, "steps": 60}))
    assert run.divergence is None and run.diverged_at is None
    assert run.snapshots[-1].step == 60
    assert max(s.loss for s in run.snapshots) <= DIVERGENCE_FACTOR * run.snapshots[0].loss


def test_the_stream_returns_the_divergence_it_stopped_at(one_thread):
    config = TrainingConfig(**{**D1, "steps": 20})
    snapshots = []
    divergence = drain(iter_training(config), snapshots)
    run = run_training(config)
    assert divergence == run.divergence and divergence is not None
    assert [s.loss for s in snapshots] == [s.loss for s in run.snapshots]


def test_a_non_finite_loss_takes_no_step_and_names_the_last_finite_loss():
    config = TrainingConfig(task="shift", d_model=16)
    model = TinyAttentionModel(config, torch.Generator().manual_seed(0))
    probe = probe_batch(config)
    start = take_snapshot(model, probe, None, 0).loss
    with torch.no_grad():
        model.readout_bias[0] = float("inf")  # logits inf: the loss is NaN, q, k, v are not
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    watch = LossWatch(start_loss=start, last_finite_loss=2.5).at(4)
    assert not train_step(model, optimizer, probe, None, watch)
    assert watch.divergence.reason == LOSS_NOT_FINITE and watch.divergence.step == 4
    assert watch.divergence.last_finite_loss == 2.5 and not np.isfinite(watch.divergence.loss)
    for p, b in zip(model.parameters(), before, strict=True):
        assert torch.equal(p.detach(), b)  # Adam did not step on it


# --- the time a run will take ---------------------------------------------------------------


def test_estimated_seconds_are_steps_times_step_plus_snapshots_times_snapshot():
    config = TrainingConfig(task="shift", steps=300, snapshot_every=10)  # snapshots 0, 10 … 300
    cost = StepCost(train_step_s=0.02, snapshot_s=0.5)
    assert estimate_training_seconds(config, cost) == pytest.approx(300 * 0.02 + 31 * 0.5)
    odd = TrainingConfig(task="shift", steps=25, snapshot_every=10)  # 0, 10, 20, 25
    assert estimate_training_seconds(odd, cost) == pytest.approx(25 * 0.02 + 4 * 0.5)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_step_cost_refuses_what_is_not_a_time(bad):
    with pytest.raises(ValueError, match="train_step_s"):
        StepCost(train_step_s=bad, snapshot_s=1.0)
    with pytest.raises(ValueError, match="snapshot_s"):
        StepCost(train_step_s=1.0, snapshot_s=bad)


def test_runs_of_one_shape_share_a_cost_measurement():
    a = TrainingConfig(task="sort", d_model=64, heads=4, lr=0.1, seed=5, steps=900)
    b = TrainingConfig(task="sort", d_model=64, heads=4, lr=0.001, seed=0, steps=50, scaled=False)
    assert cost_config(a) == cost_config(b)
    assert cost_config(a) != cost_config(TrainingConfig(task="sort", d_model=32, heads=4))
    assert cost_config(a) != cost_config(TrainingConfig(task="shift", d_model=64, heads=4))


def test_measured_cost_is_a_cost_and_leaves_torch_alone(monkeypatch):
    before = torch.get_num_threads()
    set_calls = _record_thread_setters(monkeypatch)
    cost = measure_step_cost(cost_config(TrainingConfig(task="shift", d_model=16)))
    assert cost.train_step_s > 0 and cost.snapshot_s > 0  # StepCost checks finite too
    assert torch.get_num_threads() == before and set_calls == []
    monkeypatch.setenv("ATTENTION_LAB_MEMORY_BUDGET_MIB", "1")
    with pytest.raises(MemoryBudgetError):
        measure_step_cost(TrainingConfig(task="shift", seq_len=64, heads=16, d_model=64))


# --- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "bad"),
    [
        (dict(task="copy"), "copy"),
        (dict(task="shift", variant="fancy"), "fancy"),
        (dict(task="shift", variant="local", window_size=0), "0"),
        (dict(task="shift", variant="scaled", window_size=3), "window_size"),
        (dict(task="shift", heads=3, d_model=32), "heads=3"),
        (dict(task="shift", heads=0), "0"),
        (dict(task="shift", layers=9), "9"),
        (dict(task="shift", seq_len=2), "2"),
        (dict(task="shift", seq_len=True), "True"),
        (dict(task="shift", steps=0), "0"),
        (dict(task="shift", lr=0.0), "0.0"),
        (dict(task="shift", lr=float("nan")), "nan"),
        (dict(task="shift", batch_size=5000), "5000"),
        (dict(task="shift", positions="yes"), "yes"),
        (dict(task="shift", scaled=1), "1"),
        (dict(task="shift", seed=-1), "-1"),
        (dict(task="shift", steps=10, snapshot_every=11), "11"),
    ],
)
def test_bad_input_names_the_value(kwargs, bad):
    task = kwargs.pop("task")
    with pytest.raises(ValueError, match=bad):
        train_task(task, **kwargs)


def test_over_budget_refused_before_training(monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_MEMORY_BUDGET_MIB", "1")
    with pytest.raises(MemoryBudgetError, match="batch size"):
        next(iter_training(TrainingConfig(task="shift", seq_len=64, heads=16, d_model=64)))


def test_bad_tokens_refused():
    with pytest.raises(ValueError, match="tokens"):
        task_targets("shift", torch.zeros(2, 5))
    with pytest.raises(ValueError, match="seq_len"):
        task_targets("shift", torch.zeros(2, 3, dtype=torch.long))


def test_variant_params_must_be_pairs():
    with pytest.raises(ValueError, match="variant_params"):
        TrainingConfig(task="shift", variant_params=5)
