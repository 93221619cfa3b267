"""The real-model steps of the shipped lessons ("A real model", the decoder, the heads at
work): each step opened as its lesson link opens it, its "what to notice" checked on the
page's own numbers (metrics, the canvas heatmaps' values, the census grid's cells). The
checks of the other steps, and the test that every shipped step has one, are in
``test_lesson_claims.py``; this module loads the real models (the ``model`` tier)."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from dashboard.i18n import t_in
from dashboard.lessons.model import shipped_lessons
from dashboard.numbers import parse_plain_number
from tests.dashboard.conftest import APP_PATH, assert_clean, canvas_heatmaps, grid_rows, metrics
from tests.dashboard.test_presenter_day import kept_figure_is_shown
from tests.dashboard.test_writes_page import WRITES_CLAIMS

LANG = "en"
TIMEOUT_S = 600  # a real model on a shared machine (the census runs every head)
ROW_SUM_TOLERANCE = 1e-3  # weights drawn as float32 from a 4-bit model
CACHED_BELOW = 0.5  # the 4-bit model's cached-against-recomputed logits (decoder page)
BRIGHT_OVER_MEDIAN = 5.0
OVER_UNIFORM = 5.0  # the pronoun's link, against an even spread
NOUNS = ("cat", "猫")  # the tutorial's sentences: "it" / 它 stands for the cat


def label(key: str, **values) -> str:
    return t_in(LANG, key, **values)


def model_steps() -> list:
    return [
        pytest.param(step, id=f"{name}-{number}")
        for name, lesson in shipped_lessons().items()
        for number, step in enumerate(lesson.steps, start=1)
        if f"{name}-{number}" in MODEL_CLAIMS
    ]


def step_id(step) -> tuple[str, int]:
    for name, lesson in shipped_lessons().items():
        for number, shipped in enumerate(lesson.steps, start=1):
            if shipped is step:
                return name, number
    raise AssertionError(f"{step} is not a shipped step")


def open_step(step) -> AppTest:
    """The step's page as its lesson link opens it, in English, checked clean."""
    name, number = step_id(step)
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT_S)
    query = {"lang": LANG, "lesson": name, "lesson.step": str(number), **dict(step.query)}
    for key, value in query.items():
        at.query_params[key] = value
    at.switch_page(f"views/{step.page}.py")
    at.run()
    assert_clean(at)
    return at


def canvas_titled(at: AppTest, title: str) -> np.ndarray:
    """The values (P, R, C) of the first canvas heatmap whose title starts with ``title``."""
    for heatmap in canvas_heatmaps(at):
        if heatmap["title"].startswith(title):
            return heatmap["values"]
    raise AssertionError(f"no heatmap titled {title!r} on the page")


def title_start(key: str) -> str:
    """The fixed start of a title with values (the text before its first ``{``)."""
    return t_in(LANG, key, **{name: "\0" for name in ("layer", "heads", "kv", "token")}).split(
        "\0"
    )[0]


def causal_rows(maps: np.ndarray) -> None:
    """Every panel of (P, L, L) maps is causal: 0 above the diagonal, rows adding up to 1."""
    n = maps.shape[-1]
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    assert np.all(maps[:, upper] == 0.0)
    np.testing.assert_allclose(maps.sum(axis=-1), 1.0, atol=ROW_SUM_TOLERANCE)


# ------------------------------------------------------------------ Inside a real model


def causal_map_of_the_prompt(at: AppTest) -> None:
    """Decoder: the next token's candidates are drawn, and every head's map of the prompt
    lets a token look only at itself and earlier tokens."""
    maps = canvas_titled(at, title_start("decoder.maps_title"))
    assert maps.shape[0] > 1 and maps.shape[1] == maps.shape[2] > 1
    causal_rows(maps)
    newest = canvas_titled(at, title_start("decoder.row_title"))
    np.testing.assert_allclose(newest.sum(axis=-1), 1.0, atol=ROW_SUM_TOLERANCE)


def each_token_a_new_query(at: AppTest) -> None:
    """Decoder after four tokens: the newest token's row in every layer and head reaches back
    over the whole text so far, which the cache holds (prompt + 4), and the cached step's
    logits match a full recompute up to the 4-bit rounding."""
    shown = metrics(at)
    generated = int(shown[label("decoder.metric_generated")].split("/")[0])
    cache = int(shown[label("decoder.metric_cache_tokens")])
    prompt = canvas_titled(at, title_start("decoder.maps_title")).shape[-1]
    newest = canvas_titled(at, title_start("decoder.row_title"))
    assert generated == 4
    assert cache == prompt + generated == newest.shape[-1]
    np.testing.assert_allclose(newest.sum(axis=-1), 1.0, atol=ROW_SUM_TOLERANCE)
    assert np.all(newest[..., -1] > 0)  # the newest token sees itself
    assert parse_plain_number(shown[label("decoder.metric_cached_vs_full")]) < CACHED_BELOW


def metric_starting(at: AppTest, key: str) -> str:
    """The value of the one metric whose label is ``key``'s text with any values."""
    pattern = label_pattern(key)
    found = [value for name, value in metrics(at).items() if pattern.fullmatch(name)]
    assert len(found) == 1, (pattern.pattern, metrics(at))
    return found[0]


def label_pattern(key: str) -> re.Pattern:
    """``key``'s English text as a pattern, each ``{value}`` matching one word."""
    parts = re.split(r"\{[^}]*\}", t_in(LANG, key))
    return re.compile(r"\S+".join(re.escape(part) for part in parts))


def head_of(name: str) -> tuple[int, int]:
    """(layer, head) of a head named as the page names it ("L16H0" in a label, "18.6" in
    the head's select box)."""
    match = re.search(r"L(\d+)H(\d+)", name) or re.fullmatch(r"(\d+)\.(\d+)", name.strip())
    assert match, name
    return int(match.group(1)), int(match.group(2))


def induction_heads_are_bright(at: AppTest) -> None:
    """Heads at work: the census scores every head of every layer on induction; its
    brightest cell is an induction head, far above the median head, and turning the
    brightest off undoes the copying (the second copy's loss more than doubles; as many
    control heads off leave it)."""
    rows = grid_rows(at)
    scores = np.array([row["score"] for row in rows], dtype=float)
    assert len({(row["layer"], row["head"]) for row in rows}) == len(rows) > 100
    brightest = max(rows, key=lambda row: row["score"])
    assert brightest["label"] == label("heads.label_induction"), brightest
    assert brightest["score"] > BRIGHT_OVER_MEDIAN * float(np.nanmedian(scores))
    on = float(metrics(at)[label("heads.metric_second")])
    off = float(metric_starting(at, "heads.metric_second_off"))
    control = float(metric_starting(at, "heads.metric_second_weakest"))
    assert off > 2 * on
    assert control == pytest.approx(on, rel=0.1)


def the_head_needs_an_earlier_head(at: AppTest) -> None:
    """Heads at work, why: the strongest induction head puts most of its weight on its
    target; with the top part of the key's stream turned off (an earlier head) the measured
    weight falls to under half."""
    head = head_of(str(at.selectbox(key="heads.why_head").value))
    clean = float(metric_starting(at, "heads.metric_why_clean"))
    pattern = label_pattern("heads.metric_why_measured")
    measured_label = next(name for name in metrics(at) if pattern.fullmatch(name))
    measured = float(metrics(at)[measured_label])
    part = head_of(measured_label)
    assert clean > 0.5
    assert measured < clean / 2
    assert part[0] < head[0]  # written by an earlier layer's head


def a_head_links_the_pronoun(at: AppTest) -> None:
    """A real model: the page's top head sends the pronoun to the noun it stands for, many
    times the uniform level, and the step's picture shows it: in the model view's map of that
    layer and head, the pronoun's row is darkest at the noun."""
    top = metric_starting(at, "real_model.metric_top")
    token, weight = top.split()
    assert token in NOUNS and float(weight) > 0.5
    table = frame_with(at, label("real_model.col_ratio"))
    assert float(table[label("real_model.col_ratio")].iloc[0]) > OVER_UNIFORM
    (name,) = [n for n in metrics(at) if label_pattern("real_model.metric_top").fullmatch(n)]
    pronoun, layer, head = re.search(r"“(.+)”\D+(\d+)\D+(\d+)", name).groups()
    (grid,) = [h for h in canvas_heatmaps(at) if h.get("grid")]
    heads = len(grid["grid"]["col_names"])
    shown = grid["values"][(int(layer) - 1) * heads + int(head) - 1]  # (l, l) as painted
    words = [position_label.split(" ", 1)[-1] for position_label in grid["rows"]]  # "5 it"
    for row in [i for i, word in enumerate(words) if word == pronoun]:
        assert words[int(np.argmax(shown[row]))] == token, (grid["rows"][row], shown[row])
    assert pronoun in words


def frame_with(at: AppTest, column: str):
    """The first table on the page with a column named ``column``."""
    for table in at.dataframe:
        if column in table.value.columns:
            return table.value
    raise AssertionError(f"no table with a column {column!r} on the page")


MODEL_CLAIMS: dict[str, Callable[[AppTest], None]] = {
    "self-attention-20-10": a_head_links_the_pronoun,
    "inside-a-real-model-1": causal_map_of_the_prompt,
    "inside-a-real-model-2": each_token_a_new_query,
    "inside-a-real-model-3": induction_heads_are_bright,
    "inside-a-real-model-4": the_head_needs_an_earlier_head,
    **WRITES_CLAIMS,  # "What a head writes", checked in its page's test module
}


@pytest.mark.parametrize("step", model_steps())
def test_the_real_model_step_shows_what_it_asks_to_notice(step):
    name, number = step_id(step)
    at = open_step(step)
    MODEL_CLAIMS[f"{name}-{number}"](at)
    kept_figure_is_shown(at, step, number, LANG)  # the take-home record's figure
