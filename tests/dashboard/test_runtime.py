"""The server process (dashboard/runtime/): torch threads per run, peak memory estimated
instead of measured under load (with the page saying so), a quiet profiler started in the
thread that imported torch, the C heaps trimmed and pinned, and one owner of each setting."""

from __future__ import annotations

import json
import re
import sys
import threading

import pytest
import torch

from dashboard.runtime import memory, prefetch, startup, threads
from dashboard.views import PAGES
from tests.dashboard.conftest import REPO_ROOT, assert_clean, fresh_python, metrics, open_app

LOCALES = REPO_ROOT / "dashboard" / "locales"


def _note(lang: str) -> str:
    text = json.loads((LOCALES / lang / "common.json").read_text("utf-8"))
    return text["memory_busy_note"]


@pytest.fixture
def torch_threads():
    """Restore torch's intra-op threads after the test. First wait for what an earlier test's
    app run may have left going in this process: the torch thread's imports (until they are
    done the count is not applied, as in a server's first run) and the Heads page's prefetch
    fillers (each holds torch at one thread while it computes)."""
    threads.import_torch()
    assert prefetch.wait_for_fillers(timeout=300), "a prefetch filler still running"
    before = torch.get_num_threads()
    yield before
    torch.set_num_threads(before)


def test_a_run_alone_uses_every_core_and_concurrent_runs_one_each():
    assert threads.torch_threads_for(1, 2) == 2
    assert threads.torch_threads_for(1, 16) == 16
    assert threads.torch_threads_for(2, 2) == 1
    assert threads.torch_threads_for(30, 2) == 1
    for bad in ((0, 2), (1, 0), (-1, 4)):
        with pytest.raises(ValueError, match="at least 1"):
            threads.torch_threads_for(*bad)


def test_script_runs_are_counted_and_share_torch_threads(torch_threads):
    cores = threads.usable_cores()
    assert threads.active_runs() == 0
    with threads.script_run() as first:
        assert first == 1 and torch.get_num_threads() == cores
        with threads.script_run() as second:
            assert second == 2 and threads.active_runs() == 2
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == cores
    assert threads.active_runs() == 0


def test_single_threaded_holds_one_thread_and_gives_the_count_back(torch_threads):
    cores = threads.usable_cores()
    with threads.script_run():
        assert torch.get_num_threads() == cores
        with threads.single_threaded():
            assert torch.get_num_threads() == 1
            with threads.script_run():  # another learner's run starts and ends meanwhile
                assert torch.get_num_threads() == 1
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == cores
        with pytest.raises(RuntimeError, match="cell failed"):
            with threads.single_threaded():
                raise RuntimeError("cell failed")
        assert torch.get_num_threads() == cores
    assert threads.active_runs() == 0


def test_a_failing_run_is_still_uncounted():
    with pytest.raises(RuntimeError, match="page failed"):
        with threads.script_run():
            raise RuntimeError("page failed")
    assert threads.active_runs() == 0


def test_the_profiler_slot_is_free_only_on_a_quiet_server():
    with threads.profiler_slot() as free:
        assert free
        seen = []
        other = threading.Thread(target=lambda: seen.append(_slot_free()))
        other.start()
        other.join(timeout=30)
        assert seen == [False]  # another session measuring: this one must not wait for it
    with threads.script_run(), threads.script_run():
        assert not _slot_free()  # two runs going
    assert _slot_free()


def _slot_free() -> bool:
    with threads.profiler_slot() as free:
        return free


def test_peak_memory_under_load_is_the_estimate_and_not_cached(torch_threads):
    import attention_core as core
    from dashboard import data
    from dashboard.config import LayerConfig

    cfg = LayerConfig(seq_len=96, d_model=64, heads=4, seed=9191, device="cpu")
    run = data.attention_run(cfg)
    with threads.script_run(), threads.script_run():  # two sessions at once
        busy = data.attention_peak(cfg)
    reference = core.estimate_memory("scaled", batch=1, heads=4, L=96, E=16, need_weights=True)
    assert busy.busy and not busy.measured
    assert busy.bytes == int(reference) and busy.bytes >= run.weights.nbytes
    quiet = data.attention_peak(cfg)  # the server is quiet again: measured now
    assert quiet.measured and not quiet.busy and quiet.bytes >= run.weights.nbytes
    with threads.script_run(), threads.script_run():
        assert data.attention_peak(cfg) is quiet  # a measurement cached is shown under load


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_playground_says_when_peak_memory_was_not_measured(lang, torch_threads):
    seed = {"en": "4242", "zh": "4243"}[lang]  # a config no other test has measured
    params = {"lang": lang, "playground.seq_len": "40", "playground.seed": seed}
    with threads.script_run():  # another learner's run is going
        at = open_app("playground", **params)
    assert_clean(at)
    shown = metrics(at)
    label = {"en": "Memory (est.)", "zh": "内存（估计）"}[lang]
    assert label in shown, shown
    captions = " ".join(c.value for c in at.caption)
    assert _note(lang) in captions
    at = open_app("playground", **params)  # alone: measured, and the note is gone
    assert_clean(at)
    assert _note(lang) not in " ".join(c.value for c in at.caption)
    assert len(metrics(at)) == len(shown) and label not in metrics(at)


def test_the_app_header_and_data_package_import_no_torch():
    """A page that needs no tensor can be drawn without importing torch: the modules
    dashboard/app.py imports at the top, the page helpers and the data package import
    neither torch, the library, pandas nor Altair; a page header drawn with them leaves
    none of them imported."""
    code = (
        "import sys\n"
        "from streamlit.testing.v1 import AppTest\n"
        "from dashboard import controls, data, i18n, landing, lesson_author, lesson_bar\n"
        "from dashboard import lesson_figures\n"
        "from dashboard import state, views\n"
        "from dashboard.runtime import memory, prefetch, startup, threads\n"
        "from dashboard.serving import prewarm\n"
        "page = 'from dashboard import controls\\ncontrols.page_intro(\"playground\")'\n"
        "at = AppTest.from_string(page).run(timeout=60)\n"
        "assert not at.exception, at.exception\n"
        "print(at.title[0].value)\n"
        "print(sorted(m for m in ('torch', 'attention_core', 'pandas', 'altair')"
        " if m in sys.modules))\n"
    )
    result = fresh_python(code)
    title, imported = result.stdout.strip().splitlines()[-2:]
    assert title == "Playground"
    assert imported == "[]"


def test_app_imports_only_light_modules_at_the_top():
    import ast

    tree = ast.parse((REPO_ROOT / "dashboard" / "app.py").read_text("utf-8"))
    top = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    names = {alias.name for node in top if isinstance(node, ast.Import) for alias in node.names}
    modules = {node.module for node in top if isinstance(node, ast.ImportFrom)}
    assert not {"torch", "pandas", "altair"} & names
    assert not any(m.startswith(("attention_core", "dashboard.charts")) for m in modules)
    # the dashboard modules it imports are the light ones checked above
    froms = {f"{n.module}.{a.name}" for n in top if isinstance(n, ast.ImportFrom) for a in n.names}
    dashboard = {name for name in froms if name.startswith("dashboard.")}
    assert dashboard <= {
        "dashboard.controls",
        "dashboard.landing",
        "dashboard.lesson_author",
        "dashboard.lesson_bar",
        "dashboard.lesson_figures",
        "dashboard.lesson_focus",
        "dashboard.presentation",
        "dashboard.room_controls",
        "dashboard.rooms.push",
        "dashboard.state",
        "dashboard.runtime.startup",
        "dashboard.runtime.threads",
        "dashboard.serving.prewarm",
        "dashboard.i18n.LANG_KEY",
        "dashboard.i18n.LANG_NAMES",
        "dashboard.i18n.LANGS",
        "dashboard.i18n.current_lang",
        "dashboard.i18n.t",
        "dashboard.views.APP_ICON",
        "dashboard.views.PAGES",
        "dashboard.views.SECTIONS",
        "dashboard.views.default_page",
    }, dashboard


@pytest.mark.skipif(not memory.can_trim(), reason="not glibc")
def test_freed_memory_is_released_at_most_once_per_interval():
    start = 1e9  # far from any trim the app has made in this process
    assert memory.release_memory(now=start)
    assert not memory.release_memory(now=start + 1.0)  # within the interval
    assert memory._TRIM_LOCK.acquire(timeout=30)  # the background trim has finished
    memory._TRIM_LOCK.release()
    assert not memory.release_memory(now=start + memory.TRIM_INTERVAL_S - 0.5)
    assert memory.release_memory(now=start + memory.TRIM_INTERVAL_S + 0.5)
    assert memory._TRIM_LOCK.acquire(timeout=30)  # a trim already going: none started
    try:
        assert not memory.release_memory(now=start + 3 * memory.TRIM_INTERVAL_S)
    finally:
        memory._TRIM_LOCK.release()


@pytest.mark.parametrize("page", ["playground", "scaling"])
def test_the_device_line_keeps_its_place_under_the_language_switch(page, monkeypatch):
    """The device line is drawn after torch is imported (by the page's first device
    question, or by the app after a page that asks none), in the place reserved for it:
    the sidebar's first select box, whatever the page draws below."""
    from dashboard import data

    monkeypatch.setattr(data, "device_options", lambda: ("cpu", ("cpu", "meta")))
    at = open_app(None if page == "playground" else page, device="cpu")
    assert_clean(at)
    widgets = [key for key in _sidebar_keys(at.sidebar) if key]
    assert widgets[:2] == ["lang", "device"], widgets  # the page's own widgets come after
    assert widgets.count("device") == 1 and len(widgets) > 2
    assert at.sidebar.selectbox(key="device").options == ["cpu", "meta"]
    captions = [c.value for c in at.sidebar.caption]
    assert captions.count("Device: **cpu**") == 1, captions


def _sidebar_keys(node) -> list[str | None]:
    """The widget keys of a block's elements in page order (``None`` for non-widgets)."""
    children = getattr(node, "children", None)
    if children is None:
        return [getattr(node, "key", None)]
    return [key for index in sorted(children) for key in _sidebar_keys(children[index])]


PINNED_RSS_PROBE = """import sys, numpy as np
from dashboard.runtime import memory
def rss_mib():
    with open('/proc/self/status') as f:
        return next(int(l.split()[1]) for l in f if l.startswith('VmRSS')) / 1024
if sys.argv[1] == 'pin':
    assert memory.pin_mmap_threshold()
big = np.ones(16 * 2**20 // 8); del big  # a 16 MiB block freed: glibc raises its threshold
block = np.ones(8 * 2**20 // 8)  # 8 MiB, touched
after = np.ones(1000)  # something allocated after it
before = rss_mib(); del block
print(before - rss_mib())"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc and /proc")
def test_a_pinned_threshold_hands_large_blocks_back_when_freed():
    """With glibc's moving threshold an 8 MiB block freed after a 16 MiB one stays in the
    heap (below a live object); pinned, it had its own mapping and the 8 MiB leave."""

    def released(mode: str) -> float:
        result = fresh_python(PINNED_RSS_PROBE, mode, timeout=60)
        return float(result.stdout.strip().splitlines()[-1])

    assert released("pin") >= 7.5
    assert released("default") < 1.0


def test_a_threshold_below_one_byte_is_refused():
    with pytest.raises(ValueError, match="nbytes"):
        memory.pin_mmap_threshold(0)


def test_the_threshold_is_pinned_only_once_the_process_is_large(monkeypatch):
    calls = []
    monkeypatch.setattr(memory, "_pinned", False)
    monkeypatch.setattr(memory, "pin_mmap_threshold", lambda: calls.append(1) or True)
    assert not memory.pin_when_large(1000, resident=1000)
    assert calls == []
    assert memory.pin_when_large(1000, resident=1001)
    assert memory.pin_when_large(1000, resident=10)  # pinned for good
    assert calls == [1]


def test_the_resident_size_is_read_at_most_once_per_interval(monkeypatch):
    reads = []
    monkeypatch.setattr(memory, "_pinned", False)
    monkeypatch.setattr(memory, "_last_pin_check", float("-inf"))
    monkeypatch.setattr(memory, "resident_bytes", lambda: reads.append(1) or 10)
    step = memory.PIN_CHECK_INTERVAL_S
    assert not memory.pin_when_large(1000, now=100.0)
    assert not memory.pin_when_large(1000, now=100.0 + step / 2)  # too soon: not read
    assert reads == [1]
    assert not memory.pin_when_large(1000, now=100.0 + step)
    assert reads == [1, 1]


def test_resident_bytes_reads_this_process():
    with open("/proc/self/status", encoding="ascii") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))
    assert abs(memory.resident_bytes() - kib * 1024) < 64 * 2**20


TRIM_PROBE = """import ctypes, ctypes.util
from dashboard.runtime import memory
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
def rss_mib():
    with open('/proc/self/status') as f:
        return next(int(l.split()[1]) for l in f if l.startswith('VmRSS')) / 1024
blocks, keep = [], []
for _ in range(512):  # 32 MiB in 64 KiB heap blocks, each followed by a small live one,
    block = libc.malloc(64 * 1024)  # so no free() can shrink the heap's top
    ctypes.memset(block, 1, 64 * 1024)  # touched: resident
    blocks.append(block)
    keep.append(libc.malloc(64 * 1024))  # never served from a small free chunk elsewhere
for block in blocks:
    libc.free(block)
before = rss_mib()
print(memory.trim_heap(), before - rss_mib())"""


@pytest.mark.skipif(not memory.can_trim(), reason="not glibc")
def test_trim_heap_hands_freed_heap_blocks_back_now():
    """32 MiB of small blocks freed below a live one stay resident in the heap until a trim;
    trim_heap gives them back at once (the SmolLM2 loader's callback)."""
    released, freed_mib = fresh_python(TRIM_PROBE, timeout=60).stdout.split()[-2:]
    assert released == "True"
    assert float(freed_mib) >= 24.0


QUIET_PROFILER_PROBE = """import os
os.environ.pop('KINETO_LOG_LEVEL', None)
from dashboard.runtime import threads
threads.quiet_profiler()
threads.import_torch()  # torch imported in the torch thread, as a page asks for it
import torch
from attention_core import experiments
assert threads.warm_up_profiler()
with threads.profiler_slot() as free:  # waits for the torch thread's warm-up
    assert free
    peak, method = experiments.measure_peak_bytes(
        lambda: torch.ones(4096, dtype=torch.float64), torch.device('cpu'))
print(int(peak))"""


def test_the_profiler_starts_quietly_in_the_torch_thread():
    """torch's profiler (kineto) prints "External init callback must run in same thread as
    registerClient" when it first starts in a thread other than the one that imported torch,
    and "USDT … profiler_start/stop" for every measurement: with the runtime's torch thread
    and quiet_profiler, a measurement in another thread leaves the terminal clean."""
    result = fresh_python(QUIET_PROFILER_PROBE, timeout=300)
    assert int(result.stdout.split()[-1]) >= 4096 * 8  # measured for real
    assert not re.search(r"registerClient|USDT|profiler_start", result.stderr), result.stderr


def test_quiet_profiler_keeps_a_log_level_set_by_hand(monkeypatch):
    monkeypatch.delenv("KINETO_LOG_LEVEL", raising=False)
    assert threads.quiet_profiler()
    assert threads.os.environ["KINETO_LOG_LEVEL"] == threads.KINETO_QUIET_LEVEL
    monkeypatch.setenv("KINETO_LOG_LEVEL", "0")
    assert not threads.quiet_profiler()
    assert threads.os.environ["KINETO_LOG_LEVEL"] == "0"


def test_each_page_gets_its_start_up_plan(monkeypatch):
    monkeypatch.setattr(startup, "TORCH_LATE_PAGES", frozenset({"intuition"}))
    assert startup.preloads_torch("playground")
    assert not startup.preloads_torch("intuition")
    monkeypatch.setattr(startup, "TORCH_LATE_PAGES", frozenset({"intuition", "scaling"}))
    assert not startup.preloads_torch("scaling")
    assert startup.TORCH_LATE_PAGES <= {stem for stem, _ in PAGES}


C_HEAP_SETTINGS = {
    "ctypes": "runtime/memory.py",  # the one C library lookup
    "find_library": "runtime/memory.py",
    "malloc_trim": "runtime/memory.py",
    "mallopt": "runtime/memory.py",
}


@pytest.mark.parametrize("needle", sorted(C_HEAP_SETTINGS))
def test_each_c_heap_setting_has_one_owner_in_the_dashboard(needle):
    dashboard = REPO_ROOT / "dashboard"
    users = sorted(
        name
        for path in dashboard.rglob("*.py")
        if (name := path.relative_to(dashboard).as_posix()) != "runtime/__init__.py"  # its map
        and needle in path.read_text("utf-8")
    )
    assert users == [C_HEAP_SETTINGS[needle]], users


PROCESS_TREES = ("attention_core", "bench", "dashboard")
# What sets process-wide state, and the modules allowed to: in the dashboard only
# dashboard/runtime/ (Streamlit's script runs share the process), in the bench only
# bench/process.py (each bench is its own process), in the library nowhere. Every module
# listed here uses its needle; one that is not listed may not.
PROCESS_SETTINGS = {
    "set_num_threads": ("bench/process.py", "dashboard/runtime/threads.py"),
    "set_num_interop_threads": (),
    "OMP_NUM_THREADS": ("bench/process.py",),
    "os.nice": (),
    "setpriority": ("dashboard/runtime/prefetch.py",),
    "atexit": ("dashboard/runtime/prefetch.py",),
    "setswitchinterval": (),
    "gc.freeze": ("dashboard/runtime/memory.py",),
    "gc.disable": (),
    "gc.set_threshold": (),
    "KINETO_LOG_LEVEL": ("dashboard/runtime/threads.py",),
}
PROCESS_OWNERS = ("bench/process.py", "dashboard/runtime/")
MAPS = ("dashboard/runtime/__init__.py",)  # says which module owns what, sets nothing


def test_process_settings_are_owned_only_where_the_house_allows():
    owners = {path for users in PROCESS_SETTINGS.values() for path in users}
    assert all(path.startswith(PROCESS_OWNERS) for path in owners), owners
    assert not any(path.startswith("attention_core/") for path in owners)


@pytest.mark.parametrize("needle", sorted(PROCESS_SETTINGS))
def test_each_process_setting_has_one_owner(needle):
    users = sorted(
        name
        for tree in PROCESS_TREES
        for path in (REPO_ROOT / tree).rglob("*.py")
        if (name := path.relative_to(REPO_ROOT).as_posix()) not in MAPS
        and needle in path.read_text("utf-8")
    )
    assert users == sorted(PROCESS_SETTINGS[needle]), users


def test_the_library_does_not_touch_the_c_heap():
    library = REPO_ROOT / "attention_core"
    users = [p.name for p in library.rglob("*.py") if "malloc_trim" in p.read_text("utf-8")]
    assert users == []
