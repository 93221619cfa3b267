"""First-run readiness: cold start to first painted chart, and peak RSS at the largest settings.

Usage: ``python -m bench.coldstart [--runs 3] [--no-rss]``

Cold start: Chromium is launched first (not counted); the clock starts when the Streamlit
process is spawned and stops when the first chart inside the first screen (1440×1000) has
painted pixels: the first picture a visitor sees without scrolling (on the Intuition page,
the dance's heatmap; its torch-free meeting chart, below the fold, paints earlier and is
printed too, as the first chart anywhere). Each run is broken down from timestamps the page
records for itself (``Date.now()``, the same clock as the bench's): server start (spawn →
``/_stcore/health``), the browser loading the app (→ the first script run begins), the script
drawing the page title, the first widget and the first chart element, and the browser
painting that chart. The Python imports are timed once, apart, in a fresh interpreter
(streamlit, pandas, altair, torch, the library, the dashboard, in that order: each figure is
what it adds to the ones before).
The yardstick: each cold start of the app is followed by one of a bare Streamlit page with
one Altair heatmap (:mod:`bench.bare_chart_app`) and one of the same page importing torch
before its heatmap, timed the same way; goal: the app's median within 1.3× the bare page's.
Peak RSS: the server is then driven through every page at the largest settings the controls
allow (given as URL values), sampling the server's resident memory (with children).
Goals: cold start ≤ 2.5 s, peak RSS ≤ 900 MiB (set before the decoder page existed: the peak
over every other page is printed against it, and the peak with the decoder page, all three
models loaded, against the 1.2 GiB set with the decoder page).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from bench.browser import (
    CHART_SELECTOR,
    REPO_ROOT,
    launch_chromium,
    page_names,
    painted_fraction,
    streamlit_server,
    wait_idle,
)
from bench.load import RssSampler

COLD_GOAL_S = 2.5
BARE_APP = "bench/bare_chart_app.py"
BARE_TORCH_ENV = {"BARE_CHART_TORCH": "1"}  # the bare page, importing torch first
BARE_RATIO_GOAL = 1.3
MIN_PAINTED = 0.005
RSS_GOAL_MIB = 900
APP_GOAL_MIB = 1229  # 1.2 GiB: the app with every model loaded, the decoder's included
DECODER_PAGE = "decoder"
# one chart element has painted: an SVG with marks, or a canvas with a size
CHART_DRAWN_JS = """(el) => { const svg = el.querySelector('svg');
    const c = el.querySelector('canvas');
    return (svg && svg.querySelectorAll('path, rect').length > 3) || (c && c.width > 0); }"""
FIRST_CHART_DRAWN_JS = """(sel) => { const el = document.querySelector(sel);
    return !!el && (__CHART_DRAWN__)(el); }""".replace("__CHART_DRAWN__", CHART_DRAWN_JS)
CHART = CHART_SELECTOR
# Installed before any page script: stamps (Date.now(), ms) of the first time each milestone
# is seen, polled every few milliseconds.
TIMELINE_JS = """(() => {
    const stamps = {}; window.__coldStart = stamps;
    const seen = (name, cond) => { if (!(name in stamps) && cond()) stamps[name] = Date.now(); };
    const state = () => { const app = document.querySelector('[data-testid="stApp"]');
        return app ? app.getAttribute('data-test-script-state') : null; };
    const drawn = __DRAWN__;
    const chartDrawn = __CHART_DRAWN__;
    const tick = () => {
        seen('app', () => state() !== null);
        seen('run', () => state() === 'running');
        seen('title', () => !!document.querySelector('[data-testid="stMain"] h1'));
        seen('widget', () => !!document.querySelector('[data-testid="stSidebar"] '
            + '[data-testid="stSlider"], [data-testid="stSidebar"] [data-testid="stSelectbox"]'));
        seen('chart_element', () => !!document.querySelector(__CHART__));
        seen('chart', () => drawn(__CHART__));
        seen('visible_chart', () => [...document.querySelectorAll(__CHART__)].some((el) =>
            el.getBoundingClientRect().top < window.innerHeight && chartDrawn(el)));
        seen('finished', () => 'run' in stamps && state() === 'notRunning');
        if (!('finished' in stamps && 'chart' in stamps && 'visible_chart' in stamps)) {
            setTimeout(tick, 5);
        }
    };
    tick();
})();"""
STAGES = (
    ("server start (spawn -> health)", "spawn", "healthy"),
    ("browser loads the app (-> script starts)", "healthy", "run"),
    ("script: -> page title", "run", "title"),
    ("script: title -> first sidebar widget", "title", "widget"),
    ("script: widget -> first chart element", "widget", "chart_element"),
    ("browser paints the chart", "chart_element", "chart"),
)
IMPORT_ORDER = (
    "streamlit",
    "pandas",
    "altair",
    "torch",
    "attention_core",
    "dashboard.controls",
    "dashboard.data",
    "dashboard.charts",
)
IMPORT_TIMER = """import json, sys, time
times = {}
for name in sys.argv[1:]:
    start = time.perf_counter()
    __import__(name)
    times[name] = time.perf_counter() - start
print(json.dumps(times))"""
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


def cold_start(
    playwright, app: str = "dashboard/app.py", env: dict | None = None
) -> dict[str, float]:
    """One cold start of ``app`` (its server's environment plus ``env``): the seconds from
    spawning the server to each milestone (``healthy``, ``run``, ``title``, ``widget``,
    ``chart_element``, ``chart``, ``visible_chart``, ``finished``)."""
    browser = launch_chromium(playwright)
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    timeline = TIMELINE_JS.replace("__DRAWN__", FIRST_CHART_DRAWN_JS)
    timeline = timeline.replace("__CHART_DRAWN__", CHART_DRAWN_JS)
    page.add_init_script(timeline.replace("__CHART__", json.dumps(CHART)))
    spawned = time.time()
    with streamlit_server(app=app, env=env) as server:
        healthy = time.time()
        page.goto(server.url)
        page.wait_for_function(FIRST_CHART_DRAWN_JS, arg=CHART, timeout=120_000)
        page.wait_for_function("() => 'finished' in (window.__coldStart || {})", timeout=120_000)
        page.wait_for_function(
            "() => 'visible_chart' in (window.__coldStart || {})", timeout=120_000
        )
        if painted_fraction(page)[0] < MIN_PAINTED:
            raise RuntimeError("the first chart was drawn but shows no pixels")
        stamps = page.evaluate("() => window.__coldStart")
    browser.close()
    marks = {name: stamp / 1000 - spawned for name, stamp in stamps.items()}
    return {"spawn": 0.0, "healthy": healthy - spawned, **marks}


def import_times() -> dict[str, float]:
    """Seconds each module of :data:`IMPORT_ORDER` adds, imported in that order in a fresh
    interpreter."""
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_TIMER, *IMPORT_ORDER],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def print_breakdown(runs: list[dict[str, float]], imports: dict[str, float]) -> None:
    """Median seconds per stage of the cold starts, then the import times."""
    for label, start, end in STAGES:
        spans = [run[end] - run[start] for run in runs if start in run and end in run]
        if spans:
            print(f"  {label:<44} {statistics.median(spans):5.2f} s")
    visible = [run["visible_chart"] for run in runs if "visible_chart" in run]
    if visible:
        label = "(spawn -> first chart inside the first screen)"
        print(f"  {label:<44} {statistics.median(visible):5.2f} s")
    finished = [run["finished"] - run["chart"] for run in runs if "finished" in run]
    if finished:
        print(f"  {'(script finishes, after the chart)':<44} {statistics.median(finished):5.2f} s")
    line = ", ".join(f"{name} {seconds:.2f}" for name, seconds in imports.items())
    if line:
        print(f"  imports in a fresh interpreter (s, in order): {line}")


def _median_of(runs: list[dict[str, float]], mark: str) -> tuple[float, str]:
    """The median seconds to ``mark`` over ``runs``, and each run's figure listed."""
    return statistics.median(run[mark] for run in runs), ", ".join(
        f"{run[mark]:.2f}" for run in runs
    )


def print_headline(runs, bare, bare_torch) -> None:
    """The goals' lines: spawn → the first chart inside the first screen for the app, the
    bare page and the bare page importing torch (the ratio goal is the app's against the bare
    page's), then the first chart anywhere."""
    app, listed = _median_of(runs, "visible_chart")
    verdict = "PASS" if app <= COLD_GOAL_S else "MISS"
    print(
        f"cold start to the first chart inside the first screen (1440x1000): median {app:.2f} s "
        f"({listed}) goal <= {COLD_GOAL_S} s {verdict}"
    )
    base, listed = _median_of(bare, "visible_chart")
    ratio = app / base
    print(
        f"a bare Streamlit page with one Altair heatmap ({BARE_APP}), timed interleaved: "
        f"median {base:.2f} s ({listed}); the app / bare = {ratio:.2f}x "
        f"(goal <= {BARE_RATIO_GOAL}x) {'PASS' if ratio <= BARE_RATIO_GOAL else 'MISS'}"
    )
    with_torch, listed = _median_of(bare_torch, "visible_chart")
    print(
        f"  the bare page importing torch before its heatmap: median {with_torch:.2f} s "
        f"({listed}), {with_torch / base:.2f}x the bare page; the app / it = "
        f"{app / with_torch:.2f}x"
    )
    anywhere, listed = _median_of(runs, "chart")
    print(
        f"  the app's first chart anywhere (the Intuition page's meeting chart, below the "
        f"fold): median {anywhere:.2f} s ({listed}), {anywhere / base:.2f}x the bare page"
    )


def largest_settings_rss(playwright) -> tuple[dict[str, int], list[str]]:
    """Peak server RSS on each page at its largest settings, visited in order (each page's
    peak includes what the pages before it left cached); returns ({page: bytes}, notes)."""
    browser = launch_chromium(playwright)
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    notes, peaks = [], {}
    with streamlit_server() as server:
        sampler = RssSampler(server.pid)
        sampler.start()
        for name in page_names():
            query = LARGEST.get(name, "")
            path = "" if name == page_names()[0] else name
            page.goto(f"{server.url}/{path}?{query}")
            wait_idle(page, timeout_ms=180_000)
            peaks[name], sampler.peak = sampler.peak, 0
            warnings = page.locator('[data-testid="stAlertContentWarning"]').count()
            errors = page.locator('[data-testid="stAlertContentError"]').count()
            notes.append(
                f"{name}: peak {peaks[name] / 2**20:.0f} MiB, {warnings} warning(s), "
                f"{errors} error box(es)"
            )
        sampler.stop()
    browser.close()
    return peaks, notes


def main() -> None:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-rss", action="store_true", help="skip the peak-RSS tour")
    args = parser.parse_args()
    with sync_playwright() as playwright:
        runs, bare, bare_torch = [], [], []
        for _ in range(max(1, args.runs)):  # interleaved: the machine's load hits all alike
            runs.append(cold_start(playwright))
            bare.append(cold_start(playwright, BARE_APP))
            bare_torch.append(cold_start(playwright, BARE_APP, BARE_TORCH_ENV))
        if not args.no_rss:
            peak, notes = largest_settings_rss(playwright)
    print_headline(runs, bare, bare_torch)
    print_breakdown(runs, import_times())
    print("  the bare page:")
    print_breakdown(bare, {})
    print("  the bare page importing torch:")
    print_breakdown(bare_torch, {})
    if args.no_rss:
        return
    mib = max(peak.values()) / 2**20
    verdict = "PASS" if mib <= RSS_GOAL_MIB else "MISS"
    print(
        f"peak server RSS at the largest settings: {mib:.0f} MiB "
        f"(goal <= {RSS_GOAL_MIB} MiB) {verdict}"
    )
    before = [b for name, b in peak.items() if name != DECODER_PAGE]
    if len(before) < len(peak):
        part = max(before) / 2**20
        print(
            f"  every page but the decoder's (MiniLM and e5 loaded): {part:.0f} MiB "
            f"{'PASS' if part <= RSS_GOAL_MIB else 'MISS'}; with the decoder page too "
            f"(all three models): {mib:.0f} MiB "
            f"{'PASS' if mib <= APP_GOAL_MIB else 'MISS'} against the all-models goal of "
            f"{APP_GOAL_MIB} MiB"
        )
    for note in notes:
        print(f"  {note}")


if __name__ == "__main__":
    main()
