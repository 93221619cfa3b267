"""First-run readiness: cold start to first painted chart, and peak RSS at the largest settings.

Usage: ``python -m bench.coldstart [--runs 3]``

Cold start: Chromium is launched first (not counted); the clock starts when the Streamlit
process is spawned and stops when the first chart of the start page has painted pixels.
Peak RSS: the server is then driven through every page at the largest settings the controls
allow (given as URL values), sampling the server's resident memory (with children).
Goals: cold start ≤ 4 s, peak RSS < 1 GB.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.browser import (
    CHART_SELECTOR,
    launch_chromium,
    page_names,
    painted_fraction,
    streamlit_server,
    wait_idle,
)
from bench.load import RssSampler

COLD_GOAL_S = 4.0
MIN_PAINTED = 0.005
RSS_GOAL = 1 << 30
FIRST_CHART_DRAWN_JS = """(sel) => { const el = document.querySelector(sel);
    if (!el) return false;
    const svg = el.querySelector('svg'); const c = el.querySelector('canvas');
    return (svg && svg.querySelectorAll('path, rect').length > 3) || (c && c.width > 0); }"""
CHART = CHART_SELECTOR
LARGEST = {
    "playground": "playground.seq_len=1024&playground.d_model=768&playground.heads=16"
    "&playground.variant=stable",
    "step_by_step": "step_by_step.tokens=8&step_by_step.d_k=8",
    "scaling": "scaling.d_ks=32,64,128,256,512,1024&scaling.seq_len=64&scaling.trials=100",
    "multihead": "multihead.seq_len=256&multihead.d_model=768&multihead.heads=16"
    "&multihead.gallery_len=32",
    "variants": "variants.seq_len=128&variants.d_model=768&variants.heads=16"
    "&variants.variants=scaled,local,linear,chunked",
    "properties": "properties.seq_len=16&properties.d_model=64&properties.chunk_len=512"
    "&properties.perm_mode=random",
    "gradients": "gradients.seq_len=32&gradients.embed_dim=64&gradients.trials=16",
    "practice": "practice.seq_len=512&practice.d_model=256&practice.layers=48",
    # e5 is loaded by the Intuition page; MiniLM here, so that both models count
    "real_model": "real_model.model=minilm&real_model.preset=cat_comfortable",
    "decoder": "decoder.preset=zh_cat&decoder.steps=16&decoder.window=64&decoder.sinks=8",
}


def cold_start(playwright) -> float:
    """Seconds from spawning the server to the first painted chart."""
    browser = launch_chromium(playwright)
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    started = time.monotonic()
    with streamlit_server() as server:
        page.goto(server.url)
        page.wait_for_function(FIRST_CHART_DRAWN_JS, arg=CHART, timeout=120_000)
        elapsed = time.monotonic() - started
        if painted_fraction(page)[0] < MIN_PAINTED:
            raise RuntimeError("the first chart was drawn but shows no pixels")
    browser.close()
    return elapsed


def largest_settings_rss(playwright) -> tuple[int, list[str]]:
    """Peak server RSS over every page at its largest settings; returns (bytes, notes)."""
    browser = launch_chromium(playwright)
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    notes = []
    with streamlit_server() as server:
        sampler = RssSampler(server.pid)
        sampler.start()
        for name in page_names():
            query = LARGEST.get(name, "")
            path = "" if name == page_names()[0] else name
            page.goto(f"{server.url}/{path}?{query}")
            wait_idle(page, timeout_ms=180_000)
            warnings = page.locator('[data-testid="stAlertContentWarning"]').count()
            errors = page.locator('[data-testid="stAlertContentError"]').count()
            notes.append(f"{name}: {warnings} warning(s), {errors} error box(es)")
        sampler.stop()
    browser.close()
    return sampler.peak, notes


def main() -> None:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with sync_playwright() as playwright:
        times = [cold_start(playwright) for _ in range(max(1, args.runs))]
        peak, notes = largest_settings_rss(playwright)
    median = statistics.median(times)
    verdict = "PASS" if median <= COLD_GOAL_S else "MISS"
    runs = ", ".join(f"{t:.2f}" for t in times)
    print(
        f"cold start to first painted chart: median {median:.2f} s ({runs}) "
        f"goal <= {COLD_GOAL_S} s {verdict}"
    )
    verdict = "PASS" if peak < RSS_GOAL else "MISS"
    print(
        f"peak server RSS at the largest settings: {peak / 2**20:.0f} MiB "
        f"(goal < 1024 MiB) {verdict}"
    )
    for note in notes:
        print(f"  {note}")


if __name__ == "__main__":
    main()
