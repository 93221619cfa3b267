"""The documents stay short and true: README.md and docs/ARCHITECTURE.md within their sizes,
the map's rows short and free of line counts, and every code name or repository path the
documents put in backticks present in the code.

What counts as a code name is strict, so prose, shell commands and values pass untouched: a
backticked span outside fenced code blocks that is a repository path (``dashboard/app.py``,
``views/heads_at_work/``, ``tests/x.py::test_y``), a file name with a code extension
(``band.c``), an identifier with an underscore or two capitalised humps (``dense_attention``,
``MAX_INPUT_LEN``, ``LayerConfig``), a dotted name of such parts (``band_kernel.status``), an
environment assignment (``ATTENTION_LAB_PREWARM=off``: its name) or a call (``attend(q, k)``:
its callee). A dotted name that starts with one of the repository's packages is resolved
module by module (``dashboard.runtime.threads.single_threaded``: the attribute must appear in
``dashboard/runtime/threads.py``); any other name must appear as a word in the repository's
code (``.py``, ``.sh``, ``.toml``, ``.txt``, ``.cfg``, ``.c``, ``.h``, ``.js``, ``.css``).
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

from tests.dashboard.conftest import REPO_ROOT
from tests.dashboard.test_architecture_map import MAP

README = REPO_ROOT / "README.md"
README_MAX_CHARS = 12_000
MAP_MAX_CHARS = 25_000
ROW_MAX_WORDS = 40
DOCUMENTS = (README, REPO_ROOT / "CONTRIBUTING.md", *sorted((REPO_ROOT / "docs").glob("*.md")))
CODE_SUFFIXES = (".py", ".sh", ".toml", ".txt", ".cfg", ".c", ".h", ".js", ".css")
FILE_SUFFIXES = (*CODE_SUFFIXES, ".md", ".json", ".png")
SKIPPED_DIRS = {".git", "__pycache__", ".venv", "venv", "node_modules", "build", "artifacts"}
PACKAGES = ("attention_core", "dashboard", "bench", "tests", "scripts")
# Paths the documents name that are never committed: the tools' output folder and the
# secrets file an operator writes.
UNCOMMITTED = ("artifacts/", ".streamlit/secrets.toml")

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
NAME = r"[A-Za-z_][A-Za-z0-9_]*"
DOTTED = re.compile(rf"{NAME}(?:\.{NAME})*")
PATH = re.compile(r"[\w.-]*[A-Za-z_][\w.-]*(?:/[\w.-]+)*/?(?:::\w+)?")
ENV_ASSIGNMENT = re.compile(r"([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)=\S*")
CALL = re.compile(rf"({NAME}(?:\.{NAME})*)\(.*\)")
SNAKE = re.compile(r"_*[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+_*")
HUMPS = re.compile(r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+")
WORD = re.compile(NAME)
LINE_COUNT = re.compile(r"\b\d+\s+lines?\b|\|\s*\d+\s*\|")
# A numbered issue of the tracker named in the code, which its reader cannot see.
TRACKER_REFERENCE = re.compile(r"\bissue\s+\d+", re.I)


def without_fences(text: str) -> str:
    """``text`` with its fenced code blocks removed (shell sessions, examples)."""
    return FENCE.sub("", text)


def spans(text: str) -> list[str]:
    """The inline code spans of Markdown ``text``, outside fenced blocks."""
    return [match.group(1).strip() for match in SPAN.finditer(without_fences(text))]


def looks_like_identifier(part: str) -> bool:
    """Whether a single name is unmistakably code: an underscore or two capitalised humps."""
    return bool(SNAKE.fullmatch(part) or HUMPS.fullmatch(part))


def references(span: str) -> list[tuple[str, str]]:
    """What one code span claims exists: ``("path", p)``, ``("file", name)``,
    ``("name", dotted)``, or nothing for a span that is not strictly code.

    Args:
        span: the text between the backticks.

    Returns:
        A list of (kind, reference) pairs (empty for prose, commands, values, URLs).
    """
    if (env := ENV_ASSIGNMENT.fullmatch(span)) is not None:
        return [("name", env.group(1))]
    if (call := CALL.fullmatch(span)) is not None:
        span = call.group(1)
    if "/" in span and PATH.fullmatch(span) and not span.startswith(("/", ".", "~")):
        return [("path", span)]
    if span.startswith(".") and "/" in span and PATH.fullmatch(span[1:]):
        return [("path", span)]
    if "/" not in span and span.endswith(FILE_SUFFIXES) and re.fullmatch(r"[\w-][\w.-]*", span):
        return [("file", span)]
    if DOTTED.fullmatch(span):
        parts = span.split(".")
        if parts[0] in PACKAGES or any(looks_like_identifier(part) for part in parts):
            return [("name", span)]
    return []


def repo_files() -> list[Path]:
    """Every file of the repository outside version control's and build folders."""
    return [
        path
        for path in REPO_ROOT.rglob("*")
        if path.is_file()
        and not SKIPPED_DIRS.intersection(path.relative_to(REPO_ROOT).parts[:-1])
        and not any(part.endswith(".egg-info") for part in path.parts)
    ]


@cache
def repo_index() -> tuple[frozenset[str], frozenset[str], frozenset[str], str]:
    """The repository's relative file paths, folder paths, every word of its code, and its
    code as one text (this file left out: its planted names are not code)."""
    files = repo_files()
    paths = frozenset(path.relative_to(REPO_ROOT).as_posix() for path in files)
    folders = frozenset(
        parent.relative_to(REPO_ROOT).as_posix()
        for path in files
        for parent in path.parents
        if parent != REPO_ROOT and REPO_ROOT in parent.parents
    )
    code = "\n".join(
        path.read_text(encoding="utf-8", errors="replace")
        for path in files
        if (path.suffix in CODE_SUFFIXES or path.name == "run") and path != Path(__file__)
    )
    return paths, folders, frozenset(WORD.findall(code)), code


def path_exists(reference: str) -> bool:
    """Whether a path (from the root, or the tail of a longer path) names a file or folder;
    ``file.py::test_name`` also needs that test in the file."""
    paths, folders, _words, _code = repo_index()
    if reference.startswith(UNCOMMITTED):
        return True
    path, _, test = reference.partition("::")
    is_folder = path.endswith("/")
    path = path.rstrip("/")
    pool = folders if is_folder else paths | folders
    found = [p for p in pool if p == path or p.endswith("/" + path)]
    if not found:
        return False
    if not test:
        return True
    return any(
        re.search(rf"\bdef {re.escape(test)}\b", (REPO_ROOT / p).read_text(encoding="utf-8"))
        for p in found
        if p.endswith(".py")
    )


def module_file(parts: list[str]) -> tuple[Path | None, list[str]]:
    """The longest module prefix of a dotted name inside the repository, and the rest."""
    for cut in range(len(parts), 0, -1):
        base = REPO_ROOT.joinpath(*parts[:cut])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate, parts[cut:]
        if base.is_dir() and cut == len(parts):
            return base, []
    return None, parts


def name_exists(reference: str) -> bool:
    """Whether a dotted code name is in the code: resolved module by module when it starts
    with a repository package (a compiled extension: its whole name quoted in the code), else
    each identifier-like part present as a word."""
    parts = reference.split(".")
    _paths, _folders, words, code = repo_index()
    if parts[0] in PACKAGES and (REPO_ROOT / parts[0]).is_dir():
        # a compiled extension (``attention_core._band``) is named whole where it is built
        if re.search(rf"[\"']{re.escape(reference)}[\"']", code):
            return True
        module, rest = module_file(parts)
        if module is None:
            return False
        if not rest:
            return True
        text = module.read_text(encoding="utf-8") if module.is_file() else ""
        return rest[0] in WORD.findall(text) and all(part in words for part in rest[1:])
    return all(part in words for part in parts if looks_like_identifier(part))


def file_exists(reference: str) -> bool:
    """Whether some file of the repository has this name."""
    paths, _folders, _words, _code = repo_index()
    return any(p == reference or p.endswith("/" + reference) for p in paths)


CHECKS = {"path": path_exists, "file": file_exists, "name": name_exists}


def stale_references(text: str) -> list[str]:
    """The code spans of a document whose path, file or name is not in the repository."""
    return sorted(
        {
            f"{kind} `{reference}`"
            for span in spans(text)
            for kind, reference in references(span)
            if not CHECKS[kind](reference)
        }
    )


def tracker_references() -> list[str]:
    """``file:line`` of every numbered tracker issue named in a ``.py`` file git tracks under
    the repository's packages."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", *(f"{package}/*.py" for package in PACKAGES)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = []
    for name in sorted(filter(None, listed.split("\0"))):
        path = REPO_ROOT / name
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in TRACKER_REFERENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{name}:{line}")
    return found


def map_rows(text: str) -> list[str]:
    """Every table row of the map whose first column names a module or file in backticks."""
    return [line for line in text.splitlines() if re.match(r"^\|\s*`[^`]+`\s*\|", line)]


def row_words(row: str) -> int:
    """The words of a row's description (every column after the first)."""
    cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
    return len(" ".join(cells[1:]).split())


def test_the_reader_finds_code_names_and_leaves_prose_and_commands_alone():
    text = (
        "Run `bash scripts/test.sh` or `python -m pytest -n 0`; set `ATTENTION_LAB_PREWARM=off`;"
        " read `dashboard/app.py`, `band.c`, `tests/a.py::test_b`, `attend(q, k, v)` and"
        " `band_kernel.status()`; `LayerConfig`, `MAX_INPUT_LEN`; prose: `basic`, `2.13.0+cpu`,"
        " `/?lesson=x`, `<page>.<param>`, `--replicas 1,2`, `*.toml`, `0.5 s`.\n"
        "```bash\nexport `NOT_CHECKED_INSIDE_A_FENCE`\n```\n"
    )
    found = [ref for span in spans(text) for ref in references(span)]
    assert found == [
        ("name", "ATTENTION_LAB_PREWARM"),
        ("path", "dashboard/app.py"),
        ("file", "band.c"),
        ("path", "tests/a.py::test_b"),
        ("name", "band_kernel.status"),
        ("name", "LayerConfig"),
        ("name", "MAX_INPUT_LEN"),
    ]


def test_a_planted_stale_name_is_found():
    text = (
        "`TORCH_FREE_PAGES`, `dashboard/gone.py`, `gone_module.py`, "
        "`dashboard.runtime.startup.no_such_function`, `tests/dashboard/test_docs.py::test_nope`"
        " but not `dense_attention`, `dashboard/runtime/startup.py`, `TORCH_LATE_PAGES`."
    )
    assert stale_references(text) == [
        "file `gone_module.py`",
        "name `TORCH_FREE_PAGES`",
        "name `dashboard.runtime.startup.no_such_function`",
        "path `dashboard/gone.py`",
        "path `tests/dashboard/test_docs.py::test_nope`",
    ]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_code_name_in_the_documents_is_in_the_code(document: Path):
    assert stale_references(document.read_text(encoding="utf-8")) == []


def test_the_readme_is_short():
    assert len(README.read_text(encoding="utf-8")) <= README_MAX_CHARS


def test_the_map_is_short():
    assert len(MAP.read_text(encoding="utf-8")) <= MAP_MAX_CHARS


def test_every_map_row_says_its_job_in_at_most_40_words():
    rows = map_rows(MAP.read_text(encoding="utf-8"))
    assert len(rows) > 100
    assert [row for row in rows if row_words(row) > ROW_MAX_WORDS] == []


def test_no_map_row_counts_lines():
    rows = map_rows(MAP.read_text(encoding="utf-8"))
    module_rows = [row for row in rows if not re.match(r"^\|\s*`[^`]+/`", row)]
    assert len(module_rows) > 100
    assert [row for row in module_rows if LINE_COUNT.search(row)] == []


def test_the_code_says_why_instead_of_naming_a_tracker_issue():
    found = tracker_references()
    assert found == [], "name what the issue asked for, not its number: " + ", ".join(found)


def test_the_licence_is_one_and_the_same_in_the_file_the_metadata_and_the_readme():
    import tomllib

    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    licence = (REPO_ROOT / "LICENSE").read_text("utf-8")
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert licence.startswith("MIT License\n") and "WITHOUT WARRANTY OF ANY KIND" in licence
    readme = (REPO_ROOT / "README.md").read_text("utf-8")
    assert "## Licence\n\nMIT (`LICENSE`)." in readme
