"""Heads at work (issue 23): control -> repainted page, timed as an AppTest rerun.

Usage: ``python -m bench.heads_page [--repeats 3]``

Opens the page once (loads both models and fills the caches of the default view), then
moves one control at a time and times the script's rerun, which is what the browser waits
for before it repaints (the repaint itself, a few canvas and Vega charts, is not counted).
Each move goes to a new value and back, so the first move of a value computes and the way
back hits the cache: both are printed (median over ``--repeats`` rounds; only the first
round's new values miss the cache, so "new" is the first round's time). Goal: a repainted
page within 0.5 s on the default prompt. The machine is shared: the load average is printed.
Also prints the process's peak resident size (the server holds the same models).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"
GOAL_S = 0.5
MOVES = (
    ("slider", "heads.layer", 17, 18),
    ("selectbox", "heads.score", "previous_token", "induction"),
    ("slider", "heads.top_k", 3, 5),
    ("slider", "heads.sinks", 2, 4),
)
"""(widget kind, key, new value, default value)."""


def _timed_run(at: AppTest, kind: str, key: str, value) -> float:
    widget = getattr(at.sidebar, kind)(key=key)
    start = time.perf_counter()
    widget.set_value(value).run()
    if at.exception:
        raise RuntimeError(at.exception[0].message)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    """Time each move; print seconds, PASS/MISS against the goal, load and peak RSS."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    at = AppTest.from_file(str(APP), default_timeout=1800)
    at.switch_page("views/heads.py")
    start = time.perf_counter()
    at.run()
    print(f"first run (models, caches): {time.perf_counter() - start:.1f} s")
    for kind, key, value, default in MOVES:
        new, back = [], []
        for _ in range(args.repeats):
            new.append(_timed_run(at, kind, key, value))
            back.append(_timed_run(at, kind, key, default))
        cached = statistics.median([*new[1:], *back])
        verdict = "PASS" if cached <= GOAL_S else "MISS"
        print(
            f"{key:<16} first move {new[0]:6.2f} s   cached {cached:6.2f} s   "
            f"{verdict} (goal ≤ {GOAL_S} s, cached)"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"load average {os.getloadavg()[0]:.1f}, peak RSS {peak:.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
