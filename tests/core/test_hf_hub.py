"""Hub ids in :func:`load_hf`, through the real ``huggingface_hub`` code
against a Hub served from a local folder on 127.0.0.1 (``tests/local_hub.py``,
``HF_ENDPOINT``), never the internet.

Each load runs in its own Python process with ``HF_ENDPOINT``, ``HF_HOME`` and
``HF_HUB_OFFLINE`` set as a user sets them (``huggingface_hub`` reads them as it is imported).
The decoder a Hub id gives must be the one its folder gives (whose logits are checked
against transformers in ``test_hf_model.py``): the same token ids and identical logits, from
byte-identical files; only the files the loader reads are fetched; the progress reports
start at 0 of the total and end at the total; a pinned commit in a populated cache is read
with no request at all, and ``main`` offline from the cache; every refusal is one line.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
import torch

from attention_core.pretrained import load_hf
from attention_core.pretrained.hf_hub import is_hub_id
from tests.core.hf_tiny import TinySpec, write_tiny_hf
from tests.local_hub import GATED_MARK, LocalHub, repo_commit, run_against

pytest.importorskip("transformers")
pytest.importorskip("huggingface_hub")

REPO = Path(__file__).resolve().parents[2]
PROMPT = "The quick brown fox jumps over the lazy dog."
NOT_READ = ("pytorch_model.bin", "model.gguf", "README.md")
"""Files a real repository often holds beside the safetensors, which the loader never reads
(``save_pretrained`` writes ``generation_config.json`` too)."""
READ = ("config.json", "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json")
"""What the loader reads beside the ``.safetensors`` files."""
LOAD_SCRIPT = """
import json, sys, torch
from attention_core.pretrained import load_hf
source, revision, out, prompt = sys.argv[1], sys.argv[2] or None, sys.argv[3], sys.argv[4]
events = []
try:
    decoder = load_hf(source, revision=revision, weights_dtype="float32",
                      progress=lambda done, total: events.append([done, total]))
except ValueError as err:
    print(json.dumps({"error": str(err)}))
    sys.exit(0)
ids = decoder.tokenize(prompt).input_ids
with torch.no_grad():
    torch.save(decoder(torch.tensor([ids])).logits, out)
print(json.dumps({"ids": ids, "events": events}))
"""


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """The local Hub with ``lab/tiny`` (one float32 file), ``lab/shards`` (bfloat16 shards
    with an index), ``lab/gated`` and ``lab/no-weights``; stopped after the module."""
    root = tmp_path_factory.mktemp("hub")
    tiny = write_tiny_hf(root / "lab" / "tiny", TinySpec("llama"))
    for name in NOT_READ:
        (tiny / name).write_bytes(b"not read by the lab " * 64)
    write_tiny_hf(root / "lab" / "shards", TinySpec("qwen2", tied=False, sharded_bf16=True))
    shutil.copytree(tiny, root / "lab" / "gated")
    (root / "lab" / "gated" / GATED_MARK).touch()
    shutil.copytree(tiny, root / "lab" / "no-weights")
    (root / "lab" / "no-weights" / "model.safetensors").unlink()
    server = LocalHub(root).start()
    yield server
    server.stop()


def load(hub: LocalHub, home: Path, source: str, revision: str = "", offline: bool = False):
    """Load ``source`` in a fresh process against ``hub`` with ``home`` as ``HF_HOME``: its
    JSON report and the logits it saved (None after a refusal)."""
    out = home / "logits.pt"
    args = [source, revision, str(out), PROMPT]
    report = run_against(hub.url, home, LOAD_SCRIPT, args, offline=offline)
    logits = torch.load(out) if "error" not in report else None
    out.unlink(missing_ok=True)
    return report, logits


def fetched_files(hub: LocalHub, since: int) -> set[str]:
    """The files ``GET …/resolve/…`` fetched after request number ``since``."""
    return {
        r.split("/resolve/", 1)[1].split("/", 1)[1]
        for r in hub.requests[since:]
        if r.startswith("GET ") and "/resolve/" in r
    }


def snapshot_files(home: Path, repo_id: str) -> dict[str, str]:
    """sha256 of each file of the cached snapshot of ``repo_id``."""
    folder = home / "hub" / f"models--{repo_id.replace('/', '--')}" / "snapshots"
    (snapshot,) = folder.iterdir()
    return {
        p.relative_to(snapshot).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in snapshot.rglob("*")
        if p.is_file()
    }


@pytest.mark.parametrize("repo_id", ["lab/tiny", "lab/shards"])
def test_a_hub_id_gives_its_folder_s_decoder_fetching_only_what_it_reads(hub, tmp_path, repo_id):
    folder = hub.root / repo_id
    since = len(hub.requests)
    report, logits = load(hub, tmp_path, repo_id)
    assert "error" not in report, report
    local = load_hf(folder, weights_dtype="float32")
    ids = local.tokenize(PROMPT).input_ids
    assert report["ids"] == ids
    with torch.no_grad():
        assert torch.equal(logits, local(torch.tensor([ids])).logits)
    read = {p.name for p in folder.iterdir() if p.name in READ or p.suffix == ".safetensors"}
    assert fetched_files(hub, since) == read
    assert snapshot_files(tmp_path, repo_id) == {
        name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in read
    }
    total = sum((folder / name).stat().st_size for name in read)
    events = report["events"]
    assert events[0] == [0, total] and events[-1] == [total, total]
    assert all(t == total for _, t in events)
    assert [d for d, _ in events] == sorted(d for d, _ in events)


def test_a_cached_pinned_commit_asks_nothing_and_main_reads_offline_once_seen(hub, tmp_path):
    commit = repo_commit(hub.root / "lab" / "tiny")
    first, logits = load(hub, tmp_path, "lab/tiny", commit)
    assert "error" not in first and first["events"][-1][0] > 0
    load(hub, tmp_path, "lab/tiny")  # main, online once: the cache learns main's commit
    since = len(hub.requests)
    again, again_logits = load(hub, tmp_path, "lab/tiny", commit)
    assert hub.requests[since:] == [], "a pinned, cached commit asked the Hub"
    assert again["events"] == [] and torch.equal(again_logits, logits)
    offline, offline_logits = load(hub, tmp_path, "lab/tiny", offline=True)
    assert hub.requests[since:] == []
    assert "error" not in offline, offline
    assert torch.equal(offline_logits, logits)


def test_a_hub_down_falls_back_to_the_cache_and_refuses_without_one(hub, tmp_path):
    load(hub, tmp_path, "lab/tiny")
    down = LocalHub(hub.root)  # never started: its port refuses connections
    down._server.server_close()
    cached, _ = load(down, tmp_path, "lab/tiny")
    assert "error" not in cached, cached
    fresh, _ = load(down, tmp_path / "empty", "lab/tiny")
    assert "not in the Hub cache" in fresh["error"] and "lab/tiny" in fresh["error"]
    offline, _ = load(hub, tmp_path / "empty", "lab/shards", offline=True)
    assert "not in the Hub cache" in offline["error"]


@pytest.mark.parametrize(
    ("repo_id", "revision", "words"),
    [
        ("lab/missing", "", "no model 'lab/missing'"),
        ("lab/tiny", "v9", "has no revision 'v9'"),
        ("lab/gated", "", "lab/gated is gated"),
        ("lab/no-weights", "", "no .safetensors weights"),
    ],
)
def test_what_the_hub_refuses_is_one_line_naming_it(hub, tmp_path, repo_id, revision, words):
    report, _ = load(hub, tmp_path, repo_id, revision)
    assert words in report["error"] and "\n" not in report["error"], report


@pytest.mark.parametrize(
    ("source", "revision", "words"),
    [
        ("lab/a/b", None, "no Hugging Face model folder"),
        ("-lab/tiny", None, "no Hugging Face model folder"),
        ("lab/tiny", "", "revision must be"),
    ],
)
def test_a_malformed_id_or_revision_is_refused_before_any_request(source, revision, words):
    with pytest.raises((ValueError, FileNotFoundError), match=words):
        load_hf(source, revision=revision)


def test_an_existing_folder_wins_over_a_hub_id_of_its_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_tiny_hf(tmp_path / "lab" / "local", TinySpec("llama"))
    assert not is_hub_id("lab/local") and is_hub_id("lab/elsewhere")
    assert load_hf("lab/local").config.num_layers == 2
    with pytest.raises(ValueError, match="revision is for Hub ids"):
        load_hf("lab/local", revision="main")
