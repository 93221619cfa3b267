"""Run Attention Lab as several replicas behind a real load balancer, on one machine.

Usage: ``python scripts/serve.py --replicas N --port P [--address A] [--logs DIR] [--data DIR]
[--no-warm]``. Starts, each as its own process and stopped by its own pid:

1. ``redis-server`` on a free loopback port, where the rooms live (unless
   ``ATTENTION_LAB_REDIS_URL`` names a Redis server already), with an append-only file synced
   every second in the data folder: ``--data``, by default ``attention-lab/rooms`` in the
   user's state folder (``$XDG_STATE_HOME``, else ``~/.local/state``), the same wherever
   serve.py starts and outside any checkout. A Redis killed and started again keeps its rooms
   (all but at most the last second), as does a serve.py started again on the same folder;
   one serve.py at a time holds a folder (a lock file in it), a second is refused in one line;
2. N Streamlit replicas of ``dashboard/app.py`` on free loopback ports, with one cookie secret
   (``ATTENTION_LAB_COOKIE_SECRET``, else one made now), one presenter key
   (``ATTENTION_LAB_PRESENTER_KEY``, else one made now and printed last) and the machine's
   cores shared out among them (each replica's CPU affinity, which its torch threads follow),
   and one lessons folder (``ATTENTION_LAB_LESSONS_DIR``, else ``lessons`` in the data folder:
   the operator's lessons, read by every replica; a lesson a presenter loads is kept by the
   room, in Redis, for the room's learners on every replica);
3. HAProxy on ``A:P`` with ``deploy/haproxy.cfg`` (cookie affinity, websockets passed through,
   health checks on ``/_stcore/health``), its server lines appended for the replicas.

It prints ``redis: redis://127.0.0.1:PORT/0 pid PID`` once Redis answers, then waits until each
replica is healthy and warms it (``python -m scripts.warm``, output in ``warm.log``: every page
and every shipped lesson's step opened once through the replica's own port; ``--no-warm``
skips it; a failure is one line on stderr and the replicas serve anyway), prints
``replica K: http://127.0.0.1:PORT pid PID`` per replica and then ``balancer: http://A:P``.

Then it looks after what it started: a replica or Redis that exits is said in one line and
started again on the same port (the balancer's server lines and the replicas' Redis URL stay
valid) after 1, 2, 4 … s, at most 30 (``scripts/supervise.py``), and its line is printed again
with the new pid. A restarted replica is not warmed; the balancer's health check puts it back
in rotation. A part restarted 5 times within 5 minutes is left down, in one line. When the
balancer exits serve.py stops; on Ctrl-C or SIGTERM it stops every process it started,
restarted ones included. A missing ``redis-server`` or ``haproxy`` is refused in one line with
the ``apt-get install`` that fixes it.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import TextIO

# scripts/supervise.py, beside this file: Python puts a script's own folder first on its path
from supervise import POLL_S, Part, RestartPolicy, Watched, start_part, stop, watch

REPO_ROOT = Path(__file__).resolve().parent.parent
HAPROXY_CONFIG = REPO_ROOT / "deploy" / "haproxy.cfg"
APP = "dashboard/app.py"
REDIS_ENV = "ATTENTION_LAB_REDIS_URL"
LESSONS_ENV = "ATTENTION_LAB_LESSONS_DIR"
SECRET_ENV = "ATTENTION_LAB_COOKIE_SECRET"
KEY_ENV = "ATTENTION_LAB_PRESENTER_KEY"
KEY_BYTES = 12
BIND_ENV = "ATTENTION_LAB_BIND"
STATE_ENV = "XDG_STATE_HOME"
DATA_SUBDIR = Path("attention-lab") / "rooms"
AOF_NAME = "rooms.aof"
LOCK_NAME = "serve.lock"
LOOPBACK = "127.0.0.1"
HEALTH_PATH = "/_stcore/health"
START_TIMEOUT_S = 120.0
WARM_TIMEOUT_S = 600.0
SECRET_BYTES = 32
DEFAULT_PORT = 8501
DEFAULT_REPLICAS = 2
APT_PACKAGES = {"redis-server": "redis-server", "haproxy": "haproxy"}


class ServeError(RuntimeError):
    """A part could not start; the message is the one line to print."""


def default_data_dir() -> Path:
    """Where Redis keeps the rooms unless ``--data`` says: the user's state folder
    (``$XDG_STATE_HOME``, else ``~/.local/state``), then ``attention-lab/rooms``."""
    state = os.environ.get(STATE_ENV) or Path.home() / ".local" / "state"
    return Path(state) / DATA_SUBDIR


def free_port() -> int:
    """A TCP port free on the loopback address now."""
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def require(program: str) -> str:
    """The path of ``program``, or a :class:`ServeError` naming the apt-get line."""
    found = shutil.which(program)
    if not found:
        raise ServeError(
            f"{program} is missing: install it with `apt-get install -y {APT_PACKAGES[program]}`"
        )
    return found


def claim_data(folder: Path) -> TextIO:
    """Make ``folder`` and hold its lock while serve.py runs (until the returned file is
    closed, or this process ends).

    Raises:
        ServeError: when another serve.py holds the folder, or it cannot be made.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = (folder / LOCK_NAME).open("a")
    except OSError as err:
        raise ServeError(f"cannot use {folder} for Redis's data: {err}") from err
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise ServeError(f"another serve.py uses {folder}; give this one --data DIR") from None
    return handle


def core_sets(replicas: int, cores: list[int]) -> list[set[int]]:
    """The cores each replica may run on: disjoint shares when there are enough cores, else
    one core each, taken in turn.

    Args:
        replicas: how many replicas (at least 1). cores: the cores this process may use.

    Returns:
        One non-empty set of cores per replica.
    """
    if replicas <= len(cores):
        share = len(cores) // replicas
        return [set(cores[k * share : (k + 1) * share]) for k in range(replicas)]
    return [{cores[k % len(cores)]} for k in range(replicas)]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + HEALTH_PATH, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _redis_answers(port: int) -> bool:
    try:
        with socket.create_connection((LOOPBACK, port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def wait_until(check, part: Part, what: str) -> None:
    """Poll ``check()`` until it holds; ServeError when ``part`` exits or time runs out."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while not check():
        if part.process.poll() is not None:
            tail = part.log.read_text(errors="replace").strip().splitlines()[-3:]
            raise ServeError(f"{part.name} exited before {what}: {' | '.join(tail)}")
        if time.monotonic() > deadline:
            raise ServeError(f"{part.name} was not {what} within {START_TIMEOUT_S:.0f} s")
        time.sleep(POLL_S)


def start_redis(program: str, logs: Path, data: Path) -> Part:
    """``redis-server`` on a free loopback port, its append-only file in ``data`` (synced
    every second, no snapshots), once it answers."""
    port = free_port()
    cmd = [program, "--port", str(port), "--bind", LOOPBACK, "--save", ""]
    cmd += ["--appendonly", "yes", "--appendfsync", "everysec", "--dir", str(data.resolve())]
    part = start_part("redis", [*cmd, "--appendfilename", AOF_NAME], logs)
    part.url = f"redis://{LOOPBACK}:{port}/0"
    wait_until(lambda: _redis_answers(port), part, "answering")
    return part


def start_replica(index: int, cores: set[int], env: dict, logs: Path) -> Part:
    """One Streamlit replica on a free loopback port, on ``cores``."""
    port = free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", APP, "--server.port", str(port)]
    cmd += ["--server.address", LOOPBACK, "--server.headless", "true"]
    cmd += ["--browser.gatherUsageStats", "false"]
    part = start_part(
        f"replica {index}",
        cmd,
        logs,
        cwd=REPO_ROOT,
        env=env,
        preexec_fn=lambda: os.sched_setaffinity(0, cores),
    )
    part.url = f"http://{LOOPBACK}:{port}"
    return part


def warm(replicas: list[Part], logs: Path) -> None:
    """Open every page once on each replica (``python -m scripts.warm``, all replicas at once,
    its own process, stopped by its pid if it runs over :data:`WARM_TIMEOUT_S` or serve.py is
    stopped meanwhile); a failure is one line on stderr, and serving goes on."""
    cmd = [sys.executable, "-m", "scripts.warm", *(part.url for part in replicas)]
    part = start_part("warm", cmd, logs, cwd=REPO_ROOT)
    try:
        code = part.process.wait(timeout=WARM_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        stop([part])  # by its pid, when it ran over or serve.py was told to stop
    if code != 0:
        why = "ran over its time" if code is None else f"exit code {code}"
        print(f"warm-up: {why}, see {part.log}; the replicas serve cold", file=sys.stderr)


def balancer_config(replicas: list[Part], folder: Path) -> Path:
    """``deploy/haproxy.cfg`` with one server line per replica appended to its backend."""
    lines = [HAPROXY_CONFIG.read_text()]
    for index, part in enumerate(replicas, start=1):
        address = part.url.removeprefix("http://")
        lines.append(f"    server r{index} {address} cookie r{index} check\n")
    config = folder / "haproxy.cfg"
    config.write_text("".join(lines))
    return config


def start_balancer(replicas: list[Part], address: str, port: int, logs: Path) -> Part:
    """HAProxy in the foreground (``-db``) on ``address:port``."""
    program = require("haproxy")
    config = balancer_config(replicas, logs)
    env = {**os.environ, BIND_ENV: f"{address}:{port}"}
    part = start_part("balancer", [program, "-db", "-f", str(config)], logs, env=env)
    host = LOOPBACK if address in ("0.0.0.0", "") else address
    part.url = f"http://{host}:{port}"
    return part


def _stop_on_signal(signum, _frame) -> None:
    raise KeyboardInterrupt(signum)


def start_replicas(count: int, redis_url: str, key: str, logs: Path, data: Path) -> list[Part]:
    """``count`` replicas with one environment: the Redis URL, one cookie secret, the
    presenter ``key`` (whichever replica a tab reaches) and one lessons folder (the operator's
    lessons, read by all; ``<data>/lessons``, made empty when missing, unless
    ``ATTENTION_LAB_LESSONS_DIR`` names one), the cores shared out."""
    secret = os.environ.get(SECRET_ENV) or secrets.token_hex(SECRET_BYTES)
    env = {**os.environ, REDIS_ENV: redis_url, "STREAMLIT_SERVER_COOKIE_SECRET": secret}
    env[KEY_ENV] = key
    if not env.get(LESSONS_ENV):  # the default folder is there, so no replica warns of it
        (data / "lessons").mkdir(parents=True, exist_ok=True)
        env[LESSONS_ENV] = str(data / "lessons")
    cores = core_sets(count, sorted(os.sched_getaffinity(0)))
    return [start_replica(k, cores[k - 1], env, logs) for k in range(1, count + 1)]


def serve(args: argparse.Namespace, logs: Path) -> None:
    """Start every part, print where they are, and look after them until told to stop."""
    parts: list[Part] = []
    lock = None
    try:
        redis_url = os.environ.get(REDIS_ENV, "")
        if not redis_url:
            program = require("redis-server")
            lock = claim_data(args.data)
            redis = start_redis(program, logs, args.data)
            parts.append(redis)
            print(redis.line(), flush=True)
            redis_url = redis.url
        require("haproxy")  # refused before any replica starts
        key = os.environ.get(KEY_ENV) or secrets.token_urlsafe(KEY_BYTES)
        replicas = start_replicas(args.replicas, redis_url, key, logs, args.data)
        parts += replicas
        for part in replicas:
            wait_until(lambda p=part: _healthy(p.url), part, "healthy")
        if args.warm:
            warm(replicas, logs)
        for part in replicas:
            print(part.line(), flush=True)
        balancer = start_balancer(replicas, args.address, args.port, logs)
        watched = [Watched(part) for part in parts]  # Redis (ours) and the replicas
        parts.append(balancer)
        wait_until(lambda: _healthy(balancer.url), balancer, "healthy")
        print(f"balancer: http://{args.address}:{args.port}", flush=True)
        if not os.environ.get(KEY_ENV):
            print(f"presenter key: {key} (set {KEY_ENV} to choose your own)", flush=True)
        watch(watched, balancer, RestartPolicy())
    finally:
        stop(parts)
        if lock is not None:
            lock.close()


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and serve until Ctrl-C or SIGTERM.

    Returns:
        0 after a clean stop, 1 when a part could not start (one line says why).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=DEFAULT_REPLICAS, help="Streamlit replicas")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="the balancer's port")
    parser.add_argument("--address", default=LOOPBACK, help="the balancer's address")
    parser.add_argument("--logs", type=Path, default=None, help="keep each part's log here")
    parser.add_argument(
        "--data",
        type=Path,
        default=default_data_dir(),
        help="Redis's append-only file, where the rooms outlive a restart "
        "(default: %(default)s, from $XDG_STATE_HOME or ~/.local/state)",
    )
    parser.add_argument(
        "--no-warm",
        dest="warm",
        action="store_false",
        help="serve at once, without opening every page on each replica first",
    )
    args = parser.parse_args(argv)
    if args.replicas < 1 or not 0 < args.port < 65536:
        parser.error(f"--replicas must be at least 1 and --port 1..65535, got {args}")
    signal.signal(signal.SIGTERM, _stop_on_signal)
    with tempfile.TemporaryDirectory(prefix="attention-lab-serve-") as scratch:
        logs = args.logs or Path(scratch)
        logs.mkdir(parents=True, exist_ok=True)
        try:
            serve(args, logs)
        except ServeError as err:
            print(err, file=sys.stderr, flush=True)
            return 1
        except KeyboardInterrupt:
            print("stopped every process", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
