"""Warm running Attention Lab servers: every page and every shipped lesson's step opened
once, through each server's own websocket, before learners arrive.

Usage: ``python -m scripts.warm URL [URL ...]`` (from the repository root)

A replica's first learner on a page pays for what the page loads once per process: torch's
kernels, SmolLM2 and its bfloat16 twin, e5-small, MiniLM, the default views' cached results.
Thirty learners opening their pages at once on fresh replicas waited p95 8.6 s for the
first run (``python -m bench.load --mode spread --replicas 2``); on replicas warmed by this
script, under a second. ``scripts/serve.py`` runs it on every replica before the balancer
takes its first request.

Each URL gets one session per link (:mod:`dashboard.serving.warm`: the pages in the app's
order, the first at the root address, then each lesson's steps), the servers in parallel,
the links of one server in turn. Prints one line per server, ``warmed URL: 13 pages and 18
lesson steps in 41.0 s``, and one line per link that did not finish cleanly. Exit code 0 when
every link of every server ran without an error, 1 otherwise (a cold page only means a
slower first run there: serve.py goes on).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from dashboard.serving.warm import page_links, report, shipped_lesson_links, warm_all


def main(argv: list[str] | None = None) -> int:
    """Warm every URL given; 0 when every link ran cleanly."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("urls", nargs="+", help="each server's address, http://host:port")
    args = parser.parse_args(argv)
    bad = [url for url in args.urls if not url.startswith(("http://", "https://"))]
    if bad:
        parser.error(f"an address starts with http:// or https://, got {bad[0]!r}")
    results = asyncio.run(warm_all(args.urls, page_links() + shipped_lesson_links()))
    for url, runs in zip(args.urls, results, strict=True):
        print("\n".join(report(url, runs)), flush=True)
    return 0 if all(run.ok for runs in results for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
