"""Next → the step painted, for one learner in Chromium:
``python -m bench.lesson_next [--lesson self-attention-20] [--runs 3] [--present]``.

A fresh server (its pre-warm off, so that what is measured is the server's own caches after
one walk, not a background thread racing the walk), one walk through the lesson to warm it
(the models loaded, every step's data cached, as the server's pre-warm or an instructor's
rehearsal leaves it) and the wait until the server is quiet (the background fills that walk
started, such as Heads at work's next moves, done), then ``--runs`` walks, each Next timed
from the click to the new step painted: its step number and page in the link, the script
finished, and a chart drawn (a Vega chart with its marks, or the canvas heatmap with
pixels). Prints each step's median and p95 and the whole walk's (goal: p95 ≤ 1 s on a warm
server).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from bench.browser import CHART_SELECTOR, launch_chromium, streamlit_server, wait_idle
from bench.replicas import wait_until_quiet
from dashboard.i18n import t_in
from dashboard.lessons.model import Lesson, shipped_lessons
from dashboard.views import PAGES

GOAL_S = 1.0
STEP_TIMEOUT_MS = 240_000
PAINTED_JS = """([sel, k, page, home]) => {
  if (new URLSearchParams(location.search).get('lesson.step') !== k) return false;
  const shown = location.pathname.split('/').filter(Boolean).pop() || home;
  if (shown !== page) return false;  // the step's number is in the link before its page is
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  if (document.querySelector('[data-stale="true"]')) return false;
  const charts = Array.from(document.querySelectorAll(sel));
  return charts.length > 0 && charts.some((el) => {
    const canvas = el.querySelector('canvas'), svg = el.querySelector('svg');
    return (canvas && canvas.width > 0) || (svg && svg.querySelectorAll('path, rect').length > 3);
  });
}"""


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0–1) of ``values``, linearly interpolated."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def painted_arg(lesson: Lesson, number: int) -> list[str]:
    """:data:`PAINTED_JS`'s argument for step ``number`` of ``lesson``."""
    return [CHART_SELECTOR, str(number), lesson.steps[number - 1].page, PAGES[0][0]]


def walk(tab, url: str, lesson: Lesson, lang: str) -> list[float]:
    """Open the lesson's first step, then press Next through the lesson; each Next's
    seconds to the new step painted."""
    tab.goto(url)
    tab.wait_for_function(PAINTED_JS, arg=painted_arg(lesson, 1), timeout=STEP_TIMEOUT_MS)
    times = []
    for number in range(2, len(lesson.steps) + 1):
        started = time.perf_counter()
        tab.get_by_role("button", name=t_in(lang, "lesson.next")).click()
        tab.wait_for_function(
            PAINTED_JS, arg=painted_arg(lesson, number), timeout=STEP_TIMEOUT_MS, polling=20
        )
        times.append(time.perf_counter() - started)
        wait_idle(tab, timeout_ms=STEP_TIMEOUT_MS)
    return times


def main() -> None:
    """Warm the lesson with one walk, time ``--runs`` walks; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lesson", default="self-attention-20", choices=sorted(shipped_lessons()))
    parser.add_argument("--lang", default="en", choices=("en", "zh"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--present", action="store_true", help="853x480, present=true")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    lesson = shipped_lessons()[args.lesson]
    viewport = {"width": 853, "height": 480} if args.present else {"width": 1440, "height": 900}
    query = f"lesson={lesson.name}&lang={args.lang}" + ("&present=true" if args.present else "")
    print(
        f"cpu: {os.cpu_count()} cores; lesson {lesson.name}, {len(lesson.steps)} steps, "
        f"{viewport['width']}x{viewport['height']}, {args.runs} timed walks after one warm-up"
    )
    with streamlit_server() as server, sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        context = browser.new_context(viewport=viewport)
        tab = context.new_page()
        walk(tab, f"{server.url}/?{query}", lesson, args.lang)  # the warm-up
        started = time.perf_counter()
        quiet = wait_until_quiet(server.process.pid)
        print(
            f"after the warm-up walk, the server's background fills "
            f"{'ended' if quiet else 'had not ended'} in {time.perf_counter() - started:.1f} s"
        )
        per_step: dict[int, list[float]] = {k: [] for k in range(2, len(lesson.steps) + 1)}
        for _ in range(args.runs):
            for number, seconds in zip(
                per_step,
                walk(tab, f"{server.url}/?{query}", lesson, args.lang),
                strict=True,
            ):
                per_step[number].append(seconds)
        browser.close()
    print(f"{'step':>4}  {'page':<14} {'median s':>9} {'p95 s':>7}")
    for number, times in per_step.items():
        page = lesson.steps[number - 1].page
        print(
            f"{number:>4}  {page:<14} {statistics.median(times):9.2f} "
            f"{percentile(times, 0.95):7.2f}"
        )
    every = [s for times in per_step.values() for s in times]
    p95 = percentile(every, 0.95)
    print(
        f"all   {len(every)} Next presses: median {statistics.median(every):.2f} s, "
        f"p95 {p95:.2f} s (goal p95 <= {GOAL_S:g} s: {'met' if p95 <= GOAL_S else 'missed'})"
    )


if __name__ == "__main__":
    main()
