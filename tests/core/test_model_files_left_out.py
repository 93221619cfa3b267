"""Files a models folder holds that are not listed say why: an empty file,
a link that leaves the folder, a blob an Ollama manifest names but the folder lacks, an
architecture not supported; and a listed file that cannot be read names what it claims and
what it has, in human sizes (``TruncatedFileError``, a ``ValueError``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from attention_core.device import format_bytes
from attention_core.pretrained import ARCHITECTURES, load_gguf, parse_gguf
from attention_core.pretrained.binary import TruncatedFileError, size_pair
from attention_core.pretrained.gguf_file import header_value
from attention_core.pretrained.model_files import (
    MAX_MODELS,
    LeftOut,
    ModelFileError,
    find_models,
    left_out_reason,
    scan_models,
)
from attention_core.pretrained.ollama_files import OLLAMA_MODEL_MEDIA_TYPE
from tests.hostile import gguf_claiming, refuse_opening
from tests.tiny_gguf import write_tiny_gguf

TIB, MIB = 2**40, 2**20
SUPPORTED = ", ".join(ARCHITECTURES)


def _left_out(folders) -> dict[str, LeftOut]:
    return {entry.name: entry for entry in scan_models(folders).left_out}


def test_an_empty_file_is_left_out_as_empty(tmp_path):
    write_tiny_gguf(tmp_path / "tiny.gguf")
    (tmp_path / "empty.gguf").write_bytes(b"")
    scan = scan_models([tmp_path])
    assert [m.name for m in scan.models] == ["tiny.gguf"]
    assert scan.left_out == (LeftOut("empty.gguf", "empty"),)


def test_a_link_that_leaves_the_folder_is_left_out_as_outside(tmp_path):
    models, elsewhere = tmp_path / "models", tmp_path / "elsewhere"
    models.mkdir()
    elsewhere.mkdir()
    target = write_tiny_gguf(elsewhere / "secret.gguf").path
    (models / "escape.gguf").symlink_to(target)
    (models / "gone.gguf").symlink_to(elsewhere / "absent.gguf")
    assert find_models([models]) == ()
    assert _left_out([models]) == {
        "escape.gguf": LeftOut("escape.gguf", "outside"),
        "gone.gguf": LeftOut("gone.gguf", "broken_link"),
    }


def _manifest(root: Path, model: str, digest: str) -> None:
    layer = {"mediaType": OLLAMA_MODEL_MEDIA_TYPE, "digest": f"sha256:{digest}"}
    path = root / "manifests" / "registry.ollama.ai" / "library" / model / "latest"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"layers": [layer]}))


def test_a_blob_the_manifest_names_but_the_folder_lacks_is_left_out(tmp_path):
    root = tmp_path / "ollama"
    (root / "blobs").mkdir(parents=True)
    _manifest(root, "gone", "ab" * 32)
    (root / "manifests" / "registry.ollama.ai" / "library" / "junk").mkdir()
    (root / "manifests" / "registry.ollama.ai" / "library" / "junk" / "1b").write_text("{no")
    assert find_models([root]) == ()
    assert _left_out([root]) == {
        "gone:latest": LeftOut("gone:latest", "missing_blob", (("blob", f"sha256-{'ab' * 6}…"),)),
        "junk:1b": LeftOut("junk:1b", "bad_manifest"),
    }


def test_an_architecture_not_supported_is_left_out_naming_the_supported_ones(tmp_path):
    write_tiny_gguf(tmp_path / "gemma.gguf", extra=(("general.architecture", "gemma"),))
    detail = (("architecture", "gemma"), ("supported", SUPPORTED))
    assert _left_out([tmp_path]) == {"gemma.gguf": LeftOut("gemma.gguf", "architecture", detail)}
    assert header_value((tmp_path / "gemma.gguf").read_bytes(), "general.architecture") == "gemma"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_files_without_the_magic_pipes_and_unreadable_ones_say_so(tmp_path, monkeypatch):
    (tmp_path / "zip.gguf").write_bytes(b"PK\x03\x04")
    os.mkfifo(tmp_path / "pipe.gguf")  # never opened: reading it would block
    (tmp_path / "folder.gguf").mkdir()  # a folder is no file: not mentioned
    (tmp_path / "locked.gguf").write_bytes(b"GGUF" + bytes(60))
    (tmp_path / "notes.txt").write_text("not a model, not mentioned")
    refuse_opening(monkeypatch, "locked.gguf")
    assert _left_out([tmp_path]) == {
        "locked.gguf": LeftOut("locked.gguf", "unreadable", (("error", "Permission denied"),)),
        "pipe.gguf": LeftOut("pipe.gguf", "not_a_file"),
        "zip.gguf": LeftOut("zip.gguf", "not_gguf"),
    }


def test_left_out_names_clash_across_folders_like_listed_ones(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    write_tiny_gguf(a / "m.gguf")
    (b / "m.gguf").write_bytes(b"")
    scan = scan_models([a, b])
    assert [m.name for m in scan.models] == ["a/m.gguf"]
    assert scan.left_out == (LeftOut("b/m.gguf", "empty"),)


def test_a_name_is_looked_up_in_the_left_out_list_only(tmp_path):
    (tmp_path / "empty.gguf").write_bytes(b"")
    left_out = scan_models([tmp_path]).left_out
    assert left_out_reason("empty.gguf", left_out) == LeftOut("empty.gguf", "empty")
    for name in (str(tmp_path / "empty.gguf"), "../empty.gguf", None, 3, ""):
        assert left_out_reason(name, left_out) is None


def test_the_walk_stays_bounded_counting_files_left_out(tmp_path, monkeypatch):
    monkeypatch.setattr("attention_core.pretrained.model_files.MAX_MODELS", 3)
    for index in range(5):
        (tmp_path / f"e{index}.gguf").write_bytes(b"")
    assert [e.name for e in scan_models([tmp_path]).left_out] == ["e0.gguf", "e1.gguf", "e2.gguf"]
    assert MAX_MODELS >= 1000


@pytest.mark.parametrize(
    ("nbytes", "text"),
    [
        (0, "0 B"),
        (1536, "1.5 KiB"),
        (2 * MIB, "2.0 MiB"),
        (3 * 2**30, "3.0 GiB"),
        (16 * TIB, "16.0 TiB"),
        (2**63, "8.0 EiB"),
    ],
)
def test_human_sizes_go_up_to_eib(nbytes, text):
    assert format_bytes(nbytes) == text


def test_sizes_that_would_read_the_same_are_given_in_bytes():
    assert size_pair(16 * TIB, 2 * MIB) == ("16.0 TiB", "2.0 MiB")
    assert size_pair(2 * MIB + 48, 2 * MIB) == ("2,097,200 bytes", "2,097,152 bytes")


def test_a_file_claiming_16_tib_is_refused_with_both_sizes(tmp_path):
    path = tmp_path / "huge.gguf"
    path.write_bytes(gguf_claiming(16 * TIB, 2 * MIB))
    assert [m.name for m in find_models([tmp_path])] == ["huge.gguf"]  # its header is sound
    message = "tensor 'token_embd.weight' claims 16.0 TiB; the file has 2.0 MiB"
    with pytest.raises(TruncatedFileError, match=message) as caught:
        load_gguf(path)
    assert (caught.value.claimed // TIB, caught.value.size) == (16, 2 * MIB)
    assert isinstance(caught.value, ValueError)


def test_a_truncated_file_names_the_field_and_both_sizes(tmp_path):
    data = write_tiny_gguf(tmp_path / "tiny.gguf").path.read_bytes()
    cut = data[: len(data) // 2]
    with pytest.raises(TruncatedFileError, match=r"claims .*iB; the file has .*iB") as caught:
        parse_gguf(cut)
    assert caught.value.size == len(cut) and caught.value.claimed > len(cut)


def test_a_model_file_error_names_the_file_and_its_cause():
    cause = TruncatedFileError("GGUF file", "tensor 'x'", 16 * TIB, 2 * MIB)
    err = ModelFileError("huge.gguf", cause)
    assert isinstance(err, ValueError) and err.cause is cause and err.name == "huge.gguf"
    assert str(err) == (
        "the model file 'huge.gguf' cannot be read: GGUF file truncated: tensor 'x' claims "
        "16.0 TiB; the file has 2.0 MiB"
    )
    denied = ModelFileError("m.gguf", PermissionError(13, "Permission denied", "/srv/m.gguf"))
    assert str(denied) == "the model file 'm.gguf' cannot be read: Permission denied"
