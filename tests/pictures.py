"""What a chart paints, read as pixels: the colour under each number (or letter) printed in a
heatmap's cells, against the colour the chart's own colour scale gives that cell's value.

A chart is taken as Streamlit sends it to the browser (the element's Vega-Lite spec, its
Arrow datasets put back inline, and the ``autosize`` Streamlit adds), laid out and drawn by
Vega itself through vl-convert:

* the layout comes from Vega's scenegraph (``vegalite_to_scenegraph``): where each text item
  of a cell layer stands, in the chart's own pixels;
* the colour under it comes from a PNG of the same chart with its text layers made fully
  transparent (``opacity`` 0 changes no layout), read at that point;
* the reference colour comes from Vega too: a strip of one-pixel rects on the chart's own
  colour scale (:func:`scale_colours`).

A cell layer's items are in its data's order (Vega draws one item per row, in order), and a
test that uses this module also checks that each item's text is the one its row prints, so a
mismatch between the two orders would fail rather than pass unseen.
"""

from __future__ import annotations

import copy
import io
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

COLOUR_TOLERANCE = 6
"""Per RGB channel, out of 255: a rect's inside is painted flat, so this only absorbs a
resampled PNG's rounding."""
PIXEL_SCALE = 2  # the PNG is drawn at twice the chart's pixels: a cell of 8 px is 16 samples
MINUS = "\u2212"


@dataclass(frozen=True)
class PaintedCell:
    """One printed cell of a chart: its text, the value its row holds, the colour painted
    under the text and the colour the scale gives the value (RGB, 0..255)."""

    text: str
    value: float
    painted: tuple[int, int, int]
    expected: tuple[int, int, int]
    row: dict

    @property
    def distance(self) -> int:
        """The largest per-channel difference between painted and expected colour."""
        return int(max(abs(a - b) for a, b in zip(self.painted, self.expected, strict=True)))


def element_spec(chart) -> dict:
    """The Vega-Lite spec of an AppTest ``vega_lite_chart`` element, with its Arrow datasets
    put back as inline values (what the browser's vega-embed receives)."""
    spec = json.loads(chart.proto.spec)
    datasets = {}
    for named in chart.proto.datasets:
        table = pa.ipc.open_stream(named.data.data).read_all()
        datasets[named.name] = _records(table)
    spec["datasets"] = {**spec.get("datasets", {}), **datasets}
    return spec


def _records(table: pa.Table) -> list[dict]:
    """An Arrow table's rows as plain dicts (Streamlit's added index column dropped)."""
    frame = table.to_pandas()
    frame = frame.loc[:, [c for c in frame.columns if not str(c).startswith("__index")]]
    return json.loads(frame.to_json(orient="records", force_ascii=False))


@dataclass(frozen=True)
class CellLayers:
    """A layered chart's cell layers: the rect layer whose colour encodes a quantitative field
    and the text layers printed over it."""

    rect: int
    texts: tuple[int, ...]
    value_field: str
    scale: dict


def cell_layers(spec: dict) -> CellLayers | None:
    """The cell layers of a top-level layered spec (a rect layer coloured by a quantitative
    field, and the text layers drawn from the same data), or None when the chart has none."""
    layers = spec.get("layer")
    if not isinstance(layers, list):
        return None
    rect = next(
        (
            i
            for i, layer in enumerate(layers)
            if _mark_type(layer) == "rect"
            and layer.get("encoding", {}).get("color", {}).get("type") == "quantitative"
        ),
        None,
    )
    if rect is None:
        return None
    same = layers[rect].get("data")
    texts = tuple(
        i
        for i, layer in enumerate(layers)
        if _mark_type(layer) == "text" and layer.get("data") == same
    )
    if not texts:
        return None
    color = layers[rect]["encoding"]["color"]
    return CellLayers(rect, texts, color["field"], color.get("scale", {}))


def _mark_type(layer: dict) -> str | None:
    mark = layer.get("mark")
    return mark.get("type") if isinstance(mark, dict) else mark


def _data_rows(spec: dict, layer: int | None = None) -> list[dict]:
    """The rows of a layer's own data, or of the spec's top-level data (inline, or named in
    ``datasets``)."""
    data = spec["layer"][layer].get("data") if layer is not None else None
    data = data or spec["data"]
    if "values" in data:
        return data["values"]
    return spec["datasets"][data["name"]]


def _field_value(row: dict, field: str) -> float:
    """``row[field]``, the field named as Vega-Lite names it (``\\.`` escapes a dot)."""
    name = field.replace("\\.", ".").replace("\\[", "[").replace("\\]", "]")
    return math.nan if row[name] is None else float(row[name])  # None: a cell left unpainted


def _marks(node: dict, ox: float, oy: float) -> Iterator[tuple[dict, float, float]]:
    """Every mark of a scenegraph with the absolute offset of its items."""
    yield node, ox, oy
    for item in node.get("items", []):
        for child in item.get("items", []) if isinstance(item, dict) else []:
            if isinstance(child, dict) and "marktype" in child:
                yield from _marks(child, ox + item.get("x", 0), oy + item.get("y", 0))


def _layer_marks(scene: dict, spec: dict, index: int) -> list[tuple[dict, float, float]]:
    """The scenegraph marks drawn for Vega-Lite layer ``index``: ``<name>_marks`` for a layer
    that names its view (Altair names one with a selection), else ``layer_<i>_marks``."""
    name = spec["layer"][index].get("name", f"layer_{index}") + "_marks"
    return [m for m in _marks(scene["scenegraph"], 0.0, 0.0) if m[0].get("name") == name]


def without_text(spec: dict, texts: tuple[int, ...]) -> dict:
    """``spec`` with its text layers at opacity 0: the same layout, only the cells painted."""
    hidden = copy.deepcopy(spec)
    for index in texts:
        layer = hidden["layer"][index]
        mark = layer["mark"] if isinstance(layer["mark"], dict) else {"type": layer["mark"]}
        layer["mark"] = {**mark, "opacity": 0}
        layer.get("encoding", {}).pop("opacity", None)
    return hidden


def scale_colours(values, scale: dict) -> np.ndarray:
    """(N, 3) RGB that Vega's colour ``scale`` (a Vega-Lite scale dict) gives ``values``: a
    strip of one-pixel rects drawn by vl-convert. A scale without a domain takes the data's
    extent, as the chart's does, so pass every value the chart colours."""
    import vl_convert as vlc
    from PIL import Image

    n = len(values)
    strip = {
        "data": {"values": [{"i": i, "v": float(v)} for i, v in enumerate(values)]},
        "mark": {"type": "rect", "width": 1, "height": 1},
        "width": n,
        "height": 1,
        "padding": 0,
        "autosize": "none",
        "background": "white",
        "config": {"view": {"stroke": None}},
        "encoding": {
            "x": {
                "field": "i",
                "type": "quantitative",
                "scale": {"domain": [-0.5, n - 0.5]},
                "axis": None,
            },
            "y": {"value": 0.5},
            "color": {"field": "v", "type": "quantitative", "scale": scale, "legend": None},
        },
    }
    png = vlc.vegalite_to_png(strip, scale=1)
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))[0].astype(int)


def painted_cells(spec: dict) -> list[PaintedCell]:
    """Every printed cell of a layered heatmap spec, with the colour painted under its text
    and the colour its value should have.

    Args:
        spec: a Vega-Lite spec with inline data (:func:`element_spec`), a top-level ``layer``
            holding a rect layer coloured by a quantitative field and text layers over it.

    Returns:
        One :class:`PaintedCell` per text item, in data order.

    Raises:
        ValueError: when the spec has no cell layers, or a text layer draws another number of
            items than its data has rows.
    """
    import vl_convert as vlc
    from PIL import Image

    layers = cell_layers(spec)
    if layers is None:
        raise ValueError("the chart has no rect layer with text printed over it")
    rows = _data_rows(spec, layers.rect)
    values = [_field_value(row, layers.value_field) for row in rows]
    scene = vlc.vegalite_to_scenegraph(spec)
    origin = scene["origin"]
    png = vlc.vegalite_to_png(without_text(spec, layers.texts), scale=PIXEL_SCALE)
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    expected = scale_colours([0.0 if math.isnan(v) else v for v in values], layers.scale)
    cells = []
    for index in layers.texts:
        for mark, ox, oy in _layer_marks(scene, spec, index):
            items = mark.get("items", [])
            if len(items) != len(rows):
                raise ValueError(f"text layer {index} drew {len(items)} items for {len(rows)} rows")
            for k, item in enumerate(items):
                if math.isnan(values[k]):  # a masked cell prints −∞ over no colour of its own
                    continue
                x = (origin[0] + ox + item["x"] + item.get("dx", 0)) * PIXEL_SCALE
                y = (origin[1] + oy + item["y"] + item.get("dy", 0)) * PIXEL_SCALE
                cells.append(
                    PaintedCell(
                        text=str(item.get("text", "")),
                        value=values[k],
                        painted=_sample(pixels, x, y),
                        expected=tuple(int(c) for c in expected[k]),
                        row=rows[k],
                    )
                )
    return cells


def _sample(pixels: np.ndarray, x: float, y: float) -> tuple[int, int, int]:
    """The median colour of the 3×3 pixels around (x, y)."""
    col, row = int(math.floor(x)), int(math.floor(y))
    patch = pixels[max(row - 1, 0) : row + 2, max(col - 1, 0) : col + 2].reshape(-1, 3)
    return tuple(int(c) for c in np.median(patch, axis=0))


def printed_number(text: str) -> float | None:
    """The number a cell prints (``"−0.45"`` -> -0.45), or None for a label."""
    try:
        return float(text.replace(MINUS, "-"))
    except ValueError:
        return None


def printed_digits(text: str) -> int:
    """How many decimals a printed number shows."""
    return len(text.split(".", 1)[1]) if "." in text else 0


def rank_agreement(cells: list[PaintedCell]) -> float:
    """Spearman's rank correlation between the printed values and the painted colours'
    positions on the expected ramp (each painted colour placed at the value whose expected
    colour is nearest): 1.0 when every cell sits under its own colour."""
    from scipy.stats import spearmanr

    expected = np.array([c.expected for c in cells], dtype=float)
    order = np.argsort([c.value for c in cells])
    placed = []
    for cell in cells:
        nearest = np.abs(expected - np.array(cell.painted, dtype=float)).sum(axis=1).argmin()
        placed.append(cells[nearest].value)
    values = [c.value for c in cells]
    if len(set(values)) < 2 or len(order) < 2:
        return 1.0
    return float(spearmanr(values, placed).statistic)


@dataclass(frozen=True)
class Outline:
    """The cell an unfilled rect layer outlines: the row of the cell layer's data whose rect
    the outline covers, and the colour painted on the outline's edge and on the edges of the
    other cells."""

    row: dict
    edge: tuple[int, int, int]
    other_edges: tuple[tuple[int, int, int], ...]


def outlines(spec: dict) -> list[Outline]:
    """Every outlined cell of a layered heatmap spec (an unfilled rect layer with a stroke),
    found where Vega lays it out and read from the pixels where it is painted.

    Raises:
        ValueError: when the spec has no cell layers, or an outline covers no cell.
    """
    import vl_convert as vlc
    from PIL import Image

    layers = cell_layers(spec)
    if layers is None:
        raise ValueError("the chart has no rect layer with text printed over it")
    rows = _data_rows(spec, layers.rect)
    # Vega-Lite draws no rect for a row without a value (a masked cell): the drawn rows
    rows = [row for row in rows if not math.isnan(_field_value(row, layers.value_field))]
    scene = vlc.vegalite_to_scenegraph(spec)
    origin = scene["origin"]
    png = vlc.vegalite_to_png(without_text(spec, layers.texts), scale=PIXEL_SCALE)
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    cells = [
        (ox + item["x"], oy + item["y"], item["width"], item["height"])
        for mark, ox, oy in _layer_marks(scene, spec, layers.rect)
        for item in mark.get("items", [])
    ]

    def top_edge(box) -> tuple[int, int, int]:
        x, y, width, _height = box
        return _sample(
            pixels, (origin[0] + x + width / 2) * PIXEL_SCALE, (origin[1] + y) * PIXEL_SCALE
        )

    found = []
    for index, layer in enumerate(spec["layer"]):
        mark = layer.get("mark")
        unfilled = isinstance(mark, dict) and "fill" in mark and mark["fill"] is None
        if not (_mark_type(layer) == "rect" and unfilled and "stroke" in mark):
            continue
        for outline_mark, ox, oy in _layer_marks(scene, spec, index):
            for item in outline_mark.get("items", []):
                box = (ox + item["x"], oy + item["y"], item["width"], item["height"])
                hits = [k for k, cell in enumerate(cells) if np.allclose(cell, box, atol=0.5)]
                if len(hits) != 1:
                    raise ValueError(f"outline {box} covers {len(hits)} cells")
                others = tuple(top_edge(cell) for k, cell in enumerate(cells) if k != hits[0])
                found.append(Outline(rows[hits[0]], top_edge(box), others))
    return found


def hex_rgb(colour: str) -> tuple[int, int, int]:
    """``"#e4572e"`` -> (228, 87, 46)."""
    return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
