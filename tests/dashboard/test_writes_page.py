"""What a head writes (``dashboard/views/writes.py``) on SmolLM2 and on the server's own
GGUF models: the page in both languages against the model's own forward pass, the lesson
"What a head writes" step by step checked on the page's own numbers (:data:`WRITES_CLAIMS`,
part of ``test_lesson_claims_model.MODEL_CLAIMS``), a float own model with its own shape, a
4-bit one refused in one line, and bad link values.

The library's numbers are checked against a float64 reference in
``tests/core/test_logit_lens.py`` and ``test_logit_lens_smollm2.py``; here the page is."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention_core.experiments import heads
from attention_core.experiments.head_ablation import repeated_tokens
from dashboard import data
from dashboard.i18n import t_in
from dashboard.numbers import parse_plain_number
from tests.core.logit_lens_reference import captured_parts, captured_run, norm_scale
from tests.dashboard.conftest import (
    APP_PATH,
    GRID_COLUMNS,
    assert_clean,
    chart_tables,
    metrics,
    open_model_page,
    quoted_near,
)
from tests.tiny_gguf import write_tiny_gguf

PAGE = "writes"
LANG = "en"
TIMEOUT_S = 600  # SmolLM2 loads, the census and the copying scores run, on a shared machine
LENS_COLUMNS = {"row", "position", "token", "prob"}
TINY, TINY_INT4 = "tiny.gguf", "tiny_int4.gguf"
TINY_LAYERS, TINY_HEADS = 2, 4  # write_tiny_gguf's defaults
MATRICES = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
SHOWN_DIGITS = 5e-4  # a metric written with 3 decimals
PART_TOLERANCE = 1e-3  # a share of bfloat16 weights against float64, relative to Σ|share|
FLAT_BELOW = 0.05  # the wrong lens's early rows, as the lesson says


def label(key: str, **values) -> str:
    return t_in(LANG, key, **values)


def label_pattern(key: str) -> re.Pattern:
    """``key``'s English text as a pattern, each ``{value}`` matching one or more words."""
    parts = re.split(r"\{[^}]*\}", t_in(LANG, key))
    return re.compile(".+?".join(re.escape(part) for part in parts))


def metric(at: AppTest, key: str) -> str:
    """The value of the one metric whose label is ``key``'s text with any values."""
    pattern = label_pattern(key)
    found = [value for name, value in metrics(at).items() if pattern.fullmatch(name)]
    assert len(found) == 1, (pattern.pattern, metrics(at))
    return found[0]


def tables(at: AppTest) -> list[pd.DataFrame]:
    """Every chart's data on the page, in page order."""
    return [t.to_pandas() for chart in at.get("vega_lite_chart") for t in chart_tables(chart)]


def lens_frame(at: AppTest) -> pd.DataFrame:
    (found,) = [frame for frame in tables(at) if LENS_COLUMNS <= set(frame.columns)]
    return found


def rows_top_first(frame: pd.DataFrame) -> list[str]:
    """The lens's row names as drawn, the model's output first (the data runs from the
    embedding up)."""
    return list(dict.fromkeys(frame["row"]))[::-1]


def grids(at: AppTest) -> list[pd.DataFrame]:
    """The page's whole layers × heads grids: every head's share, then the copying scores."""
    return [f for f in tables(at) if GRID_COLUMNS <= set(f.columns) and len(f) > 1]


def bars(at: AppTest) -> list[pd.DataFrame]:
    """The signed bars in page order: the largest shares, the head's attention row, its
    write."""
    return [f for f in tables(at) if {"name", "value"} <= set(f.columns)]


def open_writes(query: dict[str, str] | None = None, lang: str = LANG) -> AppTest:
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT_S)
    for key, value in {"lang": lang, **(query or {})}.items():
        at.query_params[key] = value
    at.switch_page(f"views/{PAGE}.py")
    at.run()
    return at


def spoken(token: str) -> str:
    """A token as the page writes it, with its spaces and newlines back."""
    return token.replace("␣", " ").replace("↵", "\n")


def preset_ids(preset: str) -> list[int]:
    return data.smollm2_float_decoder().tokenize(data.WRITES_PRESETS[preset]).input_ids


# ------------------------------------------------------------------ the page


@pytest.mark.parametrize("page", [PAGE])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_output_row_is_the_models_own_next_token(page, lang):
    """The lens's top row names, at every shown position, the token the model's own forward
    pass ranks first (the decoder's call, not the lens's code); the answer metric is the
    last one."""
    at = open_writes(lang=lang)
    assert_clean(at)
    decoder = data.smollm2_float_decoder()
    ids = preset_ids("repeat")
    with torch.inference_mode():
        logits = decoder(torch.tensor([ids])).logits[0].double()  # (L, V)
    frame = lens_frame(at)
    output = frame[frame["row"] == rows_top_first(frame)[0]]
    assert len(output) == data.LENS_POSITIONS_DEFAULT
    for shown, row in zip(output["token"], logits[-data.LENS_POSITIONS_DEFAULT :], strict=True):
        ties = torch.nonzero(row == row.max()).ravel().tolist()  # bfloat16 logits can tie
        assert spoken(shown) in {decoder.decode([token]) for token in ties}
    probs = torch.softmax(logits[-1], dim=-1)
    assert float(output["prob"].iloc[-1]) == pytest.approx(float(probs.max()), abs=1e-3)
    assert {len(set(frame["position"])), frame["row"].nunique()} == {
        data.LENS_POSITIONS_DEFAULT,
        data.DECODER_LAYERS + 1,
    }


@pytest.mark.parametrize("page", [PAGE])
def test_every_head_share_is_the_reference_and_the_shares_add_up(page, monkeypatch):
    """The grid of shares holds the 270 heads' shares, each ⟨g_f ⊙ write / s, W_U[a] −
    W_U[b]⟩ computed here in float64 from the head outputs a plain forward pass hands on
    (hooks: tests/core/logit_lens_reference.py); with the embedding and the 30 MLPs they add
    up to the sum shown."""
    at = open_writes()
    assert_clean(at)
    grid = grids(at)[0]
    assert len(grid) == data.DECODER_LAYERS * data.DECODER_HEADS
    decoder = data.smollm2_float_decoder()
    ids = preset_ids("repeat")
    answer, alternative = data.next_tokens(data.WRITES_PRESETS["repeat"]).ids[:2]
    streams, outputs = captured_run(decoder, ids, monkeypatch)
    parts = captured_parts(decoder, streams, outputs)[:, -1]  # (P, D) at the last position
    w_u, g_f = decoder.embedding.double(), decoder.final_norm.double()
    direction = (w_u[answer] - w_u[alternative]) * g_f / norm_scale(streams[-1, -1])
    expected = (parts @ direction).numpy()  # (P,)
    per_layer = expected[1:].reshape(data.DECODER_LAYERS, data.DECODER_HEADS + 1)
    shown = grid.sort_values(["layer", "head"])["score"].to_numpy()
    size = float(np.abs(expected).sum())
    assert np.abs(shown - per_layer[:, :-1].ravel()).max() <= PART_TOLERANCE * size
    total = parse_plain_number(metric(at, "writes.metric_sum"))
    assert abs(total - float(expected.sum())) <= PART_TOLERANCE * size + SHOWN_DIGITS


@pytest.mark.parametrize("page", [PAGE])
def test_bad_link_values_give_notices_not_tracebacks(page):
    at = open_writes(
        {
            "writes.answer": "99999999",
            "writes.alternative": "abc",
            "writes.layer": "99",
            "writes.positions": "0",
            "writes.frozen": "maybe",
        }
    )
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert at.slider(key=f"{PAGE}.layer").value == data.DECODER_LAYERS - 1
    assert metrics(at)  # the page drew its figures with the nearest values


# ------------------------------------------------------------------ own models


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("own_models")
    write_tiny_gguf(path / TINY)
    write_tiny_gguf(path / TINY_INT4, types=tuple((kind, "Q4_0") for kind in MATRICES))
    return path


@pytest.mark.parametrize("page", [PAGE])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_own_float_model_runs_the_page_with_its_own_shape(page, lang, configured):
    at = open_model_page(PAGE, lang, TINY, TIMEOUT_S)
    assert_clean(at)
    shares, copying = grids(at)
    assert len(shares) == len(copying) == TINY_LAYERS * TINY_HEADS
    frame = lens_frame(at)
    assert frame["row"].nunique() == TINY_LAYERS + 1
    assert at.slider(key=f"{PAGE}.layer").max == TINY_LAYERS - 1
    shown = "\n".join(e.value for e in at.info)
    assert TINY in shown
    assert t_in(lang, f"{PAGE}.title_own") in [e.value for e in at.title]


@pytest.mark.parametrize("page", [PAGE])
def test_a_4_bit_own_model_is_refused_in_one_line(page, configured):
    at = open_model_page(PAGE, LANG, TINY_INT4, TIMEOUT_S)
    assert not at.exception, [e.message for e in at.exception]
    (error,) = at.error
    assert "need float weights" in error.value and "int4" in error.value
    assert "\n" not in error.value.strip()
    assert not [f for f in tables(at) if LENS_COLUMNS <= set(f.columns)]


# ------------------------------------------------------------------ the lesson's claims


def answer_from_layer(at: AppTest) -> None:
    """Step 1: in the last column the model's answer is on top from the quoted layer up to
    the output, and not just below it."""
    frame = lens_frame(at)
    rows = rows_top_first(frame)
    last = frame[frame["position"] == frame["position"].iloc[-1]].set_index("row")["token"]
    answer = metric(at, "writes.metric_output")
    assert answer == "␣the" and last[rows[0]] == answer
    settled = int(metric(at, "writes.metric_settled"))
    assert settled == 20  # the notice's "from layer 20 on": ten layers before the output
    layers = {r: int(r.split(" ")[0]) for r in rows if r[0].isdigit()}  # not the embedding
    above = [r for r, layer in layers.items() if layer >= settled]
    below = [r for r, layer in layers.items() if layer == settled - 1]
    assert all(last[r] == answer for r in above) and len(above) == data.DECODER_LAYERS - 20
    assert [last[r] for r in below] != [answer]


def wrong_lens_is_flat(at: AppTest) -> None:
    """Step 2: the frozen scale's early rows under 0.05 against the right lens's quoted 0.59,
    with every cell's top token the same, and the output row unchanged."""
    frozen = lens_frame(at)
    early = parse_plain_number(metric(at, "writes.metric_early"))
    assert early < FLAT_BELOW
    right = open_writes({"lesson": "what-a-head-writes", "lesson.step": "1"})
    assert quoted_near(parse_plain_number(metric(right, "writes.metric_early")), "0.59")
    right_frame = lens_frame(right)
    assert list(frozen["token"]) == list(right_frame["token"])
    top = rows_top_first(frozen)[0]
    assert np.allclose(
        frozen[frozen["row"] == top]["prob"], right_frame[right_frame["row"] == top]["prob"]
    )


def bottom_row_echoes(at: AppTest) -> None:
    """Step 3: the bottom row is labelled an echo, and its top token is the token read at
    more than half of the positions (the position label's token)."""
    frame = lens_frame(at)
    bottom = frame[frame["row"] == rows_top_first(frame)[-1]]
    assert label("writes.row_echo") in bottom["row"].iloc[0]
    read = [p.split(" ", 1)[1] for p in bottom["position"]]
    same = [spoken(token) == word for token, word in zip(bottom["token"], read, strict=True)]
    assert sum(same) > len(same) / 2, list(zip(bottom["token"], read, strict=True))


def parts_add_up(at: AppTest) -> None:
    """Step 4: 301 shares whose sum is the model's own difference within the rounding step
    the caption gives; the three largest are MLPs of layers 20 and up, of both signs."""
    total = parse_plain_number(metric(at, "writes.metric_sum"))
    own = parse_plain_number(metric(at, "writes.metric_own"))
    assert label("writes.metric_sum", count=301) in metrics(at)
    (caption,) = [c.value for c in at.caption if c.value.startswith("The shares are added")]
    step = float(re.search(r"step of ([0-9.e-]+)", caption).group(1))
    assert abs(total - own) <= step + 2 * SHOWN_DIGITS
    largest = bars(at)[0]
    top3 = list(largest["name"][:3])
    assert all(re.fullmatch(r"L(\d+)MLP", n) and int(n[1:3]) >= 20 for n in top3), top3
    assert (largest["value"][:3] > 0).any() and (largest["value"][:3] < 0).any()


def induction_head_copies(at: AppTest) -> None:
    """Step 5: head 18.6 is the census's top induction head on Heads at work's copy test; it
    looks most at " the" right after the earlier "because" and writes " the" most."""
    decoder = data.smollm2_decoder()
    census = heads.census(decoder, repeated_tokens(decoder, data.HEADS_COPY_DEFAULT, 0))
    induction = census.scores["induction"]
    assert np.unravel_index(np.nanargmax(induction), induction.shape) == (18, 6)
    looks, writes = metric(at, "writes.metric_looks"), metric(at, "writes.metric_writes")
    assert looks == writes == "␣the"
    row = bars(at)[1]  # the head's attention row, in token order
    looked = int(row["value"].idxmax())
    assert row["name"][looked - 1].endswith("because") and row["name"][looked].endswith("the")
    assert float(row["value"].max()) > 0.5


def summary_misses_it(at: AppTest) -> None:
    """Step 6: head 18.6's copying score is the quoted 0.28, and the induction heads' mean is
    no higher than every head's."""
    copying = grids(at)[1]
    score = copying[(copying["layer"] == 18) & (copying["head"] == 6)]["score"].iloc[0]
    assert quoted_near(float(score), "0.28")
    assert metric(at, "writes.metric_copying") == f"{score:.2f}"
    (table,) = [d.value for d in at.dataframe]
    means = dict(zip(table.iloc[:, 0], table.iloc[:, 2], strict=True))
    induction, every = means[label("heads.label_induction")], means[label("writes.all_heads")]
    assert induction <= every
    assert parse_plain_number(metric(at, "writes.metric_copying_induction")) == round(induction, 2)
    assert parse_plain_number(metric(at, "writes.metric_copying_all")) == round(every, 2)


WRITES_CLAIMS: dict[str, Callable[[AppTest], None]] = {
    "what-a-head-writes-1": answer_from_layer,
    "what-a-head-writes-2": wrong_lens_is_flat,
    "what-a-head-writes-3": bottom_row_echoes,
    "what-a-head-writes-4": parts_add_up,
    "what-a-head-writes-5": induction_head_copies,
    "what-a-head-writes-6": summary_misses_it,
}
