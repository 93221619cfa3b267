"""dashboard/runtime/delivery.py: a run's messages reach the event loop in order, each once,
with one wake-up of the loop per burst instead of one per message."""

from __future__ import annotations

import asyncio
import threading

import pytest

from dashboard.runtime import delivery


class CountingLoop:
    """Records ``call_soon_threadsafe`` calls instead of running them (a loop not yet run)."""

    def __init__(self, closed: bool = False):
        self.scheduled: list = []
        self.errors: list = []
        self.closed = closed

    def call_soon_threadsafe(self, callback):
        if self.closed:
            raise RuntimeError("Event loop is closed")
        self.scheduled.append(callback)

    def call_soon(self, callback):  # from the loop's own thread
        self.scheduled.append(callback)

    def call_exception_handler(self, context):
        self.errors.append(context)

    def is_closed(self):
        return self.closed

    def run_scheduled(self):
        while self.scheduled:
            self.scheduled.pop(0)()


def test_a_burst_wakes_the_loop_once_and_runs_in_order():
    loop, ran = CountingLoop(), []
    outbox = delivery.SessionOutbox(loop)
    for index in range(5):
        outbox.put(lambda index=index: ran.append(index))
    assert len(loop.scheduled) == 1  # Streamlit's own hand-off: five wake-ups
    loop.run_scheduled()
    assert ran == [0, 1, 2, 3, 4]
    outbox.put(lambda: ran.append(5))  # the next burst wakes the loop again
    assert len(loop.scheduled) == 1
    loop.run_scheduled()
    assert ran == [0, 1, 2, 3, 4, 5]


def test_a_callback_queued_while_draining_runs_in_a_drain_of_its_own():
    loop, ran = CountingLoop(), []
    outbox = delivery.SessionOutbox(loop)
    outbox.put(lambda: (ran.append("first"), outbox.put(lambda: ran.append("second"))))
    loop.scheduled.pop(0)()  # the first drain: only what was queued when it started
    assert ran == ["first"]
    assert len(loop.scheduled) == 1  # the next drain, after the loop's other ready work
    loop.run_scheduled()
    assert ran == ["first", "second"]
    assert loop.scheduled == []


def test_a_failing_callback_is_reported_and_the_rest_still_run():
    loop, ran = CountingLoop(), []
    outbox = delivery.SessionOutbox(loop)
    outbox.put(lambda: 1 / 0)
    outbox.put(lambda: ran.append("after"))
    loop.run_scheduled()
    assert ran == ["after"]
    assert isinstance(loop.errors[0]["exception"], ZeroDivisionError)


class FakeSession:
    def __init__(self, loop):
        self._event_loop = loop


def test_a_closed_loop_drops_the_callback_as_streamlit_does():
    session = FakeSession(CountingLoop(closed=True))
    delivery.coalesced_call_soon(session, lambda: None)  # no error
    assert not delivery._outbox(session)._queue  # nothing left to run later


def test_many_threads_on_a_real_loop_each_callback_once_in_each_threads_order():
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    session, ran, lock = FakeSession(loop), [], threading.Lock()

    def produce(name: str) -> None:
        for index in range(300):
            delivery.coalesced_call_soon(session, lambda i=index: ran.append((name, i)))

    producers = [threading.Thread(target=produce, args=(f"t{n}",)) for n in range(6)]
    for thread in producers:
        thread.start()
    for thread in producers:
        thread.join()
    done = threading.Event()
    delivery.coalesced_call_soon(session, done.set)
    assert done.wait(10)
    loop.call_soon_threadsafe(loop.stop)
    runner.join(10)
    loop.close()
    with lock:
        assert len(ran) == 6 * 300
        for name in {n for n, _ in ran}:
            assert [i for n, i in ran if n == name] == list(range(300))


def test_by_default_streamlits_hand_off_stays(monkeypatch):
    monkeypatch.delenv(delivery.ON_ENV, raising=False)
    monkeypatch.setattr(delivery, "_originals", {})
    assert not delivery.enabled()
    assert delivery.install() is False


def test_install_replaces_the_hand_off_once_and_uninstall_puts_it_back(monkeypatch):
    from streamlit.runtime.app_session import AppSession

    monkeypatch.setenv(delivery.ON_ENV, "1")
    monkeypatch.setattr(delivery, "_originals", {})
    before = AppSession._call_soon_on_event_loop
    try:
        assert delivery.install() and delivery.install()
        assert AppSession._call_soon_on_event_loop is delivery.coalesced_call_soon
        assert list(delivery._originals.values()) == [before]
    finally:
        delivery.uninstall()
    assert AppSession._call_soon_on_event_loop is before


@pytest.mark.parametrize("raw, on", [("", False), ("0", False), ("1", True), ("yes", False)])
def test_the_switch_reads_the_environment(monkeypatch, raw, on):
    monkeypatch.setenv(delivery.ON_ENV, raw)
    assert delivery.enabled() is on
