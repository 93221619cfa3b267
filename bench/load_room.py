"""A room following its presenter: ``python -m bench.load --mode room``.

One server with a presenter key; one presenter and N followers, each a websocket client
(:mod:`dashboard.serving.stream_client`). The presenter opens the Scaling page with ``room=bench``,
types the key (the password field's widget state), and then moves the "Tokens per sequence
L" slider by one step every ``interval`` seconds. Every follower opens ``/?room=bench`` and
does what the browser's fragment timer does: every :data:`POLL_S` seconds it asks for a run
of the room's fragment (``rerun_script`` with its ``fragment_id``, ``is_auto_rerun``), and
reads everything the server sends, on its own task.

Measured, for each presenter move and each follower: the time from the presenter sending the
move to the end of the follower's first run that drew the new value (the slider's value in
that run's elements: its view then equals the presenter's), the same to the first run whose
URL holds it (the address bar can lag behind the view: reported beside it), and the
follower's lag behind the presenter: the same end less the end of the presenter's own run
(the goal: the presenter's screen shows the new view at the end of that run, and a follower
cannot show it before the presenter's run made it). The goal (p95 ≤ 1 s) is judged on the
first, the presenter's own run included. Also: errors (goal 0),
the presenter's own run time, and the server's CPU time during an idle stretch (followers
only polling) and during the moves, per presenter move.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from urllib.parse import parse_qs

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

from bench.load_figures import cpu_seconds, percentiles, print_errors, verdict
from dashboard.room_controls import KEY_WIDGET
from dashboard.room_follow import POLL_S
from dashboard.serving.stream_client import FINISHED_OK, StreamSession

ROOM = "bench"
KEY = "bench-presenter-key"
KEY_ENV = "ATTENTION_LAB_PRESENTER_KEY"
PAGE = "scaling"
MOVED = "scaling.seq_len"
FOLLOW_GOAL_S = 1.0
JOIN_GOAL_S = 2.5
SETTLE_S = 10.0  # after the last move: how long the followers may take to show it
IDLE_S = 5.0
JOIN_TIMEOUT_S = 120.0
EARLY_FOR_RERUN = ForwardMsg.ScriptFinishedStatus.FINISHED_EARLY_FOR_RERUN


class Presenter(StreamSession):
    """A stream session that also sends the presenter key's widget state."""

    key_id = ""

    def _widget_states(self) -> list[WidgetState]:
        states = super()._widget_states()
        if self.key_id:
            states.append(WidgetState(id=self.key_id, string_value=KEY))
        return states

    async def become_presenter(self):
        """Find the key field in the last run and type the key (one rerun)."""
        for element in self.elements:
            if element.WhichOneof("type") == "text_input" and element.text_input.id.endswith(
                KEY_WIDGET
            ):
                self.key_id = element.text_input.id
        if not self.key_id:
            raise RuntimeError("no presenter key field on the room's page")
        return await self.rerun()


class Follower:
    """A follower: a reader task keeping the URL, and the fragment's poll timer.

    Attributes:
        finished: ``(monotonic time, query)`` of every run (full or fragment) that ran to
            its end (not one that ended early for a rerun, which showed nothing).
        ended_early: how many runs after the first ended early.
        early_s: each such run's seconds, from its new-session message to its end (a
            follower sent on to the presenter's page: the run before the page's own).
    """

    def __init__(self, base_url: str, query: str = f"room={ROOM}", poll_s: float = POLL_S):
        self.session = StreamSession(base_url, "", query)
        self.poll_s = poll_s
        self.opened_at = 0.0
        self.ended_early = 0  # runs after the first that ended early (cut short or sent on)
        self.early_s: list[float] = []
        self._run_started: float | None = None
        self.finished: list[tuple[float, dict[str, str], str | None]] = []
        self.drawn: str | None = None  # the MOVED slider's value as last drawn
        self.errors: list[str] = []
        self._tasks: list[asyncio.Task] = []

    async def start(self) -> None:
        """Open the link (first run) and start reading and polling."""
        self.opened_at = time.monotonic()
        result = await self.session.open()
        for element in self.session.elements:
            self._note_drawn(element)
        if result.status in FINISHED_OK:
            self.finished.append((time.monotonic(), self.query(), self.drawn))
        # the first run ends early when it sends the follower on to the presenter's page
        if result.errors or result.status not in (*FINISHED_OK, EARLY_FOR_RERUN):
            self.errors.append(f"open: status {result.status} {result.errors}")
        self._tasks = [asyncio.create_task(self._read()), asyncio.create_task(self._poll())]

    def query(self) -> dict[str, str]:
        return {k: v[-1] for k, v in parse_qs(self.session.query).items()}

    async def _read(self) -> None:
        while True:
            forward, kind = await self.session.receive()
            if forward is None:  # the browser's tab would die here ("Cached ForwardMsg MISS")
                self.errors.append("a reference to a message the browser no longer holds")
                continue
            if kind == "new_session":
                self._run_started = time.monotonic()
            if kind == "script_finished":
                # a run that ended early (sent on to the presenter's view) showed nothing
                if forward.script_finished in FINISHED_OK:
                    self.finished.append((time.monotonic(), self.query(), self.drawn))
                else:
                    self.ended_early += 1
                    if self._run_started is not None:
                        self.early_s.append(time.monotonic() - self._run_started)
                self._run_started = None
            else:
                errors: list[str] = []
                self.session._read(forward, kind, errors)
                self.errors += errors
                if kind == "delta" and forward.delta.WhichOneof("type") == "new_element":
                    self._note_drawn(forward.delta.new_element)

    def _note_drawn(self, element) -> None:
        """Keep the value the MOVED slider shows after ``element`` (a slider drawn without a
        value set keeps the one the browser shows)."""
        if element.WhichOneof("type") != "slider" or not element.slider.id.endswith(MOVED):
            return
        if element.slider.set_value:
            self.drawn = str(int(element.slider.value[0]))
        elif self.drawn is None:
            self.drawn = str(int(element.slider.default[0]))

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.poll_s)
            if not self.session.fragment_id:
                continue
            msg = BackMsg()
            state = msg.rerun_script
            state.query_string = self.session.query
            state.page_script_hash = self.session.page_script_hash
            state.fragment_id = self.session.fragment_id
            state.is_auto_rerun = True
            await self.session.send_rerun(msg)

    def joined_s(self) -> float | None:
        """From opening the link to the end of the first run that showed the presenter's
        view (``None`` when none did)."""
        for moment, query, _drawn in self.finished:
            if query.get(MOVED):
                return moment - self.opened_at
        return None

    def seen_at(self, value: str, after: float, *, by_url: bool = False) -> float | None:
        """When the first run that ended after ``after`` drew ``MOVED = value`` (``by_url``:
        whose URL held it)."""
        for moment, query, drawn in self.finished:
            shown = query.get(MOVED) if by_url else drawn
            if moment >= after and shown == value:
                return moment
        return None

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.session.close()


async def join_all(crowd: list[Follower]) -> list[float]:
    """Open every follower's link at once and wait (at most :data:`JOIN_TIMEOUT_S`) until
    each has joined; the seconds each took (those that never joined are left out)."""
    await asyncio.gather(*(f.start() for f in crowd))
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    while time.monotonic() < deadline and not all(f.joined_s() is not None for f in crowd):
        await asyncio.sleep(0.05)
    return [f.joined_s() for f in crowd if f.joined_s() is not None]


async def drive_room(
    base_url: str, server_pid: int, followers: int, seconds: float, interval: float
) -> dict:
    """Open the presenter and the followers, then move the presenter's slider every
    ``interval`` seconds for ``seconds``; return the figures."""

    stats: dict = {"errors": []}
    host = Presenter(base_url, PAGE, f"room={ROOM}")
    await host.open()
    joined = await host.become_presenter()
    if not joined.ok:
        stats["errors"].append(f"presenter: status {joined.status} {joined.errors}")
    # off the slider's default first: a view at a default leaves that value out of the URL,
    # so a follower's URL names the presenter's value only when it is not the default (the
    # moves below never come back to it)
    first = await host.move_slider(
        MOVED, 1 if host.sliders[MOVED].moved(1) != host.sliders[MOVED].value else -1
    )
    if not first.ok:
        stats["errors"].append(f"presenter: status {first.status} {first.errors}")
    crowd = [Follower(base_url) for _ in range(followers)]
    stats["join_s"] = await join_all(crowd)
    cpu_before, idle_start = cpu_seconds(server_pid), time.monotonic()
    await asyncio.sleep(IDLE_S)
    stats["idle_cpu_s"], stats["idle_s"] = (
        cpu_seconds(server_pid) - cpu_before,
        time.monotonic() - idle_start,
    )
    half = seconds / 2
    stats["phases"] = {
        "repeat": await move_phase(host, crowd, server_pid, half, interval, fresh=False),
        "fresh": await move_phase(host, crowd, server_pid, half, interval, fresh=True),
    }
    for phase in stats["phases"].values():
        stats["errors"] += phase.pop("errors")
    for follower in crowd:
        stats["errors"] += follower.errors
        await follower.close()
    await host.close()
    return stats


async def move_phase(
    host: Presenter,
    crowd: list[Follower],
    server_pid: int,
    seconds: float,
    interval: float,
    *,
    fresh: bool,
) -> dict:
    """The presenter moves the slider every ``interval`` seconds for ``seconds``: to a new
    value each time (``fresh``: the page computes each), or back and forth between two
    values (the page's caches answer after the first two moves, so the figures are the
    room's own). Returns the phase's figures."""

    stats: dict = {"errors": [], "follow_s": [], "lag_s": [], "presenter_s": [], "missed": 0}
    stats |= {"url_s": [], "url_missed": 0}
    cpu_before, start = cpu_seconds(server_pid), time.monotonic()
    client_before = time.process_time()
    moves: list[tuple[float, float, str]] = []
    step = 1
    while time.monotonic() - start < seconds:
        slider = host.sliders[MOVED]
        if slider.moved(step) == slider.value or (moves and not fresh):
            step = -step
        sent = time.monotonic()
        result = await host.move_slider(MOVED, step)
        stats["presenter_s"].append(result.seconds)
        if not result.ok:
            stats["errors"].append(f"presenter move: {result.status} {result.errors}")
        moves.append((sent, sent + result.seconds, str(int(host.sliders[MOVED].value[0]))))
        await asyncio.sleep(max(0.0, sent + interval - time.monotonic()))
    sent, _, value = moves[-1]
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline and any(f.seen_at(value, sent) is None for f in crowd):
        await asyncio.sleep(0.1)
    stats["cpu_s"], stats["moves"] = cpu_seconds(server_pid) - cpu_before, len(moves)
    stats["client_cpu_s"] = time.process_time() - client_before
    for sent, shown, value in moves:
        seen_all = [f.seen_at(value, sent) for f in crowd]
        stats["missed"] += sum(seen is None for seen in seen_all)
        seen_all = [seen for seen in seen_all if seen is not None]
        if seen_all:
            stats.setdefault("last_s", []).append(max(seen_all) - sent)
        stats["follow_s"] += [seen - sent for seen in seen_all]
        stats["lag_s"] += [max(0.0, seen - shown) for seen in seen_all]
        in_url = [f.seen_at(value, sent, by_url=True) for f in crowd]
        stats["url_missed"] += sum(seen is None for seen in in_url)
        stats["url_s"] += [seen - sent for seen in in_url if seen is not None]
    return stats


def report_room(stats: dict, followers: int, interval: float) -> None:
    """Print the room's figures and verdicts."""
    print(
        f"room: 1 presenter ({PAGE}, {MOVED} one step every {interval:g} s) and {followers} "
        f"followers polling every {POLL_S:g} s (websocket clients)"
    )
    print_errors(stats["errors"])
    p50, p95 = percentiles(stats["join_s"])
    joined = len(stats["join_s"])
    print(
        f"{followers} followers opening the room link at once -> the presenter's page drawn: "
        f"p50 {p50:.3f} s, p95 {p95:.3f} s, {joined} joined (goal p95 <= {JOIN_GOAL_S:g} s) "
        f"{verdict(p95 <= JOIN_GOAL_S and joined == followers)}"
    )
    idle = stats["idle_cpu_s"] / stats["idle_s"]
    print(f"server CPU: {idle:.2f} cores busy with {followers} followers only polling")
    for name, phase in stats["phases"].items():
        report_phase(name, phase, followers, idle * interval)


def report_phase(name: str, phase: dict, followers: int, polling_cpu_s: float) -> None:
    """Print one phase's figures: the presenter's runs, the followers' and the CPU
    (``polling_cpu_s``: what the followers' polls alone cost per move interval)."""

    what = {"repeat": "back and forth between two values", "fresh": "to a new value each time"}
    print(f"presenter moving {what[name]} ({phase['moves']} moves):")
    p50, p95 = percentiles(phase["presenter_s"])
    print(f"  presenter's own run: p50 {p50:.3f} s, p95 {p95:.3f} s")
    p50, p95 = percentiles(phase["follow_s"])
    held = p95 <= FOLLOW_GOAL_S and not phase["missed"]
    print(
        f"  move sent -> follower's run drawing the same value finished (the presenter's own run "
        f"included): p50 {p50:.3f} s, p95 {p95:.3f} s over {len(phase['follow_s'])} "
        f"(move, follower) pairs, {phase['missed']} never seen (goal p95 <= "
        f"{FOLLOW_GOAL_S:g} s, 0 missed) {verdict(held)}"
    )
    p50, p95 = percentiles(phase["url_s"])
    print(
        f"  move sent -> follower's URL holding the value: p50 {p50:.3f} s, p95 {p95:.3f} s, "
        f"{phase['url_missed']} never (the address bar, which can lag behind the view)"
    )
    p50, p95 = percentiles(phase.get("last_s", []))
    print(f"  the last of {followers} followers, per move: p50 {p50:.3f} s, p95 {p95:.3f} s")
    p50, p95 = percentiles(phase["lag_s"])
    print(
        f"  behind the presenter (presenter's run finished -> follower's run finished): "
        f"p50 {p50:.3f} s, p95 {p95:.3f} s"
    )
    per_move = phase["cpu_s"] / max(phase["moves"], 1)
    client = phase["client_cpu_s"] / max(phase["moves"], 1)
    print(
        f"  server CPU: {per_move:.2f} CPU-s per presenter move, polling included; "
        f"{per_move - polling_cpu_s:.2f} CPU-s above the polling; the load client (one "
        f"process reading all {followers} followers): {client:.2f} CPU-s per move"
    )
