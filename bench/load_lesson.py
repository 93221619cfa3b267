"""A room walking a lesson: ``python -m bench.load --mode lesson``.

One presenter and N followers of one room (:mod:`bench.load_room`'s clients). The presenter
opens step 1 of "Self-attention in 20 minutes" with ``room=bench``, types the key, and then
presses the lesson bar's **Next** every ``interval`` seconds to its last step and **Back** to
its first, again and again: each press takes the room to another page or another view. Every
follower opens ``/?room=bench`` and polls as the browser's fragment timer does.

Measured, for each press and each follower: the time from the presenter sending the press to
the end of the follower's first run that drew the lesson bar at the new step ("Step K of N":
its page, values and what to notice are then on the follower's screen, less the browser's
own painting). Goal: p95 ≤ 1 s with none missed, for 60 followers over 2 replicas. The
steps are computed before the room arrives, as a workshop's are: a single server here opens
each step once first (:func:`dashboard.serving.warm.warm_server`), and ``scripts/serve.py``
warms every shipped lesson's step on each replica.
"""

from __future__ import annotations

import asyncio
import re
import time

from streamlit.proto.WidgetStates_pb2 import WidgetState

from bench.load_figures import cpu_seconds, percentiles, print_errors, verdict
from bench.load_room import (
    EARLY_FOR_RERUN,
    KEY,
    KEY_ENV,
    ROOM,
    SETTLE_S,
    Follower,
    Presenter,
    join_all,
)
from dashboard.lessons.model import shipped_lessons
from dashboard.serving.stream_client import RunResult
from dashboard.serving.warm import lesson_links, warm_server

LESSON = "self-attention-20"
GOAL_S = 1.0
STEP_TEXT = re.compile(r"Step (\d+) of \d+")  # the bar's caption in English (lesson.step_of)
__all__ = ["KEY", "KEY_ENV", "drive_lesson", "report_lesson"]


class LessonPresenter(Presenter):
    """The presenter, who also presses the lesson bar's buttons."""

    triggers: list[str] = []

    def _widget_states(self) -> list[WidgetState]:
        states = super()._widget_states()
        states += [WidgetState(id=button, trigger_value=True) for button in self.triggers]
        return states

    async def press(self, key: str) -> RunResult:
        """Press the button whose widget key is ``key`` in the last run; wait for the run
        of the page it leads to (a step on another page: the first run ends early)."""
        ids = [e.button.id for e in self.elements if e.WhichOneof("type") == "button"]
        found = [button for button in ids if button.endswith(f"-{key}")]
        if not found:
            raise RuntimeError(f"no button {key!r} on the presenter's page")
        self.triggers = found[:1]
        try:
            started = time.perf_counter()
            result = await self.rerun()
        finally:
            self.triggers = []
        while result.status == EARLY_FOR_RERUN:
            result = await self.finish_run()
        return RunResult(time.perf_counter() - started, result.status, result.errors)


class LessonFollower(Follower):
    """A follower whose "drawn" value is the lesson step its bar shows."""

    def _note_drawn(self, element) -> None:
        if element.WhichOneof("type") != "markdown":
            return
        found = STEP_TEXT.search(element.markdown.body)
        if found:
            self.drawn = found.group(1)

    def joined_s(self) -> float | None:
        """From opening the link to the end of the first run that drew the lesson bar."""
        for moment, _query, drawn in self.finished:
            if drawn is not None:
                return moment - self.opened_at
        return None


def step_walk(last: int, count: int) -> list[tuple[str, int]]:
    """``count`` presses from step 1: Next to ``last``, Back to 1, and so on; each press
    and the step it leads to."""
    presses, step, ahead = [], 1, True
    for _ in range(count):
        if step == last:
            ahead = False
        elif step == 1:
            ahead = True
        step += 1 if ahead else -1
        presses.append(("_lesson.next" if ahead else "_lesson.back", step))
    return presses


async def drive_lesson(
    base_url: str, server_pid: int, followers: int, seconds: float, interval: float, warm: bool
) -> dict:
    """Open the presenter and the followers, then walk the lesson for ``seconds``, one press
    every ``interval`` seconds; return the figures.

    Args:
        warm: open each step once on ``base_url`` first (a single server started cold).
    """
    lesson = shipped_lessons()[LESSON]
    stats: dict = {"errors": [], "follow_s": [], "presenter_s": [], "missed": 0}
    if warm:
        runs = await warm_server(base_url, lesson_links(lesson))
        stats["errors"] += [f"warm {run.link}: {run.problem}" for run in runs if not run.ok]
    host = LessonPresenter(base_url, lesson.steps[0].page, f"room={ROOM}&lesson={LESSON}")
    await host.open()
    joined = await host.become_presenter()
    if not joined.ok:
        stats["errors"].append(f"presenter: status {joined.status} {joined.errors}")
    crowd = [LessonFollower(base_url) for _ in range(followers)]
    stats["join_s"] = await join_all(crowd)
    cpu_before = cpu_seconds(server_pid)
    presses: list[tuple[float, str]] = []
    for key, step in step_walk(len(lesson.steps), max(1, round(seconds / interval))):
        sent = time.monotonic()
        result = await host.press(key)
        stats["presenter_s"].append(result.seconds)
        if not result.ok:
            stats["errors"].append(f"presenter {key}: {result.status} {result.errors}")
        presses.append((sent, str(step)))
        await asyncio.sleep(max(0.0, sent + interval - time.monotonic()))
    sent, step = presses[-1]
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline and any(f.seen_at(step, sent) is None for f in crowd):
        await asyncio.sleep(0.1)
    stats["cpu_s"], stats["presses"] = cpu_seconds(server_pid) - cpu_before, len(presses)
    stats["page_changes"] = sum(
        lesson.steps[int(a) - 1].page != lesson.steps[int(b) - 1].page
        for (_, a), (_, b) in zip([(0.0, "1"), *presses[:-1]], presses, strict=True)
    )
    stats["early_s"] = [seconds for follower in crowd for seconds in follower.early_s]
    for sent, step in presses:
        seen = [f.seen_at(step, sent) for f in crowd]
        stats["missed"] += sum(moment is None for moment in seen)
        times = [moment - sent for moment in seen if moment is not None]
        stats["follow_s"] += times
        stats.setdefault("by_step", {}).setdefault(int(step), []).extend(times)
    for follower in crowd:
        stats["errors"] += follower.errors
        await follower.close()
    await host.close()
    return stats


def report_lesson(stats: dict, followers: int, interval: float) -> None:
    """Print the lesson room's figures and verdict."""
    lesson = shipped_lessons()[LESSON]
    print(
        f"lesson room: 1 presenter pressing Next/Back through {LESSON} ({len(lesson.steps)} "
        f"steps) every {interval:g} s, {followers} followers (websocket clients)"
    )
    print_errors(stats["errors"])
    p50, p95 = percentiles(stats["join_s"])
    print(
        f"{len(stats['join_s'])} of {followers} followers joined: p50 {p50:.3f} s, p95 {p95:.3f} s"
    )
    p50, p95 = percentiles(stats["presenter_s"])
    print(f"presenter's own run after a press: p50 {p50:.3f} s, p95 {p95:.3f} s")
    p50, p95 = percentiles(stats["follow_s"])
    held = p95 <= GOAL_S and not stats["missed"] and not stats["errors"]
    print(
        f"Next/Back sent -> follower's run drawing that step finished: p50 {p50:.3f} s, "
        f"p95 {p95:.3f} s over {len(stats['follow_s'])} (press, follower) pairs, "
        f"{stats['missed']} never (goal p95 <= {GOAL_S:g} s, 0 missed) {verdict(held)}"
    )
    pages = [step.page for step in lesson.steps]
    for number, times in sorted(stats["by_step"].items()):
        p50, p95 = percentiles(times)
        print(f"  step {number:>2} ({pages[number - 1]}): p50 {p50:.3f} s, p95 {p95:.3f} s")
    early, changes = stats["early_s"], stats["page_changes"] * followers
    p50, p95 = percentiles(early)
    print(
        f"runs that ended early to send a follower on: {len(early)} for {changes} "
        f"(page change, follower) pairs, p50 {p50:.3f} s, p95 {p95:.3f} s each"
    )
    per = stats["cpu_s"] / max(stats["presses"], 1)
    print(f"server CPU: {per:.2f} CPU-s per press, the followers' polling included")


def lesson_row(stats: dict, followers: int, replicas: int | None, peak: int) -> dict:
    """The lesson room's figures for :func:`bench.load.print_side_by_side`."""
    return {
        "mode": f"lesson, {followers} followers",
        "replicas": replicas or 1,
        "errors": len(stats["errors"]) + stats["missed"],
        "p95": percentiles(stats["follow_s"])[1],
        "worst page": float("nan"),
        "open p95": percentiles(stats["join_s"])[1],
        "cpu per move": stats["cpu_s"] / max(stats["presses"], 1),
        "peak MiB": peak / 2**20,
    }
