"""Run Attention Lab as several replicas behind a real load balancer, on one machine.

Usage: ``python scripts/serve.py --replicas N --port P [--address A] [--logs DIR] [--no-warm]``

Starts, each as its own process and stopped by its own pid:

1. ``redis-server`` on a free loopback port, where the rooms live (unless
   ``ATTENTION_LAB_REDIS_URL`` names a Redis server already);
2. N Streamlit replicas of ``dashboard/app.py`` on free loopback ports, with one cookie secret
   (``ATTENTION_LAB_COOKIE_SECRET``, else one made now) and the machine's cores shared out
   among them (each replica's CPU affinity, which its torch threads follow);
3. HAProxy on ``A:P`` with ``deploy/haproxy.cfg`` (cookie affinity, websockets passed through,
   health checks on ``/_stcore/health``), its server lines appended for the replicas.

Before the balancer starts, every replica is warmed (``python -m scripts.warm``, its output in
``warm.log``): each page opened once through the replica's own port, so that the models and
the default views are loaded before the first learner arrives (``--no-warm`` skips it); what
those pages start in the background (the Heads page's prefetch) goes on at the lowest
priority while learners arrive. A page that fails to warm is said in one line on stderr, and
the replicas serve anyway.

Every replica gets the same presenter key (``ATTENTION_LAB_PRESENTER_KEY``, else one made now
and printed last), so a presenter's key works whichever replica their tab reaches. It waits
until every part is healthy, prints ``replica K: http://127.0.0.1:PORT pid PID`` per replica
and then ``balancer: http://A:P``, reports a replica that exits (the others go on),
and on Ctrl-C or SIGTERM stops every process it started. A missing ``redis-server`` or
``haproxy`` is refused in one line with the ``apt-get install`` that fixes it.
"""

from __future__ import annotations

import argparse
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
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
HAPROXY_CONFIG = REPO_ROOT / "deploy" / "haproxy.cfg"
APP = "dashboard/app.py"
REDIS_ENV = "ATTENTION_LAB_REDIS_URL"
SECRET_ENV = "ATTENTION_LAB_COOKIE_SECRET"
KEY_ENV = "ATTENTION_LAB_PRESENTER_KEY"
KEY_BYTES = 12
BIND_ENV = "ATTENTION_LAB_BIND"
LOOPBACK = "127.0.0.1"
HEALTH_PATH = "/_stcore/health"
START_TIMEOUT_S = 120.0
WARM_TIMEOUT_S = 600.0
POLL_S = 0.5
STOP_TIMEOUT_S = 15.0
SECRET_BYTES = 32
DEFAULT_PORT = 8501
DEFAULT_REPLICAS = 2
APT_PACKAGES = {"redis-server": "redis-server", "haproxy": "haproxy"}


class ServeError(RuntimeError):
    """A part could not start; the message is the one line to print."""


@dataclass
class Part:
    """One process this script started: its name, the process, its log and address."""

    name: str
    process: subprocess.Popen
    log: Path
    url: str = ""


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


def _start(name: str, cmd: list[str], logs: Path, **popen) -> Part:
    log = logs / f"{name.replace(' ', '-')}.log"
    with log.open("w") as handle:
        process = subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT, **popen)
    return Part(name, process, log)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + HEALTH_PATH, timeout=2) as response:
            return response.status == 200
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


def start_redis(logs: Path) -> tuple[Part, str]:
    """``redis-server`` on a free loopback port, nothing written to disk; its URL."""
    port = free_port()
    cmd = [require("redis-server"), "--port", str(port), "--bind", LOOPBACK]
    part = _start("redis", [*cmd, "--save", "", "--appendonly", "no"], logs)
    part.url = f"redis://{LOOPBACK}:{port}/0"

    def answers() -> bool:
        try:
            with socket.create_connection((LOOPBACK, port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    wait_until(answers, part, "answering")
    return part, part.url


def start_replica(index: int, cores: set[int], env: dict, logs: Path) -> Part:
    """One Streamlit replica on a free loopback port, on ``cores``."""
    port = free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", APP, "--server.port", str(port)]
    cmd += ["--server.address", LOOPBACK, "--server.headless", "true"]
    cmd += ["--browser.gatherUsageStats", "false"]
    part = _start(
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
    part = _start("warm", cmd, logs, cwd=REPO_ROOT)
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
    part = _start("balancer", [program, "-db", "-f", str(config)], logs, env=env)
    host = LOOPBACK if address in ("0.0.0.0", "") else address
    part.url = f"http://{host}:{port}"
    return part


def stop(parts: list[Part]) -> None:
    """SIGTERM each started process by its own pid, then SIGKILL what is left."""
    for part in parts:
        if part.process.poll() is None:
            os.kill(part.process.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for part in parts:
        try:
            part.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.kill(part.process.pid, signal.SIGKILL)
            part.process.wait()


def _stop_on_signal(signum, _frame) -> None:
    raise KeyboardInterrupt(signum)


def watch(replicas: list[Part], balancer: Part) -> None:
    """Report each replica that exits (once); return when the balancer exits."""
    reported: set[str] = set()
    while balancer.process.poll() is None:
        for part in replicas:
            code = part.process.poll()
            if code is not None and part.name not in reported:
                reported.add(part.name)
                print(f"{part.name} exited with code {code}; the others go on", flush=True)
        time.sleep(POLL_S)
    print(f"balancer exited with code {balancer.process.returncode}", flush=True)


def serve(args: argparse.Namespace, logs: Path) -> None:
    """Start every part, print where they are, and watch them until told to stop."""
    parts: list[Part] = []
    try:
        redis_url = os.environ.get(REDIS_ENV, "")
        if not redis_url:
            redis, redis_url = start_redis(logs)
            parts.append(redis)
        require("haproxy")  # refused before any replica starts
        secret = os.environ.get(SECRET_ENV) or secrets.token_hex(SECRET_BYTES)
        key = os.environ.get(KEY_ENV) or secrets.token_urlsafe(KEY_BYTES)
        env = {**os.environ, REDIS_ENV: redis_url, "STREAMLIT_SERVER_COOKIE_SECRET": secret}
        env[KEY_ENV] = key  # one presenter key for the room, whichever replica a tab reaches
        cores = core_sets(args.replicas, sorted(os.sched_getaffinity(0)))
        replicas = [start_replica(k, cores[k - 1], env, logs) for k in range(1, args.replicas + 1)]
        parts += replicas
        for part in replicas:
            wait_until(lambda p=part: _healthy(p.url), part, "healthy")
        if args.warm:
            warm(replicas, logs)
        for part in replicas:
            print(f"{part.name}: {part.url} pid {part.process.pid}", flush=True)
        balancer = start_balancer(replicas, args.address, args.port, logs)
        parts.append(balancer)
        wait_until(lambda: _healthy(balancer.url), balancer, "healthy")
        print(f"balancer: http://{args.address}:{args.port}", flush=True)
        if not os.environ.get(KEY_ENV):
            print(f"presenter key: {key} (set {KEY_ENV} to choose your own)", flush=True)
        watch(replicas, balancer)
    finally:
        stop(parts)


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
