"""Community Cloud's dependency file (dashboard/requirements.txt) against the root one.

Cloud reads the file beside the entrypoint before the root's; local installs and CI read the
root requirements.txt. The Cloud file must pin exactly the same packages and versions (plus,
optionally, the model package of requirements-model.txt at its version), add only PyTorch's
CPU wheel index (as an extra index, so PyPI stays the source of every other package), and the
files local installs and CI read must name no index at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

REPO_ROOT = Path(__file__).resolve().parents[2]
CLOUD_FILE = REPO_ROOT / "dashboard" / "requirements.txt"
ROOT_FILE = REPO_ROOT / "requirements.txt"
MODEL_FILE = REPO_ROOT / "requirements-model.txt"
LOCAL_FILES = ["requirements.txt", "requirements-dev.txt", "requirements-model.txt"]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def read_requirements(path: Path) -> tuple[list[str], dict[str, SpecifierSet]]:
    """``(option lines, {package name: version specifier})`` of a pip requirements file."""
    options, pins = [], {}
    for line in path.read_text("utf-8").splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            options.append(line)
            continue
        requirement = Requirement(line)
        assert requirement.name not in pins, f"{path.name} names {requirement.name} twice"
        pins[requirement.name.lower()] = requirement.specifier
    return options, pins


def test_cloud_file_pins_exactly_the_root_versions():
    _, cloud = read_requirements(CLOUD_FILE)
    _, root = read_requirements(ROOT_FILE)
    _, model = read_requirements(MODEL_FILE)
    assert {name: cloud[name] for name in root if name in cloud} == root
    extra = {name: spec for name, spec in cloud.items() if name not in root}
    assert extra == {name: model[name] for name in extra if name in model}, extra
    assert all(len(spec) == 1 and next(iter(spec)).operator == "==" for spec in root.values())


def test_cloud_file_adds_only_the_cpu_index_as_an_extra_index():
    """Options: the CPU index, and the project itself, installed editable as locally."""
    options, _ = read_requirements(CLOUD_FILE)
    root_options, _ = read_requirements(ROOT_FILE)
    assert root_options == ["-e ."]
    assert options == [f"--extra-index-url {CPU_INDEX}", "-e ."]


@pytest.mark.parametrize("name", LOCAL_FILES)
def test_local_and_ci_files_name_no_other_index(name):
    options, _ = read_requirements(REPO_ROOT / name)
    assert [o for o in options if "index" in o or "://" in o] == []
    assert set(options) <= {"-e ."}
    text = (REPO_ROOT / name).read_text("utf-8")
    assert "download.pytorch.org" not in text and "://" not in text


def test_the_cpu_build_satisfies_the_pin_and_ranks_above_pypis():
    """What the Cloud file relies on (PEP 440, as pip and uv apply it): the CPU index's
    ``2.13.0+cpu`` matches ``torch==2.13.0``, and a local version label ranks above the
    plain release, so pip, seeing both, installs the CPU build."""
    _, root = read_requirements(ROOT_FILE)
    pinned = Version(next(iter(root["torch"])).version)
    cpu_build = Version(f"{pinned}+cpu")
    assert root["torch"].contains(cpu_build)
    assert max(pinned, cpu_build) == cpu_build
