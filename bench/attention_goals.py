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


def goals(results: dict[tuple[str, int], Measurement], small: int, large: int) -> list[Goal]:
    """The product's goals (issue 13's table), computed from the measurements keyed by
    (kind, L); ``small`` and ``large`` are the two lengths of the run. The dense path's cost
    is not a goal (issue 21): see :func:`dense_cost`."""

    def t(kind, L):
        return results[(kind, L)].seconds

    def m(kind, L):
        return results[(kind, L)].alloc_bytes

    def rss(kind, L):
        return results[(kind, L)].peak_bytes

    return [
        Goal(
            f"scaled / SDPA time, L={small}",
            ratio(t("scaled", small), t("sdpa", small)),
            1.02,
            False,
        ),
        Goal(
            f"chunked / SDPA time, L={small}",
            ratio(t("chunked", small), t("sdpa", small)),
            1.3,
            False,
        ),
        Goal(
            f"chunked peak RSS growth, L={large}", rss("chunked", large) / MIB, 70.0, False, " MiB"
        ),
        Goal(
            f"chunked / naive peak memory, L={small}",
            ratio(m("chunked", small), m("naive", small)),
            0.1,
            False,
            "",
        ),
        Goal(
            f"local / FlexAttention time, w={WINDOW}, L={large}",
            ratio(t("local", large), t("flex", large)),
            0.5,
            False,
        ),
        Goal(
            f"SDPA+band / local time, w={WINDOW}, L={large}",
            ratio(t("sdpa+band", large), t("local", large)),
            25.0,
            True,
        ),
        Goal(
            f"local peak memory L={large} / L={small}",
            ratio(m("local", large), m("local", small)),
            2.2,
            False,
            "",
        ),
        Goal(
            f"linear / its two matmuls time, L={large}",
            ratio(t("linear", large), t("linear-mm", large)),
            2.0,
            False,
        ),
        Goal(
            f"SDPA / linear time, L={large}",
            ratio(t("sdpa", large), t("linear", large)),
            40.0,
            True,
        ),
        Goal(
            f"linear time L={large} / L={large // 2}, side by side",
            ratio(t("linear", large), t("linear/2", large)),
            2.2,
            False,
            "",
        ),
        Goal(
            f"block b={BLOCK} / SDPA+block peak memory, L={large}",
            ratio(m("block", large), m("sdpa+block", large)),
            0.1,
            False,
            "",
        ),
        Goal(
            f"strided s={STRIDE} / SDPA+strided peak memory, L={large}",
            ratio(m("strided", large), m("sdpa+strided", large)),
            0.1,
            False,
            "",
        ),
    ]


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
