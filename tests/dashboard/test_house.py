"""The house rules: small signatures and small modules in dashboard/, attention_core/ and
bench/; in dashboard/ also one page shape, a data layer that starts nothing at import, and no
sys.path edits."""

from __future__ import annotations

import ast

import pytest

from tests.dashboard.conftest import REPO_ROOT, fresh_python

DASHBOARD = REPO_ROOT / "dashboard"
MAX_POSITIONAL = 6
MAX_MODULE_LINES = 600
SOURCES = sorted(DASHBOARD.rglob("*.py"))
# the size rules hold for the whole house: the app, the library and the benchmarks
SIZED_SOURCES = sorted(
    path
    for folder in ("dashboard", "attention_core", "bench")
    for path in (REPO_ROOT / folder).rglob("*.py")
)


def _positional_params(fn: ast.FunctionDef) -> list[str]:
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    return [n for n in names if n not in ("self", "cls")]


def test_the_rules_see_the_code():
    assert len(SOURCES) > 20
    folders = {path.relative_to(REPO_ROOT).parts[0] for path in SIZED_SOURCES}
    assert folders == {"dashboard", "attention_core", "bench"}
    tree = ast.parse("def f(a, b, c, d, e, f, g, *, h): pass")
    assert len(_positional_params(tree.body[0])) == 7


def test_no_function_takes_more_than_six_positional_parameters():
    offenders = []
    for path in SIZED_SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if len(_positional_params(node)) > MAX_POSITIONAL:
                    offenders.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno} {node.name}")
    assert offenders == []


def test_every_module_stays_under_600_lines():
    long = {
        str(p.relative_to(REPO_ROOT)): n
        for p in SIZED_SOURCES
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_nothing_edits_sys_path():
    offenders = [
        str(p.relative_to(REPO_ROOT)) for p in SOURCES if "sys.path" in p.read_text("utf-8")
    ]
    assert offenders == []


@pytest.mark.parametrize("view", sorted((DASHBOARD / "views").glob("[a-z]*.py")), ids=str)
def test_every_page_has_one_shape(view):
    """Module level ends with: page_intro(PAGE); ctl = <page>_controls(PAGE); render(ctl)."""
    body = ast.parse(view.read_text(encoding="utf-8")).body
    tail = [ast.unparse(node) for node in body[-3:]]
    assert tail[0] == "controls.page_intro(PAGE)"
    assert tail[1].startswith("ctl = ") and tail[1].endswith("_controls(PAGE)")
    assert tail[2] == "render(ctl)"
    statements = [n for n in body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)]
    assert len(statements) == 2, "only page_intro and render run at module level"


def test_importing_the_data_layer_starts_no_thread():
    code = (
        "import threading, dashboard.data; "
        "print(sorted(t.name for t in threading.enumerate() if t.name != 'MainThread'))"
    )
    result = fresh_python(code)
    assert result.stdout.strip() == "[]", result.stdout + result.stderr


@pytest.mark.parametrize(
    "script", [DASHBOARD / "app.py", *sorted((DASHBOARD / "views").glob("[a-z]*.py"))], ids=str
)
def test_no_bare_string_for_streamlit_magic_to_draw(script):
    """A script Streamlit runs draws every bare expression (its "magic"): a string after
    the module docstring would appear on the page."""
    body = ast.parse(script.read_text(encoding="utf-8")).body
    strays = [
        node.lineno
        for node in body[1:]
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    ]
    assert strays == []
