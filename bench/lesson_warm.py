"""A lesson made ready: ``python -m bench.lesson_warm [--lesson self-attention-20] [--runs 1]``.

On a freshly started server (its own shipped lessons not warmed at start:
``ATTENTION_LAB_PREWARM=off``), the landing page is opened once (what a learner does
first), then each step of the lesson is opened once in turn, as the server's own pre-warm
does (:func:`dashboard.serving.prewarm.warm_lesson`: the same links, one after another,
through its websocket). The sum of those first runs is the lesson's pre-warm time (goal:
"Self-attention in 20 minutes" in at most 60 s on 2 cores); the table says where the time
goes, step by step. Then each step is opened again, as a learner who presses Next after the
pre-warm does: those runs are what Next costs on a warmed server.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

from bench.browser import streamlit_server
from dashboard.lessons.model import shipped_lessons
from dashboard.serving.warm import Link, lesson_links, open_once, warm_server

GOAL_S = 60.0


def main() -> None:
    """Time the lesson's pre-warm and its warmed steps; print the table and the verdict."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lesson", default="self-attention-20", choices=sorted(shipped_lessons()))
    parser.add_argument("--lang", default="en", choices=("en", "zh"))
    args = parser.parse_args()
    lesson = shipped_lessons()[args.lesson]
    links = lesson_links(lesson, args.lang)
    print(f"cpu: {os.cpu_count()} cores; lesson {lesson.name}: {len(links)} steps")
    with streamlit_server() as server:
        started = time.perf_counter()
        landing = asyncio.run(open_once(server.url, Link("")))
        print(f"landing page first run: {landing.seconds:.2f} s (ok {landing.ok})")
        cold = asyncio.run(warm_server(server.url, links))
        warm_wall = time.perf_counter() - started - landing.seconds
        again = asyncio.run(warm_server(server.url, links))
    print(f"\n{'step':>4}  {'page':<14} {'pre-warm s':>10} {'warmed s':>9}  ok")
    for number, (first, second) in enumerate(zip(cold, again, strict=True), start=1):
        ok = first.ok and second.ok
        path, cold_s, warm_s = first.link.path, first.seconds, second.seconds
        print(f"{number:>4}  {path:<14} {cold_s:>10.2f} {warm_s:>9.2f}  {ok}")
    total = sum(run.seconds for run in cold)
    warmed = sorted(run.seconds for run in again)
    p95 = warmed[min(len(warmed) - 1, round(0.95 * (len(warmed) - 1)))]
    print(
        f"\npre-warm of {lesson.name}: {total:.1f} s of first runs ({warm_wall:.1f} s wall), "
        f"goal ≤ {GOAL_S:.0f} s: {'MET' if total <= GOAL_S else 'MISSED'}"
    )
    print(
        f"a warmed step's run: median {statistics.median(warmed):.2f} s, "
        f"p95 {p95:.2f} s, max {warmed[-1]:.2f} s"
    )
    problems = [f"  {run.link}: {run.problem}" for run in cold + again if not run.ok]
    print("\n".join(problems) or "every step ran cleanly")


if __name__ == "__main__":
    main()
