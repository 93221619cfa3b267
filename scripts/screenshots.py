"""Full-page screenshots of every dashboard page in English and Chinese, one page at a time.

Starts ``python3 -m streamlit run dashboard/app.py`` from the repository root given by
``--repo`` (its own code is imported: the server's working directory and ``PYTHONPATH`` are
that root), opens each page of that root's ``dashboard/views/__init__.py`` ``PAGES`` in
headless Chromium (Debian's ``/usr/bin/chromium`` through Playwright), waits until the page's
script has finished and every chart is drawn, and writes ``<out>/<page>-<lang>.png``. The
server is stopped by its own process id (terminate, then kill).

Usage::

    python3 scripts/screenshots.py --out artifacts/shots
    python3 scripts/screenshots.py --repo ../before --out /tmp/before \
        --pages intuition,decoder --langs zh
    python3 scripts/screenshots.py --out /tmp/d3 --pages heads --tag nothing-cut \
        --query "heads.window=0&heads.sinks=0&heads.prefix=0&heads.stride=0"

(``--query`` adds those values to every page's URL; ``--tag`` names the files
``<page>-<tag>-<lang>.png``.)

The README's picture is one target of its own: ``python3 scripts/screenshots.py --readme``
writes ``docs/screenshot.png`` of the repository given by ``--repo``: the landing page in
English, the first 1440×900 CSS pixels a browser window of that size shows.

The waiting helpers are the browser tests' own (``bench/browser.py``,
``tests/browser/test_pages.py`` of the repository this script lives in).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

SCRIPT_REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(SCRIPT_REPO))

from bench.browser import (  # noqa: E402
    CHART_SELECTOR,
    HEALTH_TIMEOUT_S,
    free_port,
    launch_chromium,
    stop_process,
    wait_healthy,
    wait_idle,
)
from tests.browser.test_pages import open_page, wait_painted  # noqa: E402

LANGS = ("en", "zh")
VIEWPORT_WIDTH = 1400
VIEWPORT_HEIGHT = 1000
README_IMAGE = Path("docs") / "screenshot.png"
README_VIEWPORT = {"width": 1440, "height": 900}
README_LANG = "en"
FIRST_CHART_TIMEOUT_MS = 30_000
STOP_TIMEOUT_S = 15.0
# Streamlit scrolls inside its main block and its sidebar, not the document: the viewport is
# grown to the taller one's full height so that a full-page screenshot holds the whole page.
PAGE_HEIGHT_JS = """() => Math.max(
    ...Array.from(document.querySelectorAll(
        '[data-testid="stMain"], [data-testid="stAppViewContainer"], section.main, '
        + '[data-testid="stSidebarContent"]'
    )).map(el => el.scrollHeight),
    document.documentElement.scrollHeight
)"""
MAX_PAGE_HEIGHT = 30_000
# Waiting for the charts scrolls each into view; a one-window picture is taken from the top.
SCROLL_TO_TOP_JS = """() => { for (const el of document.querySelectorAll('*')) {
    if (el.scrollTop > 0) el.scrollTop = 0; } }"""


def page_names(repo: Path) -> list[str]:
    """The page url paths of ``repo``, in navigation order.

    Args:
        repo: a repository root holding ``dashboard/views/__init__.py`` (which imports nothing).

    Returns:
        The first element of each ``PAGES`` entry; the first is the landing page ``/``.

    Raises:
        ValueError: if the file defines no ``PAGES``.
    """
    path = repo / "dashboard" / "views" / "__init__.py"
    spec = importlib.util.spec_from_file_location("_screenshot_views", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "PAGES"):
        raise ValueError(f"{path} defines no PAGES")
    return [name for name, _icon in module.PAGES]


def page_url(base: str, name: str, *, landing: str, lang: str, query: str = "") -> str:
    """The URL of page ``name`` in language ``lang`` with the extra ``query`` values
    (``a=1&b=2``; the landing page is ``/``)."""
    path = "" if name == landing else name
    extra = f"&{query}" if query else ""
    return f"{base}/{path}?lang={lang}{extra}"


@contextlib.contextmanager
def dashboard_server(repo: Path, log_path: Path) -> Iterator[str]:
    """Run ``repo``'s dashboard on a free loopback port; yield its base URL; stop it on exit.

    Args:
        repo: the repository root (working directory and ``PYTHONPATH`` of the server).
        log_path: where the server's output goes.

    Yields:
        ``http://127.0.0.1:<port>``.

    Raises:
        RuntimeError: if the server exits or is not healthy in time.
    """
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        "dashboard/app.py",
        "--server.headless",
        "true",
        "--server.address",
        "127.0.0.1",
        "--server.port",
        str(port),
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
    ]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")])),
    }
    with open(log_path, "w") as log:
        process = subprocess.Popen(cmd, cwd=repo, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, log_path, HEALTH_TIMEOUT_S)
        yield url
    finally:
        stop_process(process, STOP_TIMEOUT_S)


def shoot(browser, url: str, path: Path, *, window: dict[str, int] | None = None) -> None:
    """Open ``url`` in a fresh context, wait until its script finished and its charts are
    drawn, and write a screenshot to ``path``.

    Args:
        browser: a Playwright browser.
        url: the page's URL.
        path: the PNG to write.
        window: ``{"width": w, "height": h}`` for a picture of exactly that window (what a
            browser of that size shows first); None for the whole page at
            ``VIEWPORT_WIDTH`` CSS pixels wide.
    """
    viewport = window or {"width": VIEWPORT_WIDTH, "height": VIEWPORT_HEIGHT}
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    try:
        open_page(page, url)
        with contextlib.suppress(Exception):  # a page may draw no chart at all
            page.wait_for_selector(CHART_SELECTOR, timeout=FIRST_CHART_TIMEOUT_MS)
        wait_idle(page)
        wait_painted(page)
        if window is not None:
            page.evaluate(SCROLL_TO_TOP_JS)
            page.wait_for_timeout(300)  # let the scrolled-to area repaint
            page.screenshot(path=str(path))
            return
        height = min(int(page.evaluate(PAGE_HEIGHT_JS)), MAX_PAGE_HEIGHT)
        page.set_viewport_size({"width": VIEWPORT_WIDTH, "height": max(height, VIEWPORT_HEIGHT)})
        wait_idle(page)
        wait_painted(page)
        page.screenshot(path=str(path), full_page=True)
    finally:
        context.close()


def _split(value: str | None) -> list[str] | None:
    return [item for item in value.split(",") if item] if value else None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: ``--repo``, ``--out``, ``--pages a,b``, ``--langs en,zh``, or
    ``--readme`` alone."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="repository root")
    parser.add_argument(
        "--readme",
        action="store_true",
        help=f"write only the README's picture, {README_IMAGE} of --repo",
    )
    parser.add_argument("--out", type=Path, help="folder for <page>-<lang>.png")
    parser.add_argument("--pages", help="comma-separated page names (default: all)")
    parser.add_argument("--langs", default=",".join(LANGS), help="comma-separated: en,zh")
    parser.add_argument("--query", default="", help="extra query values: a=1&b=2")
    parser.add_argument("--tag", default="", help="file names <page>-<tag>-<lang>.png")
    args = parser.parse_args(argv)
    if args.out is None and not args.readme:
        parser.error("--out is required (or --readme)")
    return args


def readme_image(browser, base: str, repo: Path) -> Path:
    """Write the README's picture: the landing page in English, one 1440×900 window.

    Args:
        browser: a Playwright browser.
        base: the running dashboard's base URL.
        repo: the repository root whose ``docs/screenshot.png`` is written.

    Returns:
        The path written.
    """
    path = repo / README_IMAGE
    landing = page_names(repo)[0]
    url = page_url(base, landing, landing=landing, lang=README_LANG)
    shoot(browser, url, path, window=README_VIEWPORT)
    return path


def main(argv: list[str] | None = None) -> int:
    """Take the screenshots; return the number of pages that failed (0 when all worked)."""
    from playwright.sync_api import sync_playwright

    args = parse_args(argv)
    repo = args.repo.resolve()
    if args.readme:
        log_path = repo / "artifacts" / "readme-screenshot-server.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with dashboard_server(repo, log_path) as base, sync_playwright() as playwright:
            browser = launch_chromium(playwright)
            try:
                print(readme_image(browser, base, repo))
            finally:
                browser.close()
        return 0
    names = page_names(repo)
    wanted = _split(args.pages) or names
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        raise ValueError(f"unknown pages {unknown}; valid: {names}")
    langs = _split(args.langs)
    bad_langs = sorted(set(langs) - set(LANGS))
    if bad_langs:
        raise ValueError(f"unknown languages {bad_langs}; valid: {list(LANGS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    failures = 0
    with (
        dashboard_server(repo, args.out / "server.log") as base,
        sync_playwright() as playwright,
    ):
        browser = launch_chromium(playwright)
        try:
            for name in wanted:
                for lang in langs:
                    stem = "-".join(part for part in (name, args.tag, lang) if part)
                    path = args.out / f"{stem}.png"
                    url = page_url(base, name, landing=names[0], lang=lang, query=args.query)
                    started = time.monotonic()
                    try:
                        shoot(browser, url, path)
                    except Exception as err:  # one broken page must not stop the others
                        failures += 1
                        print(f"FAILED {name}-{lang}: {err}", file=sys.stderr)
                        continue
                    print(f"{path}  ({time.monotonic() - started:.1f} s)")
        finally:
            browser.close()
    return failures


if __name__ == "__main__":
    sys.exit(1 if main() else 0)
