"""Finding local GGUF models (attention_core.pretrained.model_files): plain folders, nested
files, Ollama's manifests and blobs, symlinks in and out, clashing names, and names from a
link that are compared with the list, never opened."""

from __future__ import annotations

import builtins
import hashlib
import json
import os
from pathlib import Path

import pytest

from attention_core.pretrained import model_files, ollama_files
from attention_core.pretrained.model_files import ModelFile, find_models, resolve_model
from attention_core.pretrained.ollama_files import model_digest, ollama_name
from tests.hostile import refuse_opening

BODY = b"GGUF" + bytes(60)  # the magic is all the finder reads


def _write(path: Path, data: bytes = BODY) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _ollama_model(root: Path, parts: tuple[str, str, str, str], data: bytes = BODY) -> Path:
    """A manifest at manifests/<host>/<namespace>/<model>/<tag> and its model blob, as Ollama
    writes them (a config layer first, then the model layer)."""
    digest = hashlib.sha256(data).hexdigest()
    blob = _write(root / "blobs" / f"sha256-{digest}", data)
    config = _write(root / "blobs" / f"sha256-{'0' * 64}", b"{}")
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json"},
        "layers": [
            {"mediaType": "application/vnd.ollama.image.license", "digest": f"sha256:{'0' * 64}"},
            {
                "mediaType": "application/vnd.ollama.image.model",
                "digest": f"sha256:{digest}",
                "size": len(data),
            },
        ],
    }
    _write(root / "manifests" / Path(*parts), json.dumps(manifest).encode())
    assert config.exists()
    return blob


def test_a_plain_folder_lists_its_gguf_files_sorted_with_sizes(tmp_path):
    _write(tmp_path / "b.gguf")
    _write(tmp_path / "a.gguf", BODY + b"more")
    found = find_models([tmp_path])
    assert [m.name for m in found] == ["a.gguf", "b.gguf"]
    assert found[0] == ModelFile("a.gguf", (tmp_path / "a.gguf").resolve(), len(BODY) + 4, "gguf")
    assert {m.kind for m in found} == {"gguf"}


def test_nested_files_are_named_by_their_relative_path_down_to_the_depth_bound(tmp_path):
    _write(tmp_path / "org" / "repo" / "model-Q4_K_M.gguf")
    folders = [f"d{i}" for i in range(model_files.MAX_DEPTH + 1)]
    deep = _write(tmp_path.joinpath(*folders, "deep.gguf"))
    just_inside = tmp_path.joinpath(*folders[:-1], "x.gguf")
    _write(just_inside)
    names = [m.name for m in find_models([tmp_path])]
    assert "org/repo/model-Q4_K_M.gguf" in names
    assert just_inside.relative_to(tmp_path).as_posix() in names
    assert deep.relative_to(tmp_path).as_posix() not in names


def test_files_without_the_magic_or_the_suffix_are_ignored(tmp_path):
    _write(tmp_path / "model.gguf")
    _write(tmp_path / "fake.gguf", b"PK\x03\x04 a zip, not a model")
    _write(tmp_path / "empty.gguf", b"")
    _write(tmp_path / "model.bin", BODY)
    _write(tmp_path / "notes.txt", b"GGUF but a text")
    (tmp_path / "folder.gguf").mkdir()
    assert [m.name for m in find_models([tmp_path])] == ["model.gguf"]


def test_an_upper_case_suffix_counts(tmp_path):
    _write(tmp_path / "MODEL.GGUF")
    assert [m.name for m in find_models([tmp_path])] == ["MODEL.GGUF"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_is_never_opened(tmp_path):
    os.mkfifo(tmp_path / "pipe.gguf")  # opening it for reading would block forever
    _write(tmp_path / "ok.gguf")
    assert [m.name for m in find_models([tmp_path])] == ["ok.gguf"]


def test_an_ollama_folder_lists_model_tag_names_pointing_at_their_blobs(tmp_path):
    root = tmp_path / "ollama"
    blob = _ollama_model(root, ("registry.ollama.ai", "library", "llama3.2", "1b"))
    other = _ollama_model(
        root, ("registry.ollama.ai", "someone", "tiny", "latest"), BODY + b"other"
    )
    hub = _ollama_model(root, ("hf.co", "org", "repo-GGUF", "Q4_K_M"), BODY + b"hub")
    found = find_models([root])
    assert [(m.name, m.path, m.kind) for m in found] == [
        ("hf.co/org/repo-GGUF:Q4_K_M", hub.resolve(), "ollama"),
        ("llama3.2:1b", blob.resolve(), "ollama"),
        ("someone/tiny:latest", other.resolve(), "ollama"),
    ]
    assert found[1].size == len(BODY)


def test_an_ollama_folder_skips_bad_manifests_and_missing_or_foreign_blobs(tmp_path):
    root = tmp_path / "ollama"
    _ollama_model(root, ("registry.ollama.ai", "library", "good", "1b"))
    manifests = root / "manifests" / "registry.ollama.ai" / "library"
    _write(manifests / "broken" / "1b", b"{not json")
    _write(manifests / "nolayer" / "1b", json.dumps({"layers": []}).encode())
    _write(manifests / "list" / "1b", b"[1, 2, 3]")
    escape = {"mediaType": ollama_files.OLLAMA_MODEL_MEDIA_TYPE, "digest": "sha256:../../x"}
    _write(manifests / "escape" / "1b", json.dumps({"layers": [escape]}).encode())
    missing = {"mediaType": ollama_files.OLLAMA_MODEL_MEDIA_TYPE, "digest": f"sha256:{'a' * 64}"}
    _write(manifests / "missing" / "1b", json.dumps({"layers": [missing]}).encode())
    not_gguf = _ollama_model(root, ("registry.ollama.ai", "library", "notgguf", "1b"), b"ZIP!")
    assert not_gguf.exists()
    _write(root / "manifests" / "shallow", b"{}")
    assert [m.name for m in find_models([root])] == ["good:1b"]


def test_the_digest_must_be_sha256_hex_and_names_follow_ollama():
    layer = {"mediaType": ollama_files.OLLAMA_MODEL_MEDIA_TYPE, "digest": "sha256:" + "ab" * 32}
    assert model_digest({"layers": [layer]}) == "ab" * 32
    for digest in ("sha256:" + "AB" * 32, "sha256:abc", "md5:" + "ab" * 32, None, 7):
        assert model_digest({"layers": [{**layer, "digest": digest}]}) is None
    assert model_digest(None) is None and model_digest({"layers": "x"}) is None
    assert ollama_name(("registry.ollama.ai", "library", "qwen3", "0.6b")) == "qwen3:0.6b"
    with pytest.raises(ValueError, match="host/namespace/model/tag"):
        ollama_name(("library", "qwen3", "0.6b"))


def test_a_symlink_pointing_outside_is_refused_and_one_inside_allowed(tmp_path):
    models, outside = tmp_path / "models", tmp_path / "outside"
    secret = _write(outside / "secret.gguf")
    _write(models / "real.gguf")
    (models / "escape.gguf").symlink_to(secret)
    (models / "alias.gguf").symlink_to(models / "real.gguf")
    (models / "linked_dir").symlink_to(outside, target_is_directory=True)
    found = {m.name: m for m in find_models([models])}
    assert sorted(found) == ["alias.gguf", "real.gguf"]
    assert found["alias.gguf"].path == (models / "real.gguf").resolve()
    assert all(m.path.is_relative_to(models.resolve()) for m in found.values())


def test_a_symlink_into_another_configured_folder_is_allowed(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    target = _write(second / "shared.gguf")
    first.mkdir()
    (first / "link.gguf").symlink_to(target)
    names = [m.name for m in find_models([first, second])]
    assert names == ["link.gguf", "shared.gguf"]
    assert [m.name for m in find_models([first])] == []


def test_an_ollama_blob_symlinked_outside_is_refused(tmp_path):
    root = tmp_path / "ollama"
    blob = _ollama_model(root, ("registry.ollama.ai", "library", "m", "1b"))
    moved = _write(tmp_path / "elsewhere" / blob.name)
    blob.unlink()
    blob.symlink_to(moved)
    assert find_models([root]) == ()


def test_names_that_clash_across_folders_get_their_folder_name(tmp_path):
    a, b = tmp_path / "lmstudio", tmp_path / "llamacpp"
    _write(a / "same.gguf")
    _write(a / "only_a.gguf")
    _write(b / "same.gguf")
    names = [m.name for m in find_models([a, b])]
    assert names == ["only_a.gguf", "lmstudio/same.gguf", "llamacpp/same.gguf"]
    assert len(set(names)) == len(names)


def test_clashing_folders_of_the_same_name_are_numbered(tmp_path):
    a, b = tmp_path / "x" / "models", tmp_path / "y" / "models"
    _write(a / "m.gguf")
    _write(b / "m.gguf")
    assert [m.name for m in find_models([a, b])] == ["models/m.gguf", "models (2)/m.gguf"]


def test_missing_unreadable_and_repeated_folders_are_skipped(tmp_path):
    _write(tmp_path / "m.gguf")
    folders = [tmp_path / "missing", tmp_path / "m.gguf", "bad\0name", tmp_path, tmp_path]
    assert [m.name for m in find_models(folders)] == ["m.gguf"]
    assert find_models([]) == ()
    with pytest.raises(ValueError, match="collection"):
        find_models(str(tmp_path))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every folder")
def test_an_unreadable_subfolder_is_skipped(tmp_path):
    _write(tmp_path / "ok.gguf")
    locked = tmp_path / "locked"
    _write(locked / "hidden.gguf")
    locked.chmod(0)
    try:
        assert [m.name for m in find_models([tmp_path])] == ["ok.gguf"]
    finally:
        locked.chmod(0o755)


def test_an_unreadable_file_is_skipped(tmp_path, monkeypatch):
    _write(tmp_path / "ok.gguf")
    _write(tmp_path / "locked.gguf")
    refuse_opening(monkeypatch, "locked.gguf")
    assert [m.name for m in find_models([tmp_path])] == ["ok.gguf"]


REFUSED_NAMES = [
    "../../etc/passwd",
    "..",
    "/etc/passwd",
    "/tmp/model.gguf",
    "model.gguf\0",
    "a\0b",
    "",
    "sub/../model.gguf",
    "./model.gguf",
    "MODEL.gguf",
    "model.gguf ",
    "llama3.2:1b",
    "C:\\models\\model.gguf",
]


@pytest.mark.parametrize("name", REFUSED_NAMES)
def test_a_name_not_in_the_list_is_refused_without_touching_the_disk(tmp_path, monkeypatch, name):
    _write(tmp_path / "model.gguf")
    listed = find_models([tmp_path])

    def no_disk(*args, **kwargs):
        raise AssertionError(f"the disk was touched for {name!r}")

    for module, attribute in ((os, "stat"), (os, "open"), (os, "lstat"), (builtins, "open")):
        monkeypatch.setattr(module, attribute, no_disk)
    with pytest.raises(ValueError) as refused:
        resolve_model(name, listed)
    assert repr(name) in str(refused.value)


def test_a_listed_name_resolves_and_other_values_are_refused(tmp_path):
    _write(tmp_path / "sub" / "model.gguf")
    listed = find_models([tmp_path])
    assert resolve_model("sub/model.gguf", listed) is listed[0]
    for value in (None, 3, b"sub/model.gguf", Path("sub/model.gguf")):
        with pytest.raises(ValueError, match="no model is listed"):
            resolve_model(value, listed)
