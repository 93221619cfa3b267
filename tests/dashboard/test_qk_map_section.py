"""The query–key map's chart builders and data helpers (dashboard/charts/qk_map.py,
dashboard/data/qk_map.py) on a tiny decoder's map: no real model, no page."""

from __future__ import annotations

import numpy as np
import pytest

from attention_core.experiments import qk_map, qk_projection
from attention_core.pretrained import load_gguf
from dashboard.charts.qk_map import (
    COLOUR_FIELDS,
    QKMapTitles,
    attention_row_chart,
    picked_point,
    qk_map_chart,
)
from dashboard.data import qk_map as qk_data
from dashboard.numbers import parse_plain_number
from tests.tiny_gguf import write_tiny_gguf

TITLES = QKMapTitles(*(f"t{i}" for i in range(9)))


@pytest.fixture(scope="module")
def tiny_map(tmp_path_factory):
    path = tmp_path_factory.mktemp("qk_section") / "tiny.gguf"
    tiny = load_gguf(write_tiny_gguf(path, seed=7).path, weights_dtype="float32")
    qk = qk_map.decoder_head_qk(tiny, ("the cat sat", "a hat"), 1, 2)
    normalized = qk_map.normalize_qk(qk)
    points = qk_map.joint_points(qk, normalized)
    projection = qk_projection.project_pca(points.points)
    trust = qk_projection.map_trust(qk, projection.coords)
    return qk_data.QKMapData(
        model="smollm2",
        layer=1,
        head=2,
        method="pca",
        sentences=qk.sentences,
        coords=projection.coords,
        is_key=points.is_key,
        sentence=points.sentence,
        position=points.position,
        tokens=points.tokens,
        languages=points.languages,
        weights=qk.weights,
        explained=projection.explained,
        spearman=trust.spearman,
        pairs=trust.pairs,
        row_change=normalized.row_change,
        translation=None,
    )


@pytest.mark.parametrize("colour", COLOUR_FIELDS)
def test_map_chart_has_a_point_per_query_and_key(tiny_map, colour):
    table = qk_data.qk_map_table(tiny_map, ("query", "key"))
    assert len(table) == 2 * tiny_map.weights[0].shape[0] + 2 * tiny_map.weights[1].shape[0]
    spec = qk_map_chart(table, TITLES, colour=colour).to_dict()
    assert spec["encoding"]["tooltip"][0]["field"] == "token"
    assert spec["params"][0]["name"] == "point"


def test_bad_colour_is_refused(tiny_map):
    with pytest.raises(ValueError, match="colour"):
        qk_map_chart(qk_data.qk_map_table(tiny_map, ("q", "k")), TITLES, colour="size")


def test_attention_row_of_a_query_and_of_a_key(tiny_map):
    first = tiny_map.weights[0]  # (L, L)
    length = first.shape[0]
    row = qk_data.attention_row(tiny_map, 1)  # query 1 of sentence 0
    np.testing.assert_array_equal(row["weight"], first[1])
    total = len(tiny_map.tokens) // 2
    column = qk_data.attention_row(tiny_map, total + 1)  # key 1 of sentence 0
    np.testing.assert_array_equal(column["weight"], first[:, 1])
    assert list(row["token"]) == list(tiny_map.tokens[:length])
    assert attention_row_chart(row, "title", "weight").to_dict()["mark"]["type"] == "bar"
    with pytest.raises(ValueError, match="index"):
        qk_data.attention_row(tiny_map, len(tiny_map.tokens))


def test_picked_point():
    assert picked_point(None, 5) is None
    assert picked_point([{"index": 1}, {"index": 4}], 5) == 4
    assert picked_point([{"index": 5}], 5) is None
    assert picked_point([{"index": True}], 5) is None


def test_sentences_presets_then_own():
    assert qk_data.qk_sentences("e5") == qk_map.E5_SENTENCES
    assert qk_data.qk_sentences("smollm2", "  mine  ")[-1] == "mine"
    assert len(qk_data.qk_sentences("smollm2", "x" * 500)[-1]) == qk_data.OWN_MAX_CHARS
    with pytest.raises(ValueError, match="model"):
        qk_data.qk_sentences("gpt")


def _metric(at, label: str) -> str:
    found = [m.value for m in at.metric if m.label == label]
    assert len(found) == 1, [m.label for m in at.metric]
    return found[0]


@pytest.mark.parametrize("page", ["heads"])
@pytest.mark.parametrize(
    ("lang", "model", "method"), [("en", "e5", "pca"), ("zh", "smollm2", "tsne")]
)
def test_the_section_draws_its_map_and_quotes_the_library(page, lang, model, method):
    from dashboard.i18n import t_in
    from tests.dashboard.conftest import assert_clean, link_or_default, open_app

    params = {
        "heads.qk_model": model,
        "heads.qk_method": method,
        "heads.qk_layer": "2",
        "heads.qk_head": "1",
    }
    at = open_app(page, lang=lang, **params)
    assert_clean(at)
    assert t_in(lang, "qk_map.title") in [h.value for h in at.header]
    for key, value in params.items():  # the link round-trips
        assert (
            link_or_default(at, key) if key.endswith(("_layer", "_head")) else at.query_params[key]
        ) == value
    sentences = qk_data.qk_sentences(model, "")
    found = qk_data.qk_map_data(model, sentences, 2, 1, method)  # the page's cached call
    assert float(_metric(at, t_in(lang, "qk_map.metric_trust"))) == pytest.approx(
        found.spearman, abs=5e-4
    )
    rows = parse_plain_number(_metric(at, t_in(lang, "qk_map.metric_rows")))
    assert rows <= qk_map.ROW_TOLERANCE
    offered = {button.label for button in at.get("download_button")}
    for label in ("common.export_csv", "common.export_png", "common.export_svg"):
        assert t_in(lang, label) in offered  # the map's points and picture


@pytest.mark.parametrize("kinds", [("query", "key"), ("查询", "键")])
def test_queries_and_keys_keep_their_shape_and_colour_in_every_language(tiny_map, kinds):
    from dashboard.charts.qk_map import KIND_COLOURS, KIND_SHAPES

    table = qk_data.qk_map_table(tiny_map, kinds)
    spec = qk_map_chart(table, TITLES, colour="kind").to_dict()
    encoding = spec["encoding"] if "encoding" in spec else spec["layer"][0]["encoding"]
    assert encoding["shape"]["scale"] == {"domain": list(kinds), "range": list(KIND_SHAPES)}
    assert encoding["color"]["scale"] == {"domain": list(kinds), "range": list(KIND_COLOURS)}
