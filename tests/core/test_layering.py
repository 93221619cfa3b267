"""attention_core is computation only: it never imports streamlit, altair or dashboard."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import attention_core

FORBIDDEN = ("streamlit", "altair", "dashboard")
CORE_DIR = Path(attention_core.__file__).resolve().parent
REPO_ROOT = CORE_DIR.parent
DYNAMIC_IMPORT = re.compile(r"(?:import_module|__import__)\(\s*[\"'](streamlit|altair|dashboard)")


def test_importing_attention_core_loads_no_ui_module():
    code = (
        "import attention_core, sys; "
        f"print([m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert result.stdout.strip() == "[]", result.stdout + result.stderr


def _imported_roots(source: str) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_no_source_file_imports_ui_modules():
    files = sorted(CORE_DIR.rglob("*.py"))
    assert len(files) > 5
    offenders = {}
    for path in files:
        source = path.read_text(encoding="utf-8")
        bad = _imported_roots(source) & set(FORBIDDEN)
        bad.update(DYNAMIC_IMPORT.findall(source))
        if bad:
            offenders[str(path.relative_to(REPO_ROOT))] = sorted(bad)
    assert not offenders, offenders


def test_the_import_scanner_sees_imports():
    found = _imported_roots("import streamlit as st\nfrom altair import Chart\nfrom . import x\n")
    assert found == {"streamlit", "altair"}
    assert DYNAMIC_IMPORT.findall("importlib.import_module('dashboard.app')") == ["dashboard"]
