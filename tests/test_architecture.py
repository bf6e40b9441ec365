"""The shape of the code: arrows between the stages point one way, the core imports
neither Typer nor Rich, and ``import autogradcli`` loads nothing heavy."""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "autogradcli"

# Each unit may import (at module level) only units before it: the pipeline's order.
LAYERS = [
    "autogradcli",  # the package itself (__version__)
    "registry",  # the command registry
    "errors",
    "recursion",
    "memory",
    "settings",
    "reads",
    "glossary",
    "notes",
    "progress",
    "lang",
    "messages",
    "policy",
    "results",
    "bind",
    "footprint",
    "torchside",
    "reference",
    "verify",
    "pipeline",
    "cellrun",
    "api",
    "sample",
    "render",
    "cli",
    "magics",
    "worker",
    "client",
    "__main__",
]
FRONT = ("cli", "render", "magics", "__main__")  # may use Typer and Rich


@functools.cache
def _tree(py: Path) -> ast.Module:
    """A module's syntax tree, parsed once for the analyses below (about 3 ms a file;
    collection parses every file for ``units``, and three tests walk them all again)."""
    return ast.parse(py.read_text())


@functools.cache
def units() -> dict[str, set[str]]:
    """Unit -> the units it imports at module level."""
    found: dict[str, set[str]] = {}
    for py in PACKAGE.rglob("*.py"):
        parts = py.relative_to(PACKAGE).with_suffix("").parts
        unit = parts[0] if parts[0] != "__init__" else "autogradcli"
        for node in _tree(py).body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("autogradcli"):
                target = node.module.split(".")[1] if "." in node.module else "autogradcli"
                found.setdefault(unit, set()).add(target)
    return found


def test_every_unit_has_a_layer():
    assert set(units()) <= set(LAYERS)
    assert {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir() if p.name[0] != "."} - {
        "__pycache__"
    } <= {*LAYERS, "__init__"}


def _unit_names() -> list[str]:
    """Every unit, from the file names (collection parses nothing: units() runs in the test)."""
    parts = [py.relative_to(PACKAGE).parts[0] for py in PACKAGE.rglob("*.py")]
    return sorted({"autogradcli" if p == "__init__.py" else p.removesuffix(".py") for p in parts})


@pytest.mark.parametrize("unit", _unit_names())
def test_imports_point_back_along_the_pipeline(unit):
    upward = [t for t in units().get(unit, set()) if LAYERS.index(t) > LAYERS.index(unit)]
    assert not upward, f"{unit} imports {upward}, later stages"


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout.strip()


def _imported(py: Path) -> set[str]:
    """Top-level package names a module imports anywhere, function bodies included."""
    names: set[str] = set()
    for node in ast.walk(_tree(py)):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_core_imports_neither_typer_nor_rich():
    core = [
        p
        for p in PACKAGE.rglob("*.py")
        if p.relative_to(PACKAGE).parts[0].removesuffix(".py") not in FRONT
    ]
    assert {p.stem for p in core} >= {"pipeline", "run", "api"}
    offenders = {
        str(p.relative_to(PACKAGE)): _imported(p) & {"typer", "rich", "click"} for p in core
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_importing_the_api_loads_nothing_heavy():
    code = (
        "import sys, autogradcli as ag\n"
        "ag.grad, ag.Settings, ag.AutogradCliError\n"
        "heavy = ('torch', 'sympy', 'typer', 'rich', 'mpmath')\n"
        "print(sorted(k for k in heavy if k in sys.modules))\n"
    )
    assert _run(code) == "[]"


def test_the_architecture_page_lists_every_module():
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    listed = set(re.findall(r"^\| `([\w/]+\.py)` \|", page, flags=re.M))
    with_code = (PACKAGE, PACKAGE / "reference", PACKAGE / "render")  # other __init__s: docstrings
    modules = {
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if p.name != "__init__.py" or p.parent in with_code
    }
    assert listed == modules


# Imports inside functions that may point anywhere: each a protocol the front ends call.
LAZY_FUNCTIONS = frozenset(
    {
        "__getattr__",  # the lazy package __init__ (PEP 562)
        "__str__",  # str() of an error or a cause: its sentence, made by messages.py
        "__rich__",  # Rich's protocol: a result draws itself with its renderer
        "__rich_console__",
        "_repr_html_",  # Jupyter's display protocol
        "_repr_svg_",
        "_repr_mimebundle_",
        "_repr_pretty_",
    }
)


def _module(py: Path) -> str:
    parts = list(py.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def module_imports() -> dict[str, dict[str, int]]:
    """Module -> the package's modules it imports, at any depth of the file (function
    bodies included, except in ``LAZY_FUNCTIONS`` and in the package's lazy ``__init__``),
    with the line of the first such import."""
    modules = {_module(py): py for py in PACKAGE.rglob("*.py")}
    found: dict[str, dict[str, int]] = {m: {} for m in modules}

    def visit(module: str, node: ast.AST, inside: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(module, child, (*inside, child.name))
                continue
            lazy = bool(set(inside) & LAZY_FUNCTIONS) or (module == "autogradcli" and inside)
            targets: list[str] = []
            if isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                targets = [
                    f"{child.module}.{a.name}"
                    if f"{child.module}.{a.name}" in modules
                    else child.module
                    for a in child.names
                ]
            elif isinstance(child, ast.Import):
                targets = [a.name for a in child.names]
            for target in targets:
                if target in modules and target != module and not lazy:
                    found[module].setdefault(target, child.lineno)
            visit(module, child, inside)

    for module, py in modules.items():
        visit(module, _tree(py), ())
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return cycles


def test_no_import_cycle_at_any_depth():
    imports = module_imports()
    cycles = _cycles({m: set(t) for m, t in imports.items()})
    where = [
        [f"{a} -> {b} (line {imports[a][b]})" for a in c for b in imports[a] if b in c]
        for c in cycles
    ]
    assert where == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


# Modules allowed past LONGEST lines: the sentence catalog, one sentence after another.
LONG_MODULES = frozenset({"messages.py"})
LONGEST = 600


def test_no_module_holds_more_than_one_idea_of_600_lines():
    """A module past 600 lines holds several ideas: split it by idea (issue 24)."""
    lengths = {
        str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")
    }
    assert {m: n for m, n in lengths.items() if n > LONGEST and m not in LONG_MODULES} == {}
