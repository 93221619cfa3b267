"""Slider → repaint latency of the dashboard in headless Chromium.

Usage: ``python -m bench.repaint [--repeats N] [--lengths 64 1024]``

For each sequence length it opens the Playground with that length in the URL and times two
kinds of slider move, N times each: it marks the time in the page, presses an arrow key, and
waits until the script has finished and a chart's pixels differ from before.

* ``toggle``: the first slider whose move repaints a chart (the sequence length), moved right
  and left in turn, so after two moves both views come from the data layer's cache: what a
  presenter flicking between two settings sees.
* ``fresh``: the random-seed slider moved right every time, so every move computes new
  attention (and measures its time and memory) before drawing.

Prints the median and p95 per length and kind next to the goals (≤ 0.3 s at L=64, ≤ 0.6 s at
L=1024; for a fresh move ≤ 0.2 s and ≤ 0.35 s), judged on the whole repaint (script finished
and charts changed); the last column is the median time until the first chart had changed,
for reference.
"""

from __future__ import annotations

import argparse
import re
import statistics

from bench.browser import CHART_SELECTOR, launch_chromium, streamlit_server, wait_idle

SLIDER = '[data-testid="stSlider"] input[type="range"]'
GOALS_S = {64: 0.3, 1024: 0.6}
FRESH_GOALS_S = {64: 0.2, 1024: 0.35}
"""The room issue's goals for a fresh move (new attention computed), tighter than GOALS_S."""
ARM_JS = """(sel) => {
    // cheap fingerprint, run every frame: a few 16x16 pixel patches of each canvas (a full
    // toDataURL per frame would itself slow the page down), or the SVG markup's size and hash
    const patch = (c) => {
        const ctx = c.getContext('2d'); let h = 0;
        for (const [fx, fy] of [[0.5, 0.5], [0.25, 0.25], [0.75, 0.25], [0.25, 0.75],
                                [0.75, 0.75], [0.5, 0.15]]) {
            const d = ctx.getImageData(Math.floor(c.width * fx), Math.floor(c.height * fy),
                                       16, 16).data;
            for (let i = 0; i < d.length; i += 4) h = (h * 31 + d[i] + 7 * d[i + 2]) | 0;
        }
        return h;
    };
    const svgHash = (s) => {
        const text = s.innerHTML; let h = 0;
        for (let i = 0; i < text.length; i += 13) h = (h * 31 + text.charCodeAt(i)) | 0;
        return text.length + ':' + h;
    };
    const sig = () => Array.from(document.querySelectorAll(sel)).map(el => {
        const c = el.querySelector('canvas');
        if (c && c.width) return patch(c);
        const s = el.querySelector('svg');
        return s ? svgHash(s) : '';
    }).join(',');
    const state = {t0: performance.now(), first: null, done: null, before: sig()};
    window.__repaint = state;
    const app = () => document.querySelector('[data-testid="stApp"]');
    const poll = () => {
        const idle = app() && app().getAttribute('data-test-script-state') === 'notRunning';
        const changed = sig() !== state.before;
        if (changed && state.first === null) state.first = performance.now();
        if (performance.now() - state.t0 > 30 && idle && changed) {
            state.done = performance.now();
        } else { requestAnimationFrame(poll); }
    };
    requestAnimationFrame(poll);
}"""
CHART = CHART_SELECTOR


def measure_once(page, slider, key: str, timeout_ms: int = 30_000) -> float:
    """Seconds from the key press to the repainted page (script finished, charts changed)."""
    return measure_move(page, slider, key, timeout_ms)[1]


def measure_move(page, slider, key: str, timeout_ms: int = 30_000) -> tuple[float, float]:
    """Seconds from the key press to (the first chart changed, the repainted page)."""
    page.evaluate(ARM_JS, CHART)
    slider.focus()
    page.keyboard.press(key)
    page.wait_for_function("() => window.__repaint && window.__repaint.done", timeout=timeout_ms)
    first, done = page.evaluate(
        "() => [window.__repaint.first - window.__repaint.t0,"
        " window.__repaint.done - window.__repaint.t0]"
    )
    return first / 1000.0, done / 1000.0


def find_repainting_slider(page):
    """The first slider whose ArrowRight repaints a chart, or None."""
    sliders = page.locator(SLIDER)
    for index in range(sliders.count()):
        slider = sliders.nth(index)
        try:
            measure_once(page, slider, "ArrowRight", timeout_ms=10_000)
        except Exception:  # noqa: BLE001 - this slider did not repaint a chart; try the next
            wait_idle(page)
            continue
        wait_idle(page)
        return slider
    return None


def seed_slider(page):
    """The Playground's random-seed slider (found by its English label)."""
    block = page.locator('[data-testid="stSlider"]').filter(has_text=re.compile("seed", re.I))
    return block.locator('input[type="range"]').first


def run(
    lengths: list[int], repeats: int, url_template: str
) -> dict[tuple[int, str], list[tuple[float, float]]]:
    """Measure ``repeats`` moves of each kind at each length: (first chart, whole page)
    seconds per (length, kind)."""
    from playwright.sync_api import sync_playwright

    results: dict[tuple[int, str], list[float]] = {}
    with streamlit_server() as server, sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        for length in lengths:
            page.goto(server.url + url_template.format(L=length))
            wait_idle(page)
            slider = find_repainting_slider(page)
            if slider is None:
                raise RuntimeError(f"no slider repaints a chart at L={length}")
            moves = {
                "toggle": (slider, lambda i: "ArrowLeft" if i % 2 else "ArrowRight"),
                "fresh": (seed_slider(page), lambda i: "ArrowRight"),
            }
            for kind, (moved, key_for) in moves.items():
                times = []
                for i in range(repeats):
                    times.append(measure_move(page, moved, key_for(i)))
                    wait_idle(page, settle_ms=100)
                results[(length, kind)] = times
        browser.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 1024])
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument(
        "--url",
        default="/?playground.seq_len={L}",
        help="page path and query, {L} is replaced by the length",
    )
    args = parser.parse_args()
    results = run(args.lengths, args.repeats, args.url)
    print(f"{'L':>6} {'move':>7} {'median s':>9} {'p95 s':>7} {'goal s':>7}  result  first chart s")
    for (length, kind), moves in results.items():
        times = [page for _first, page in moves]
        first = statistics.median(first for first, _page in moves)
        median = statistics.median(times)
        p95 = sorted(times)[max(0, round(0.95 * len(times)) - 1)]
        goal = (FRESH_GOALS_S if kind == "fresh" else GOALS_S).get(length)
        verdict = "-" if goal is None else ("PASS" if median <= goal else "MISS")
        goal_text = f"{goal:.2f}" if goal is not None else "-"
        print(
            f"{length:>6} {kind:>7} {median:>9.3f} {p95:>7.3f} {goal_text:>7}  {verdict:<6}"
            f"  {first:>12.3f}"
        )


if __name__ == "__main__":
    main()
