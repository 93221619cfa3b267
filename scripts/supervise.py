"""Processes started, stopped by their own pid, and started again when they exit: what
``scripts/serve.py`` needs to look after Redis and its replicas, apart from what they are.

:class:`RestartPolicy` decides, as a pure function of a part's restart times, how long to wait
before starting it again (1, 2, 4 … s, at most 30) and when to leave it down (5 restarts
within 5 minutes); :func:`look_after` applies it to one part at a time, :func:`watch` to all of
them until the balancer exits. SIGTERM and SIGINT are held back while a process starts, so
every process started is on record before a stop can begin, and :func:`stop` reaches it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

POLL_S = 0.5
STOP_TIMEOUT_S = 15.0
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


@dataclass
class Part:
    """One process serve.py started and how to start it again: its name, the process now,
    its log, its address, and the command and ``Popen`` arguments that started it."""

    name: str
    process: subprocess.Popen
    log: Path
    url: str = ""
    cmd: list[str] = field(default_factory=list)
    popen: dict = field(default_factory=dict)

    def line(self) -> str:
        """``NAME: URL pid PID``, the line printed when the part starts and restarts."""
        return f"{self.name}: {self.url} pid {self.process.pid}"


@dataclass(frozen=True)
class RestartPolicy:
    """When a part that exited starts again (pure: a test checks it without processes): after
    ``first_delay_s``, doubled for each restart within the last ``window_s`` seconds (1, 2, 4,
    8, 16 s …) up to ``max_delay_s``; never after ``max_restarts`` restarts in that window."""

    first_delay_s: float = 1.0
    max_delay_s: float = 30.0
    max_restarts: int = 5
    window_s: float = 300.0

    def recent(self, restarts: tuple[float, ...], now: float) -> int:
        """How many of ``restarts`` (clock times) lie within ``window_s`` before ``now``."""
        return sum(1 for at in restarts if now - at < self.window_s)

    def delay_s(self, tries: int) -> float:
        """The wait before a restart that follows ``tries`` recent ones.

        Raises:
            ValueError: for a negative ``tries``.
        """
        if tries < 0:
            raise ValueError(f"tries must be 0 or more, got {tries}")
        doublings = min(tries, 64)  # past the cap long before; keeps 2**n a small float
        return min(self.max_delay_s, self.first_delay_s * 2.0**doublings)

    def next_delay(self, restarts: tuple[float, ...], now: float) -> float:
        """The wait before restarting a part that exited at ``now``, restarted at ``restarts``."""
        return self.delay_s(self.recent(restarts, now))

    def gives_up(self, restarts: tuple[float, ...], now: float) -> bool:
        """Whether a part that exited at ``now``, restarted at ``restarts``, stays down."""
        return self.recent(restarts, now) >= self.max_restarts


@dataclass
class Watched:
    """A part the watch loop starts again: when it was restarted, when its next start is due
    (``None`` while it runs) and whether it was given up."""

    part: Part
    restarts: tuple[float, ...] = ()
    due: float | None = None
    given_up: bool = False


@contextmanager
def _stops_held():
    """SIGTERM and SIGINT wait until the block ends, so a process started in it is on record
    (its Part) before a stop begins; the children take them again (:func:`_spawn`)."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _spawn(cmd: list[str], log: Path, mode: str, popen: dict) -> subprocess.Popen:
    before_exec = popen.get("preexec_fn")

    def in_child() -> None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        if before_exec is not None:
            before_exec()

    with log.open(mode) as handle, _stops_held():
        return subprocess.Popen(
            cmd, stdout=handle, stderr=subprocess.STDOUT, **{**popen, "preexec_fn": in_child}
        )


def start_part(name: str, cmd: list[str], logs: Path, **popen) -> Part:
    """Start ``cmd`` as part ``name``, its output in ``logs/<name>.log``; ``popen`` goes to
    :class:`subprocess.Popen` now and at each :func:`restart`."""
    log = logs / f"{name.replace(' ', '-')}.log"
    return Part(name, _spawn(cmd, log, "w", popen), log, cmd=cmd, popen=popen)


def restart(part: Part) -> None:
    """Start ``part``'s command again (same port, same environment); its log goes on."""
    with _stops_held():
        part.process = _spawn(part.cmd, part.log, "a", part.popen)


def stop(parts: list[Part]) -> None:
    """SIGTERM each started process by its own pid, then SIGKILL what is left."""
    for part in parts:
        if part.process.poll() is None:
            os.kill(part.process.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for part in parts:
        try:
            part.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.kill(part.process.pid, signal.SIGKILL)
            part.process.wait()


def look_after(item: Watched, policy: RestartPolicy, now: float) -> str:
    """One look at a watched part at clock time ``now``: note that it exited and when it will
    start again (or that it is given up), or start it when that time has come.

    Returns:
        The line to print about it, or ``""`` when nothing happened.
    """
    name = item.part.name
    if item.given_up:
        return ""
    if item.due is None:
        code = item.part.process.poll()
        if code is None:
            return ""
        if policy.gives_up(item.restarts, now):
            item.given_up = True
            return (
                f"{name} exited with code {code}; not starting it again "
                f"({policy.max_restarts} restarts within {policy.window_s:.0f} s)"
            )
        delay = policy.next_delay(item.restarts, now)
        item.due = now + delay
        return f"{name} exited with code {code}; starting it again in {delay:.0f} s"
    if now < item.due:
        return ""
    restart(item.part)
    item.restarts = (*(at for at in item.restarts if now - at < policy.window_s), now)
    item.due = None
    return item.part.line()


def watch(watched: list[Watched], balancer: Part, policy: RestartPolicy) -> None:
    """Look after each watched part (:func:`look_after`) every :data:`POLL_S` seconds,
    printing what happened; return when the balancer exits."""
    while balancer.process.poll() is None:
        for item in watched:
            if said := look_after(item, policy, time.monotonic()):
                print(said, flush=True)
        time.sleep(POLL_S)
    print(f"balancer exited with code {balancer.process.returncode}", flush=True)
