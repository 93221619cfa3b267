"""The room's wake-ups (dashboard/rooms/push.py): the registry, and on a live server a
follower that never polls still follows the presenter within seconds, because the
presenter's new view wakes it (a follower that polled would hide a broken wake-up)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import time

import pytest

from dashboard.rooms import push

FOLLOW_DEADLINE_S = 20  # a woken follower shows a move within a second; polling never runs


def test_the_registry_wakes_each_follower_once_and_forgets_the_gone():
    registry = push.FollowerRegistry(max_followers=3)
    for session in ("a", "b", "a", "c"):
        registry.register("room-1", session)
    registry.register("room-2", "z")
    assert registry.followers("room-1") == ["b", "a", "c"]
    woken: list[tuple[str, float]] = []

    def waker(session_id: str, delay_s: float) -> bool:
        woken.append((session_id, delay_s))
        return session_id != "b"  # b's tab was closed

    assert registry.wake("room-1", waker) == 2
    assert [session for session, _ in woken] == ["b", "a", "c"]
    delays = [delay for _, delay in woken]
    assert delays == sorted(delays) and delays[0] >= push.WAKE_DELAY_S
    assert registry.followers("room-1") == ["a", "c"]
    assert registry.followers("room-2") == ["z"]
    assert registry.wake("no-such-room", waker) == 0


def test_a_full_room_keeps_its_newest_followers():
    registry = push.FollowerRegistry(max_followers=2)
    for session in ("a", "b", "c"):
        registry.register("r", session)
    assert registry.followers("r") == ["b", "c"]
    registry.forget("r", "c")
    registry.forget("r", "never-there")
    assert registry.followers("r") == ["b"]


def test_outside_a_streamlit_server_nobody_is_woken():
    assert push.this_session() == ""
    assert push.streamlit_waker("no-such-session") is False


async def runs_started(session, within_s: float) -> int:
    """How many script runs the server starts for ``session`` within ``within_s`` seconds."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    started, end = 0, time.monotonic() + within_s
    while (left := end - time.monotonic()) > 0:
        try:
            raw = await asyncio.wait_for(session._socket.recv(), timeout=left)
        except TimeoutError:
            break
        message = ForwardMsg()
        message.ParseFromString(raw)
        started += message.WhichOneof("type") == "new_session"
    return started


@pytest.mark.browser
def test_a_follower_that_never_polls_follows_the_presenter():
    from bench import load_room
    from bench.browser import streamlit_server

    async def follow() -> list[tuple[str, str | None]]:
        host = load_room.Presenter(server.url, load_room.PAGE, f"room={load_room.ROOM}")
        await host.open()
        assert (await host.become_presenter()).ok
        follower = load_room.Follower(server.url)
        await follower.start()
        follower._tasks[1].cancel()  # no poll timer: only a wake-up can bring a new view
        seen = []
        for step in (1, 1, -1):
            result = await host.move_slider(load_room.MOVED, step)
            sent = time.monotonic() - result.seconds  # when the move left the presenter
            assert result.ok, result
            # the presenter followed the room before typing the key: never woken by its moves
            assert await runs_started(host, within_s=1.0) == 0
            value = str(int(host.sliders[load_room.MOVED].value[0]))
            deadline = time.monotonic() + FOLLOW_DEADLINE_S
            in_url = functools.partial(follower.seen_at, value, sent, by_url=True)
            while in_url() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert in_url() is not None, (
                f"move {len(seen) + 1} to {value}: the follower never showed it within "
                f"{FOLLOW_DEADLINE_S} s; its runs: {follower.finished[-4:]}"
            )
            seen.append((value, follower.query().get(load_room.MOVED)))
        # each wake-up drew the presenter's view in the run it started, not in a second one
        assert follower.ended_early == 0
        await follower.close()
        await host.close()
        return seen

    with streamlit_server(env={load_room.KEY_ENV: load_room.KEY}) as server:
        # a thread of its own: an earlier test may leave an event loop running in this one
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            seen = pool.submit(asyncio.run, follow()).result()
    assert [value for value, _ in seen] == [shown for _, shown in seen]
    assert len({value for value, _ in seen}) == 2
