"""``scripts/serve.py`` looks after what it started (issue: the stack survives its parts):
Redis keeps the rooms in its append-only file, so a Redis killed with SIGKILL is started
again on its port with the same room (view, question, answers); a replica killed the same way
is started again on its port, healthy without warm-up, and the balancer serves throughout;
SIGTERM then stops the restarted processes too. Each restart prints the part's line again with
its new pid, and the measured times are printed (``-s`` shows them).
"""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from bench.browser import free_port, patient, stop_process

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
SERVE = REPO / "scripts" / "serve.py"
REDIS_LINE = re.compile(r"^redis: redis://127\.0\.0\.1:(\d+)/0 pid (\d+)$")
REPLICA_LINE = re.compile(r"^replica (\d): (http://127\.0\.0\.1:\d+) pid (\d+)$")
START_S = patient(180)
RESTART_LINE_S = patient(15)
REDIS_BACK_S = patient(15)
REPLICA_HEALTHY_S = patient(90)
FSYNC_WAIT_S = 1.2  # Redis syncs its append-only file every second (appendfsync everysec)
STOP_S = patient(60)
ROOM = "restart"


class Lines:
    """serve.py's output, read by a thread: every line so far, and the next one that matches."""

    def __init__(self, process: subprocess.Popen):
        self.seen: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, args=(process,), daemon=True).start()

    def _read(self, process: subprocess.Popen) -> None:
        for line in process.stdout:
            self._queue.put(line.strip())
        self._queue.put("")  # serve.py ended

    def next(self, pattern: re.Pattern, timeout_s: float) -> re.Match:
        """The next line that matches ``pattern`` (others are kept in ``seen``)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._queue.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no line like {pattern.pattern} in {timeout_s} s: {self.seen}")
            assert line, f"serve.py ended: {self.seen}"
            self.seen.append(line)
            if found := pattern.match(line):
                return found


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """serve.py with two cold replicas, its data in a folder of its own; its lines and the
    first parts' matches (``redis``, ``replica 1``, ``replica 2``)."""
    if not all(os.path.exists(p) for p in ("/usr/bin/redis-server", "/usr/sbin/haproxy")):
        pytest.skip("redis-server and haproxy are installed by scripts/test.sh")
    folder = tmp_path_factory.mktemp("serve-restarts")
    port = free_port()
    cmd = [sys.executable, str(SERVE), "--replicas", "2", "--no-warm", "--port", str(port)]
    cmd += ["--logs", str(folder / "logs"), "--data", str(folder / "data")]
    process = subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        lines = Lines(process)
        first = {"redis": lines.next(REDIS_LINE, START_S)}
        for _ in range(2):
            found = lines.next(REPLICA_LINE, START_S)
            first[f"replica {found.group(1)}"] = found
        lines.next(re.compile(rf"^balancer: http://127\.0\.0\.1:{port}$"), START_S)
        yield process, port, lines, first
    finally:
        stop_process(process, STOP_S)


def _redis_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except OSError:
        return 0


def _seconds_until(check, timeout_s: float, since: float) -> float:
    """Seconds from ``since`` until ``check()`` holds, polled every 50 ms; fails past the
    timeout."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout_s} s"
        time.sleep(0.05)
    return time.monotonic() - since


def test_a_killed_redis_starts_again_on_its_port_with_the_room(stack):
    from dashboard.rooms.redis_store import RedisRoomStore
    from dashboard.rooms.store import Question, View

    _, _, lines, first = stack
    port, pid = first["redis"].group(1), int(first["redis"].group(2))
    url = f"redis://127.0.0.1:{port}/0"
    store = RedisRoomStore(url)
    try:
        store.present(ROOM, "presenter", take_over=True)
        view = View.of("scaling", {"scaling.seq_len": "64"})
        published = store.publish(ROOM, view)
        asked = store.ask(ROOM, Question("", "Which one grows as L²?", ("dense", "local"), 0))
        number = asked.poll.number
        for voter, choice in (("ada", 0), ("bo", 1), ("cy", 0)):
            before = store.answer(ROOM, voter, choice, number)
    finally:
        store.close()
    assert before.poll.tally == (2, 1)
    time.sleep(FSYNC_WAIT_S)
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    again = lines.next(REDIS_LINE, RESTART_LINE_S)
    assert again.group(1) == port and int(again.group(2)) != pid
    back_s = _seconds_until(lambda: _redis_answers(int(port)), REDIS_BACK_S, killed)
    print(f"\nredis answered again {back_s:.2f} s after SIGKILL (pid {again.group(2)})")
    fresh = RedisRoomStore(url)
    try:
        room = fresh.get(ROOM)
    finally:
        fresh.close()
    assert room is not None, "the room was lost with its Redis"
    assert (room.view, room.version) == (view, published.version)
    assert room.poll.number == number and room.poll.tally == (2, 1)
    assert room.poll.question == asked.poll.question and room.presenter == "presenter"


def test_a_killed_replica_starts_again_on_its_port_and_serves(stack):
    _, port, lines, first = stack
    url, pid = first["replica 1"].group(2), int(first["replica 1"].group(3))
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    again = lines.next(REPLICA_LINE, RESTART_LINE_S)
    assert again.group(1, 2) == ("1", url) and int(again.group(3)) != pid
    assert any(line.startswith("replica 1 exited with code -9") for line in lines.seen)
    healthy_s = _seconds_until(
        lambda: _status(url + "/_stcore/health") == 200, REPLICA_HEALTHY_S, killed
    )
    print(f"\nreplica 1 healthy again {healthy_s:.2f} s after SIGKILL, not warmed")
    assert _status(f"http://127.0.0.1:{port}/") == 200  # the balancer serves


def test_sigterm_stops_the_restarted_processes_too(stack):
    process, _, lines, _ = stack
    pids = [int(m.group(2)) for line in lines.seen if (m := REDIS_LINE.match(line))]
    pids += [int(m.group(3)) for line in lines.seen if (m := REPLICA_LINE.match(line))]
    assert len(pids) >= 3, lines.seen  # after the tests above: two of Redis, three replicas
    os.kill(process.pid, signal.SIGTERM)
    assert process.wait(timeout=STOP_S) == 0
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
