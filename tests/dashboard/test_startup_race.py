"""A cold server under a room: the torch thread's first profiler use and a learner's first
optimizer, released together, must not meet inside torch's lazy imports.

Python's import lock hands a second thread a half-imported module when two threads import a
circular package at once: ``torch.profiler`` reaching ``torch._inductor`` in the torch thread
while a script run's ``torch.optim.Adam`` imports ``torch._dynamo`` broke those modules for the
life of the server (``cannot import name 'IndentedBuffer' from partially initialized module
'torch._inductor.utils'``). Each probe runs in a fresh interpreter, where nothing is imported
yet, and releases both threads with one barrier after torch itself is imported."""

from __future__ import annotations

import pytest

from tests.dashboard.conftest import fresh_python

RACE_PROBE = """import threading, traceback
import torch
from dashboard.runtime import threads

threads.import_torch()  # the torch thread has imported torch and the data layer's modules
barrier = threading.Barrier(3)
errors = []

def measuring_page():  # a page's first peak-memory figure: the profiler starts
    barrier.wait()
    try:
        with threads.script_run(), threads.profiler_slot():
            pass
    except BaseException:
        errors.append(traceback.format_exc(limit=-2))

def watch_page():  # the Watch page's first time estimate: an optimizer, through the data layer
    barrier.wait()
    try:
        with threads.script_run():
            from dashboard import data
            data.step_cost  # the data layer's training module: it waits for the lazy modules
            torch.optim.Adam([torch.zeros(1, requires_grad=True)])
    except BaseException:
        errors.append(traceback.format_exc(limit=-2))

runs = [threading.Thread(target=f) for f in (measuring_page, watch_page)]
for run in runs:
    run.start()
barrier.wait()
for run in runs:
    run.join(120)
print("errors", len(errors))
for error in errors:
    print(error)
"""

ROUNDS = 3


@pytest.mark.parametrize(
    "round_", [pytest.param(r, marks=[pytest.mark.slow] if r else []) for r in range(ROUNDS)]
)
def test_a_first_profiler_use_and_a_first_optimizer_at_once_break_nothing(round_):
    """Before the torch thread imported torch's lazy modules ahead of every script run, this
    probe failed in every round (an ImportError or a partially initialised module). The fast
    tier runs the first round; the whole suite all of them."""
    result = fresh_python(RACE_PROBE, timeout=180)
    assert "errors 0" in result.stdout, result.stdout + result.stderr[-2000:]
    assert "Exception in thread torch-preload" not in result.stderr, result.stderr[-2000:]


LAZY_PROBE = """import sys
from dashboard.runtime import threads
threads.import_torch()
print("torch._dynamo" in sys.modules)
from dashboard import data
from dashboard.config import LayerConfig
data.attention_run(LayerConfig(d_model=32, heads=2, input_kind="preset_zh"))  # the dance
print("torch._dynamo" in sys.modules)
threads.import_whole_torch()
print(sorted(m for m in threads.LAZY_TORCH_MODULES if m not in sys.modules))
threads.start_profiler()  # the torch thread starts it next: not while the interpreter exits"""


def test_the_first_page_does_not_wait_for_the_lazy_modules_and_a_run_that_needs_them_does():
    """After :func:`threads.import_torch` a run computes without ``torch._dynamo`` (the
    landing page's first heatmap does not wait for it, nor make a script thread import it);
    after :func:`threads.import_whole_torch` no module of :data:`threads.LAZY_TORCH_MODULES`
    is left for a script thread to import."""
    result = fresh_python(LAZY_PROBE, timeout=180)
    lines = result.stdout.strip().splitlines()[-3:]
    assert lines == ["False", "False", "[]"], result.stderr[-2000:]


GATE_PROBE = """import sys
from dashboard.runtime import threads
calls = []
threads.import_torch = lambda: calls.append("dashboard.data.catalogue" in sys.modules)
from dashboard import data
data.softmax  # the Intuition page's analogies: no torch
print(calls, "torch" in sys.modules)
data.device_options
print(calls)"""


def test_the_data_layer_waits_for_the_torch_thread_before_a_torch_module():
    """``dashboard.data`` asks for ``threads.import_torch`` before it imports a module that
    needs torch, and not for its torch-free modules (the landing page's first charts)."""
    first, second = fresh_python(GATE_PROBE, timeout=180).stdout.strip().splitlines()[-2:]
    assert first == "[] False"
    assert second == "[False]"  # asked before the torch module was imported
