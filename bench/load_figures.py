"""The figures the load benches compute from what they measured: a server's CPU time, the
median and p95 of a list of times, a goal's verdict, each mode's row and the side-by-side
table of ``--replicas``. Shared by :mod:`bench.load`, :mod:`bench.load_spread`,
:mod:`bench.load_room` and :mod:`bench.load_lesson` (each imports this, none the others'
internals).
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


def room_row(stats: dict, followers: int, replicas: int | None, peak: int) -> dict:
    """The room's figures for the side-by-side table."""
    follow = [t for phase in stats["phases"].values() for t in phase["follow_s"]]
    missed = sum(phase["missed"] for phase in stats["phases"].values())
    moves = sum(phase["moves"] for phase in stats["phases"].values())
    cpu = sum(phase["cpu_s"] for phase in stats["phases"].values())
    return {
        "mode": f"room, {followers} followers",
        "replicas": replicas or 1,
        "errors": len(stats["errors"]) + missed,
        "p95": percentiles(follow)[1],
        "worst page": float("nan"),
        "open p95": percentiles(stats["join_s"])[1],
        "cpu per move": cpu / max(moves, 1),
        "peak MiB": peak / 2**20,
    }


def spread_row(stats: dict, links: list[str], replicas: int | None, peak: int) -> dict:
    """Spread mode's figures for the side-by-side table."""
    worst = max((percentiles(times)[1] for times in stats["by_page"].values()), default=0.0)
    return {
        "mode": f"spread, {len(links)} learners",
        "replicas": replicas or 1,
        "errors": len(stats["errors"]),
        "p95": percentiles(stats["move_s"])[1],
        "worst page": worst,
        "open p95": percentiles(stats["open_s"])[1],
        "cpu per move": stats["cpu_s"] / max(stats["moves"], 1),
        "peak MiB": peak / 2**20,
    }


def print_side_by_side(rows: list[dict], interval: float) -> None:
    """The runs of ``--replicas`` in one table, with learners per core at each."""
    print("\nside by side (one run of this command, the same machine):")
    print(
        "mode                    replicas  errors  p95 s  worst page p95 s  open p95 s  "
        "CPU-s/move  learners/core  peak MiB"
    )
    for row in rows:
        per_core = interval / row["cpu per move"] if row["cpu per move"] else float("nan")
        print(
            f"{row['mode']:<24}{row['replicas']:>8}{row['errors']:>8}{row['p95']:>7.3f}"
            f"{row['worst page']:>18.3f}{row['open p95']:>12.3f}{row['cpu per move']:>12.3f}"
            f"{per_core:>15.1f}{row['peak MiB']:>10.0f}"
        )
