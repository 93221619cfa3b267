"""Every step of every shipped lesson shows what its "what to notice" says: each step is opened
as a learner opens it (its page, its lesson link, its query values) and its claim is checked
on the page's own numbers (metrics, tables and chart data the page drew, or the data-layer
call the page makes with the values its controls hold), never on the text. One checking
function per step; a shipped step without one fails, and so does a change of a page's
defaults that makes its step's words untrue.

The real-model steps (real_model, decoder, heads pages) load a model: their parameters get
the ``model`` tier from ``tests/conftest.py`` (the step's ``.page``)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from dashboard import data
from dashboard.config import StepConfig
from dashboard.i18n import t_in
from dashboard.numbers import parse_plain_number
from tests.dashboard.conftest import (
    assert_clean,
    canvas_heatmaps,
    chart_tables,
    metrics,
    open_app,
    shipped_steps,
)

LANG = "en"
ROW_SUM_TOLERANCE = 1e-6
SHOWN_SUM = "1.0000"  # a row sum as the pages print it (four decimals)
BOSS_MAJORITY = 0.8  # "almost all" of the attention
SPREAD_TOLERANCE = 0.1  # a measured std within 10 % of √d_k, a scaled one within 0.1 of 1
SATURATED = 0.9  # "nearly all of each query's weight"
ENTROPY_MARGIN = 1.0  # nats between the sharpest and the most spread-out head
EQUIVARIANT_BELOW = 1e-5
BROKEN_ABOVE = 1e-2
CELL_DECIMALS = 4  # the cell table prints four decimals


STEPS, STEP_IDS = shipped_steps()


def open_step(step) -> AppTest:
    """The step's page as its lesson link opens it, in English, checked clean."""
    name, number = STEP_IDS[id(step)]
    at = open_app(
        step.page, lang=LANG, lesson=name, **{"lesson.step": str(number)}, **dict(step.query)
    )
    assert_clean(at)
    return at


def label(key: str, **values) -> str:
    return t_in(LANG, key, **values)


def shown_range(text: str) -> tuple[float, float]:
    """The (low, high) of a row-sums metric ("1.0000", or "0.9999 – 1.0001")."""
    numbers = [float(x) for x in re.findall(r"-?\d+\.\d+", text)]
    assert len(numbers) in (1, 2), text
    return numbers[0], numbers[-1]


def frame_with(at: AppTest, column: str) -> pd.DataFrame:
    """The first table on the page with a column named ``column``."""
    for table in at.dataframe:
        if column in table.value.columns:
            return table.value
    raise AssertionError(f"no table with a column {column!r} on the page")


def chart_titled(at: AppTest, title: str) -> pd.DataFrame:
    """The data of the first Vega-Lite chart whose title starts with ``title`` (its largest
    table)."""
    for chart in at.get("vega_lite_chart"):
        text = json.loads(chart.proto.spec).get("title", {})
        text = text.get("text", "") if isinstance(text, dict) else text
        text = " ".join(text) if isinstance(text, list) else str(text)
        if text.startswith(title):
            tables = [table.to_pandas() for table in chart_tables(chart)]
            return max(tables, key=len)  # the cells, not an outline's one row
    raise AssertionError(f"no chart titled {title!r} on the page")


def canvas_titled(at: AppTest, title: str) -> np.ndarray:
    """The values (P, R, C) of the first canvas heatmap whose title starts with ``title``."""
    for heatmap in canvas_heatmaps(at):
        if heatmap["title"].startswith(title):
            return heatmap["values"]
    raise AssertionError(f"no heatmap titled {title!r} on the page")


def walk_config(at: AppTest) -> StepConfig:
    """The Step-by-step walkthrough the page's controls hold."""
    return StepConfig(
        sentence=at.selectbox(key="step_by_step.sentence").value,
        n_tokens=at.slider(key="step_by_step.tokens").value,
        d_k=at.slider(key="step_by_step.d_k").value,
        causal=at.checkbox(key="step_by_step.causal").value,
        seed=at.slider(key="step_by_step.seed").value,
    )


def above_diagonal(n: int) -> np.ndarray:
    return np.triu(np.ones((n, n), dtype=bool), k=1)


# ------------------------------------------------------------------ Self-attention in 20 min


def rows_add_up_to_one(at: AppTest) -> None:
    """Intuition: each row of the dance's map, and the meeting's shares, add up to 1."""
    shown = metrics(at)
    low, high = shown_range(shown[label("intuition.metric_row_sums")])
    assert low == high == float(SHOWN_SUM)
    assert shown[label("intuition.metric_shares_total")] == "1.000"
    projections = at.selectbox(key="intuition.qk").value
    dance = chart_titled(at, label(f"intuition.dance_chart_{projections}"))
    weights = dance[label("common.chart_weight")].to_numpy(dtype=float)
    n = math.isqrt(len(weights))
    assert n * n == len(weights) and n > 1
    np.testing.assert_allclose(weights.reshape(n, n).sum(axis=1), 1.0, atol=n * 1e-4)
    boss = at.slider(key="intuition.boss").value
    assert math.fsum(data.meeting_weights(boss)) == pytest.approx(1.0, abs=ROW_SUM_TOLERANCE)


def boss_takes_almost_all(at: AppTest) -> None:
    """The meeting: at the step's relevance the boss holds most of the attention, and every
    other share is smaller than at the page's default relevance."""
    boss = at.slider(key="intuition.boss").value
    shares = data.meeting_weights(boss)
    assert float(metrics(at)[label("intuition.metric_boss")]) > BOSS_MAJORITY
    assert shares[0] > BOSS_MAJORITY
    calmer = data.meeting_weights(boss - 2.5)
    assert all(now < before for now, before in zip(shares[1:], calmer[1:], strict=True))


def one_cell_followed(at: AppTest) -> None:
    """Step by step: the cell table goes from q_i·k_j through √d_k and the softmax to the
    weight in the weights matrix, and the output mixes V with those weights."""
    walk = data.step_by_step(walk_config(at))
    i, j = at.selectbox(key="step_by_step.query").value, at.selectbox(key="step_by_step.key").value
    table = frame_with(at, label("step_by_step.col_value"))
    values = table[label("step_by_step.col_value")].tolist()
    m = walk.matrices
    dot = float(m["Q"][i] @ m["K"][j])
    tol = 10.0**-CELL_DECIMALS
    assert float(values[0]) == pytest.approx(dot, abs=tol)
    assert float(values[1]) == pytest.approx(math.sqrt(walk.d_k), abs=tol)
    assert float(values[2]) == pytest.approx(dot / math.sqrt(walk.d_k), abs=tol)
    assert float(values[-1]) == pytest.approx(float(m["weights"][i, j]), abs=tol)
    assert float(values[-1]) == pytest.approx(float(values[-3]) / float(values[-2]), abs=tol)
    np.testing.assert_allclose(m["output"], m["weights"] @ m["V"], atol=1e-12)


def minus_infinity_above_the_diagonal(at: AppTest) -> None:
    """The causal mask: the masked scores the page draws are −∞ above the diagonal (printed
    "−∞", no colour), the scaled scores on and below it, and the weights there are 0."""
    walk = data.step_by_step(walk_config(at))
    assert walk_config(at).causal
    masked = data.masked_scores(walk)
    n = masked.shape[0]
    upper = above_diagonal(n)
    assert np.all(np.isneginf(masked[upper]))
    np.testing.assert_array_equal(masked[~upper], walk.matrices["scaled"][~upper])
    assert np.all(walk.matrices["weights"][upper] == 0.0)
    drawn = chart_titled(at, label("step_by_step.m_masked"))
    value = drawn[label("common.chart_value")].to_numpy(dtype=float)
    assert len(value) == n * n
    assert int(np.isnan(value).sum()) == int(upper.sum())  # unpainted cells, read "−∞"
    spec = next(
        json.loads(c.proto.spec)
        for c in at.get("vega_lite_chart")
        if label("step_by_step.m_masked") in c.proto.spec
    )
    assert "−∞" in json.dumps(spec, ensure_ascii=False)


def spread_follows_sqrt_dk(at: AppTest) -> None:
    """Scaling: the unscaled scores' std follows √d_k, the scaled ones' stays near 1."""
    table = frame_with(at, label("scaling.col_std_unscaled"))
    d_ks = table["d_k"].to_numpy(dtype=float)
    raw = table[label("scaling.col_std_unscaled")].to_numpy(dtype=float)
    scaled = table[label("scaling.col_std_scaled")].to_numpy(dtype=float)
    assert len(d_ks) >= 2
    np.testing.assert_allclose(raw / np.sqrt(d_ks), 1.0, atol=SPREAD_TOLERANCE)
    np.testing.assert_allclose(scaled, 1.0, atol=SPREAD_TOLERANCE)


def heads_differ_in_spread(at: AppTest) -> None:
    """Multi-head: the gallery's heads differ in how spread out their weights are: the local
    band is the sharpest, the global head spreads evenly (entropy ln L)."""
    gallery = canvas_titled(at, label("multihead.gallery_title"))
    stats = chart_titled(at, label("multihead.entropy_title"))
    entropy = stats["entropy"].to_numpy(dtype=float)
    names = stats["name"].tolist()
    assert len(entropy) == gallery.shape[0]
    assert entropy.max() - entropy.min() > ENTROPY_MARGIN
    assert names[int(entropy.argmin())] == label("multihead.pattern_local")
    assert names[int(entropy.argmax())] == label("multihead.pattern_global")
    assert entropy.max() == pytest.approx(math.log(gallery.shape[1]), abs=1e-3)
    expected = data.head_entropy(gallery.astype(np.float64))
    np.testing.assert_allclose(entropy, expected, atol=1e-3)


def upper_triangle_empty_in_every_head(at: AppTest) -> None:
    """Playground with the causal mask: every head's weights are 0 above the diagonal, and
    each row still adds up to 1."""
    assert at.selectbox(key="playground.mask").value == "causal"
    heads = canvas_titled(at, label("playground.grid_title", heads="")[:16])
    n = heads.shape[1]
    assert heads.shape[0] > 1
    assert np.all(heads[:, above_diagonal(n)] == 0.0)
    assert np.all(heads[:, ~above_diagonal(n)] > 0.0)
    np.testing.assert_allclose(heads.sum(axis=-1), 1.0, atol=1e-5)


def cost_grows_with_length(at: AppTest) -> None:
    """Variants: which variants match the full map is in the summary table, and the cost
    chart's data is there on arrival (no press): each variant's measured peak memory grows
    with L, and full attention's time too."""
    summary = frame_with(at, label("variants.metric_diff"))
    diff = summary[label("variants.metric_diff")].to_numpy(dtype=float)
    assert diff[0] == 0.0 and np.all(diff[1:] > 1e-3)  # full; local and linear approximate
    chart = chart_titled(at, label("variants.chart_memory"))
    assert not chart.empty
    cost = frame_with(at, "L")
    variant, measured = label("variants.col_variant"), label("variants.col_peak_measured")
    assert cost["L"].nunique() >= 3
    for _, rows in cost.groupby(variant):
        rows = rows.sort_values("L")
        assert np.all(np.diff(rows[measured].to_numpy(dtype=float)) > 0), rows
    full = cost[cost[variant] == summary[label("variants.col_variant")].iloc[0]].sort_values("L")
    times = full[label("variants.col_time_ms")].to_numpy(dtype=float)
    assert times[-1] > times[0]


def shuffling_only_shuffles(at: AppTest) -> None:
    """Properties: without a mask, f(Px) = P f(x) to round-off; the causal mask breaks it."""
    shown = metrics(at)
    free = parse_plain_number(shown[label("properties.metric_eq_plain")])
    causal = parse_plain_number(shown[label("properties.metric_eq_causal")])
    assert free < EQUIVARIANT_BELOW
    assert causal > BROKEN_ABOVE


# ------------------------------------------------------------------ Why √d_k


def saturated_at_256(at: AppTest) -> None:
    """Scaling at d_k 64 and 256: unscaled, the largest weight of a row is near 1 at 256."""
    table = frame_with(at, label("scaling.col_std_unscaled"))
    assert table["d_k"].max() == 256
    assert float(metrics(at)[label("scaling.metric_max_weight_unscaled")]) > SATURATED
    peaks = chart_titled(at, label("scaling.chart_max_weight"))
    assert not peaks.empty


def division_by_sqrt_dk(at: AppTest) -> None:
    """Step by step at d_k 8: the scaled scores are the scores divided by √8, both drawn."""
    walk = data.step_by_step(walk_config(at))
    assert walk.d_k == 8
    np.testing.assert_allclose(
        walk.matrices["scaled"], walk.matrices["scores"] / math.sqrt(8), atol=1e-12
    )
    table = frame_with(at, label("step_by_step.col_value"))
    assert table[label("step_by_step.col_value")].tolist()[1] == f"{math.sqrt(8):.4f}"
    for name in ("scores", "scaled"):
        chart_titled(at, label(f"step_by_step.m_{name}"))


def gradients_erratic_without_scale(at: AppTest) -> None:
    """Gradients: at the largest d_k, without 1/√d_k, W_Q's and W_K's gradients are erratic
    over seeds (a spread relative to the mean twice the scaled one's, and a seed that gets
    almost nothing back: under a tenth of the mean), while with the scale every seed keeps at
    least half the mean."""
    table = frame_with(at, label("gradients.axis_scaling"))
    scale, tensor = label("gradients.axis_scaling"), label("gradients.col_tensor")
    mean, std = label("gradients.col_mean"), label("gradients.col_std")
    smallest = label("gradients.col_min")
    largest = table[table["d_k"] == table["d_k"].max()]
    assert table["d_k"].nunique() >= 3
    for name in ("W_Q", "W_K"):
        rows = largest[largest[tensor] == name].set_index(scale)
        raw, kept = (
            rows.loc[label("gradients.scaling_unscaled")],
            rows.loc[label("gradients.scaling_scaled")],
        )
        assert raw[std] / raw[mean] > 2 * kept[std] / kept[mean]
        assert raw[smallest] < 0.1 * raw[mean]
        assert kept[smallest] > 0.5 * kept[mean]


CLAIMS: dict[str, Callable[[AppTest], None]] = {
    "self-attention-20-1": rows_add_up_to_one,
    "self-attention-20-2": boss_takes_almost_all,
    "self-attention-20-3": one_cell_followed,
    "self-attention-20-4": minus_infinity_above_the_diagonal,
    "self-attention-20-5": spread_follows_sqrt_dk,
    "self-attention-20-6": heads_differ_in_spread,
    "self-attention-20-7": upper_triangle_empty_in_every_head,
    "self-attention-20-8": cost_grows_with_length,
    "self-attention-20-9": shuffling_only_shuffles,
    "why-sqrt-dk-1": spread_follows_sqrt_dk,
    "why-sqrt-dk-2": saturated_at_256,
    "why-sqrt-dk-3": division_by_sqrt_dk,
    "why-sqrt-dk-4": gradients_erratic_without_scale,
}


def test_every_shipped_step_has_a_claim_check():
    from tests.dashboard.test_lesson_claims_model import MODEL_CLAIMS

    shipped = {f"{name}-{number}" for name, number in STEP_IDS.values()}
    assert shipped == set(CLAIMS) | set(MODEL_CLAIMS)
    assert not set(CLAIMS) & set(MODEL_CLAIMS)


@pytest.mark.parametrize("step", [p for p in STEPS if p.id in CLAIMS])
def test_the_step_shows_what_it_asks_to_notice(step):
    name, number = STEP_IDS[id(step)]
    CLAIMS[f"{name}-{number}"](open_step(step))
