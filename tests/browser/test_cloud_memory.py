"""The whole lab inside Community Cloud's largest memory limit (issue 54, point 5): one
server started as Cloud starts it (``streamlit run dashboard/app.py``, the lessons' pre-warm
on), inside a memory cgroup of :data:`CLOUD_LIMIT_BYTES` that this module creates (cgroup v1
or v2) and removes; Chromium opens every page, then every step of every shipped lesson, each
until its first chart is drawn. The server must be alive at the end (over the limit the
kernel kills it, as Cloud stops an app for everyone), no page may show an exception, and
the cgroup's own peak is printed per page and in all.

Where no memory cgroup can be made here (not root, no writable controller), the module skips
with the reason. The models are the installed ones: MiniLM is loaded here though Cloud
cannot install it, so the figure is an upper bound of Cloud's."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.browser import (
    CHART_SELECTOR,
    REPO_ROOT,
    free_port,
    stop_process,
    wait_healthy,
    wait_idle,
)
from dashboard.lessons.model import LESSON_KEY, STEP_KEY, shipped_lessons
from tests.browser.helpers import PAGES, page_url

pytestmark = pytest.mark.browser

CLOUD_LIMIT_BYTES = int(2.7 * 1024**3)
"""Community Cloud's largest limit for an app (2.7 GB, read as GiB: the looser reading)."""
MIB = 1 << 20
PAGE_TIMEOUT_MS = 300_000

SETTLE_MS = 1500


def _cgroup_base() -> tuple[Path, str] | None:
    """The memory controller's folder of this process's group, and the version ("1"/"2")."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return Path("/sys/fs/cgroup/memory") / path.lstrip("/"), "1"
        if number == "0" and controllers == "":
            unified = Path("/sys/fs/cgroup") / path.lstrip("/")
            if (unified / "cgroup.controllers").exists():
                return unified, "2"
    return None


class MemoryGroup:
    """A child memory cgroup with a limit: :meth:`peak`, :meth:`usage`, :meth:`remove`."""

    def __init__(self, limit: int) -> None:
        found = _cgroup_base()
        if found is None:
            raise OSError("no memory cgroup controller for this process")
        base, self.version = found
        self.path = base / f"attention-lab-cloud-{os.getpid()}"
        self.path.mkdir()
        limit_file = "memory.limit_in_bytes" if self.version == "1" else "memory.max"
        (self.path / limit_file).write_text(str(limit))

    def _read(self, v1: str, v2: str) -> int:
        name = v1 if self.version == "1" else v2
        return int((self.path / name).read_text().split()[0])

    def usage(self) -> int:
        return self._read("memory.usage_in_bytes", "memory.current")

    def peak(self) -> int:
        return self._read("memory.max_usage_in_bytes", "memory.peak")

    def remove(self) -> None:
        for _ in range(50):  # its processes have ended; the kernel frees it a moment later
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)


@pytest.fixture(scope="module")
def group():
    try:
        made = MemoryGroup(CLOUD_LIMIT_BYTES)
    except OSError as err:
        pytest.skip(f"no memory cgroup can be made here ({err}); run as root on Linux")
    yield made
    made.remove()


@pytest.fixture(scope="module")
def cloud_server(group, tmp_path_factory):
    """The dashboard in the group, started as Cloud starts it (pre-warm on)."""
    log_path = tmp_path_factory.mktemp("cloud") / "server.log"
    port = free_port()
    command = (
        f"echo $$ > {group.path / 'cgroup.procs'} && exec {sys.executable} -m streamlit run"
        f" dashboard/app.py --server.port {port} --server.address 127.0.0.1"
        " --server.headless true --server.fileWatcherType none"
    )
    env = {k: v for k, v in os.environ.items() if k != "ATTENTION_LAB_PREWARM"}
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            ["/bin/sh", "-c", command], cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, env=env
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, log_path, 180)
        yield url, process, log_path
    finally:
        stop_process(process, 15)


def _visit(browser, url: str) -> list[str]:
    """Open ``url``, wait for its run and its first chart; the page's errors and exceptions."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        tab.goto(url)
        tab.wait_for_selector("h1", timeout=PAGE_TIMEOUT_MS)
        wait_idle(tab, timeout_ms=PAGE_TIMEOUT_MS)
        tab.wait_for_selector(CHART_SELECTOR, timeout=PAGE_TIMEOUT_MS)
        tab.wait_for_timeout(SETTLE_MS)
        errors += [e.inner_text()[:200] for e in tab.locator("[data-testid='stException']").all()]
    finally:
        context.close()
    return errors


def test_every_page_and_lesson_step_runs_within_cloud_s_largest_limit(cloud_server, group, browser):
    url, process, log_path = cloud_server
    visits = [(name, page_url(url, name, "lang=en")) for name in PAGES]
    for lesson in shipped_lessons().values():
        for number, step in enumerate(lesson.steps, start=1):
            query = f"lang=en&{LESSON_KEY}={lesson.name}&{STEP_KEY}={number}"
            visits.append((f"{lesson.name} {number}", page_url(url, step.page, query)))
    problems, lines = {}, []
    for what, address in visits:
        errors = _visit(browser, address)
        if errors:
            problems[what] = errors
        assert process.poll() is None, f"the server died on {what}: {log_path.read_text()[-2000:]}"
        lines.append(f"{what}: now {group.usage() / MIB:.0f} MiB, peak {group.peak() / MIB:.0f}")
    print("\n" + "\n".join(lines))
    print(f"peak of the whole walk: {group.peak() / MIB:.0f} MiB of {CLOUD_LIMIT_BYTES / MIB:.0f}")
    assert problems == {}
    assert group.peak() <= CLOUD_LIMIT_BYTES
