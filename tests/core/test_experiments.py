"""Tests of attention_core.experiments against independent references."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attention_core import VARIANTS, MultiHeadSelfAttention, masks
from attention_core.experiments import (
    COMPLEXITY_COLUMNS,
    GRAD_TENSORS,
    PATTERN_NAMES,
    SCALING_COLUMNS,
    check_causal_leak,
    check_chunked_exact,
    check_perm,
    check_permutation_equivariance,
    checkpointing_estimate,
    chunked_vs_full_memory,
    compare_softmax_stability,
    equivariance_table,
    gradient_norms_vs_dk,
    gradient_table,
    head_patterns,
    make_gradient_problem,
    measure_complexity,
    measure_gradient_norms,
    measure_peak_bytes,
    measure_scaling,
    naive_softmax,
    precision_comparison,
    random_perm,
    row_sums,
    sinusoidal_positions,
    softmax_entropy,
    softmax_jacobian_norm,
    softmax_overflow_sweep,
)

# --- head patterns ---------------------------------------------------------------------


def test_head_patterns_names_and_rows_sum_to_one():
    patterns = head_patterns(seq_len=6, seed=3)
    assert tuple(patterns) == PATTERN_NAMES
    assert len(patterns) == 8
    for name, pattern in patterns.items():
        assert pattern.shape == (6, 6), name
        assert (pattern >= 0).all(), name
        np.testing.assert_allclose(pattern.sum(axis=1), np.ones(6), atol=1e-12, err_msg=name)


def test_head_patterns_literal_small_matrices():
    patterns = head_patterns(seq_len=3)
    forward = np.array([[1 / 3, 1 / 3, 1 / 3], [0.0, 0.5, 0.5], [0.0, 0.0, 1.0]])
    backward = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3]])
    local = np.array([[0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3], [0.0, 0.5, 0.5]])
    np.testing.assert_allclose(patterns["forward"], forward)
    np.testing.assert_allclose(patterns["backward"], backward)
    np.testing.assert_allclose(patterns["local"], local)
    np.testing.assert_allclose(patterns["global"], np.full((3, 3), 1 / 3))
    assert np.array_equal(np.triu(patterns["forward"]), patterns["forward"])


def test_head_patterns_random_heads_seeded_and_distinct():
    first = head_patterns(seq_len=5, seed=7)
    again = head_patterns(seq_len=5, seed=7)
    other = head_patterns(seq_len=5, seed=8)
    for i in range(1, 5):
        np.testing.assert_array_equal(first[f"random_{i}"], again[f"random_{i}"])
    assert not np.allclose(first["random_1"], other["random_1"])
    assert not np.allclose(first["random_1"], first["random_2"])


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "10", 10_000])
def test_head_patterns_bad_seq_len(bad):
    with pytest.raises(ValueError, match="seq_len"):
        head_patterns(seq_len=bad)


@pytest.mark.parametrize("bad", [-1, 1.5, None])
def test_head_patterns_bad_seed(bad):
    with pytest.raises(ValueError, match="seed"):
        head_patterns(seed=bad)


# --- scaling -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scaling_table():
    return measure_scaling(d_ks=(16, 64, 256), seq_len=8, seed=0, trials=200)


def test_scaling_columns_and_theory(scaling_table):
    assert tuple(scaling_table.columns) == SCALING_COLUMNS
    assert scaling_table["d_k"].tolist() == [16, 64, 256]
    np.testing.assert_allclose(scaling_table["theory_std_unscaled"], [4.0, 8.0, 16.0])
    np.testing.assert_allclose(scaling_table["max_entropy"], math.log(8))


def test_scaling_std_matches_sqrt_dk(scaling_table):
    # 200 trials x 64 scores per d_k: the std estimate is within a few percent
    np.testing.assert_allclose(scaling_table["std_scaled"], 1.0, rtol=0.08)
    np.testing.assert_allclose(
        scaling_table["std_unscaled"], np.sqrt(scaling_table["d_k"]), rtol=0.08
    )
    assert (scaling_table["mean_scaled"].abs() < 0.1).all()


def test_scaling_saturates_without_scale(scaling_table):
    t = scaling_table
    assert (t["entropy_unscaled"] < t["entropy_scaled"]).all()
    assert (t["max_weight_unscaled"] > t["max_weight_scaled"]).all()
    assert (t["jacobian_norm_unscaled"] < t["jacobian_norm_scaled"]).all()
    # saturation deepens with d_k: entropy falls, the largest weight approaches 1
    assert t["entropy_unscaled"].is_monotonic_decreasing
    assert t["max_weight_unscaled"].iloc[-1] > 0.9


def test_scaling_rows_independent_of_other_dks():
    both = measure_scaling(d_ks=(8, 32), seq_len=4, trials=10)
    alone = measure_scaling(d_ks=(32,), seq_len=4, trials=10)
    np.testing.assert_allclose(both.iloc[1].to_numpy(float), alone.iloc[0].to_numpy(float))


def test_softmax_jacobian_norm_matches_autograd():
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, generator=generator, dtype=torch.float64) * 3.0
    weights = torch.softmax(logits, dim=-1)
    got = softmax_jacobian_norm(weights)
    for row in range(3):
        jac = torch.autograd.functional.jacobian(
            lambda z: torch.softmax(z, dim=-1), logits[row]
        )  # (5, 5)
        torch.testing.assert_close(got[row], torch.linalg.matrix_norm(jac), rtol=1e-12, atol=0)


def test_softmax_entropy_literal():
    weights = torch.tensor([[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0]])
    torch.testing.assert_close(
        softmax_entropy(weights), torch.tensor([math.log(4), 0.0, math.log(2)])
    )


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"d_ks": ()}, "d_ks"),
        ({"d_ks": (0, 32)}, "d_k"),
        ({"d_ks": (5000,)}, "d_k"),
        ({"d_ks": (32.5,)}, "d_k"),
        ({"d_ks": "32"}, "d_ks"),
        ({"seq_len": 0}, "seq_len"),
        ({"trials": 0}, "trials"),
        ({"seed": -1}, "seed"),
        ({"d_ks": (4096,), "trials": 10_000}, "trials"),
    ],
)
def test_scaling_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        measure_scaling(**kwargs)


# --- equivariance --------------------------------------------------------------------------

TUTORIAL_PERM = (2, 0, 4, 1, 3)


def test_equivariance_holds_for_scaled():
    result = check_permutation_equivariance("scaled", perm=TUTORIAL_PERM)
    assert result.holds
    assert result.max_abs_diff < 1e-5
    assert result.perm == TUTORIAL_PERM
    assert len(result.per_position_diff) == 5


def test_equivariance_matches_explicit_reference():
    """max |f(Px) - P f(x)| recomputed here with the same seeded layer and input."""
    result = check_permutation_equivariance("scaled", perm=TUTORIAL_PERM, causal=True, seed=3)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        layer = MultiHeadSelfAttention(8, 2).eval()
    x = torch.randn(1, 5, 8, generator=torch.Generator().manual_seed(3))
    mask = masks.causal(5)
    with torch.no_grad():
        expected = (
            layer(x[:, list(TUTORIAL_PERM)], mask)[0] - layer(x, mask)[0][:, list(TUTORIAL_PERM)]
        )
    assert result.max_abs_diff == pytest.approx(expected.abs().max().item(), abs=1e-7)


def test_equivariance_broken_by_causal_mask_and_positions():
    causal = check_permutation_equivariance("scaled", perm=TUTORIAL_PERM, causal=True)
    positional = check_permutation_equivariance("scaled", perm=TUTORIAL_PERM, positional=True)
    assert causal.max_abs_diff > 1e-3 and not causal.holds
    assert positional.max_abs_diff > 1e-3 and not positional.holds


def test_equivariance_identity_perm_is_trivial():
    result = check_permutation_equivariance("scaled", perm=(0, 1, 2, 3, 4), causal=True)
    assert result.max_abs_diff == 0.0


def test_random_perm_seeded_and_not_identity():
    assert random_perm(6, 1) == random_perm(6, 1)
    for seed in range(20):
        perm = random_perm(3, seed)
        assert sorted(perm) == [0, 1, 2] and perm != (0, 1, 2)


def test_equivariance_table_scaled_and_linear():
    table = equivariance_table(["scaled", "linear"], seq_len=6)
    assert table["variant"].tolist() == ["scaled", "scaled", "linear", "linear"]
    assert table["causal"].tolist() == [False, True, False, True]
    assert table["holds"].tolist() == [True, False, True, False]


def test_sinusoidal_positions_literal():
    pe = sinusoidal_positions(3, 4)
    expected = torch.tensor(
        [
            [0.0, 1.0, 0.0, 1.0],
            [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)],
            [math.sin(2), math.cos(2), math.sin(0.02), math.cos(0.02)],
        ]
    )
    torch.testing.assert_close(pe, expected)
    assert sinusoidal_positions(2, 5).shape == (2, 5)


@pytest.mark.parametrize(
    "perm", [(0, 1, 2, 3), (0, 1, 2, 3, 3), (0, 1, 2, 3, 5), (0, 1, 2, 3, 4.0), "01234"]
)
def test_equivariance_bad_perm(perm):
    with pytest.raises(ValueError, match="perm"):
        check_permutation_equivariance(perm=perm)
    with pytest.raises(ValueError, match="perm"):
        check_perm(perm, 5)


def test_equivariance_bad_variant_and_heads():
    with pytest.raises(ValueError, match="nope"):
        check_permutation_equivariance("nope")
    with pytest.raises(ValueError, match="divisible"):
        check_permutation_equivariance(embed_dim=8, num_heads=3)
    with pytest.raises(ValueError, match="equivariance|variants"):
        equivariance_table([])


# --- gradients -----------------------------------------------------------------------------


def _reference_gradient_norms(problem, scale):
    """The same computation written out in float64: Q, K, V, softmax via exp/sum, MSE."""
    x = problem.x.detach().double().requires_grad_(True)
    w_q, w_k, w_v = (
        w.detach().double().requires_grad_(True) for w in (problem.w_q, problem.w_k, problem.w_v)
    )
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    scores = (q @ k.T) * scale
    exp = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
    weights = exp / exp.sum(dim=-1, keepdim=True)
    out = weights @ v
    loss = ((out - problem.target.double()) ** 2).sum() / out.numel()
    loss.backward()
    return {
        "W_Q": w_q.grad.norm().item(),
        "W_K": w_k.grad.norm().item(),
        "W_V": w_v.grad.norm().item(),
        "input": x.grad.norm().item(),
        "loss": loss.item(),
    }


@pytest.mark.parametrize("scale", [None, "none"])
@pytest.mark.parametrize("init", ["scaled", "randn"])
def test_gradient_norms_match_float64_reference(scale, init):
    got = measure_gradient_norms("scaled", 6, 4, scale=scale, init=init, seed=2, dtype="float64")
    problem = make_gradient_problem(6, 4, init=init, seed=2, dtype="float64")
    factor = 1.0 / math.sqrt(6) if scale is None else 1.0
    expected = _reference_gradient_norms(problem, factor)
    assert got.scale == pytest.approx(factor)
    for name, value in expected.items():
        assert getattr(got, name) == pytest.approx(value, rel=1e-9), name


def test_gradient_norms_float32_close_to_reference():
    got = measure_gradient_norms("stable", 16, 4, seed=1)
    expected = _reference_gradient_norms(make_gradient_problem(16, 4, seed=1), 0.25)
    for name in GRAD_TENSORS:
        assert getattr(got, name) == pytest.approx(expected[name], rel=1e-4), name


def test_gradient_problem_leaves():
    problem = make_gradient_problem(4, 3, seed=0)
    for t in (problem.x, problem.w_q, problem.w_k, problem.w_v):
        assert t.is_leaf and t.requires_grad
    assert problem.x.shape == (3, 4) and problem.w_q.shape == (4, 4)
    assert not problem.target.requires_grad


def test_gradient_norms_vs_dk_shape_and_scales():
    table = gradient_norms_vs_dk((4, 16), seq_len=3, trials=2)
    assert len(table) == 2 * 2 * 4
    scaled = table[table["scaling"] == "scaled"].groupby("d_k")["scale"].first()
    np.testing.assert_allclose(scaled.to_numpy(), [0.5, 0.25])
    assert (table[table["scaling"] == "unscaled"]["scale"] == 1.0).all()
    assert (table["grad_norm_min"] <= table["grad_norm"]).all()
    assert (table["grad_norm"] <= table["grad_norm_max"]).all()


def test_gradient_table_exact_variants_agree():
    table = gradient_table(["scaled", "stable"], embed_dim=8, seq_len=4)
    pivot = table.pivot_table(index=["scaling", "tensor"], columns="variant", values="grad_norm")
    np.testing.assert_allclose(pivot["scaled"], pivot["stable"], rtol=1e-4)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"embed_dim": 0}, "embed_dim"),
        ({"seq_len": -2}, "seq_len"),
        ({"scale": -1.0}, "scale"),
        ({"scale": "tiny"}, "scale"),
        ({"init": "zeros"}, "init"),
        ({"dtype": "float16"}, "dtype"),
        ({"variant": "nope"}, "nope"),
    ],
)
def test_gradient_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        measure_gradient_norms(**kwargs)


# --- stability -----------------------------------------------------------------------------


def test_naive_fp16_softmax_overflows_stable_does_not():
    table = compare_softmax_stability(1e4, "float16").set_index("method")
    assert not table.loc["naive", "all_finite"]
    assert table.loc["naive", "n_nan"] + table.loc["naive", "n_inf"] > 0
    assert table.loc["stable", "all_finite"]
    assert table.loc["stable", "max_abs_err"] < 1e-3
    assert table.loc["stable", "max_row_sum_err"] < 1e-3


def test_naive_softmax_literal():
    logits = torch.tensor([[0.0, math.log(3.0)], [1e4, 0.0]], dtype=torch.float16)
    out = naive_softmax(logits)
    torch.testing.assert_close(out[0], torch.tensor([0.25, 0.75], dtype=torch.float16))
    assert not torch.isfinite(out[1]).all()
    torch.testing.assert_close(
        naive_softmax(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)),
        torch.softmax(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), dim=-1),
    )


def test_softmax_overflow_sweep_thresholds():
    sweep = softmax_overflow_sweep((5.0, 50.0, 500.0), ("float16", "float32"))
    naive = sweep[sweep["method"] == "naive"].set_index(["dtype", "logit_scale"])
    assert naive.loc[("float16", 5.0), "nonfinite_fraction"] == 0
    assert naive.loc[("float16", 50.0), "nonfinite_fraction"] > 0
    assert naive.loc[("float32", 50.0), "nonfinite_fraction"] == 0
    assert naive.loc[("float32", 500.0), "nonfinite_fraction"] > 0
    assert (sweep[sweep["method"] == "stable"]["nonfinite_fraction"] == 0).all()


def test_precision_comparison_orders_dtypes():
    table = precision_comparison(seq_len=8, d_model=16, heads=2).set_index("dtype")
    assert table.loc["float64", "max_abs_diff_vs_fp32"] < 1e-5
    assert table.loc["float16", "max_abs_diff_vs_fp32"] < 1e-2
    assert table.loc["bfloat16", "max_abs_diff_vs_fp32"] < 5e-2
    assert (
        table.loc["float64", "max_abs_diff_vs_fp32"]
        < table.loc["float16", "max_abs_diff_vs_fp32"]
        < table.loc["bfloat16", "max_abs_diff_vs_fp32"]
    )
    assert table["bytes_per_element"].tolist() == [2, 2, 8]


def test_chunked_vs_full_memory_uses_estimates():
    from attention_core import estimate_memory

    table = chunked_vs_full_memory((256, 1024), batch=1, heads=2, E=8, chunk_size=64)
    assert len(table) == 6
    full = table[table["strategy"] == "full weights"]["estimated_bytes"].tolist()
    assert full == [
        estimate_memory("stable", batch=1, heads=2, L=n, E=8, need_weights=True)
        for n in (256, 1024)
    ]
    chunked = table[table["strategy"] == "chunked"]["estimated_bytes"].to_numpy()
    assert chunked[1] < full[1]


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"logit_scale": 0.0}, "logit_scale"),
        ({"logit_scale": 1e5}, "logit_scale"),
        ({"dtype": "int8"}, "int8"),
        ({"seq_len": 1}, "seq_len"),
    ],
)
def test_stability_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        compare_softmax_stability(**kwargs)


def test_precision_bad_input():
    with pytest.raises(ValueError, match="divisible"):
        precision_comparison(d_model=10, heads=3)
    with pytest.raises(ValueError, match="float8"):
        precision_comparison(dtypes=("float8",))
    with pytest.raises(ValueError, match="naive_softmax|x must"):
        naive_softmax([1.0, 2.0])


# --- complexity ----------------------------------------------------------------------------


def test_measure_complexity_rows_and_progress():
    seen = []
    table = measure_complexity(
        ("scaled", "stable"), (16, 32), heads=1, E=8, repeats=1, progress=seen.append
    )
    assert tuple(table.columns) == COMPLEXITY_COLUMNS
    assert len(table) == 4 and (table["status"] == "ok").all()
    assert seen == [0.25, 0.5, 0.75, 1.0]
    assert (table["time_ms"] > 0).all()
    stable = table[table["variant"] == "stable"].set_index("L")
    # explicit attention allocates at least its (1, 1, L, L) float32 scores
    assert stable.loc[32, "peak_bytes_measured"] >= 32 * 32 * 4
    assert stable["memory_method"].str.startswith("measured").all()


def test_measure_complexity_skips_over_budget():
    table = measure_complexity(("stable",), (64,), heads=1, E=8, repeats=1, memory_budget=4096)
    row = table.iloc[0]
    assert row["status"] == "skipped" and math.isnan(row["time_ms"])
    assert "budget" in row["note"]


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"variants": ("nope",)}, "nope"),
        ({"lengths": ()}, "length"),
        ({"lengths": (0,)}, "L"),
        ({"repeats": 0}, "repeats"),
        ({"device": "tpu"}, "tpu"),
        ({"params": {"local": {"window_size": 0}}}, "window_size"),
    ],
)
def test_measure_complexity_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        measure_complexity(**kwargs)


class _ScriptedClock:
    """A perf_counter under which the n-th call of :meth:`call` takes durations[n] seconds
    (the last one repeats)."""

    def __init__(self, durations):
        self.now, self.durations, self.calls = 0.0, list(durations), 0

    def perf_counter(self):
        return self.now

    def call(self):
        self.now += self.durations[min(self.calls, len(self.durations) - 1)]
        self.calls += 1


@pytest.mark.parametrize(
    ("durations", "expected_ms", "expected_calls"),
    [
        # warm-up, three 10 ms stalls (the other core busy), then 0.1 ms calls: timed until
        # 0.05 s were spent, capped at 100 runs; the fastest is the call's cost
        ([0.5, 0.01, 0.01, 0.01, 0.0001], 0.1, 1 + 100),
        ([0.5, 0.2], 200.0, 1 + 3),  # slow calls: just the 3 asked for
        # calls of 2^-10 s (binary fractions, so the sums are exact): 52 of them pass 0.05 s
        ([2**-10], 1e3 * 2**-10, 1 + 52),
        # a 2^-5 s stall in two calls, then calls of 2^-10 s: 20 more pass 0.05 s
        ([0.5, 2**-6, 2**-6, 2**-10], 1e3 * 2**-10, 1 + 2 + 20),
    ],
)
def test_time_call_takes_the_fastest_of_enough_runs(
    durations, expected_ms, expected_calls, monkeypatch
):
    from attention_core.experiments import complexity

    clock = _ScriptedClock(durations)
    monkeypatch.setattr(complexity.time, "perf_counter", clock.perf_counter)
    assert complexity.time_call(clock.call, 3, torch.device("cpu")) == pytest.approx(expected_ms)
    assert clock.calls == expected_calls


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_equivariance_runs_for_every_variant(variant):
    result = check_permutation_equivariance(variant, seq_len=4)
    assert math.isfinite(result.max_abs_diff)


_GRADIENT_VARIANTS = sorted(VARIANTS)


@pytest.mark.parametrize("variant", _GRADIENT_VARIANTS)
def test_gradients_run_for_every_variant(variant):
    norms = measure_gradient_norms(variant, embed_dim=4, seq_len=3)
    assert all(math.isfinite(getattr(norms, name)) for name in GRAD_TENSORS)


# --- other properties ----------------------------------------------------------------------


def test_causal_mask_never_leaks_the_future():
    result = check_causal_leak("scaled", seq_len=6, cutoff=2, causal=True)
    assert result.past_max_abs_diff < 1e-6 and not result.leaks
    assert result.future_max_abs_diff > 1e-3
    unmasked = check_causal_leak("scaled", seq_len=6, cutoff=2, causal=False)
    assert unmasked.leaks and unmasked.past_max_abs_diff > 1e-3


def test_causal_leak_bad_cutoff():
    with pytest.raises(ValueError, match="cutoff"):
        check_causal_leak(seq_len=4, cutoff=3)


def test_row_sums_are_one():
    table = row_sums("scaled", seq_len=5, embed_dim=8, num_heads=2, causal=True)
    assert len(table) == 10
    np.testing.assert_allclose(table["row_sum"], 1.0, atol=1e-6)


@pytest.mark.parametrize("causal", [False, True])
def test_chunked_equals_full(causal):
    diff = check_chunked_exact(37, 8, chunk_size=5, key_chunk_size=7, causal=causal)
    assert diff < 1e-5


def test_checkpointing_estimate_literal():
    table = checkpointing_estimate(layers=2, batch=1, heads=1, L=4, d_model=2).set_index("strategy")
    per_layer = (5 * 4 * 2 + 2 * 16) * 4
    assert table.loc["store all", "stored_bytes"] == 2 * per_layer
    assert table.loc["checkpoint", "stored_bytes"] == 2 * 4 * 2 * 4 + per_layer
    with pytest.raises(ValueError, match="layers"):
        checkpointing_estimate(layers=0)


def test_peak_measurements_from_several_threads_all_finish():
    """The profiler is process-wide: concurrent measurements (one per dashboard session)
    must be serialised, each still seeing its own allocation."""
    import threading

    results: list[float] = []
    size = 1 << 18  # floats: 1 MiB per allocation

    def work():
        peak, _method = measure_peak_bytes(lambda: torch.ones(size), torch.device("cpu"))
        results.append(peak)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert len(results) == 4
    assert all(p >= size * 4 for p in results if not math.isnan(p)), results


def test_scaling_scores_are_drawn_a_group_of_trials_at_a_time(monkeypatch):
    """One group draws q then k exactly as randn(T, L, d_k) would; with groups of 3 trials
    the pairs come group by group (q then k each time), and the (T, L, d_k) inputs are never
    whole."""
    from attention_core.experiments import scaling

    generator = torch.Generator().manual_seed(11)
    q = torch.randn(7, 4, 5, generator=generator, dtype=torch.float64)  # (T, L, E)
    k = torch.randn(7, 4, 5, generator=generator, dtype=torch.float64)  # (T, L, E)
    assert torch.equal(scaling._unscaled_scores(11, 7, 4, 5), q @ k.transpose(-2, -1))
    monkeypatch.setattr(scaling, "DRAW_ELEMENTS", 3 * 4 * 5)  # 3 trials a group
    generator = torch.Generator().manual_seed(11)
    expected = []
    for count in (3, 3, 1):
        qg = torch.randn(count, 4, 5, generator=generator, dtype=torch.float64)
        kg = torch.randn(count, 4, 5, generator=generator, dtype=torch.float64)
        expected.append(qg @ kg.transpose(-2, -1))  # (t, L, L)
    assert torch.equal(scaling._unscaled_scores(11, 7, 4, 5), torch.cat(expected))


def test_next_token_nll_in_blocks_is_the_written_out_formula():
    """NLL of token t + 1 = logsumexp(logits_t) − logits_t[id_{t+1}], in float64, for every
    position across several blocks of NLL_ROWS rows (the last one partial)."""
    from attention_core.experiments import decoding

    gen = torch.Generator().manual_seed(7)
    length, vocab = 2 * decoding.NLL_ROWS + 6, 50
    logits = torch.randn(1, length, vocab, generator=gen) * 4  # (1, L, V) float32
    ids = torch.randint(vocab, (1, length), generator=gen)  # (1, L)
    wide = logits[0].double()  # (L, V)
    expected = torch.stack(
        [torch.logsumexp(wide[t], 0) - wide[t, ids[0, t + 1]] for t in range(length - 1)]
    )  # (L − 1,)
    nll = decoding.next_token_nll(logits, ids)
    assert nll.dtype == torch.float64 and nll.shape == (length - 1,)
    torch.testing.assert_close(nll, expected, atol=1e-12, rtol=0)
