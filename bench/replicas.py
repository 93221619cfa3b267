"""The load benches against the real stack: ``scripts/serve.py --replicas N`` (redis-server,
N Streamlit replicas, HAProxy), started for one measurement and stopped by its pid.

:func:`serve_stack` yields the balancer's URL and serve.py's pid, whose process tree (the
replicas, Redis and the balancer) is the server whose CPU and memory the benches count.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.browser import REPO_ROOT, free_port, stop_process
from bench.load_figures import cpu_seconds

SERVE = REPO_ROOT / "scripts" / "serve.py"
START_TIMEOUT_S = 240.0
QUIET_TIMEOUT_S = 180.0
QUIET_WINDOW_S = 1.0
QUIET_CORES = 0.1
"""The stack is quiet when its process tree used less than this many cores over a window:
what the warm-up's pages started in the background (the Heads page's prefetch) is done, so
the CPU a bench counts is its learners'."""
STOP_TIMEOUT_S = 30.0
BALANCER_PREFIX = "balancer: "


@dataclass(frozen=True)
class Stack:
    """A running serve.py: the balancer's URL, serve.py's pid, its printed lines, and the
    folder of its parts' logs (``replica-K.log``, ``balancer.log``, ``redis.log``)."""

    url: str
    pid: int
    lines: tuple[str, ...]
    logs: Path


def parse_replicas(text: str) -> tuple[int, ...]:
    """``"1,2"`` -> (1, 2).

    Raises:
        ValueError: for anything but positive whole numbers separated by commas.
    """
    counts = tuple(int(part) for part in text.split(",") if part.strip())
    if not counts or min(counts) < 1:
        raise ValueError(f"--replicas must list positive whole numbers, e.g. 1,2; got {text!r}")
    return counts


def wait_until_quiet(pid: int, timeout_s: float = QUIET_TIMEOUT_S) -> bool:
    """Wait until the process tree of ``pid`` uses under :data:`QUIET_CORES` cores over
    :data:`QUIET_WINDOW_S` (at most ``timeout_s``); True when it did."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        time.sleep(QUIET_WINDOW_S)
        if cpu_seconds(pid) - before < QUIET_CORES * QUIET_WINDOW_S:
            return True
    return False


@contextlib.contextmanager
def serve_stack(
    replicas: int, logs: Path, env: dict[str, str] | None = None, *, warm: bool = True
) -> Iterator[Stack]:
    """Run ``scripts/serve.py --replicas N`` on a free port until the block ends.

    Args:
        replicas: N. logs: the folder for the parts' logs.
        env: extra environment for serve.py (and so for the replicas).
        warm: let serve.py open every page on each replica before the balancer starts (its
            default), and wait until what those pages started in the background is done
            (:func:`wait_until_quiet`); False passes ``--no-warm``.

    Yields:
        The :class:`Stack`, once serve.py printed the balancer's line.

    Raises:
        RuntimeError: when serve.py ends or stays silent before the balancer is up.
    """
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVE), "--replicas", str(replicas), "--port", str(port)]
        + ["--logs", str(logs), "--data", str(Path(logs) / "data")]
        + ([] if warm else ["--no-warm"]),
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while not lines or not lines[-1].startswith(BALANCER_PREFIX):
            line = process.stdout.readline()
            if not line or time.monotonic() > deadline:
                raise RuntimeError(f"serve.py did not start: {' | '.join(lines)}")
            lines.append(line.strip())
        balancer = next(line for line in lines if line.startswith(BALANCER_PREFIX))
        if warm:
            wait_until_quiet(process.pid)
        yield Stack(balancer.removeprefix(BALANCER_PREFIX), process.pid, tuple(lines), logs)
    finally:
        stop_process(process, STOP_TIMEOUT_S)
