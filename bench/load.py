"""Workshop load: N browser sessions moving sliders on different pages against one server.

Usage: ``python -m bench.load [--sessions 8] [--seconds 60]``

One Streamlit server on loopback, one headless Chromium with N contexts (separate sessions).
Each session opens its own page, then until the time is up presses arrow keys on its sliders
and times key press → script finished and chart repainted. The server's resident memory
(with children) is sampled every 0.25 s. Bounded in sessions and time; it stops by itself.
Prints errors (goal 0), p50/p95 repaint and the server's peak RSS (goal < 1 GB).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time

from bench.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    IDLE_JS,
    page_names,
    rss_bytes,
    streamlit_server,
)
from bench.repaint import ARM_JS, CHART, SLIDER

ERROR_SELECTOR = '[data-testid="stException"], [data-testid="stAlertContentError"]'
RSS_GOAL = 1 << 30
MAX_SESSIONS = 16
MAX_SECONDS = 300


class RssSampler(threading.Thread):
    """Samples a process tree's RSS until stopped; keeps the peak."""

    def __init__(self, pid: int, period_s: float = 0.25):
        super().__init__(daemon=True)
        self.pid, self.period_s, self.peak = pid, period_s, 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                self.peak = max(self.peak, rss_bytes(self.pid))
            except Exception:  # noqa: BLE001 - the process may be exiting
                return
            self._stop_event.wait(self.period_s)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=2)


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
            slider = sliders.nth(step % min(count, 3))
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

    names = page_names()
    stats = {"errors": [], "repaint_s": [], "no_repaint": 0, "moves": 0}
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        deadline = time.monotonic() + seconds
        urls = [
            f"{base_url}/{'' if i % len(names) == 0 else names[i % len(names)]}"
            for i in range(sessions)
        ]
        await asyncio.gather(*(session(browser, url, deadline, stats) for url in urls))
        await browser.close()
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    sessions = max(1, min(args.sessions, MAX_SESSIONS))
    seconds = max(5.0, min(args.seconds, MAX_SECONDS))
    with streamlit_server() as server:
        sampler = RssSampler(server.pid)
        sampler.start()
        started = time.monotonic()
        stats = asyncio.run(drive(server.url, sessions, seconds))
        elapsed = time.monotonic() - started
        sampler.stop()
    times = sorted(stats["repaint_s"])
    p50 = statistics.median(times) if times else float("nan")
    p95 = times[max(0, round(0.95 * len(times)) - 1)] if times else float("nan")
    print(
        f"sessions {sessions}, {elapsed:.0f} s, slider moves {stats['moves']}, "
        f"repaints timed {len(times)}, moves without a repaint {stats['no_repaint']}"
    )
    print(f"errors: {len(stats['errors'])} (goal 0)")
    for error in stats["errors"][:10]:
        print(f"  - {error}")
    print(f"slider -> repaint: p50 {p50:.3f} s, p95 {p95:.3f} s")
    verdict = "PASS" if sampler.peak < RSS_GOAL else "MISS"
    print(f"server peak RSS: {sampler.peak / 2**20:.0f} MiB (goal < 1024 MiB) {verdict}")


if __name__ == "__main__":
    main()
