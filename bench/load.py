"""Workshop load: N learners moving sliders on different pages against one server.

Usage: ``python -m bench.load [--sessions 30] [--seconds 60] [--interval 5]
[--client stream|browser] [--mode spread|room] [--replicas 1,2 [--cold] | --base URL
--server-pid PID]``

Where: by default one Streamlit server on loopback, started here. ``--replicas 1,2`` runs the
mode against the real stack (``scripts/serve.py --replicas N``: redis-server, N replicas and
HAProxy, :mod:`bench.replicas`) for each N in turn, in the same run, and prints the figures
side by side at the end; the server counted (CPU, memory) is serve.py's whole process tree.
serve.py warms every replica (each page opened once) before the balancer starts, as it does
for a workshop; ``--cold`` passes ``--no-warm`` (learners then pay the models' loading).
``--base URL --server-pid PID`` drives any address, counting the process tree of PID.
``--prewarm on|off`` (modes room and lesson, one server): a fresh server whose own pre-warm
of the shipped lessons is on or off meets the room at once (does the pre-warm slow it?).

``--mode landing``: every learner opens the root link (the landing page) at once, as a room
does when the link goes up on the projector. ``--mode room`` (stream client only): one
presenter and N followers of one room, the presenter moving a slider every ``--interval``
seconds; see :mod:`bench.load_room`. ``--mode lesson``: the same room walking a lesson, the
presenter pressing Next and Back every ``--interval`` seconds; see :mod:`bench.load_lesson`.

The spread and landing modes, their clients and figures: :mod:`bench.load_spread`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import threading
import time
from pathlib import Path

from bench.browser import rss_bytes, streamlit_server
from bench.load_figures import print_server_log, print_side_by_side, room_row, spread_row
from bench.load_spread import drive, drive_stream, page_links, report_browser, report_stream
from bench.replicas import parse_replicas, serve_stack

MAX_SESSIONS = {"stream": 60, "browser": 16}
DEFAULT_SESSIONS = {"stream": 30, "browser": 8}
MAX_SECONDS = 300
MOVE_INTERVAL_S = 5.0


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


@contextlib.contextmanager
def target(args: argparse.Namespace, env: dict[str, str], replicas: int | None):
    """The server the mode drives: (URL, pid to count, its log or None)."""
    if args.base:
        yield args.base.rstrip("/"), args.server_pid, None
    elif replicas is not None:
        warm = not args.cold
        with (
            tempfile.TemporaryDirectory() as logs,
            serve_stack(replicas, Path(logs), env, warm=warm) as stack,
        ):
            state = "warmed by serve.py" if warm else "cold (--no-warm)"
            print(f"--- {replicas} replica(s) behind HAProxy, {state}: {stack.url} ---", flush=True)
            yield stack.url, stack.pid, None
            for log in sorted(Path(logs).glob("replica-*.log")):
                print(f"{log.stem}:", end=" ")
                print_server_log(log)
    else:
        with streamlit_server(env=env) as server:
            yield server.url, server.pid, server.log_path


def prewarm_env(args: argparse.Namespace) -> dict[str, str]:
    """``--prewarm on|off``: the single server's own pre-warm of the shipped lessons
    (:mod:`dashboard.serving.prewarm`) switched on or off for a fresh server that a room
    meets at once; without it the bench's servers leave it off."""
    return {} if args.prewarm is None else {"ATTENTION_LAB_PREWARM": args.prewarm}


def run_room(args: argparse.Namespace, replicas: int | None = None) -> dict:
    """``--mode room``: one presenter and N followers (:mod:`bench.load_room`); returns its
    summary row."""
    from bench import load_room

    followers = max(1, min(args.sessions or DEFAULT_SESSIONS["stream"], MAX_SESSIONS["stream"]))
    seconds = max(5.0, min(args.seconds, MAX_SECONDS))
    env = {load_room.KEY_ENV: load_room.KEY, **prewarm_env(args)}
    with target(args, env, replicas) as (url, pid, log):
        sampler = RssSampler(pid)
        sampler.start()
        stats = asyncio.run(load_room.drive_room(url, pid, followers, seconds, args.interval))
        sampler.stop()
    load_room.report_room(stats, followers, args.interval)
    print(f"server peak RSS: {sampler.peak / 2**20:.0f} MiB")
    if log is not None:
        print_server_log(log)
    return room_row(stats, followers, replicas, sampler.peak)


def run_lesson(args: argparse.Namespace, replicas: int | None = None) -> dict:
    """``--mode lesson``: a room walking a lesson (:mod:`bench.load_lesson`); its row."""
    from bench import load_lesson

    followers = max(1, min(args.sessions or DEFAULT_SESSIONS["stream"], MAX_SESSIONS["stream"]))
    seconds = max(5.0, min(args.seconds, MAX_SECONDS))
    env = {load_lesson.KEY_ENV: load_lesson.KEY, **prewarm_env(args)}
    with target(args, env, replicas) as (url, pid, log):
        sampler = RssSampler(pid)
        sampler.start()
        # serve.py warms its replicas itself; --prewarm: the server's own, with the room live
        warm = replicas is None and not args.base and args.prewarm is None
        stats = asyncio.run(
            load_lesson.drive_lesson(url, pid, followers, seconds, args.interval, warm)
        )
        sampler.stop()
    load_lesson.report_lesson(stats, followers, args.interval)
    print(f"server peak RSS: {sampler.peak / 2**20:.0f} MiB")
    if log is not None:
        print_server_log(log)
    return load_lesson.lesson_row(stats, followers, replicas, sampler.peak)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", choices=sorted(MAX_SESSIONS), default="stream")
    parser.add_argument("--sessions", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--interval", type=float, default=MOVE_INTERVAL_S)
    parser.add_argument(
        "--mode",
        choices=("spread", "landing", "room", "lesson"),
        default="spread",
        help="spread: learners on different pages; landing: all open the root link at once, "
        "then move sliders there; room: one presenter and N followers; lesson: the same "
        "room walking a lesson with Next and Back",
    )
    parser.add_argument("--replicas", type=parse_replicas, default=None, help="e.g. 1,2")
    parser.add_argument("--cold", action="store_true", help="with --replicas: serve.py --no-warm")
    parser.add_argument(
        "--prewarm",
        choices=("on", "off"),
        default=None,
        help="one fresh server (room, lesson): its own pre-warm on or off while the room is "
        "live (the lesson mode's warm-up before the room is then skipped)",
    )
    parser.add_argument("--base", default="", help="drive this address instead")
    parser.add_argument("--server-pid", type=int, default=None, help="with --base: its pid")
    args = parser.parse_args()
    if args.prewarm and (args.base or args.replicas or args.mode not in ("room", "lesson")):
        parser.error(
            "--prewarm is for one fresh server (no --base, no --replicas), modes room and lesson"
        )
    if args.base and (args.server_pid is None or args.replicas):
        parser.error("--base needs --server-pid (the process tree whose CPU is counted)")
    rows = [run_mode(args, replicas) for replicas in (args.replicas or (None,))]
    if args.replicas:
        print_side_by_side([row for row in rows if row], max(0.1, args.interval))


def run_mode(args: argparse.Namespace, replicas: int | None) -> dict | None:
    """Run ``--mode`` once against :func:`target`; its summary row (stream client)."""
    if args.mode == "room":
        return run_room(args, replicas)
    if args.mode == "lesson":
        return run_lesson(args, replicas)
    wanted = DEFAULT_SESSIONS[args.client] if args.sessions is None else args.sessions
    sessions = max(1, min(wanted, MAX_SESSIONS[args.client]))
    seconds = max(5.0, min(args.seconds, MAX_SECONDS))
    interval = max(0.1, args.interval)
    with target(args, {}, replicas) as (url, pid, log):
        sampler = RssSampler(pid)
        sampler.start()
        started = time.monotonic()
        links = [""] * sessions if args.mode == "landing" else page_links(sessions)
        if args.client == "stream":
            stats = asyncio.run(drive_stream(url, pid, links, seconds, interval))
        else:
            stats = asyncio.run(drive(url, sessions, seconds))
        elapsed = time.monotonic() - started
        sampler.stop()
    if log is not None:
        print_server_log(log)
    if args.client != "stream":
        report_browser(stats, sessions, elapsed, sampler.peak)
        return None
    report_stream(stats, links, seconds, interval, sampler.peak)
    return spread_row(stats, links, replicas, sampler.peak)


if __name__ == "__main__":
    main()
