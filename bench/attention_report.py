"""The printed report of ``python -m bench``: the measurement table, the goals with PASS or
MISS, and the stated figures (the dense path's cost), one device at a time."""

from __future__ import annotations

import math

from bench.attention_cases import BATCH, FULL_SIZES, HEAD_DIM, HEADS, QUICK_SIZES
from bench.attention_goals import MIB, Goal, Measurement, dense_cost, goals, ratio


def _fmt_ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1e3:.1f}"


def _fmt_mib(nbytes: float) -> str:
    return "-" if math.isnan(nbytes) else f"{nbytes / MIB:.1f}"


def _print_measurements(device: str, results: dict[tuple[str, int], Measurement]) -> None:
    """One line per measured row: time, allocated and RSS memory, and its note or error."""
    print(f"{'measure':<14}{'L':>7}{'time ms':>11}{'alloc MiB':>11}{'RSS MiB':>10}")
    for r in results.values():
        rss = "-" if device == "cuda" else _fmt_mib(r.peak_bytes) + ("" if r.peak_exact else "~")
        line = f"{r.kind:<14}{r.L:>7}{_fmt_ms(r.seconds):>11}{_fmt_mib(r.alloc_bytes):>11}{rss:>10}"
        extra = f"  ERROR {r.error}" if r.error else (f"  ({r.note})" if r.note else "")
        print(line + extra)


def _print_goals(checked: list[Goal]) -> None:
    """The goal table: value, target and PASS or MISS (a MISS is printed, never hidden)."""
    print(f"\n{'goal':<50}{'value':>11}{'target':>12}  result")
    for g in checked:
        sign = ">=" if g.higher_is_better else "<="
        value = "n/a" if math.isnan(g.value) else f"{g.value:.2f}{g.unit}"
        target = f"{sign} {g.target:g}{g.unit}"
        print(f"{g.name:<50}{value:>11}{target:>12}  {'PASS' if g.passed else 'MISS'}")


def _print_stated(results: dict[tuple[str, int], Measurement], large: int) -> None:
    """Figures stated without a target: the dense path's cost, and local's PyTorch path
    against FlexAttention."""
    stated = dense_cost(results)
    if stated:
        print(
            "\nstated, not goals: the dense path (scaled with weights: dense_attention, the\n"
            "PyTorch formula a learner reads) against fused SDPA, which forms no weights"
        )
        for figure in stated:
            value = "n/a" if math.isnan(figure.value) else f"{figure.value:.2f}x"
            times = f"{_fmt_ms(figure.seconds)} ms against {_fmt_ms(figure.reference_seconds)} ms"
            print(f"{figure.name:<50}{value:>11}  ({times})")
    if ("local-sdpa", large) in results and ("flex", large) in results:
        fallback = ratio(results[("local-sdpa", large)].seconds, results[("flex", large)].seconds)
        print(
            f"\n(local's pure-PyTorch path, where the band kernel is not built: local-sdpa / "
            f"FlexAttention = {fallback:.2f}x)"
        )


def report(
    device: str,
    results: dict[tuple[str, int], Measurement],
    *,
    quick: bool,
    repeats: int,
    threads: int = 0,
) -> list[Goal]:
    """Print the measurement table, the goal table and the stated figures for one device.

    Args:
        device: "cpu" or "cuda". results: the measurements keyed by (kind, L).
        quick: whether the run used the small sizes. repeats: timed rounds per length.
        threads: torch threads of the measuring processes (0: torch's own choice).

    Returns:
        The goals, as printed.
    """
    small, large = QUICK_SIZES if quick else FULL_SIZES
    memory_how = (
        "max_memory_allocated growth"
        if device == "cuda"
        else "peak of live tensor allocations (torch.profiler), and peak RSS growth"
    )
    print(
        f"\n== {device}: float32, B={BATCH}, H={HEADS}, E={HEAD_DIM}; time = median of "
        f"{repeats} round-robin runs after a warm-up; memory = {memory_how} of one call"
        f"{'; QUICK sizes' if quick else ''}"
        f"{f'; {threads} torch thread(s)' if threads else ''}"
    )
    _print_measurements(device, results)
    checked = goals(results, small, large)
    if device != "cpu":
        print(
            f"\n(the goals were set for the CPU; on {device} they are printed for comparison: "
            "at these sizes a GPU call takes about a millisecond, so Python and kernel-launch "
            "overhead weigh on every ratio)"
        )
    _print_goals(checked)
    _print_stated(results, large)
    return checked
