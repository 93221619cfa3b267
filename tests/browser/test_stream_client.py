"""The websocket client of ``bench.load`` and the app's scale-out promise, on live servers.

* A slider move sent by :class:`dashboard.serving.stream_client.StreamSession` reruns the
  page with the new value, as a browser's move does (the URL and the page's figures follow it).
* Every view lives in the URL, so identical replicas behind a load balancer are
  interchangeable: the same link, opened against two separately started servers, shows
  identical numbers (every heatmap's values and scores, every computed figure; only the
  measured time and memory may differ), and so does the same slider move on both.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json

import pytest
from streamlit.proto.Markdown_pb2 import Markdown

from bench.browser import streamlit_server
from dashboard.i18n import load_namespace
from dashboard.serving.stream_client import StreamSession

pytestmark = pytest.mark.browser

COMMON = load_namespace("en", "common")
SEQ_LEN_LABEL = COMMON["metric_seq_len"]
MEASURED = {COMMON[k] for k in ("metric_time", "metric_memory_measured", "metric_memory_estimate")}
LINK = (
    "playground.seq_len=12&playground.seed=7&playground.variant=local"
    "&playground.local.window_size=5&playground.mask=causal&playground.heads=2"
)


def figures(session: StreamSession) -> dict:
    """What the last run showed that the link determines: metrics (but measured time and
    memory), captions, and every canvas heatmap's spec (values and scores as sent)."""
    metrics, heatmaps, captions = {}, [], []
    for element in session.elements:
        kind = element.WhichOneof("type")
        if kind == "metric" and element.metric.label not in MEASURED:
            metrics[element.metric.label] = element.metric.body
        elif kind == "bidi_component":
            heatmaps.append(json.loads(element.bidi_component.json))
        elif kind == "markdown" and element.markdown.element_type == Markdown.Type.CAPTION:
            captions.append(element.markdown.body)
    # captions sorted: a slot filled after the heatmaps (the time note) can reach the client
    # before or after the output's caption, depending on how fast each server ran
    return {"metrics": metrics, "heatmaps": heatmaps, "captions": sorted(captions)}


async def open_and_move(base_url: str, query: str, key: str, steps: int) -> tuple[dict, dict]:
    """Figures of ``query`` opened on the Playground, then after moving slider ``key``."""
    session = StreamSession(base_url, "playground", query)
    try:
        opened = await session.open()
        assert opened.ok, opened
        before = figures(session)
        moved = await session.move_slider(key, steps)
        assert moved.ok, moved
        return before, figures(session)
    finally:
        await session.close()


def run_apart(coroutine):
    """Run ``coroutine`` to completion on a fresh event loop in a thread of its own: the
    browser tests' sync Playwright keeps an event loop running in this thread, where
    ``asyncio.run`` refuses to start a second one."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def test_slider_move_reruns_the_page_with_the_new_value(server):
    before, after = run_apart(open_and_move(server.url, LINK, "playground.seq_len", 1))
    assert before["metrics"][SEQ_LEN_LABEL] == "12"
    assert after["metrics"][SEQ_LEN_LABEL] == "13"
    assert before["heatmaps"] and after["heatmaps"]
    assert len(after["heatmaps"][0]["rows"]) == 13


def test_same_link_shows_identical_numbers_on_two_servers(server, tmp_path):
    with streamlit_server(log_path=tmp_path / "replica.log") as replica:
        assert replica.url != server.url and replica.pid != server.pid
        first = run_apart(open_and_move(server.url, LINK, "playground.seed", 1))
        second = run_apart(open_and_move(replica.url, LINK, "playground.seed", 1))
    for one, other in zip(first, second, strict=True):
        assert one["metrics"] and one["heatmaps"]
        assert one == other
    assert first[0]["heatmaps"] != first[1]["heatmaps"], "the move changed nothing"
