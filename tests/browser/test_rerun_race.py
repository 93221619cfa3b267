"""A run that a newer request stopped, still on its way to ``page.run()`` while the new run
of the same session starts (Streamlit's ``runner.fastReruns``: the new run does not wait for
the old one to reach its next message): the new run's page must run. Were both runs to
share the session's ``st.Page`` objects, the old run's ``page.run()`` would take the mark
that the new run's ``st.navigation`` put on the object, and the new run would end in "This
page cannot be called directly": the error page of a follower woken by the presenter while
its own rerun is under way.

The server here holds each run a few seconds as its page is about to run
(``tests/browser/stalled_app.py``), so that the interleaving a loaded machine makes now and
then happens every time: a second request comes while the first run is held."""

from __future__ import annotations

import asyncio
import concurrent.futures

import pytest

RACE_ERROR = "This page cannot be called directly"
PAGES = ("scaling", "playground")
APP = "tests/browser/stalled_app.py"
STALL_S = 3.0  # each run held this long before its page (tests/browser/stalled_app.py)


async def two_runs_racing(url: str, page: str) -> list[str]:
    """Open ``page``, ask for a run, and ask again while that run is held before its page;
    the errors of every message until the second run finishes."""
    from dashboard.serving.stream_client import FINISHED_OK, StreamSession

    session = StreamSession(url, page)
    try:
        assert (await session.open()).ok
        await session.ask_rerun()
        await asyncio.sleep(STALL_S / 2)  # the first run is held before its page.run()
        await session.ask_rerun()
        errors = []
        while True:  # the first run's end (stopped), then the second run's
            result = await session.finish_run()
            errors += result.errors
            if result.status in FINISHED_OK:
                return errors
    finally:
        await session.close()


@pytest.mark.parametrize("page", PAGES)
def test_a_run_stopped_before_its_page_leaves_the_next_run_its_page(page, tmp_path):
    from bench.browser import streamlit_server

    log = tmp_path / "server.log"
    with streamlit_server(
        log_path=log, env={"ATTENTION_LAB_TEST_STALL_S": str(STALL_S)}, app=APP
    ) as server:
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            errors = pool.submit(asyncio.run, two_runs_racing(server.url, page)).result()
    assert errors == []
    assert RACE_ERROR not in log.read_text()
