"""The figures the load benches compute from what they measured: a server's CPU time, the
median and p95 of a list of times, a goal's verdict. Shared by :mod:`bench.load` and
:mod:`bench.load_room` (each imports this, neither the other's internals).
"""

from __future__ import annotations

import contextlib
import statistics
from pathlib import Path


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process and its children (psutil), in seconds."""
    import psutil

    proc = psutil.Process(pid)
    total = sum(proc.cpu_times()[:2])
    for child in proc.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += sum(child.cpu_times()[:2])
    return total


def percentiles(times: list[float]) -> tuple[float, float]:
    """(p50, p95) of ``times`` (NaN when empty); p95 is the nearest-rank value."""
    if not times:
        return float("nan"), float("nan")
    ordered = sorted(times)
    return statistics.median(ordered), ordered[max(0, round(0.95 * len(ordered)) - 1)]


def verdict(ok: bool) -> str:
    """``PASS`` when a goal held, else ``MISS``."""
    return "PASS" if ok else "MISS"


def print_errors(errors: list[str], shown: int = 10) -> None:
    """Print how many errors a run met (the goal is none) and the first ``shown`` of them."""
    print(f"errors {len(errors)} (goal 0)")
    for error in errors[:shown]:
        print(f"  - {error}")


UNCAUGHT = "Uncaught app execution"  # what Streamlit logs for a script run that raised


def print_server_log(path: Path) -> int:
    """Print how many script runs raised on the server (its log's ``Uncaught app execution``
    lines, the red error box a learner saw; the goal is none) and the first one's traceback.

    Returns:
        The count.
    """
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    found = [i for i, line in enumerate(lines) if UNCAUGHT in line]
    print(f"server log: {len(found)} uncaught app executions (goal 0) {verdict(not found)}")
    if found:
        print("\n".join(f"  | {line}" for line in lines[found[0] : found[0] + 20]))
    return len(found)
