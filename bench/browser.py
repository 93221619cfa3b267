"""Drive the dashboard in headless Chromium: shared by tests/browser and the browser benches.

* :func:`streamlit_server` starts ``streamlit run dashboard/app.py`` on a free loopback port,
  waits for ``/_stcore/health`` and stops that one process (by its own id) on exit.
* :func:`launch_chromium` starts Debian's ``/usr/bin/chromium`` through Playwright with the
  flags this offline machine needs (Playwright's own browser download is never used).
* :func:`wait_idle`, :func:`chart_signatures`, :func:`painted_fraction` read the page state.
* :func:`patient` stretches a wait by ``ATTENTION_LAB_SLOWDOWN`` (default 1) on a slow or
  busy machine: every browser-tier wait is a hang guard a few times the quiet figure, never
  a speed goal, so a slower machine only needs longer guards.
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SLOWDOWN_ENV = "ATTENTION_LAB_SLOWDOWN"


def slowdown() -> float:
    """How many times longer than their quiet figures the browser tier's waits run out
    (``ATTENTION_LAB_SLOWDOWN``, a number ≥ 1; unset or empty: 1).

    Raises:
        ValueError: naming the value, when it is not a number ≥ 1.
    """
    raw = os.environ.get(SLOWDOWN_ENV, "").strip() or "1"
    try:
        factor = float(raw)
    except ValueError:
        factor = float("nan")
    if not factor >= 1 or factor == float("inf"):
        raise ValueError(f"{SLOWDOWN_ENV} must be a number of at least 1, got {raw!r}")
    return factor


def patient(limit: float) -> float:
    """``limit`` (seconds or milliseconds, an int stays an int) times :func:`slowdown`."""
    stretched = limit * slowdown()
    return round(stretched) if isinstance(limit, int) else stretched


HEALTH_TIMEOUT_S = patient(90.0)
IDLE_TIMEOUT_MS = patient(60_000)
# Altair charts, and the canvas heatmaps of dashboard/charts/heatmap_canvas.js (first canvas:
# the cells)
CHART_SELECTOR = '[data-testid="stVegaLiteChart"], .attn-heatmap'


def page_names() -> list[str]:
    """The dashboard's page url paths, read from ``PAGES`` in dashboard/views/__init__.py
    (one source of truth)."""
    tree = ast.parse((REPO_ROOT / "dashboard" / "views" / "__init__.py").read_text("utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "PAGES" for t in node.targets
        ):
            return [name for name, _icon in ast.literal_eval(node.value)]
    raise ValueError("dashboard/views/__init__.py defines no PAGES")


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    """A running Streamlit server."""

    url: str
    process: subprocess.Popen
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid


def wait_healthy(url: str, process: subprocess.Popen, log_path: Path, timeout: float) -> None:
    """Wait until the server at ``url`` answers its health check.

    Raises:
        RuntimeError: when the process exits first or ``timeout`` seconds pass (with the
            end of its log).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"streamlit exited early:\n{log_path.read_text()[-3000:]}")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as resp:
                if resp.read().decode().strip() == "ok":
                    return
        time.sleep(0.25)
    raise RuntimeError(f"streamlit not healthy after {timeout}s:\n{log_path.read_text()[-3000:]}")


@contextlib.contextmanager
def streamlit_server(
    log_path: Path | None = None, env: dict | None = None, app: str = "dashboard/app.py"
) -> Iterator[Server]:
    """Start the dashboard (or another Streamlit ``app``) on a free loopback port; stop that
    process on exit. The shipped lessons are not warmed in its background after the first
    page (``ATTENTION_LAB_PREWARM=off``: a bench's or test's timings are the pages' own)
    unless ``env`` says otherwise."""
    port = free_port()
    log_path = log_path or Path(os.environ.get("TMPDIR", "/tmp")) / f"streamlit-{port}.log"
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        app,
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
    ]
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            cmd,
            cwd=REPO_ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "ATTENTION_LAB_PREWARM": "off", **(env or {})},
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, log_path, HEALTH_TIMEOUT_S)
        yield Server(url, process, log_path)
    finally:
        stop_process(process, 15)


def stop_process(process: subprocess.Popen, timeout_s: float) -> None:
    """Stop a process this code started, by its own process id: SIGTERM, then SIGKILL when
    it has not ended within ``timeout_s``; nothing when it has ended already."""
    if process.poll() is not None:
        return
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=timeout_s)


def launch_chromium(playwright):
    """Launch Debian's Chromium headless through Playwright."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


IDLE_JS = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    return !!app && app.getAttribute('data-test-script-state') === 'notRunning'
        && !document.querySelector('[data-stale="true"]');
}"""


def wait_idle(page, timeout_ms: int = IDLE_TIMEOUT_MS, settle_ms: int = 300) -> None:
    """Wait until the Streamlit script has finished running and stays finished for
    ``settle_ms`` (a widget's first value can trigger one more run)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_ms)
        page.wait_for_function(IDLE_JS, timeout=timeout_ms)
        page.wait_for_timeout(settle_ms)
        page.wait_for_function(IDLE_JS, timeout=timeout_ms)
    except PlaywrightTimeout as err:
        raise AssertionError(
            f"the page's script run did not finish within {timeout_ms / 1000:g} s"
            f" ({SLOWDOWN_ENV} stretches the wait): {page.url}"
        ) from err


CHART_SIGNATURE_JS = """(sel) => Array.from(document.querySelectorAll(sel)).map(el => {
    const canvas = el.querySelector('canvas');
    const text = canvas ? canvas.toDataURL() : (el.querySelector('svg') || {}).innerHTML || '';
    let h = 0;
    for (let i = 0; i < text.length; i += 3) h = (h * 31 + text.charCodeAt(i)) | 0;
    return text.length + ':' + h;
})"""
NEAR_WHITE = 245


def chart_signatures(page) -> list[str]:
    """A fingerprint (length and hash) of every chart's rendered content, in page order:
    the SVG markup Vega drew, or the canvas pixels."""
    return page.evaluate(CHART_SIGNATURE_JS, CHART_SELECTOR)


def painted_fraction(page) -> list[float | None]:
    """For every chart on the page, the fraction of its on-screen pixels that are not
    near-white, read from a screenshot of the element (what the user sees, whether Vega
    drew SVG or canvas); ``None`` for a chart hidden from view (e.g. a closed expander)."""
    import numpy as np
    from PIL import Image

    fractions = []
    charts = page.locator(CHART_SELECTOR)
    for index in range(charts.count()):
        chart = charts.nth(index)
        if not chart.is_visible():
            fractions.append(None)
            continue
        chart.scroll_into_view_if_needed()
        pixels = np.asarray(Image.open(io.BytesIO(chart.screenshot())).convert("RGB"))
        painted = (pixels < NEAR_WHITE).any(axis=-1)  # (H, W): any channel below near-white
        fractions.append(float(painted.mean()) if painted.size else 0.0)
    return fractions


def rss_bytes(pid: int) -> int:
    """Resident memory of a process and its children (psutil), in bytes."""
    import psutil

    proc = psutil.Process(pid)
    total = proc.memory_info().rss
    for child in proc.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += child.memory_info().rss
    return total
