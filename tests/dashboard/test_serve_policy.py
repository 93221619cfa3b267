"""The restart policy of scripts/serve.py (``scripts/supervise.py``), without processes: a
part that exits starts again after 1, 2, 4 … s (at most 30) by its restarts in the last 5
minutes, and is left down after 5 restarts in that window, until the older ones age out. The
restarts themselves, with real processes, are ``tests/browser/test_serve_restarts.py``."""

from __future__ import annotations

import pytest

from scripts.supervise import RestartPolicy, Watched, look_after

WINDOW_S = 300.0


def test_the_waits_double_from_one_second_up_to_thirty():
    policy = RestartPolicy()
    assert [policy.delay_s(tries) for tries in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert policy.delay_s(10_000) == 30
    with pytest.raises(ValueError, match="-1"):
        policy.delay_s(-1)


def test_five_restarts_in_five_minutes_give_up_until_they_age_out():
    policy = RestartPolicy()
    restarts: tuple[float, ...] = ()
    now, waits = 0.0, []
    while not policy.gives_up(restarts, now):
        waits.append(policy.next_delay(restarts, now))
        now += waits[-1]
        restarts += (now,)
        now += 10.0  # it ran 10 s, then exited again
    assert waits == [1, 2, 4, 8, 16]
    assert len(restarts) == 5 and now - restarts[0] < WINDOW_S
    first_ages_out = restarts[0] + WINDOW_S
    assert policy.gives_up(restarts, first_ages_out - 0.1)
    assert not policy.gives_up(restarts, first_ages_out)
    assert policy.next_delay(restarts, first_ages_out) == 16  # four restarts still count
    assert policy.next_delay(restarts, restarts[-1] + WINDOW_S) == 1  # a quiet part starts over


class _Exited:
    """A process that exited with ``returncode``, and the pid a restart would get."""

    def __init__(self, returncode: int | None, pid: int = 41):
        self.returncode, self.pid = returncode, pid

    def poll(self) -> int | None:
        return self.returncode


def test_one_look_says_the_exit_then_restarts_when_due(monkeypatch):
    import scripts.supervise as supervise

    part = supervise.Part("replica 1", _Exited(-9), log=None, url="http://127.0.0.1:9")
    monkeypatch.setattr(supervise, "restart", lambda p: setattr(p, "process", _Exited(None, 42)))
    item, policy = Watched(part), RestartPolicy()
    assert (
        look_after(item, policy, 100.0) == "replica 1 exited with code -9; starting it again in 1 s"
    )
    assert look_after(item, policy, 100.5) == ""  # not due yet
    assert look_after(item, policy, 101.0) == "replica 1: http://127.0.0.1:9 pid 42"
    assert item.restarts == (101.0,) and look_after(item, policy, 102.0) == ""
    given_up = Watched(supervise.Part("redis", _Exited(1), log=None), restarts=(1.0,) * 5)
    assert look_after(given_up, policy, 2.0) == (
        "redis exited with code 1; not starting it again (5 restarts within 300 s)"
    )
    assert given_up.given_up and look_after(given_up, policy, 1e6) == ""
