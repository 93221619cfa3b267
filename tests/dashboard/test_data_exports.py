"""The export table of ``dashboard/data/__init__.py`` is the one list of the data layer's
public names: every name in it exists in its module, every public function and class a
module defines is in it, every ``data.X`` the dashboard and the tests use is in it, and no
name has two owners."""

from __future__ import annotations

import ast
import importlib
import re
from collections import Counter
from pathlib import Path

import pytest

from dashboard import data

DATA_DIR = Path(data.__file__).parent
DASHBOARD_DIR = DATA_DIR.parent
TESTS_DIR = Path(__file__).parent

MODULE_ONLY = {"memo", "serving"}
"""Modules the dashboard imports as modules (``from dashboard.data import memo``): they
export nothing through the table."""

HELPERS = {
    "decoder": {"prompt_ids"},
    "runs": {"shown_scores", "zero_fraction", "identity_queries_and_keys"},
    "training": {"single_threaded_steps"},
}
"""Public functions and classes a module keeps for its own cached calls (and its tests,
which import them from the module): private by intent, not in the table."""

DATA_ATTRIBUTE = re.compile(r"\bdata\.([A-Za-z_][A-Za-z0-9_]*)")


def _defined(module: str, kinds: tuple[type, ...]) -> set[str]:
    """Top-level public names a module's source defines with one of the AST ``kinds``."""
    tree = ast.parse((DATA_DIR / f"{module}.py").read_text(encoding="utf-8"))
    return {
        node.name for node in tree.body if isinstance(node, kinds) and not node.name.startswith("_")
    }


def _files_using_data() -> list[Path]:
    """The dashboard's and the tests' Python files that bind ``data`` to this package."""
    found = []
    for root in (DASHBOARD_DIR, TESTS_DIR):
        for path in sorted(root.rglob("*.py")):
            if DATA_DIR in path.parents or path == Path(__file__):
                continue
            if re.search(r"from dashboard import [^\n]*\bdata\b", path.read_text("utf-8")):
                found.append(path)
    return found


def test_no_name_has_two_owners():
    counts = Counter(name for names in data._EXPORTS.values() for name in names)
    assert sorted(name for name, n in counts.items() if n > 1) == []


@pytest.mark.parametrize("module", sorted(data._EXPORTS))
def test_every_exported_name_is_its_modules_own_object(module):
    mod = importlib.import_module(f"dashboard.data.{module}")
    missing = [name for name in data._EXPORTS[module] if not hasattr(mod, name)]
    assert missing == []
    for name in data._EXPORTS[module]:
        assert getattr(data, name) is getattr(mod, name), name


@pytest.mark.parametrize("module", sorted(data._EXPORTS))
def test_every_public_function_and_class_is_exported(module):
    defined = _defined(module, (ast.FunctionDef, ast.ClassDef))
    unexported = defined - set(data._EXPORTS[module]) - HELPERS.get(module, set())
    assert sorted(unexported) == [], f"add to _EXPORTS[{module!r}] or make private"


def test_helpers_allow_list_names_real_unexported_definitions():
    for module, names in HELPERS.items():
        defined = _defined(module, (ast.FunctionDef, ast.ClassDef))
        assert names <= defined, module
        assert not names & set(data._EXPORTS[module]), module


def test_every_data_module_is_in_the_table_or_imported_as_a_module():
    modules = {p.stem for p in DATA_DIR.glob("*.py") if p.stem != "__init__"}
    assert sorted(modules - set(data._EXPORTS) - MODULE_ONLY) == []
    assert set(data._EXPORTS) <= modules


def test_every_data_attribute_the_code_uses_is_exported():
    files = _files_using_data()
    assert len(files) > 10, "the scan found suspiciously few users of dashboard.data"
    modules = {p.stem for p in DATA_DIR.glob("*.py")}
    unknown = sorted(
        f"{path.relative_to(DASHBOARD_DIR.parent)}: data.{name}"
        for path in files
        for name in DATA_ATTRIBUTE.findall(path.read_text(encoding="utf-8"))
        if name not in data.__all__ and name not in modules
    )
    assert unknown == []


def test_dir_and_all_list_every_export_and_unknown_names_raise():
    exported = {name for names in data._EXPORTS.values() for name in names}
    assert set(data.__all__) == exported
    assert exported <= set(dir(data))
    with pytest.raises(AttributeError, match="no_such_name"):
        data.no_such_name  # noqa: B018
