"""A Hugging Face Hub served from a local folder on 127.0.0.1, for ``HF_ENDPOINT``.

``root/<owner>/<name>/`` holds one model repository's files. The server answers the four
requests ``huggingface_hub`` makes to fetch a snapshot, as the Hub answers them:

* ``GET /api/models/<owner>/<name>/revision/<rev>``: the commit and the file list;
* ``GET /api/models/<owner>/<name>/tree/<rev>``: each file's size, git oid and, for weights,
  its LFS sha256;
* ``HEAD`` and ``GET /<owner>/<name>/resolve/<rev>/<path>``: the file, with ``X-Repo-Commit``,
  its ``ETag`` and ``Content-Length`` (a ``Range`` request gets the rest of a file).

A repository's one commit is the SHA-1 of its files' names and bytes, or the one given for it
(a real repository's pinned commit); ``main`` names it. An
unknown repository or revision gets the Hub's 404 with its ``X-Error-Code``; a repository
holding a file named :data:`GATED_MARK` answers 403 ``GatedRepo``. Every request is kept in
:attr:`LocalHub.requests`, so a test can tell whether a load touched the network.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

GATED_MARK = ".gated"
LFS_SUFFIXES = (".safetensors", ".gguf", ".bin")
CHUNK = 1 << 20


def _files(repo: Path) -> list[Path]:
    return sorted(p for p in repo.rglob("*") if p.is_file() and p.name != GATED_MARK)


def repo_commit(repo: Path) -> str:
    """The repository's one commit: SHA-1 of its files' relative names and bytes."""
    digest = hashlib.sha1()
    for path in _files(repo):
        digest.update(path.relative_to(repo).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    hub: LocalHub

    def log_message(self, *_args) -> None:  # quiet: the test reads hub.requests instead
        return None

    def _error(self, status: int, code: str, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, value) -> None:
        body = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _repo(self, owner: str, name: str, rev: str) -> tuple[Path, str] | None:
        repo = self.hub.root / owner / name
        if not repo.is_dir():
            self._error(404, "RepoNotFound", f"Repository {owner}/{name} not found")
            return None
        if (repo / GATED_MARK).exists():
            self._error(403, "GatedRepo", f"Access to {owner}/{name} is restricted")
            return None
        commit = self.hub.commits.get(f"{owner}/{name}") or repo_commit(repo)
        if unquote(rev) not in ("main", commit):
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            return None
        return repo, commit

    def _api(self, parts: list[str]) -> None:
        # api / models / owner / name / (revision|tree) / rev [/ path...]
        if len(parts) < 6 or parts[1] != "models" or parts[4] not in ("revision", "tree"):
            self._error(404, "EntryNotFound", "unknown API route")
            return
        found = self._repo(parts[2], parts[3], parts[5])
        if found is None:
            return
        repo, commit = found
        files = _files(repo)
        if parts[4] == "revision":
            self._json(
                {
                    "id": f"{parts[2]}/{parts[3]}",
                    "modelId": f"{parts[2]}/{parts[3]}",
                    "sha": commit,
                    "private": False,
                    "siblings": [{"rfilename": p.relative_to(repo).as_posix()} for p in files],
                }
            )
            return
        entries = []
        for path in files:
            data = path.read_bytes()
            entry = {
                "type": "file",
                "oid": _git_oid(data),
                "size": len(data),
                "path": path.relative_to(repo).as_posix(),
            }
            if path.suffix in LFS_SUFFIXES:
                lfs = hashlib.sha256(data).hexdigest()
                entry["lfs"] = {"oid": lfs, "size": len(data), "pointerSize": 134}
            entries.append(entry)
        self._json(entries)

    def _resolve(self, parts: list[str]) -> None:
        # owner / name / resolve / rev / path...
        found = self._repo(parts[0], parts[1], parts[3])
        if found is None:
            return
        repo, commit = found
        path = Path(os.path.normpath(repo.joinpath(*parts[4:])))  # a link inside may lead out
        if not path.is_file() or repo not in path.parents:
            self._error(404, "EntryNotFound", f"{'/'.join(parts[4:])} not found")
            return
        data_size = path.stat().st_size
        if path.suffix in LFS_SUFFIXES:
            etag = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            etag = _git_oid(path.read_bytes())
        start = 0
        ranged = self.headers.get("Range", "")
        if ranged.startswith("bytes=") and ranged[6:].split("-")[0].isdigit():
            start = min(int(ranged[6:].split("-")[0]), data_size)
        self.send_response(206 if start else 200)
        self.send_header("X-Repo-Commit", commit)
        self.send_header("ETag", f'"{etag}"')
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(data_size - start))
        if start:
            self.send_header("Content-Range", f"bytes {start}-{data_size - 1}/{data_size}")
        self.end_headers()
        if self.command == "HEAD":
            return
        with path.open("rb") as handle:
            handle.seek(start)
            while chunk := handle.read(self.hub.chunk_bytes):
                self.wfile.write(chunk)
                if self.hub.chunk_delay_s:
                    threading.Event().wait(self.hub.chunk_delay_s)

    def _route(self) -> None:
        self.hub.requests.append(f"{self.command} {self.path}")
        parts = [unquote(p) for p in urlsplit(self.path).path.strip("/").split("/")]
        if parts and parts[0] == "api":
            self._api(parts)
        elif len(parts) >= 5 and parts[2] == "resolve":
            self._resolve(parts)
        else:
            self._error(404, "EntryNotFound", "unknown route")

    do_GET = _route
    do_HEAD = _route


class LocalHub:
    """The server: :meth:`start` it, hand :attr:`url` to ``HF_ENDPOINT``, :meth:`stop` it.

    Attributes:
        root: the folder of repositories (``root/<owner>/<name>/``).
        requests: ``"METHOD /path"`` of every request, in order.
        chunk_delay_s: a pause after each ``chunk_bytes`` sent (a slow link, to watch a
            download).
        commits: a repository's commit where it must be a given one (``owner/name`` -> 40
            hex digits: the commit a real repository pins), instead of :func:`repo_commit`.
    """

    def __init__(
        self,
        root: Path,
        chunk_delay_s: float = 0.0,
        chunk_bytes: int = CHUNK,
        commits: dict[str, str] | None = None,
    ) -> None:
        self.root = Path(root)
        self.commits = dict(commits or {})
        self.requests: list[str] = []
        self.chunk_delay_s, self.chunk_bytes = chunk_delay_s, chunk_bytes
        handler = type("Handler", (_Handler,), {"hub": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> LocalHub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def shipped_models_hub(root: Path) -> LocalHub | None:
    """A Hub (not yet started) in ``root`` whose repositories are the lab's pinned Hub copies
    of SmolLM2 (its GGUF file) and MiniLM (the package's whole model folder, as the real
    repository holds more than the three files the lab reads), linking the installed
    packages' own files; None when either package is not installed here."""
    from attention_core.pretrained import minilm, smollm2

    gguf, folder = smollm2.installed_gguf_path(), minilm.installed_model_folder()
    if gguf is None or folder is None:
        return None
    (root / smollm2.SMOLLM2_HUB_REPO).mkdir(parents=True)
    (root / smollm2.SMOLLM2_HUB_REPO / smollm2.SMOLLM2_HUB_FILE).symlink_to(gguf)
    (root / minilm.MINILM_HUB_REPO).mkdir(parents=True)
    for path in folder.iterdir():
        link = root / minilm.MINILM_HUB_REPO / path.name
        link.symlink_to(path, target_is_directory=path.is_dir())
    commits = {
        smollm2.SMOLLM2_HUB_REPO: smollm2.SMOLLM2_HUB_REVISION,
        minilm.MINILM_HUB_REPO: minilm.MINILM_HUB_REVISION,
    }
    return LocalHub(root, commits=commits)


def unreachable_hub(folder: Path) -> str:
    """The address of a Hub that refuses every connection (a port bound, then closed)."""
    down = LocalHub(folder)
    url = down.url
    down._server.server_close()
    return url


def point_hub_at(monkeypatch, url: str, cache: Path) -> None:
    """Point an already imported ``huggingface_hub`` at ``url`` with ``cache`` as its Hub
    cache, for one test (a process that imports it afterwards reads ``HF_ENDPOINT`` and
    ``HF_HUB_CACHE`` itself): its module constants are what those variables set."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", url)
    template = url + "/{repo_id}/resolve/{revision}/{filename}"
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


def run_against(
    url: str, home: Path, script: str, args: list[str], *, offline: bool = False
) -> dict:
    """Run ``script`` (``python -c``) with ``args`` in a fresh process whose ``huggingface_hub``
    reads the Hub at ``url`` and keeps its cache in ``home`` (``HF_HOME``; ``HF_HUB_OFFLINE``
    as ``offline`` says; no token), as a user's process would; its last line of output, JSON."""
    env = {
        **os.environ,
        "HF_ENDPOINT": url,
        "HF_HOME": str(home),
        "HF_HUB_OFFLINE": "1" if offline else "0",
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    env.pop("HF_TOKEN", None)
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
