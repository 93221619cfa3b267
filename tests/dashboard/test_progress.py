"""The progress bar's time-left estimate (:func:`dashboard.progress.seconds_left`), against
the pace written out."""

from __future__ import annotations

import pytest

from dashboard.progress import seconds_left


@pytest.mark.parametrize(
    ("elapsed", "done", "total", "left"),
    [(2.0, 1, 31, 60), (3.0, 3, 4, 1), (10.0, 4, 4, 0), (0.5, 2, 5, 1), (1.0, 3, 10, 3)],
)
def test_seconds_left_is_the_pace_so_far_times_the_passes_left(elapsed, done, total, left):
    assert seconds_left(elapsed, done, total) == left


@pytest.mark.parametrize(("done", "total"), [(0, 3), (4, 3), (-1, 3)])
def test_a_pass_count_out_of_range_is_named(done, total):
    with pytest.raises(ValueError, match=str(done)):
        seconds_left(1.0, done, total)
