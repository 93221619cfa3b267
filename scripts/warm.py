"""Warm running Attention Lab servers: every page opened once, through each server's own
websocket, before learners arrive.

Usage: ``python -m scripts.warm URL [URL ...]`` (from the repository root)

A replica's first learner on a page pays for what the page loads once per process: torch's
kernels, SmolLM2 and its bfloat16 twin, e5-small, MiniLM, the default views' cached results.
Thirty learners opening their pages at once on fresh replicas waited p95 8.6 s for the
first run (``python -m bench.load --mode spread --replicas 2``); on replicas warmed by this
script, under a second. ``scripts/serve.py`` runs it on every replica before the balancer
takes its first request.

Each URL gets one session per page (:func:`bench.browser.page_names`, in the app's order; the
first at the root address, where a learner's link lands),
the servers in parallel (each replica has its own cores), the pages of one server in turn.
Prints one line per server, ``warmed URL: 13 pages in 16.1 s``, and one line per page that
did not finish cleanly. Exit code 0 when every page of every server ran without an error, 1
otherwise (a cold page only means a slower first run there: serve.py goes on).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass

from bench.browser import page_names
from bench.stream_client import StreamSession

PAGE_TIMEOUT_S = 300.0
"""The longest one page's first run may take (a real model loaded on a shared machine)."""


@dataclass(frozen=True)
class PageRun:
    """One page's first run on one server: its URL path, whether it finished cleanly, the
    seconds it took and what went wrong (a refusal, an exception, an error box)."""

    page: str
    ok: bool
    seconds: float
    problem: str = ""


async def open_once(url: str, page: str) -> PageRun:
    """Open ``page`` on the server at ``url`` in a new session, wait for its first run, and
    close the session."""
    session = StreamSession(url, page)
    started = time.perf_counter()
    try:
        result = await asyncio.wait_for(session.open(), PAGE_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - reported, the other pages still warm
        return PageRun(page, False, time.perf_counter() - started, f"{type(exc).__name__}: {exc}")
    finally:
        await session.close()
    problem = "; ".join(result.errors) or ("" if result.ok else f"status {result.status}")
    return PageRun(page, result.ok, result.seconds, problem)


async def warm_server(url: str, pages: list[str]) -> list[PageRun]:
    """Every page of ``pages`` opened once on ``url``, in turn."""
    return [await open_once(url, page) for page in pages]


async def warm_all(urls: list[str], pages: list[str]) -> list[list[PageRun]]:
    """:func:`warm_server` on every URL at once."""
    return list(await asyncio.gather(*(warm_server(url, pages) for url in urls)))


def report(url: str, runs: list[PageRun]) -> list[str]:
    """The lines for one server: its summary, then each page that did not finish cleanly."""
    total = sum(run.seconds for run in runs)
    lines = [f"warmed {url}: {len(runs)} pages in {total:.1f} s"]
    lines += [f"  {run.page or '(root)'}: {run.problem}" for run in runs if not run.ok]
    return lines


def main(argv: list[str] | None = None) -> int:
    """Warm every URL given; 0 when every page ran cleanly."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("urls", nargs="+", help="each server's address, http://host:port")
    args = parser.parse_args(argv)
    bad = [url for url in args.urls if not url.startswith(("http://", "https://"))]
    if bad:
        parser.error(f"an address starts with http:// or https://, got {bad[0]!r}")
    names = page_names()
    results = asyncio.run(warm_all(args.urls, ["", *names[1:]]))
    for url, runs in zip(args.urls, results, strict=True):
        print("\n".join(report(url, runs)), flush=True)
    return 0 if all(run.ok for runs in results for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
