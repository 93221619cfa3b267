"""A room on the real stack in Chromium: ``scripts/serve.py --replicas 2`` runs two
Streamlit replicas behind HAProxy with the rooms in a ``redis-server`` this module starts
itself (``ATTENTION_LAB_REDIS_URL``), so that it can stop Redis and start it again on the same
port.

Every browser context is its own cookie jar: the balancer's round robin gives each its replica
(the ``LABREPLICA`` cookie, ``r1`` or ``r2``). The presenter is on one replica; followers in
English and Chinese are on the other, and one Chinese follower on the presenter's own; each
replica's ``/_stcore/metrics`` (``active_sessions``) shows it holds sessions. The tests run in
order on one room:

1. the presenter types the key, the followers join, both replicas hold sessions;
2. the presenter changes page and moves a slider: every follower follows within
   :data:`FOLLOW_S` (screenshots of the presenter and of the followers on the other replica,
   in both languages);
3. the replica that holds two followers is killed (SIGKILL): their tabs reconnect through the
   balancer to the live replica and show the presenter's move made after the kill within
   :data:`RECONNECT_S`; serve.py starts the replica again on its port (its line, a new pid)
   and it answers its health check; a later move reaches every follower;
4. Redis is killed (SIGKILL): every page keeps working and says in one line, in its
   language, that the room server cannot be reached; a follower who explores on their own
   moves a slider and its chart repaints (screenshots); the presenter moves meanwhile. Redis
   starts again on the same port with its append-only file, as serve.py runs it: the room is
   kept, the line goes away, and every follower shows the presenter's newest view within
   :data:`CATCH_UP_S` with no further move; "Follow again" takes the explorer there.
5. The presenter on Properties sets L = 16 and the leak cut-off to 14, then lowers L to 4 with
   the arrow keys: every follower ends on L 4 and the cut-off 2, with no exception.
6. The followers that test 3 moved go back to the replica they first landed on (a reload with
   its cookie). The presenter, in the session that typed the key, goes to the landing page
   and opens "Self-attention in 20 minutes" from its header, then presses Next past the step
   with notes to a step on another page: after each click every follower, on either replica
   and in either language, shows the step (its "Step K of N", title and what to notice)
   within :data:`FOLLOW_S`, timed from the click; the presenter alone has Back, Next and the
   notes; screenshots of the presenter and the followers on the step with notes, and of a
   Chinese follower who turns the presentation view on.

Only the killed replica (by its pid from serve.py's lines), this module's Redis (by its pid)
and serve.py (SIGTERM, which stops its own children) are stopped.
"""

from __future__ import annotations

import os
import queue
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from bench.browser import free_port, patient, stop_process, wait_idle
from bench.repaint import SLIDER
from dashboard.i18n import t_in
from dashboard.lessons.model import shipped_lessons
from tests.browser.helpers import wait_painted

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
SERVE = REPO / "scripts" / "serve.py"
REDIS_SERVER = "/usr/bin/redis-server"
HAPROXY = "/usr/sbin/haproxy"
REPLICA_LINE = re.compile(r"^replica (\d): (http://127\.0\.0\.1:\d+) pid (\d+)$")
KEY_LINE = re.compile(r"^presenter key: (\S+) ")
COOKIE = "LABREPLICA"
VIEWPORT = {"width": 1440, "height": 1000}
KEY_BOX = '[data-testid="stSidebar"] input[type="password"]'
NAV = '[data-testid="stSidebarNav"]'
SEQ = "scaling.seq_len"
START_S = patient(180.0)  # serve.py starting two replicas on two shared cores
# The waits below guard against a room that never follows; they are no latency goal (that is
# bench.lesson_next's room, whose p95 PERFORMANCE.md reports). Each is a few times what a quiet
# 2-core machine takes (the room's timings, printed as the module runs: open 12.5 s, page change
# 3.2 s, Redis notice 4.8 s, catch-up 5.0 s): CI's machine, with a second test file running beside
# this one, once took 119 s to open the room.
FOLLOW_S = patient(60.0)  # a presenter's move reaches every follower, whichever replica it is on
RECONNECT_S = patient(90.0)  # a follower whose replica died shows the presenter's view again
NOTICE_S = patient(60.0)  # the room's line appears or goes (polls and heartbeats every 5 s)
CATCH_UP_S = patient(45.0)  # followers show the presenter's newest view after Redis is back
MAX_PRESSES = 40  # arrow keys pressed at most to move a slider to a value
OPEN_TRIES = 8  # contexts opened at most to find each follower's replica


# --- the processes ------------------------------------------------------------------------


class Redis:
    """A ``redis-server`` on one loopback port that the test stops and starts again."""

    def __init__(self, log: Path):
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.log = log
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        """Start it, keeping its data in an append-only file as serve.py's Redis does."""
        cmd = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        cmd += ["--appendonly", "yes", "--appendfsync", "everysec", "--dir", str(self.log.parent)]
        with self.log.open("a") as handle:
            self.process = subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not self.answers():
            assert self.process.poll() is None, f"redis-server exited: {self.log.read_text()}"
            assert time.monotonic() < deadline, "redis-server did not answer within 20 s"
            time.sleep(0.1)

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


@dataclass
class Stack:
    """serve.py's process, its printed lines (read by a thread) and what they say."""

    process: subprocess.Popen
    lines: queue.Queue
    logs: Path
    base: str = ""
    key: str = ""
    replicas: dict[str, tuple[str, int]] = field(default_factory=dict)  # r1 -> (url, pid)

    def next_line(self, timeout_s: float) -> str:
        try:
            line = self.lines.get(timeout=timeout_s)
        except queue.Empty:
            raise AssertionError(f"serve.py printed nothing within {timeout_s:g} s") from None
        assert line is not None, f"serve.py ended: {self.process.poll()}\n{self.log_tail()}"
        return line

    def log_tail(self) -> str:
        out = []
        for log in sorted(self.logs.glob("*.log")):
            tail = log.read_text(errors="replace").strip().splitlines()[-15:]
            out.append(f"--- {log.name}\n" + "\n".join(tail))
        return "\n".join(out)


def _pump(process: subprocess.Popen, lines: queue.Queue) -> None:
    for line in process.stdout:
        lines.put(line.strip())
    lines.put(None)


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    if not (os.path.exists(REDIS_SERVER) and os.path.exists(HAPROXY)):
        pytest.skip("redis-server and haproxy are installed by scripts/test.sh")
    server = Redis(tmp_path_factory.mktemp("redis") / "redis.log")
    server.start()
    yield server
    server.kill()


@pytest.fixture(scope="module")
def stack(redis_server, tmp_path_factory):
    """``serve.py --replicas 2`` on a free port with the rooms in this module's Redis."""
    logs = tmp_path_factory.mktemp("serve")
    env = {k: v for k, v in os.environ.items() if k != "ATTENTION_LAB_PRESENTER_KEY"}
    env["ATTENTION_LAB_REDIS_URL"] = redis_server.url
    # the follow rule's own timings: no shipped lessons warmed behind the room (each replica
    # would load the real models meanwhile; that warm-up is test_lesson_prewarm.py's)
    env["ATTENTION_LAB_PREWARM"] = "off"
    port = free_port()
    # cold replicas, as a restarted stack has them (serve.py's warm-up is test_serve.py's)
    cmd = [sys.executable, str(SERVE), "--replicas", "2", "--port", str(port), "--no-warm"]
    process = subprocess.Popen(
        [*cmd, "--logs", str(logs)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_pump, args=(process, lines), daemon=True).start()
    found = Stack(process, lines, logs)
    try:
        for _ in range(2):
            match = REPLICA_LINE.match(found.next_line(START_S))
            assert match, "a replica line"
            found.replicas[f"r{match.group(1)}"] = (match.group(2), int(match.group(3)))
        assert found.next_line(60) == f"balancer: http://127.0.0.1:{port}"
        found.base = f"http://127.0.0.1:{port}"
        key = KEY_LINE.match(found.next_line(10))
        assert key, "the presenter key line"
        found.key = key.group(1)
        yield found
    finally:
        stop_process(process, 60)  # serve.py stops every process it started


# --- the page ------------------------------------------------------------------------------


def href(tab) -> str:
    return tab.evaluate("location.href")


def query(tab) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlsplit(href(tab)).query).items()}


def text(tab) -> str:
    return tab.locator('[data-testid="stApp"]').inner_text()


def first_part(lang: str, key: str, code: str) -> str:
    """The words of a room line before its code (the code is drawn as inline code)."""
    return t_in(lang, key, code="\0").split("\0")[0].strip()


def replica_of(context) -> str:
    return next((c["value"] for c in context.cookies() if c["name"] == COOKIE), "")


def healthy(url: str) -> bool:
    """Whether the replica at ``url`` answers its health check."""
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def active_sessions(url: str) -> int:
    with urllib.request.urlopen(f"{url}/_stcore/metrics", timeout=10) as response:
        metrics = response.read().decode()
    found = re.search(r"^active_sessions (\d+)$", metrics, re.M)
    assert found, metrics
    return int(found.group(1))


SCALING_DEFAULT_L = "10"  # the Scaling slider's default, which its binding leaves out of the URL
ON_VIEW_PARTS_JS = """([page, value, slider, fallback]) => {
    const app = document.querySelector('[data-testid="stApp"]');
    const input = document.querySelector(slider);
    return {
        page: location.pathname.endsWith('/' + page),
        link: (new URLSearchParams(location.search).get('scaling.seq_len') ?? fallback) === value,
        slider: input ? input.value : null,
        idle: !!app && app.getAttribute('data-test-script-state') === 'notRunning',
    };
}"""
ON_VIEW_JS = f"""(args) => {{
    const seen = ({ON_VIEW_PARTS_JS})(args);
    return seen.page && seen.link && seen.slider === args[1] && seen.idle;
}}"""
POLL_MS = 100  # timer polling: a frame callback (Playwright's default) waits for a paint


def wait_view(tab, page: str, value: str, deadline: float, what: str) -> float:
    """Wait until ``tab`` shows ``page`` with the first slider (L) at ``value``, by
    ``deadline`` (monotonic); return when it did. The URL, the slider and an idle script."""
    left_ms = max(1.0, (deadline - time.monotonic()) * 1000)
    try:
        tab.wait_for_function(
            ON_VIEW_JS,
            arg=[page, value, SLIDER, SCALING_DEFAULT_L],
            timeout=left_ms,
            polling=POLL_MS,
        )
    except Exception as err:  # Playwright's TimeoutError: say what the page shows instead
        parts = tab.evaluate(ON_VIEW_PARTS_JS, [page, value, SLIDER, SCALING_DEFAULT_L])
        shows = described(tab)
        raise AssertionError(
            f"{what}: not on {page} with L={value} in time: the checks {parts}; {shows}"
        ) from err
    return time.monotonic()


def wait_text(tab, words: str, deadline: float, what: str, *, gone: bool = False) -> float:
    """Wait until ``words`` are on ``tab``'s page (or, with ``gone``, no longer are)."""
    js = "([w, gone]) => document.body.innerText.includes(w) !== gone"
    left_ms = max(1.0, (deadline - time.monotonic()) * 1000)
    try:
        tab.wait_for_function(js, arg=[words, gone], timeout=left_ms)
    except Exception as err:
        state = "still there" if gone else "not shown"
        raise AssertionError(f"{what}: {words!r} {state} in time: {described(tab)}") from err
    return time.monotonic()


STATE_JS = r"""() => {
    const app = document.querySelector('[data-testid="stApp"]');
    return {url: location.href, app: !!app,
            script: app ? app.getAttribute('data-test-script-state') : null,
            stale: document.querySelectorAll('[data-stale="true"]').length,
            sidebar: (document.querySelector('[data-testid="stSidebarUserContent"]')
                || {innerText: ''}).innerText.slice(0, 300),
            sliders: Array.from(document.querySelectorAll('[data-testid="stSlider"]'))
                .map((s) => s.innerText.replace(/\s+/g, ' ').slice(0, 60)),
            main: (document.querySelector('[data-testid="stMain"]') || document.body)
                .innerText.slice(0, 700)};
}"""


def described(tab) -> str:
    """What ``tab`` shows, for a failed wait: its URL, whether the app is there, the
    script's state, how many elements are stale, its sliders' text, the main area's first
    words and the last console lines (a screenshot goes to ``artifacts/screenshots``)."""
    try:
        seen = tab.evaluate(STATE_JS)
    except Exception as err:  # a tab that no longer answers says so
        seen = {"evaluate": repr(err)[:200]}
    name = re.sub(r"[^a-z0-9]+", "-", urlsplit(tab.url).path.lower()).strip("-") or "root"
    shot = REPO / "artifacts" / "screenshots" / f"replicas-failed-{name}-{time.time():.0f}.png"
    try:
        shot.parent.mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(shot))
    except Exception as err:
        seen["screenshot"] = repr(err)[:200]
    return f"{seen}\nconsole: {getattr(tab, 'console', [])[-8:]}"


def move_slider(tab, key: str = "ArrowRight") -> str:
    """Move the page's first slider (L) one step; its new value once the run ended."""
    try:
        tab.locator(SLIDER).first.focus()
        tab.keyboard.press(key)
        wait_idle(tab)
    except Exception as err:  # Playwright's TimeoutError: say what the page shows instead
        raise AssertionError(f"the slider's move did not end: {described(tab)}") from err
    return query(tab)[SEQ]


TOP_JS = """() => { for (const el of document.querySelectorAll('*')) {
    if (el.scrollTop > 0) el.scrollTop = 0; } }"""


def shoot(tab, path: Path) -> None:
    """A screenshot once every chart is painted: the page's top (where the room's line is)
    and the sidebar's room part (its code, the key box, the follow switch or the presenting
    line) in view."""
    wait_painted(tab)
    tab.evaluate(TOP_JS)
    box = tab.locator(KEY_BOX)
    if box.count():  # the presentation view keeps the room's controls in a folded box
        box.scroll_into_view_if_needed()
    tab.wait_for_timeout(200)
    tab.screenshot(path=str(path))


def no_exception(tab) -> None:
    """No exception box on the page, and no uncaught error in its JavaScript."""
    boxes = tab.locator('[data-testid="stException"]')
    assert boxes.count() == 0, boxes.first.inner_text()
    assert not tab.errors, tab.errors


# --- the room ------------------------------------------------------------------------------


@dataclass
class Tab:
    who: str  # "presenter" or "follower"
    lang: str
    replica: str
    context: object
    page: object = None
    origin: str = ""  # the replica it first landed on

    def __post_init__(self):
        self.origin = self.origin or self.replica

    @property
    def name(self) -> str:
        return f"{self.who}-{self.lang}@{self.origin}"


@dataclass
class Room:
    code: str
    stack: Stack
    presenter: Tab
    followers: list[Tab]
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def other(self) -> str:
        return next(r for r in self.stack.replicas if r != self.presenter.replica)

    def on(self, replica: str) -> list[Tab]:
        """The followers that first landed on ``replica``."""
        return [f for f in self.followers if f.origin == replica]

    def follower(self, lang: str, replica: str) -> Tab:
        return next(f for f in self.followers if f.lang == lang and f.origin == replica)


def all_follow(
    room: Room,
    value: str,
    since: float,
    timing: str,
    *,
    tabs: list[Tab] | None = None,
    within: float = FOLLOW_S,
) -> None:
    """Wait until every follower (or each of ``tabs``) shows Scaling with L at ``value``,
    ``within`` seconds of ``since`` at the most; the slowest is ``room.timings[timing]``."""
    tabs = room.followers if tabs is None else tabs
    try:
        reached = [wait_view(f.page, "scaling", value, since + within, f.name) for f in tabs]
    except AssertionError as err:  # the replicas' own words on what happened
        raise AssertionError(f"{err}\n{room.stack.log_tail()}") from err
    room.timings[timing] = max(reached) - since


def presenter_slides(room: Room, expected: str, timing: str) -> None:
    """The presenter moves the slider one step (to ``expected``), every follower follows
    (timed as ``timing``), and no tab shows an exception."""
    moved = time.monotonic()
    value = move_slider(room.presenter.page)
    assert value == expected
    all_follow(room, value, moved, timing)
    for tab in (room.presenter, *room.followers):
        no_exception(tab.page)


def _land(browser, base: str) -> tuple[object, str]:
    """A new context (its own cookie jar) and the replica the balancer gave it."""
    context = browser.new_context(viewport=VIEWPORT)
    context.request.get(f"{base}/_stcore/health")
    replica = replica_of(context)
    assert replica in ("r1", "r2"), context.cookies()
    return context, replica


def _open(tab: Tab, url: str) -> None:
    tab.page = tab.context.new_page()
    tab.page.errors = []
    tab.page.console = []
    tab.page.on("pageerror", lambda exc: tab.page.errors.append(str(exc)))
    tab.page.on("console", lambda msg: tab.page.console.append(f"{msg.type}: {msg.text[:200]}"))
    tab.page.goto(url)
    tab.page.wait_for_selector("h1", timeout=60_000)
    wait_idle(tab.page)


@pytest.fixture(scope="module")
def room(stack, browser):
    """The presenter on one replica, followers in English and Chinese on the other, and a
    Chinese follower on the presenter's: contexts opened one after another, each given a
    role by the replica the round robin gave it."""
    code = f"rep-{secrets.token_hex(3)}"
    context, replica = _land(browser, stack.base)
    host = Tab("presenter", "en", replica, context)
    opened = [host]
    wanted = {("en", "other"), ("zh", "other"), ("zh", "same")}
    followers = []
    try:
        for _ in range(OPEN_TRIES):
            if not wanted:
                break
            context, replica = _land(browser, stack.base)
            side = "same" if replica == host.replica else "other"
            lang = next((lang for lang, s in sorted(wanted) if s == side), None)
            if lang is None:  # this replica has its followers already
                context.close()
                continue
            wanted.discard((lang, side))
            followers.append(Tab("follower", lang, replica, context))
            opened.append(followers[-1])
        assert not wanted, f"the round robin never gave {wanted}"
        yield Room(code, stack, host, followers)
    finally:
        for tab in opened:
            tab.context.close()


# --- the steps -----------------------------------------------------------------------------


def test_1_presenter_and_followers_on_both_replicas(room):
    host, stack = room.presenter, room.stack
    start = time.monotonic()
    _open(host, f"{stack.base}/?room={room.code}")
    host.page.locator(KEY_BOX).fill(stack.key)
    host.page.keyboard.press("Enter")
    wait_idle(host.page)
    wait_text(host.page, first_part("en", "room.presenting", room.code), start + 60, "presenting")
    for tab in room.followers:
        lang = "&lang=zh" if tab.lang == "zh" else ""
        _open(tab, f"{stack.base}/?room={room.code}{lang}")
        words = first_part(tab.lang, "room.following", room.code)
        wait_text(tab.page, words, time.monotonic() + 30, f"{tab.name} follows")
        assert replica_of(tab.context) == tab.replica  # kept on its replica
    sessions = {r: active_sessions(url) for r, (url, _pid) in stack.replicas.items()}
    room.timings["open_s"] = time.monotonic() - start
    print(
        f"\nroom {room.code}: presenter on {host.replica}; followers "
        f"{[t.name for t in room.followers]}; active_sessions {sessions}"
    )
    assert sessions[host.replica] >= 1 + len(room.on(host.replica)), sessions
    assert sessions[room.other] >= len(room.on(room.other)) >= 2, sessions
    for tab in (host, *room.followers):
        no_exception(tab.page)


def test_2_followers_follow_a_page_change_and_a_slider_on_either_replica(room, screenshot_dir):
    host = room.presenter.page
    host.locator(NAV).get_by_text(t_in("en", "common.page_scaling"), exact=True).click()
    moved = time.monotonic()
    wait_view(host, "scaling", "10", moved + 60, "the presenter on Scaling")
    all_follow(room, "10", moved, "page_change_s")
    presenter_slides(room, "11", "slider_s")

    shoot(host, screenshot_dir / "replicas-presenter-en.png")
    for lang in ("en", "zh"):
        tab = room.follower(lang, room.other)
        shoot(tab.page, screenshot_dir / f"replicas-follower-{lang}.png")
    # the presenter in Chinese: the same session goes on presenting (the key is its own)
    host.locator('[data-testid="stSidebar"] label').filter(has_text="中文").first.click()
    wait_idle(host)
    wait_text(
        host,
        first_part("zh", "room.presenting", room.code),
        time.monotonic() + 30,
        "presenting in Chinese",
    )
    room.presenter.lang = "zh"
    shoot(host, screenshot_dir / "replicas-presenter-zh.png")
    print(f"\ntimings so far: {room.timings}")


def test_3_a_killed_replica_s_followers_reconnect_to_the_live_one(room):
    stack, host = room.stack, room.presenter.page
    url, pid = stack.replicas[room.other]
    moved_away = room.on(room.other)
    os.kill(pid, signal.SIGKILL)  # the replica that holds two followers, not the presenter
    killed = time.monotonic()
    value = move_slider(host)  # a move the dead replica's followers have not seen
    assert value == "12"
    all_follow(room, value, killed, "reconnect_s", within=RECONNECT_S)
    reported = stack.next_line(10)
    assert reported.startswith(f"replica {room.other[1]} exited"), reported
    # serve.py starts the replica again on its port and says so with its new pid
    restarted = stack.next_line(20)
    while not restarted.startswith(f"replica {room.other[1]}: "):
        restarted = stack.next_line(20)
    found = REPLICA_LINE.match(restarted)
    assert found and found.group(2) == url and int(found.group(3)) != pid, restarted
    stack.replicas[room.other] = (url, int(found.group(3)))
    deadline = time.monotonic() + RECONNECT_S
    while not healthy(url):
        assert time.monotonic() < deadline, "the restarted replica did not answer"
        time.sleep(0.5)
    # each moved tab reconnected to a live replica: the other one (the balancer's redispatch
    # while its own was down) or its own, started again
    for tab in moved_away:
        tab.replica = replica_of(tab.context)
        assert tab.replica in stack.replicas, tab.context.cookies()
    held = sum(active_sessions(u) for u, _pid in stack.replicas.values())
    assert held >= 1 + len(room.followers)
    room.timings["replica_back_s"] = time.monotonic() - killed

    presenter_slides(room, "13", "after_kill_slider_s")
    print(f"\ntimings so far: {room.timings}")


def test_4_redis_down_and_back(room, redis_server, screenshot_dir):
    tabs = [room.presenter, *room.followers]
    redis_server.kill()
    down = time.monotonic()
    for tab in tabs:
        words = first_part(tab.lang, "room.unreachable", room.code)
        wait_text(tab.page, words, down + NOTICE_S, f"{tab.name}: the unreachable line")
    room.timings["notice_s"] = time.monotonic() - down
    for tab in tabs:
        assert text(tab.page).count(first_part(tab.lang, "room.unreachable", room.code)) == 1

    # a follower who explores on their own: their page works alone (its chart repaints)
    learner = room.follower("en", room.other)
    learner.page.get_by_text(t_in("en", "room.explore"), exact=True).click()
    wait_text(learner.page, t_in("en", "room.exploring"), time.monotonic() + 15, "exploring")
    charts = learner.page.locator('[data-testid="stVegaLiteChart"]').first
    before = charts.inner_html()
    shown = query(learner.page)[SEQ]
    value = move_slider(learner.page, "ArrowLeft")
    assert int(value) == int(shown) - 1
    learner.page.wait_for_function(
        "(before) => { const c = document.querySelector('[data-testid=\"stVegaLiteChart\"]');"
        " return !!c && c.innerHTML !== before; }",
        arg=before,
        timeout=15_000,
    )
    wait_painted(learner.page)
    no_exception(learner.page)
    shoot(learner.page, screenshot_dir / "replicas-redis-down-en.png")
    chinese = room.follower("zh", room.other)
    shoot(chinese.page, screenshot_dir / "replicas-redis-down-zh.png")
    ahead = int(query(room.presenter.page)[SEQ]) + 1
    value = move_slider(room.presenter.page)  # the presenter moves while Redis is down
    assert int(value) == ahead
    no_exception(room.presenter.page)

    redis_server.start()  # the same port and the same append-only file: the room is kept
    back = time.monotonic()
    following = [f for f in room.followers if f is not learner]
    all_follow(room, value, back, "caught_up_s", tabs=following, within=CATCH_UP_S)
    for tab in tabs:
        words = first_part(tab.lang, "room.unreachable", room.code)
        wait_text(tab.page, words, back + NOTICE_S, f"{tab.name}: the line goes", gone=True)
    room.timings["back_s"] = time.monotonic() - back
    for f in room.followers:
        assert first_part(f.lang, "room.ended", room.code) not in text(f.page)
    assert query(learner.page)[SEQ] == str(int(shown) - 1)  # still their own view
    learner.page.get_by_text(t_in("en", "room.follow_again"), exact=True).click()
    wait_view(learner.page, "scaling", value, time.monotonic() + FOLLOW_S, "following again")
    for tab in tabs:
        no_exception(tab.page)
    print(f"\ntimings: {room.timings}")


def slider_of(tab, label: str):
    """The thumb of the slider labelled ``label`` on ``tab``."""
    box = tab.locator('[data-testid="stSlider"]').filter(has_text=label).first
    return box.locator('input[type="range"]').first


def press_to(tab, label: str, key: str, name: str, target: str) -> None:
    """Press ``key`` on the slider labelled ``label``, a press at a time, until the link's
    ``name`` reads ``target`` (a loaded server's run can swallow a press). The slider is
    focused again before each press: a run that redraws it (its range moved with another
    slider) takes the focus with the old one."""
    wait_idle(tab)
    for _ in range(MAX_PRESSES):
        if query(tab).get(name) == target:
            return
        slider_of(tab, label).focus()
        tab.keyboard.press(key)
        tab.wait_for_timeout(50)
        if query(tab).get(name) != target:
            wait_idle(tab)
    assert query(tab).get(name) == target, described(tab)


def test_5_a_range_that_shrinks_under_a_value_moves_every_follower_to_the_nearest(room):
    """The presenter on Properties sets L = 16 and the leak cut-off to 14, then lowers L to 4
    with the arrow keys: every follower, on either replica, ends on L 4 and the cut-off 2
    (the nearest the new range 0..2 allows), locked, with no exception."""
    host, lang = room.presenter.page, room.presenter.lang
    host.locator(NAV).get_by_text(t_in(lang, "common.page_properties"), exact=True).click()
    wait_idle(host)
    length, cutoff = t_in(lang, "common.ctl_seq_len"), t_in(lang, "properties.ctl_cutoff")
    press_to(host, length, "ArrowRight", "properties.seq_len", "16")
    press_to(host, cutoff, "ArrowRight", "properties.cutoff", "14")
    moved = time.monotonic()
    press_to(host, length, "ArrowLeft", "properties.seq_len", "4")
    wait_idle(host)
    for f in room.followers:
        f.page.wait_for_function(
            "() => { const q = new URLSearchParams(location.search);"
            " return q.get('properties.seq_len') === '4' && q.get('properties.cutoff') === '2'; }",
            timeout=FOLLOW_S * 1000,
        )
        assert t_in(f.lang, "room.locked_line") in text(f.page)  # still following, locked
        no_exception(f.page)
    room.timings["shrunk_range_s"] = time.monotonic() - moved
    no_exception(host)
    print(f"\ntimings: {room.timings}")


LESSON = "self-attention-20"
LANDING = "intuition"  # the page whose header lists the lessons as links (dashboard/landing.py)
PAGE_LINK = '[data-testid="stPageLink"]'
EXPANDER = '[data-testid="stExpander"]'
STEP_JS = """([page, step, pairs, words]) => {
    const app = document.querySelector('[data-testid="stApp"]');
    const q = new URLSearchParams(location.search);
    return location.pathname.endsWith('/' + page) && q.get('lesson.step') === step
        && pairs.every(([key, value]) => q.get(key) === value)
        && !!app && words.every((w) => app.innerText.includes(w));
}"""
WATCH_JS = f"""(arg) => {{
    const shows = {STEP_JS};
    clearInterval(window.__stepWatch);
    window.__stepSeen = null;
    window.__stepWatch = setInterval(() => {{
        if (shows(arg)) {{ window.__stepSeen = Date.now(); clearInterval(window.__stepWatch); }}
    }}, 50);
}}"""


def back_on_their_replicas(room: Room) -> dict[str, int]:
    """The room on both replicas again: after test 3 the balancer keeps the killed
    replica's followers on the live one (their cookie names it), so each follower not on
    the replica it first landed on reloads its tab with that replica's cookie (a new
    session, following, as any learner's reload). Each replica's ``active_sessions``."""
    for f in room.followers:
        if replica_of(f.context) != f.origin:
            f.context.add_cookies([{"name": COOKIE, "value": f.origin, "url": room.stack.base}])
            f.page.reload()
            f.page.wait_for_selector("h1", timeout=60_000)
            wait_idle(f.page)
            words = first_part(f.lang, "room.following", room.code)
            wait_text(f.page, words, time.monotonic() + 30, f"{f.name} follows after a reload")
        assert replica_of(f.context) == f.origin, f.context.cookies()
        f.replica = f.origin
    sessions = {r: active_sessions(url) for r, (url, _pid) in room.stack.replicas.items()}
    assert sessions[room.other] >= len(room.on(room.other)) >= 2, sessions
    assert sessions[room.presenter.replica] >= 1 + len(room.on(room.presenter.replica)), sessions
    return sessions


def step_shown(lesson, number: int, tab: Tab) -> list:
    """What ``tab`` shows on step ``number``: the arguments of :data:`STEP_JS` (its page, the
    step in the link, the step's values, and the bar's "Step K of N", title and what to
    notice, which the presentation view keeps one click away)."""
    step, lang = lesson.steps[number - 1], tab.lang
    words = [t_in(lang, "lesson.step_of", k=number, n=len(lesson.steps)), step.title(lang)]
    if "present=true" not in tab.page.url:
        words.append(step.notice(lang))
    return [step.page, str(number), [list(pair) for pair in step.query], words]


def wait_step(tab: Tab, lesson, number: int, deadline: float) -> float:
    """Wait until ``tab`` shows step ``number`` of ``lesson`` (:func:`step_shown`)."""
    left_ms = max(1.0, (deadline - time.monotonic()) * 1000)
    try:
        tab.page.wait_for_function(STEP_JS, arg=step_shown(lesson, number, tab), timeout=left_ms)
    except Exception as err:
        shows = described(tab.page)
        raise AssertionError(f"{tab.name}: not on step {number} in time: {shows}") from err
    return time.monotonic()


def followers_reach(room: Room, lesson, number: int, press) -> dict[str, float]:
    """``press()`` (the presenter's click), the presenter on step ``number`` and still
    presenting, and for each follower the seconds from the click to its page showing that
    step, each within :data:`FOLLOW_S`: a watcher in each follower's page notes when (every
    50 ms), so that waiting for one follower adds nothing to another's time."""
    host = room.presenter
    for f in room.followers:
        f.page.evaluate(WATCH_JS, step_shown(lesson, number, f))
    clicked, since = time.time(), time.monotonic()
    press()
    presenting = first_part(host.lang, "room.presenting", room.code)
    try:
        wait_step(host, lesson, number, since + 60)
    except AssertionError as err:
        still = presenting in text(host.page)
        raise AssertionError(f"{err}\nthe presenter's tab still presents: {still}") from err
    wait_idle(host.page)
    assert presenting in text(host.page), f"no longer presenting: {described(host.page)}"
    seen = {}
    for f in room.followers:
        left_ms = max(1.0, (since + FOLLOW_S - time.monotonic()) * 1000)
        try:
            f.page.wait_for_function("() => window.__stepSeen !== null", timeout=left_ms)
        except Exception as err:
            shown = step_shown(lesson, number, f)
            raise AssertionError(f"{f.name}: not {shown} in time: {described(f.page)}") from err
        seen[f.name] = round(f.page.evaluate("window.__stepSeen") / 1000 - clicked, 2)
    assert all(s <= FOLLOW_S for s in seen.values()), seen
    return seen


def open_more(tab) -> None:
    """Open the lesson bar's "More" popover (its label: "What to notice" when presenting)."""
    names = [t_in(tab.lang, key) for key in ("lesson.more", "lesson.notice_more")]
    more = tab.page.get_by_role("button", name=re.compile("|".join(map(re.escape, names))))
    more.first.click()
    tab.page.locator('[data-testid="stPopoverBody"]').first.wait_for(timeout=10_000)


def notes_for_the_presenter_alone(room: Room, lesson, number: int) -> None:
    """On step ``number``: the presenter's bar has Back and Next, and the notes when the step
    has some (unfolded, they read the step's notes); no follower's page has Back, Next, the
    notes' label or, in either language, the notes."""
    step, host = lesson.steps[number - 1], room.presenter
    for key in ("lesson.back", "lesson.next"):
        named = host.page.get_by_role("button", name=t_in(host.lang, key), exact=True)
        assert named.count() == 1, f"the presenter's {key} on step {number}"
    open_more(host)  # the notes are in the bar's "More"
    notes = host.page.locator(EXPANDER).filter(has_text=t_in(host.lang, "lesson.notes"))
    if step.notes is None:
        assert notes.count() == 0, f"notes on step {number}, which has none"
    else:
        assert notes.count() == 1, f"the presenter's notes on step {number}"
        notes.locator("summary").click()
        wait_text(host.page, step.notes(host.lang), time.monotonic() + 10, "the notes unfold")
    host.page.keyboard.press("Escape")
    for f in room.followers:
        open_more(f)
        shown = text(f.page)
        f.page.keyboard.press("Escape")
        for key in ("lesson.back", "lesson.next", "lesson.notes"):
            assert t_in(f.lang, key) not in shown, f"{f.name} shows {key} on step {number}"
            assert f.page.get_by_role("button", name=t_in(f.lang, key)).count() == 0
        for notes_lang in ("en", "zh") if step.notes is not None else ():
            assert step.notes(notes_lang) not in shown, f"{f.name} reads the notes"


def presentation_on(tab) -> None:
    """Tick the tab's own presentation-view switch (a follower's is not locked)."""
    sidebar = tab.page.locator('[data-testid="stSidebar"]')
    sidebar.get_by_text(t_in(tab.lang, "common.present_label"), exact=True).click()
    tab.page.wait_for_function(
        "() => new URLSearchParams(location.search).get('present') === 'true'",
        timeout=FOLLOW_S * 1000,
    )
    wait_idle(tab.page)


def test_6_the_room_follows_a_lesson_across_both_replicas_without_the_presenter_s_notes(
    room, screenshot_dir
):
    """The presenter, in the session that typed the key, goes to the landing page, opens
    "Self-attention in 20 minutes" from its header and presses Next past the step with notes
    to a step on another page; every follower shows each step within :data:`FOLLOW_S`."""
    host, lang = room.presenter, room.presenter.lang
    lesson = shipped_lessons()[LESSON]
    noted = next(k for k, step in enumerate(lesson.steps, start=1) if step.notes is not None)
    away = next(
        k
        for k in range(noted + 1, len(lesson.steps) + 1)
        if lesson.steps[k - 1].page != lesson.steps[noted - 1].page
    )
    for tab in (host, *room.followers):
        assert not tab.page.is_closed(), tab.name
    sessions = back_on_their_replicas(room)
    print(
        f"\nlesson: presenter {host.name} in {lang} on {replica_of(host.context)}; followers "
        f"{[(f.name, replica_of(f.context)) for f in room.followers]}; sessions {sessions}"
    )
    page = host.page
    page.locator(NAV).get_by_text(t_in(lang, f"common.page_{LANDING}"), exact=True).click()
    link = page.locator(PAGE_LINK).filter(has_text=lesson.title(lang))
    link.wait_for(timeout=60_000)
    wait_idle(page)
    timings = {1: followers_reach(room, lesson, 1, link.click)}
    notes_for_the_presenter_alone(room, lesson, 1)
    ahead = page.get_by_role("button", name=t_in(lang, "lesson.next"), exact=True)
    viewer = room.follower("zh", room.other)
    for number in range(2, away + 1):
        if number == away:  # a follower's presentation view stays on as the page changes
            presentation_on(viewer)
        timings[number] = followers_reach(room, lesson, number, ahead.click)
        notes_for_the_presenter_alone(room, lesson, number)
        if number == noted:
            shoot(page, screenshot_dir / f"lesson-presenter-{lang}.png")
            for flang in ("en", "zh"):
                tab = room.follower(flang, room.other)
                shoot(tab.page, screenshot_dir / f"lesson-follower-{flang}.png")
    viewer.page.wait_for_function(
        "() => new URLSearchParams(location.search).get('present') === 'true'",
        timeout=FOLLOW_S * 1000,
    )
    wait_idle(viewer.page)
    wait_step(viewer, lesson, away, time.monotonic() + FOLLOW_S)
    assert t_in("zh", "common.present_controls") in text(viewer.page)  # the folded controls
    shoot(viewer.page, screenshot_dir / "lesson-follower-presentation-zh.png")
    room.timings["lesson_step_s"] = max(s for seen in timings.values() for s in seen.values())
    print(f"\nlesson steps, seconds from the click to each follower: {timings}")
    for tab in (host, *room.followers):
        no_exception(tab.page)
