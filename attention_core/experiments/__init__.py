"""Experiments a teacher runs on attention, returning tidy tables or frozen dataclasses.

No plotting here: the dashboard turns these tables into charts.
"""

from attention_core.experiments.patterns import PATTERN_NAMES, head_patterns

__all__ = [
    "PATTERN_NAMES",
    "head_patterns",
]
