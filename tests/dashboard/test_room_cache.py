"""A follower's tab must never meet a reference to a message its browser has
dropped ("Cached ForwardMsg MISS", after which only a reload helps).

The followers here are websocket clients that keep the browser's message cache by the
frontend's own rules (:class:`dashboard.serving.stream_client.MessageCache`): every rerun
they ask for lists the hashes they hold, and a reference they cannot resolve is a miss.
Three of them (one in Chinese) follow a presenter who moves through pages not yet drawn for
them and back and moves a slider on each (so that most of a page's messages are sent again
unchanged), with their poll timer running fast so that polls cross the server's wake-ups.
Before the fix a follower received references on every page change (a miss came once in
about 150 changes, when a wake-up finished between a poll's request and its run); now a
follower's runs send every message whole, while the presenter's runs still use the cache."""

from __future__ import annotations

import asyncio
import concurrent.futures

import pytest

PAGES = ("playground", "scaling", "multihead", "step_by_step", "playground")
MOVES = (1, 1, -1)  # the presenter's moves of the page's first slider, on each page
POLL_S = 0.25  # the followers' poll timer, 20 times the app's, to cross more wake-ups
SETTLE_S = 1.0  # after each move of the presenter
FOLLOW_DEADLINE_S = 30


@pytest.mark.browser
def test_followers_get_no_references_and_miss_nothing_across_page_changes():
    from bench import load_room
    from bench.browser import streamlit_server

    async def room(url: str):
        host = load_room.Presenter(url, "intuition", f"room={load_room.ROOM}")
        assert (await host.open()).ok
        assert (await host.become_presenter()).ok
        followers = [
            load_room.Follower(url, query, POLL_S)
            for query in (
                f"room={load_room.ROOM}",
                f"room={load_room.ROOM}&lang=zh",
                f"room={load_room.ROOM}",
            )
        ]
        for follower in followers:
            await follower.start()
        for page in PAGES:
            result = await host.switch_page(page, f"room={load_room.ROOM}")
            assert result.ok, (page, result)
            await asyncio.sleep(SETTLE_S)
            for step in MOVES:
                assert (await host.move_slider(host.shown[0], step)).ok
                await asyncio.sleep(SETTLE_S)
        deadline = asyncio.get_running_loop().time() + FOLLOW_DEADLINE_S
        while asyncio.get_running_loop().time() < deadline and any(
            f.session.page_script_hash != host.page_script_hash for f in followers
        ):
            await asyncio.sleep(0.1)
        seen = [
            (
                (f.session.page_script_hash == host.page_script_hash, f.query()),
                f.session.cache.references,
                f.session.cache.misses,
                f.errors,
            )
            for f in followers
        ]
        presenter_references = host.cache.references
        for follower in followers:
            await follower.close()
        await host.close()
        return seen, presenter_references

    with streamlit_server(env={load_room.KEY_ENV: load_room.KEY}) as server:
        # a thread of its own: an earlier test may leave an event loop running in this one
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            seen, presenter_references = pool.submit(asyncio.run, room(server.url)).result()
    for landed, references, misses, errors in seen:
        assert landed[0], f"a follower did not reach the presenter's last page: {landed[1]}"
        assert misses == [] and errors == []
        assert references == 0
    # the presenter came back to a page it had drawn: its browser's cache still serves it
    assert presenter_references > 0
