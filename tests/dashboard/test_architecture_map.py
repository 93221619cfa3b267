"""The map in docs/ARCHITECTURE.md stays current: every Python module of ``attention_core/``,
``bench/`` and ``dashboard/`` has a row in its folder's table, and no row names a module that
is gone.

A folder's table is the one under the heading that starts with the folder's path (``##
attention_core/``, ``### dashboard/data/ — cached calls only``); a row names a module by its
file name in backticks in the first column.
"""

from __future__ import annotations

import re

from tests.dashboard.conftest import REPO_ROOT

MAP = REPO_ROOT / "docs" / "ARCHITECTURE.md"
PACKAGES = ("attention_core", "bench", "dashboard")
HEADING = re.compile(r"^#{2,3} `?([\w./]+/)`?")
ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|")


def rows_by_folder(text: str) -> dict[str, set[str]]:
    """The file names listed in each folder's table of the map.

    Args:
        text: the map's Markdown.

    Returns:
        ``{"dashboard/data": {"runs.py", …}, …}``: for each heading that starts with a folder
        path, the first-column names of the table rows below it (until the next heading).
    """
    rows: dict[str, set[str]] = {}
    folder = None
    for line in text.splitlines():
        if line.startswith("#"):
            heading = HEADING.match(line)
            folder = heading.group(1).rstrip("/") if heading else None
            if folder is not None:
                rows.setdefault(folder, set())
        elif folder is not None and (row := ROW.match(line)):
            rows[folder].add(row.group(1))
    return rows


def python_modules() -> set[str]:
    """Every ``.py`` file of the packages, as a path relative to the repository root."""
    return {
        path.relative_to(REPO_ROOT).as_posix()
        for package in PACKAGES
        for path in (REPO_ROOT / package).rglob("*.py")
        if "__pycache__" not in path.parts
    }


def listed_modules(rows: dict[str, set[str]]) -> set[str]:
    """The ``.py`` paths the map's tables name under the packages."""
    return {
        f"{folder}/{name}"
        for folder, names in rows.items()
        if folder.split("/")[0] in PACKAGES
        for name in names
        if name.endswith(".py")
    }


def test_the_reader_sees_tables_under_folder_headings():
    text = "## `pkg/`\n\n| module | lines |\n|---|---|\n| `a.py` | 3 |\n\n### pkg/sub/ — x\n"
    text += "| `b.py` | 4 |\n## Elsewhere\n| `c.py` | 5 |\n"
    assert rows_by_folder(text) == {"pkg": {"a.py"}, "pkg/sub": {"b.py"}}


def test_the_map_has_a_table_for_every_package_folder():
    rows = rows_by_folder(MAP.read_text(encoding="utf-8"))
    folders = {path.rsplit("/", 1)[0] for path in python_modules()}
    assert len(folders) >= 8  # the rule sees the packages' sub-folders
    assert sorted(folders - set(rows)) == []


def test_every_module_is_named_in_the_map():
    listed = listed_modules(rows_by_folder(MAP.read_text(encoding="utf-8")))
    assert sorted(python_modules() - listed) == []


def test_the_map_names_no_module_that_is_gone():
    listed = listed_modules(rows_by_folder(MAP.read_text(encoding="utf-8")))
    assert sorted(listed - python_modules()) == []


TESTS_ROW = re.compile(r"^\|\s*`(tests/[\w/]*)`\s*\|\s*(\d+)\s*\|")


def test_the_tests_table_counts_each_folders_test_files():
    text = MAP.read_text(encoding="utf-8")
    table = text[text.index("\n## tests/\n") :].split("\n## ", 2)[1]
    listed = {
        m.group(1): int(m.group(2)) for line in table.splitlines() if (m := TESTS_ROW.match(line))
    }
    tests = REPO_ROOT / "tests"
    folders = [
        tests,
        *(p for p in sorted(tests.iterdir()) if p.is_dir() and p.name != "__pycache__"),
    ]
    actual = {
        f"{folder.relative_to(REPO_ROOT).as_posix()}/": len(list(folder.glob("test_*.py")))
        for folder in folders
    }
    assert listed == actual
