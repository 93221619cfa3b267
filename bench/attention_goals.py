"""The goals ``python -m bench`` prints with PASS or MISS, and the figures it states without a
target (the dense path's cost), computed from the measurements."""

from __future__ import annotations

import math
from dataclasses import dataclass

from bench.attention_cases import BLOCK, DENSE_LENS, STRIDE, WINDOW

MIB = 2**20


@dataclass(frozen=True)
class Measurement:
    """Median time (seconds) and peak memory growth (bytes) of one function at one length."""

    kind: str
    L: int
    seconds: float = math.nan
    peak_bytes: float = math.nan
    peak_exact: bool = True
    error: str = ""
    alloc_bytes: float = math.nan  # peak of live tensor allocations (profiler / CUDA allocator)
    note: str = ""  # e.g. FlexAttention's compile time and its difference from ``local``


@dataclass(frozen=True)
class Goal:
    """A printed goal: value compared with a target."""

    name: str
    value: float
    target: float
    higher_is_better: bool
    unit: str = "x"

    @property
    def passed(self) -> bool:
        if math.isnan(self.value):
            return False
        return self.value >= self.target if self.higher_is_better else self.value <= self.target


def ratio(a: float, b: float) -> float:
    """a / b, or NaN when b is not positive (a row that did not run)."""
    return a / b if b > 0 else math.nan


@dataclass(frozen=True)
class GoalRule:
    """One goal as data: ``figure`` of the row (``numerator`` kind, at ``at``) divided by the
    same figure of the ``denominator`` kind (at ``denominator_at``, default ``at``).

    ``at`` and ``denominator_at`` name a length of the run: "small", "large" or "half" (half
    of large); ``figure`` is "time" (median seconds) or "memory" (peak live allocations).
    """

    name: str
    figure: str
    numerator: str
    denominator: str
    at: str
    target: float
    higher_is_better: bool = False
    denominator_at: str | None = None
    unit: str = "x"


GOAL_RULES = (
    GoalRule("scaled / SDPA time, L={small}", "time", "scaled", "sdpa", "small", 1.02),
    GoalRule("chunked / SDPA time, L={small}", "time", "chunked", "sdpa", "small", 1.3),
    GoalRule(
        "chunked / naive peak memory, L={small}",
        "memory",
        "chunked",
        "naive",
        "small",
        0.1,
        unit="",
    ),
    GoalRule(
        f"local / FlexAttention time, w={WINDOW}, L={{large}}",
        "time",
        "local",
        "flex",
        "large",
        0.5,
    ),
    GoalRule(
        f"SDPA+band / local time, w={WINDOW}, L={{large}}",
        "time",
        "sdpa+band",
        "local",
        "large",
        25.0,
        higher_is_better=True,
    ),
    GoalRule(
        "local peak memory L={large} / L={small}",
        "memory",
        "local",
        "local",
        "large",
        2.2,
        denominator_at="small",
        unit="",
    ),
    GoalRule(
        "linear / its two matmuls time, L={large}", "time", "linear", "linear-mm", "large", 2.0
    ),
    GoalRule(
        "SDPA / linear time, L={large}",
        "time",
        "sdpa",
        "linear",
        "large",
        40.0,
        higher_is_better=True,
    ),
    GoalRule(
        "linear time L={large} / L={half}, side by side",
        "time",
        "linear",
        "linear/2",
        "large",
        2.2,
        unit="",
    ),
    GoalRule(
        f"block b={BLOCK} / SDPA+block peak memory, L={{large}}",
        "memory",
        "block",
        "sdpa+block",
        "large",
        0.1,
        unit="",
    ),
    GoalRule(
        f"strided s={STRIDE} / SDPA+strided peak memory, L={{large}}",
        "memory",
        "strided",
        "sdpa+strided",
        "large",
        0.1,
        unit="",
    ),
)
"""Every ratio goal of ``python -m bench``, in print order after the RSS
goal. The dense path's cost is not a goal: see :func:`dense_cost`."""
CHUNKED_RSS_GOAL_MIB = 70.0


def _figure(measurement: Measurement, figure: str) -> float:
    return measurement.seconds if figure == "time" else measurement.alloc_bytes


def goals(results: dict[tuple[str, int], Measurement], small: int, large: int) -> list[Goal]:
    """The product's goals, computed from the measurements keyed by (kind, L); ``small`` and
    ``large`` are the two lengths of the run: :data:`GOAL_RULES` plus the chunked variant's
    RSS growth (a figure in MiB, not a ratio)."""
    lengths = {"small": small, "large": large, "half": large // 2}

    def value(rule: GoalRule) -> float:
        top = _figure(results[(rule.numerator, lengths[rule.at])], rule.figure)
        at = lengths[rule.denominator_at or rule.at]
        return ratio(top, _figure(results[(rule.denominator, at)], rule.figure))

    rows = [
        Goal(
            rule.name.format(**lengths), value(rule), rule.target, rule.higher_is_better, rule.unit
        )
        for rule in GOAL_RULES
    ]
    rss = Goal(
        f"chunked peak RSS growth, L={large}",
        results[("chunked", large)].peak_bytes / MIB,
        CHUNKED_RSS_GOAL_MIB,
        False,
        " MiB",
    )
    return [*rows[:2], rss, *rows[2:]]


@dataclass(frozen=True)
class StatedFigure:
    """A printed figure without a target: ``value`` = ``seconds`` / ``reference_seconds``."""

    name: str
    seconds: float
    reference_seconds: float

    @property
    def value(self) -> float:
        return ratio(self.seconds, self.reference_seconds)


def dense_cost(results: dict[tuple[str, int], Measurement]) -> list[StatedFigure]:
    """The dense path's cost, stated: ``scaled`` with weights (``dense_attention``, the
    PyTorch formula a learner reads: scores, softmax, weights @ v) against fused SDPA,
    which forms no weights, at each of :data:`DENSE_LENS` that was measured."""
    return [
        StatedFigure(
            f"scaled+weights / SDPA time, L={L}",
            results[("scaled+w", L)].seconds,
            results[("sdpa", L)].seconds,
        )
        for L in DENSE_LENS
        if ("scaled+w", L) in results and ("sdpa", L) in results
    ]
