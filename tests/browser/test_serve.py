"""The real stack on one machine: ``scripts/serve.py --replicas 2`` starts
``redis-server``, two Streamlit replicas and HAProxy with ``deploy/haproxy.cfg``; the balancer
gives each new browser a cookie naming its replica and keeps it there, passes the websocket
upgrade through, sends a tab whose replica died to a live one; SIGTERM stops every process by
its pid; a missing program is refused in one line with the apt-get that fixes it. Before the
balancer starts, every page has run once on each replica (``scripts/warm.py``), and a page
that cannot be opened is named; the benches wait for the warmed stack to be quiet.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from bench.browser import free_port, page_names, patient
from dashboard.serving.warm import shipped_lesson_links

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
SERVE = REPO / "scripts" / "serve.py"
REDIS_LINE = re.compile(r"^redis: redis://127\.0\.0\.1:\d+/0 pid \d+$")
REPLICA_LINE = re.compile(r"^replica (\d): http://127\.0\.0\.1:(\d+) pid (\d+)$")
# two replicas warming every page, Heads at work's census among them (47 s a core, AMD EPYC)
START_S = patient(480)
COOKIE = "LABREPLICA"


def _read_line(process: subprocess.Popen, deadline: float) -> str:
    line = process.stdout.readline()
    assert line, f"serve.py ended early: {process.poll()}"
    assert time.monotonic() < deadline, "serve.py took too long"
    return line.strip()


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("serve-logs")


@pytest.fixture(scope="module")
def stack(logs):
    """serve.py with two replicas on a free port; its printed lines."""
    if not all(os.path.exists(p) for p in ("/usr/bin/redis-server", "/usr/sbin/haproxy")):
        pytest.skip("redis-server and haproxy are installed by scripts/test.sh")
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVE), "--replicas", "2", "--port", str(port), "--logs", str(logs)]
        + ["--data", str(logs / "data")],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + START_S
    try:
        lines = [_read_line(process, deadline) for _ in range(5)]
        assert REDIS_LINE.match(lines[0]), lines  # Redis first, then the lines below
        yield process, port, lines[1:]
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()


def _get(port: int, path: str = "/", cookie: str = "") -> tuple[int, str]:
    """Status and the replica cookie the balancer set ("" when it set none)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if cookie:
        request.add_header("Cookie", f"{COOKIE}={cookie}")
    with urllib.request.urlopen(request, timeout=10) as response:
        found = re.search(rf"{COOKIE}=(\w+)", response.headers.get("Set-Cookie", ""))
        return response.status, found.group(1) if found else ""


def _upgrade(port: int, cookie: str) -> str:
    """The status line of a websocket upgrade to Streamlit's stream through the balancer."""
    request = (
        "GET /_stcore/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        f"Sec-WebSocket-Version: 13\r\nCookie: {COOKIE}={cookie}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request.encode())
        return sock.recv(256).decode(errors="replace").splitlines()[0]


def test_the_stack_starts_prints_its_parts_and_keeps_a_tab_on_its_replica(stack):
    process, port, lines = stack
    replicas = [REPLICA_LINE.match(line) for line in lines[:2]]
    assert all(replicas), lines
    assert [m.group(1) for m in replicas] == ["1", "2"]
    assert lines[2] == f"balancer: http://127.0.0.1:{port}"
    assert re.fullmatch(r"presenter key: \S{16} \(set ATTENTION_LAB_PRESENTER_KEY .*\)", lines[3])
    for match in replicas:  # each replica healthy on its own port
        url = f"http://127.0.0.1:{match.group(2)}/_stcore/health"
        assert urllib.request.urlopen(url, timeout=10).status == 200
    first, second = _get(port)[1], _get(port)[1]
    assert {first, second} == {"r1", "r2"}  # new browsers are spread over the replicas
    assert _get(port, cookie="r2") == (200, "")  # a known browser keeps its replica
    assert _upgrade(port, "r1").startswith("HTTP/1.1 101")  # the websocket goes through


def test_every_page_ran_on_each_replica_before_the_balancer_started(stack, logs):
    """serve.py warms each replica (each page and each shipped lesson's step opened once on
    its own port) before it prints the replicas' lines; a page that failed would be a line
    of its own in the log, and a failed warm-up a line before the replicas' lines (the
    fixture's first line)."""
    _, _, lines = stack
    pages, steps = len(page_names()), len(shipped_lesson_links())
    summary = re.compile(
        rf"warmed http://127\.0\.0\.1:(\d+): {pages} pages and {steps} lesson steps in .* s"
    )
    log = (logs / "warm.log").read_text()
    warmed = [summary.fullmatch(line) for line in log.splitlines()]
    assert all(warmed), f"a page that did not run cleanly, or a line of another kind:\n{log}"
    assert [m.group(1) for m in warmed] == [REPLICA_LINE.match(s).group(2) for s in lines[:2]]


def test_a_new_data_folder_gets_its_lessons_folder_and_no_replica_warns_of_it(stack, logs):
    """serve.py names ``<data>/lessons`` as every replica's lessons folder and makes it when
    it is missing: a first start's replica logs say nothing of a folder they cannot read."""
    assert (logs / "data" / "lessons").is_dir()
    for name in ("replica-1.log", "replica-2.log"):
        text = (logs / name).read_text()
        assert "cannot be read" not in text, f"{name}:\n{text[-2000:]}"


def _warm(address: str) -> subprocess.CompletedProcess:
    """``python -m scripts.warm ADDRESS``, as serve.py runs it."""
    return subprocess.run(
        [sys.executable, "-m", "scripts.warm", address],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_warm_names_each_page_it_could_not_open():
    port = free_port()  # nothing listens there
    result = _warm(f"http://127.0.0.1:{port}")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    pages, steps = len(page_names()), len(shipped_lesson_links())
    assert lines[0].startswith(f"warmed http://127.0.0.1:{port}: {pages} pages and {steps} lesson")
    assert len(lines) == 1 + pages + steps
    assert all("Connect" in line or "refused" in line for line in lines[1:]), lines
    refused = _warm(f"127.0.0.1:{port}")
    assert refused.returncode == 2
    assert "an address starts with http://" in refused.stderr


def test_a_dead_replica_sends_its_tabs_to_a_live_one(stack):
    process, port, lines = stack
    pid = int(REPLICA_LINE.match(lines[0]).group(3))
    os.kill(pid, signal.SIGKILL)
    reported = _read_line(process, time.monotonic() + 30)
    assert reported.startswith("replica 1 exited"), reported
    assert _get(port, cookie="r1") == (200, "r2")  # redispatched, and told its new replica
    assert _upgrade(port, "r2").startswith("HTTP/1.1 101")


def test_sigterm_stops_every_process_it_started(stack):
    process, port, lines = stack
    pids = [int(REPLICA_LINE.match(line).group(3)) for line in lines[:2]]
    os.kill(process.pid, signal.SIGTERM)
    assert process.wait(timeout=60) == 0
    assert process.stdout.read().strip().endswith("stopped every process")
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2)


@pytest.mark.parametrize(
    ("env", "program"),
    [({}, "redis-server"), ({"ATTENTION_LAB_REDIS_URL": "redis://127.0.0.1:1/0"}, "haproxy")],
)
def test_a_missing_program_is_one_line_with_its_apt_get(env, program):
    result = subprocess.run(
        [sys.executable, str(SERVE), "--replicas", "1", "--port", str(free_port())],
        cwd=REPO,
        env={**os.environ, **env, "PATH": "/nonexistent"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"{program} is missing: install it with `apt-get install -y {program}`"
    )


def test_a_stack_is_quiet_once_its_process_tree_stops_using_cpu():
    """The load benches wait for the warmed stack's background work (bench.replicas) by the
    CPU time of serve.py's process tree: a tree with a busy child is not quiet, one whose
    children sleep is."""
    from bench import replicas

    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    spinner = "import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'while 1: pass']);"
    busy = subprocess.Popen([sys.executable, "-c", spinner + " import time; time.sleep(60)"])
    idle = subprocess.Popen(sleeper)
    try:
        time.sleep(1.0)
        assert not replicas.wait_until_quiet(busy.pid, timeout_s=3.0)
        assert replicas.wait_until_quiet(idle.pid, timeout_s=3.0)
    finally:
        import psutil

        for process in (busy, idle):
            for child in psutil.Process(process.pid).children(recursive=True):
                child.kill()
            process.kill()
            process.wait()
