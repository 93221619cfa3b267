"""Learners spread over the pages (``--mode spread``) or on one link (``--mode landing``):
the clients and the figures of :mod:`bench.load`.

One Streamlit server on loopback. Session i opens page ``i mod pages`` (a room opening the
same link and then spreading over the pages); its resident memory (with children) is sampled
every 0.25 s and its CPU time read before and after the moves.

* ``--client stream`` (default, up to 60 sessions): each learner is a websocket client that
  speaks Streamlit's own protocol (:mod:`dashboard.serving.stream_client`), so no browser spends the
  server's cores. After every page has opened, each learner moves one of its page's first
  sliders by one step every ``--interval`` seconds (random slider and direction, a random
  first moment; the next move waits for the last one to finish) and times widget change →
  the script's finished message. Prints moves, errors (goal 0), p50/p95 (goal p95 ≤ 1 s), the
  slowest moves (page, slider, seconds after the first move), the
  server's CPU-seconds per move and cores busy, peak RSS (goal < 1 GiB), and learners per core
  at one move per interval: interval ÷ CPU-seconds per move (goal ≥ 15).
* ``--client browser`` (up to 16 sessions): one headless Chromium with N contexts; each
  presses arrow keys on its sliders as fast as it can and times key press → script finished
  and chart repainted. The browsers share the server's cores, so this measures them too.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter

from bench.browser import CHROMIUM, CHROMIUM_ARGS, IDLE_JS, page_names
from bench.load_figures import cpu_seconds, percentiles, print_errors, verdict
from bench.repaint import ARM_JS, CHART, SLIDER
from dashboard.serving.stream_client import StreamSession

ERROR_SELECTOR = '[data-testid="stException"], [data-testid="stAlertContentError"]'
RSS_GOAL = 1 << 30
P95_GOAL_S = 1.0
OPEN_GOAL_S = 2.5  # thirty learners opening the same link at once: first page, p95
LEARNERS_PER_CORE_GOAL = 15
SLIDERS_MOVED = 3  # a learner moves one of the first three sliders of its page
SLOWEST_SHOWN = 6


async def session(browser, url: str, deadline: float, stats: dict) -> None:
    """One user: open ``url``, then move sliders until ``deadline``."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.on("pageerror", lambda exc: stats["errors"].append(f"{url}: {exc}"))
    try:
        await page.goto(url, timeout=120_000)
        # "not running" also holds before the first run has started: wait for the page's
        # sliders first, or a session on a busy server would find none and stop at once
        await page.wait_for_selector(SLIDER, timeout=120_000)
        await page.wait_for_function(IDLE_JS, timeout=120_000)
        sliders = page.locator(SLIDER)
        count = await sliders.count()
        step = 0
        while time.monotonic() < deadline and count:
            slider = sliders.nth(step % min(count, SLIDERS_MOVED))
            await page.evaluate(ARM_JS, CHART)
            await slider.focus()
            await page.keyboard.press("ArrowRight" if (step // 3) % 2 == 0 else "ArrowLeft")
            try:
                await page.wait_for_function(
                    "() => window.__repaint && window.__repaint.done", timeout=5_000
                )
                stats["repaint_s"].append(
                    await page.evaluate("() => (window.__repaint.done - window.__repaint.t0)")
                    / 1000.0
                )
            except Exception:  # noqa: BLE001 - a move that repaints no chart is not an error
                stats["no_repaint"] += 1
            await page.wait_for_function(IDLE_JS, timeout=60_000)
            boxes = page.locator(ERROR_SELECTOR)
            if await boxes.count():
                text = " ".join((await boxes.first.inner_text()).split())[:200]
                stats["errors"].append(f"{url}: error box after a slider move: {text}")
            step += 1
        stats["moves"] += step
    except Exception as exc:  # noqa: BLE001 - count every failure as an error
        stats["errors"].append(f"{url}: {type(exc).__name__}: {exc}"[:300])
    finally:
        await context.close()


async def drive(base_url: str, sessions: int, seconds: float) -> dict:
    from playwright.async_api import async_playwright

    stats = {"errors": [], "repaint_s": [], "no_repaint": 0, "moves": 0}
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        deadline = time.monotonic() + seconds
        urls = [f"{base_url}/{link}" for link in page_links(sessions)]
        await asyncio.gather(*(session(browser, url, deadline, stats) for url in urls))
        await browser.close()
    return stats


def page_links(sessions: int) -> list[str]:
    """The page (URL path) that each session opens: session i opens page i mod pages."""
    names = page_names()
    return ["" if i % len(names) == 0 else names[i % len(names)] for i in range(sessions)]


async def learner(
    learner_session: StreamSession,
    seed: int,
    start: float,
    deadline: float,
    interval: float,
    stats: dict,
) -> None:
    """One learner over the websocket: from ``start`` until ``deadline``, one slider move
    every ``interval`` seconds (or right after the last one finished, when it ran late);
    ``seed`` picks its first moment, sliders and directions."""
    rng = random.Random(seed)
    page = learner_session.page or page_names()[0]
    when = start + rng.uniform(0.0, interval)
    moves = 0
    try:
        while True:
            await asyncio.sleep(max(0.0, when - time.monotonic()))
            if time.monotonic() >= deadline or not learner_session.shown:
                break
            key = rng.choice(learner_session.shown[:SLIDERS_MOVED])
            steps = rng.choice((-1, 1))
            slider = learner_session.sliders[key]
            if slider.moved(steps) == slider.value:  # at an end: a hand moves it the other way
                steps = -steps
            result = await learner_session.move_slider(key, steps)
            moves += 1
            stats["move_s"].append(result.seconds)
            stats["slowest"].append((result.seconds, page, key, time.monotonic() - start))
            stats["by_page"].setdefault(page, []).append(result.seconds)
            if not result.ok:
                stats["errors"].append(
                    f"/{learner_session.page} {key}: status {result.status} {result.errors}"
                )
            when = max(when + interval, time.monotonic())
    except Exception as exc:  # noqa: BLE001 - count every failure as an error
        stats["errors"].append(f"/{learner_session.page}: {type(exc).__name__}: {exc}"[:300])
    finally:
        stats["moves"] += moves
        await learner_session.close()


async def open_session(base_url: str, page: str, stats: dict) -> StreamSession | None:
    """Open one page (its first run); ``None`` (and an error) when that fails."""
    opened = StreamSession(base_url, page)
    try:
        result = await opened.open()
    except Exception as exc:  # noqa: BLE001 - count every failure as an error
        stats["errors"].append(f"/{page} open: {type(exc).__name__}: {exc}"[:300])
        await opened.close()
        return None
    stats["open_s"].append(result.seconds)
    if not result.ok:
        stats["errors"].append(f"/{page} open: status {result.status} {result.errors}")
    return opened


async def drive_stream(
    base_url: str, server_pid: int, links: list[str], seconds: float, interval: float
) -> dict:
    """Open every learner's page (``links``: URL paths) at once, then let them move sliders
    for ``seconds``."""
    stats = {"errors": [], "move_s": [], "open_s": [], "moves": 0, "by_page": {}, "slowest": []}
    if len(set(links)) == 1:  # one link for all: the instructor opened it first
        first = {"errors": [], "open_s": []}
        instructor = await open_session(base_url, links[0], first)
        stats["errors"] += first["errors"]
        stats["instructor_s"] = first["open_s"]
        if instructor is not None:
            await instructor.close()
    opened = await asyncio.gather(*(open_session(base_url, p, stats) for p in links))
    learners = [s for s in opened if s is not None]
    cpu_before, start = cpu_seconds(server_pid), time.monotonic()
    client_before = time.process_time()
    await asyncio.gather(
        *(learner(s, i, start, start + seconds, interval, stats) for i, s in enumerate(learners))
    )
    stats["elapsed_s"] = time.monotonic() - start
    stats["cpu_s"] = cpu_seconds(server_pid) - cpu_before
    stats["client_cpu_s"] = time.process_time() - client_before
    return stats


def report_stream(
    stats: dict, links: list[str], seconds: float, interval: float, peak: int
) -> None:
    """Print the stream client's figures and verdicts."""
    sessions = len(links)
    pages = Counter(p or page_names()[0] for p in links)
    print(
        f"client: websocket (dashboard/serving/stream_client.py), {sessions} learners, "
        f"one slider move each every {interval:g} s, {seconds:g} s of moves after every page opened"
    )
    print("pages: " + ", ".join(f"{name} ×{n}" for name, n in pages.items()))
    if stats.get("instructor_s"):
        print(
            f"the instructor opens the link first, on the fresh server: "
            f"{stats['instructor_s'][0]:.3f} s (torch and e5 loaded by this first run)"
        )
    p50, p95 = percentiles(stats["open_s"])
    print(
        f"page open (first run, all at once): p50 {p50:.3f} s, p95 {p95:.3f} s "
        f"(goal for one link opened by all, --mode landing: p95 <= {OPEN_GOAL_S:g} s"
        f"{', ' + verdict(p95 <= OPEN_GOAL_S) if len(pages) == 1 else ''})"
    )
    print(f"moves {stats['moves']}", end=", ")
    print_errors(stats["errors"])
    p50, p95 = percentiles(stats["move_s"])
    print(
        f"widget change -> script finished: p50 {p50:.3f} s, p95 {p95:.3f} s "
        f"(goal p95 <= {P95_GOAL_S:g} s) {verdict(p95 <= P95_GOAL_S)}"
    )
    by_page = {page: percentiles(times) for page, times in stats["by_page"].items()}
    print(
        "  by page (p50/p95 s): "
        + ", ".join(f"{page} {mid:.2f}/{tail:.2f}" for page, (mid, tail) in by_page.items())
    )
    slowest = sorted(stats["slowest"], reverse=True)[:SLOWEST_SHOWN]
    print(
        "  slowest moves: "
        + ", ".join(f"{page} {key} {s:.2f} s at {t:.0f} s" for s, page, key, t in slowest)
    )
    per_move = stats["cpu_s"] / max(stats["moves"], 1)
    busy = stats["cpu_s"] / stats["elapsed_s"]
    print(
        f"server CPU: {stats['cpu_s']:.1f} CPU-s in {stats['elapsed_s']:.1f} s = {busy:.2f} "
        f"cores busy (this machine: {os.cpu_count()}); {per_move:.3f} CPU-s per move; "
        f"the load client itself: {stats['client_cpu_s']:.1f} CPU-s"
    )
    print(f"server peak RSS: {peak / 2**20:.0f} MiB (goal < 1024 MiB) {verdict(peak < RSS_GOAL)}")
    per_core = interval / per_move if stats["moves"] else 0.0
    held = per_core >= LEARNERS_PER_CORE_GOAL and p95 <= P95_GOAL_S and not stats["errors"]
    print(
        f"learners per core at one move per {interval:g} s: {interval:g} / {per_move:.3f} = "
        f"{per_core:.1f} (goal >= {LEARNERS_PER_CORE_GOAL}, with p95 <= {P95_GOAL_S:g} s and "
        f"0 errors) {verdict(held)}"
    )


def report_browser(stats: dict, sessions: int, elapsed: float, peak: int) -> None:
    """Print the browser client's figures (as before the stream client existed)."""
    times = sorted(stats["repaint_s"])
    p50, p95 = percentiles(times)
    print(
        f"sessions {sessions}, {elapsed:.0f} s, slider moves {stats['moves']}, "
        f"repaints timed {len(times)}, moves without a repaint {stats['no_repaint']}"
    )
    print(f"errors: {len(stats['errors'])} (goal 0)")
    for error in stats["errors"][:10]:
        print(f"  - {error}")
    print(f"slider -> repaint: p50 {p50:.3f} s, p95 {p95:.3f} s")
    print(f"server peak RSS: {peak / 2**20:.0f} MiB (goal < 1024 MiB) {verdict(peak < RSS_GOAL)}")
