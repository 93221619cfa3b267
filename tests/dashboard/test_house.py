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


# ---------------------------------------------------------------- one page rule

WIDGET_METHODS = frozenset(
    {
        "button",
        "checkbox",
        "chat_input",
        "color_picker",
        "data_editor",
        "date_input",
        "download_button",
        "feedback",
        "file_uploader",
        "form_submit_button",
        "multiselect",
        "number_input",
        "pills",
        "radio",
        "segmented_control",
        "select_slider",
        "selectbox",
        "slider",
        "text_area",
        "text_input",
        "time_input",
        "toggle",
    }
)
WIDGET_MODULES = ("bound", "state", "exports", "controls")  # modules whose helpers draw widgets
# (in order; state re-exports bound's helpers, so a page reaches them as state.<helper>)
MAX_DRAW_LINES = 80
VIEWS = sorted(
    [*(DASHBOARD / "views").glob("[a-z]*.py"), *(DASHBOARD / "views").glob("[a-z]*/[a-z]*.py")]
)
"""Every page and every section module of a page (``views/<package>/``): the page rules reach
both."""


def _is_output_download(call: ast.Call) -> bool:
    """A download button with ``on_click="ignore"`` is output: it never reruns the script and
    carries no value into a config, so a draw function may offer its chart's files."""
    return any(
        kw.arg == "on_click" and isinstance(kw.value, ast.Constant) and kw.value.value == "ignore"
        for kw in call.keywords
    )


def _is_streamlit_widget(call: ast.Call) -> bool:
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in WIDGET_METHODS:
        return False
    return not (func.attr == "download_button" and _is_output_download(call))


def _draws_widget(call: ast.Call, local: set[str], known: dict[str, set[str]]) -> bool:
    """A Streamlit widget, ``container(...)`` (bound.py's container for its widget), a helper
    of this module (``local``) or of a module already read (``known``, e.g. ``state.select``)."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id == "container" or func.id in local
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        if func.attr in known.get(func.value.id, set()):
            return True
    return _is_streamlit_widget(call)


def _widget_helpers(tree: ast.Module, known: dict[str, set[str]]) -> set[str]:
    """The module-level functions of ``tree`` that draw a widget, directly or through
    another widget helper (repeated until no function is added)."""
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    calls = {fn.name: [c for c in ast.walk(fn) if isinstance(c, ast.Call)] for fn in functions}
    helpers: set[str] = set()
    while True:
        found = {
            name
            for name, made in calls.items()
            if any(_draws_widget(c, helpers, known) for c in made)
        }
        if found <= helpers:
            return helpers
        helpers |= found


def _module_helpers() -> dict[str, set[str]]:
    """Widget helpers by module, each module read after those it calls (state first)."""
    known: dict[str, set[str]] = {}
    for module in WIDGET_MODULES:
        tree = ast.parse((DASHBOARD / f"{module}.py").read_text(encoding="utf-8"))
        known[module] = _widget_helpers(tree, known)
    known["state"] |= known["bound"]  # re-exported: pages call state.slider_int
    return known


def _is_widget_call(call: ast.Call, helpers: dict[str, set[str]]) -> bool:
    """Streamlit widget, a widget helper of state/controls/exports, or a ``*_controls`` group."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id.endswith("_controls")
    if not isinstance(func, ast.Attribute):
        return False
    if isinstance(func.value, ast.Name) and func.value.id in helpers:
        return func.attr in helpers[func.value.id] or func.attr.endswith("_controls")
    return _is_streamlit_widget(call)


def _widgets_outside_controls(tree: ast.Module, helpers: dict[str, set[str]]) -> list[str]:
    """``"function:line call"`` for every widget call whose innermost enclosing function's name
    does not end with ``_controls`` (module-level code, the page's tail, is not checked)."""
    found = []

    def visit(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef) else function
            if (
                isinstance(child, ast.Call)
                and function is not None
                and not function.endswith("_controls")
                and _is_widget_call(child, helpers)
            ):
                found.append(f"{function}:{child.lineno} {ast.unparse(child.func)}")
            visit(child, inner)

    visit(tree, None)
    return found


def _long_functions(tree: ast.Module) -> list[str]:
    return [
        f"{node.name}:{node.lineno} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > MAX_DRAW_LINES
    ]


BAD_PAGE = """
def page_controls(page):
    return state.slider_int(page, "n", "n", 0, 9, 1)

def helper_control():
    return st.sidebar.selectbox("a", [1, 2])

def render(ctl):
    col = st.columns(2)[0]
    if col.button("Go"):
        pass
    state.select(PAGE, "x", "x", [1], 1)
    controls.variant_controls(PAGE, 8)
    controls.variant_select(PAGE)
    refusals.show_error(err)
    more_controls()
    st.download_button("csv", "a,b", on_click="ignore")
    st.download_button("csv", "a,b")
    exports.export_buttons("weights", csv_text="a")

    def inner():
        st.toggle("t")
"""


def test_the_page_rules_see_a_bad_page():
    helpers = _module_helpers()
    assert {"slider_int", "select", "text", "checkbox"} <= helpers["state"]
    assert {"layer_controls", "variant_select", "device_controls"} <= helpers["controls"]
    assert "show_error" not in helpers["controls"]
    assert "export_buttons" not in helpers["exports"]  # its buttons only download
    found = [f.split(" ")[0] for f in _widgets_outside_controls(ast.parse(BAD_PAGE), helpers)]
    assert found == [
        "helper_control:6",
        "render:10",
        "render:12",
        "render:13",
        "render:14",
        "render:16",
        "render:18",
        "inner:22",
    ]
    long_body = "def draw():\n" + "    x = 1\n" * MAX_DRAW_LINES
    assert _long_functions(ast.parse(long_body)) == [f"draw:1 ({MAX_DRAW_LINES + 1} lines)"]


@pytest.mark.parametrize("view", VIEWS, ids=str)
def test_widgets_live_only_in_controls(view):
    """A page's widgets are made in ``<page>_controls`` (or a ``*_controls`` helper it calls),
    so the config carries every value and the draw functions only draw; a download button
    with ``on_click="ignore"`` (exports.export_buttons) is output and may sit beside its chart."""
    tree = ast.parse(view.read_text(encoding="utf-8"))
    assert _widgets_outside_controls(tree, _module_helpers()) == []


@pytest.mark.parametrize("view", VIEWS, ids=str)
def test_no_view_function_is_over_80_lines(view):
    assert _long_functions(ast.parse(view.read_text(encoding="utf-8"))) == []
