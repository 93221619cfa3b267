"""Tests of the synthetic tasks and of training a tiny attention model on them."""

from __future__ import annotations

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


def _thread_counts_seen(monkeypatch, threads):
    """Train a short run with ``threads``, recording every torch.set_num_threads call and the
    thread count the training step itself runs with."""
    set_calls, in_step = [], []
    real_step = training_module._train_step
    monkeypatch.setattr(torch, "set_num_threads", set_calls.append)
    monkeypatch.setattr(
        training_module,
        "_train_step",
        lambda *args: (in_step.append(set_calls[-1] if set_calls else None), real_step(*args)),
    )
    config = TrainingConfig(task="shift", steps=2, snapshot_every=1, d_model=16)
    snapshots = list(iter_training(config, threads=threads))
    return set_calls, in_step, snapshots


def test_threads_none_leaves_torch_alone(monkeypatch):
    set_calls, in_step, snapshots = _thread_counts_seen(monkeypatch, None)
    assert set_calls == [] and in_step == [None, None]
    assert [s.step for s in snapshots] == [0, 1, 2]


def test_threads_are_set_while_training_and_restored_before_each_yield(monkeypatch):
    before = torch.get_num_threads()
    set_calls, in_step, _ = _thread_counts_seen(monkeypatch, 3)
    assert in_step == [3, 3]  # both steps ran with the asked count
    # set then restored around the first snapshot and around each of the two steps
    assert set_calls == [3, before] * 3


@pytest.mark.parametrize("threads", [0, -1, 1.5, "2"])
def test_bad_threads_named(threads):
    with pytest.raises(ValueError, match="threads"):
        next(iter_training(TrainingConfig(task="shift"), threads=threads))


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
