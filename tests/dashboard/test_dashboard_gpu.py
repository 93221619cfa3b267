"""Every page on CUDA: the sidebar's device choice reaches the data layer and the numbers
stay right. Skipped without CUDA (see tests/conftest.py); run on a GPU machine with
``scripts/gpu_check.sh``."""

from __future__ import annotations

import numpy as np
import pytest

from dashboard.views import PAGES
from tests.dashboard.conftest import assert_clean, canvas_heatmaps, metrics, open_app

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("page", [stem for stem, _ in PAGES])
def test_every_page_runs_on_cuda(page):
    at = open_app(page, device="cuda")
    assert_clean(at)
    assert any("cuda" in c.value for c in at.sidebar.caption), [c.value for c in at.sidebar.caption]


def test_playground_on_cuda_measures_there_and_rows_sum_to_one():
    at = open_app(device="cuda", **{"playground.seq_len": "256", "playground.heads": "8"})
    assert_clean(at)
    shown = metrics(at)
    assert shown["Device"] == "cuda"
    assert shown["Row sums of the averaged map"] == "min 1.0000, max 1.0000"
    grid, _avg, _out = canvas_heatmaps(at)
    assert grid["values"].shape[0] == 8 and np.isfinite(grid["values"]).all()


def test_cpu_stays_selectable_next_to_cuda():
    at = open_app(device="cpu")
    assert_clean(at)
    assert metrics(at)["Device"] == "cpu"
    assert at.sidebar.selectbox(key="device").options == ["cuda", "cpu"]
