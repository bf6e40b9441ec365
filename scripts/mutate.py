"""Mutation testing of the modules that decide the verdict (issue 23, section 6).

    python scripts/mutate.py              # every mutant, then the score
    python scripts/mutate.py --list       # the numbered mutants, nothing run
    python scripts/mutate.py --only 12,40 # these mutants, each with its diff
    python scripts/mutate.py --confirm    # survivors run again against every selected test

A mutant is one small change to one function of ``TARGETS`` (an operator swapped, a constant
moved, a condition negated, a return replaced; ``OPERATORS`` below), made in a private copy of
the committed tree (``git archive HEAD``; ``--worktree`` copies the working tree instead),
never in the checkout itself. Each mutant runs ``pytest -x`` on ``TESTS`` in that copy, the
copy first on ``sys.path`` (checked before anything runs: the editable install's finder comes
after ``sys.path``), and is ``killed`` (a test failed or the module no longer imports),
``timeout`` (killed by the time limit: a loop that no longer ends), ``survived`` (every test
passed) or ``uncovered`` (no selected test runs that line: survived without running).

To keep a full run within minutes on two cores:

- the slow imports (torch, SymPy, NumPy, pytest, ...) are made once; each run is a fork of
  this process that imports ``autogradcli`` from the copy afresh (bytecode is never written,
  so no stale ``.pyc`` of another mutant is ever read);
- a first run of the unmutated tree records, for every test, the lines of the targets it
  executes (``sys.settrace``, restricted to those files); a mutant runs only the tests that
  execute its lines, fastest first, or all of them for a change at module level (constants,
  defaults). ``--confirm`` runs survivors against every test (a value cached by one test and
  read by another would be missed by the selection).

``EQUIVALENT`` lists the mutants no test can kill, each with its reason (docs/trust.md,
"Mutation testing"); the score leaves them out. The exit code is 0 when every other mutant
is killed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import difflib
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# The modules under test; None: every function and module-level value, else those names only.
TARGETS: dict[str, frozenset[str] | None] = {
    "autogradcli/policy/verdict.py": None,
    "autogradcli/policy/compare.py": None,
    "autogradcli/verify/judge.py": None,
    "autogradcli/verify/reconcile.py": frozenset(
        {
            "kink_sides",
            "decide",
            "_sides",
            "_beside",
            "_moved",
            "KINK_BITS",
            "STEP_BITS",
            "SIDES_RTOL",
            "PRECISE_SIDES",
            "ONE_BY_ONE",
        }
    ),
}

# The tests that judge verdicts (per mutant, only those that run its lines, fastest first).
TESTS = (
    "tests/test_verdict_edges.py",
    "tests/test_verdict.py",
    "tests/test_points.py",
    "tests/test_kinks.py",
    "tests/test_huge.py",
    "tests/test_large_reference.py",
    "tests/test_fallback.py",
    "tests/test_mutants_judge.py",
    "tests/test_mutants_kinks.py",
    "tests/test_unsent.py",
)

# Imported once in this process before any fork (never autogradcli itself); after the
# baseline, every other module it imported too (lazy imports of SymPy, torch, ...).
PRELOAD = ("numpy", "torch", "sympy", "mpmath", "pytest", "hypothesis", "rich", "typer")
NEVER_PRELOAD = ("autogradcli", "tests", "__main__", "this", "antigravity", "idlelib")

# Survivors that no test can kill: "path:function:description" -> why.
_V, _C = "autogradcli/policy/verdict.py", "autogradcli/policy/compare.py"
_J, _R = "autogradcli/verify/judge.py", "autogradcli/verify/reconcile.py"
_LOG2 = "log2(1) is 0: one element adds no step either way"
EQUIVALENT: dict[str, str] = {
    _V + ":reduction_steps:> -> >= in `elements > 1`": _LOG2,
    _V + ":reduction_steps:1 -> 0 in `return math.ceil(math.log2(elements)) if elemen...`": _LOG2,
    _J + ":Judge.settle:`return AGREE` -> `return 'agree'`": "AGREE is 'agree'",
    _C + ":compare:if negated: `huge.any()`": (
        "close &= ~huge is redundant: an infinite autograd value at a huge element is already"
        " in bad, and a finite one is never close to the reference's infinity"
    ),
    _C + ":compare:.any -> .all in `huge.any()`": "as above: close &= ~huge is redundant",
    _C + ":compare:.any -> .all in `np.isnan(checked).any()`": "max() of NaNs is NaN anyway",
    _C + ":_agreeing:min -> max in `min(BLOCK, a.size)`": "only the size of a scratch array",
    _C + ":_agreeing:if negated: `bad.any()`": (
        "close &= ~(bad & finite reference) is redundant: NaN or inf against a finite number"
        " is never close"
    ),
    _C + ":_agreeing:.any -> .all in `bad.any()`": "as above: the mask is redundant",
    _C + ":_agreeing:or -> and in `nan or bool(np.isnan(error).any())`": (
        "an error on the fast path is never NaN: NaN against a number is not close, and the"
        " fast path has already handed the comparison back"
    ),
    _C + ":_agreeing:.any -> .all in `np.isnan(error).any()`": "as above: never NaN there",
    _C + ":_errors:and -> or in `bounds is not None and between.any()`": (
        "without bounds nothing is between; with no element between, np.where changes nothing"
    ),
    _J + ":float64_checks:0.0 -> 1.0 in `grads[name] = compare(got, expected.grads[name]...`": (
        "only elements with no finite estimate get the placeholder: those are loose (left"
        " out) or marked by the reference (kinks, no number: left out); where bounds judge"
        " an element the central differences across the kink settle to a finite estimate"
    ),
    _J + ":times:1 -> 0 in `return values if scale == 1 else scale * values`": (
        "1 * values is values: only a copy is saved"
    ),
    _J + ":Judge.forward:True -> False in `self._diagnosed = True`": (
        "the diagnosis is computed again, with the same result: only a cache"
    ),
    _J + ":variable_notes:0.0 -> 1.0 in `ordinary = np.where(kinks, 0.0, expected) if ki...`": (
        "any finite placeholder counts the same infinite and NaN elements"
    ),
    _J + ":<module>:False -> True in `the defaults of variable_notes`": (
        "its one caller (Judge.variable) always passes sided"
    ),
    _J + ":decided_notes:True -> False in `pairs = sorted({(float(a), float(b)) for a, b i...`": (
        "zip(strict=) over two arrays of the same length"
    ),
    _R + ":<module>:320 -> 640 in `KINK_BITS = 320`": "more precision: the same sides",
    _R + ":<module>:320 -> 321 in `KINK_BITS = 320`": "more precision: the same sides",
    _R + ":_beside:> -> >= in `direction > 0`": "direction is -1 or 1",
}

COMPARE_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
BINOP_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
}
NAME_SWAPS = {"min": "max", "max": "min"}
ATTRIBUTE_SWAPS = {
    "all": "any",
    "any": "all",
    "minimum": "maximum",
    "maximum": "minimum",
    "fmin": "fmax",
    "fmax": "fmin",
}
# A typed function's return value replaced by a constant of its type.
RETURN_CONSTANTS = {
    "bool": ("True", "False"),
    "float": ("0.0",),
    "int": ("0",),
    "str": ("'agree'",),
}
OPERATORS = (
    "comparison <, <=, >, >=, ==, !=, is, in: the boundary moved or the test reversed",
    "and <-> or; & <-> |; + <-> -; * <-> /",
    ".all() <-> .any(); min <-> max; np.minimum <-> np.maximum; np.fmin <-> np.fmax",
    "a number: x2, /2, +1, 0; True <-> False",
    "a `not` or a `~` dropped; an if/while/ternary condition negated",
    "`return X` replaced by a constant of the annotated type (None where it may be None)",
)


@dataclass
class Mutant:
    """One change: where, what, and the module's text with it."""

    number: int
    path: str
    function: str  # the innermost function whose body holds the change; "" at module level
    lines: tuple[int, int]
    description: str
    source: str  # the whole mutated module
    key: str = ""
    status: str = ""
    seconds: float = 0.0
    tests: int = 0
    killer: str = ""

    def __post_init__(self) -> None:
        self.key = f"{self.path}:{self.function or '<module>'}:{self.description}"


@dataclass
class Site:
    """A node that can be changed, the path to it from the module, and its scope."""

    node: ast.AST
    route: tuple[tuple[str, int | None], ...]
    function: str
    returns: str | None  # the annotation of the function whose return this is, if any
    wanted: bool  # inside a target function (or a targeted module-level name)
    statement: str = ""  # the innermost statement holding it, shortened (for descriptions)
    shape_argument: bool = False  # an argument of .reshape(...): -1 and -2 mean the same


def _children(node: ast.AST) -> Iterator[tuple[str, int | None, ast.AST]]:
    for name, value in ast.iter_fields(node):
        if isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, ast.AST):
                    yield name, index, item
        elif isinstance(value, ast.AST):
            yield name, None, value


COMPOUND = (
    ast.If,
    ast.For,
    ast.While,
    ast.With,
    ast.Try,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
)
SKIPPED_FIELDS = {"annotation", "returns", "decorator_list", "type_comment"}


def sites(tree: ast.Module, names: frozenset[str] | None) -> Iterator[Site]:
    """Every node of the module in source order with its scope; annotations, docstrings,
    imports and asserts are left out."""

    def walk(node, route, function, returns, wanted, qualified, statement="", shaped=False):
        for name, index, child in _children(node):
            if name in SKIPPED_FIELDS:
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom, ast.Assert)):
                continue
            if isinstance(child, ast.Expr) and isinstance(child.value, ast.Constant):
                continue  # a docstring
            here = (*route, (name, index))
            inner, ret, want, qual = function, returns, wanted, qualified
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qual = f"{qualified}.{child.name}" if qualified else child.name
                if node is tree:
                    want = names is None or child.name in names
            elif node is tree and isinstance(child, (ast.Assign, ast.AnnAssign)):
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                labels = {t.id for t in targets if isinstance(t, ast.Name)}
                want = names is None or bool(labels & names)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and name == "body":
                inner = qualified
                ret = ast.unparse(node.returns) if node.returns is not None else None
            held = statement
            if isinstance(child, ast.stmt) and not isinstance(child, COMPOUND):
                held = _short(child, 50)
            elif isinstance(child, ast.expr) and isinstance(node, COMPOUND):
                held = _short(child, 50)  # an if's or a while's test, a for's iterable
            elif isinstance(child, ast.arguments):
                held = f"the defaults of {qualified}"
            shape = _reshapes(node) and name == "args"
            yield Site(child, here, inner, ret, want, held, shape or shaped)
            yield from walk(child, here, inner, ret, want, qual, held, shape or shaped)

    yield from walk(tree, (), "", None, names is None, "")


def _reshapes(node: ast.AST) -> bool:
    func = node.func if isinstance(node, ast.Call) else None
    return isinstance(func, ast.Attribute) and func.attr == "reshape"


def _number_changes(value: int | float) -> list[int | float]:
    if isinstance(value, int):
        found = [value * 2, value // 2, value + 1, 0]
    else:
        found = [value * 2, value / 2, value + 1, 0.0]
    out: list[int | float] = []
    for v in found:
        if v != value and v not in out:
            out.append(v)
    return out


def _negated(test: ast.expr) -> ast.expr:
    return ast.UnaryOp(op=ast.Not(), operand=test)


def changes(site: Site) -> Iterator[tuple[str, ast.AST, str]]:
    """(field to replace in, new node, description) for each mutant of one site; the
    first is '' when the site's node itself is replaced."""
    node = site.node
    text = _short(node)
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            swap = COMPARE_SWAPS.get(type(op))
            if swap is not None:
                new = copy.deepcopy(node)
                new.ops[i] = swap()
                yield "", new, f"{_op(op)} -> {_op(swap())} in `{text}`"
            if isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)):
                reverse = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE}
                new = copy.deepcopy(node)
                new.ops[i] = reverse[type(op)]()
                yield "", new, f"{_op(op)} -> {_op(new.ops[i])} in `{text}`"
    elif isinstance(node, ast.BoolOp):
        new = copy.deepcopy(node)
        new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield "", new, f"{_op(node.op)} -> {_op(new.op)} in `{text}`"
    elif isinstance(node, (ast.BinOp, ast.AugAssign)):
        swap = BINOP_SWAPS.get(type(node.op))
        if swap is not None:
            new = copy.deepcopy(node)
            new.op = swap()
            yield "", new, f"{_op(node.op)} -> {_op(new.op)} in `{text}`"
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.Invert)):
        yield "", copy.deepcopy(node.operand), f"{_op(node.op)} dropped in `{text}`"
    elif isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id in NAME_SWAPS:
            new = copy.deepcopy(node)
            new.func.id = NAME_SWAPS[func.id]
            yield "", new, f"{func.id} -> {new.func.id} in `{text}`"
        elif isinstance(func, ast.Attribute) and func.attr in ATTRIBUTE_SWAPS:
            new = copy.deepcopy(node)
            new.func.attr = ATTRIBUTE_SWAPS[func.attr]
            yield "", new, f".{func.attr} -> .{new.func.attr} in `{text}`"
    elif isinstance(node, ast.Constant):
        value = node.value
        where = f" in `{site.statement}`" if site.statement else ""
        if isinstance(value, bool):
            yield "", ast.Constant(not value), f"{value} -> {not value}{where}"
        elif isinstance(value, (int, float)):
            # any negative size in .reshape means "the rest": only 0 changes it
            found = [0] if site.shape_argument and value == 1 else _number_changes(value)
            for v in found:
                yield "", ast.Constant(v), f"{value!r} -> {v!r}{where}"
    elif isinstance(node, (ast.If, ast.While, ast.IfExp)):
        test = node.test
        if not (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)):
            kind = type(node).__name__.lower().replace("ifexp", "ternary")
            yield "test", _negated(copy.deepcopy(test)), f"{kind} negated: `{_short(test)}`"
    elif isinstance(node, ast.Return) and node.value is not None and site.returns:
        for constant in _return_constants(site.returns):
            if ast.unparse(node.value) != constant:
                new_value = ast.parse(constant, mode="eval").body
                yield "value", new_value, f"`return {text[7:]}` -> `return {constant}`"


def _return_constants(annotation: str) -> list[str]:
    parts = [p.strip() for p in annotation.split("|")]
    found = [c for p in parts for c in RETURN_CONSTANTS.get(p, ())]
    if "None" in parts:
        found.append("None")
    return found


def _short(node: ast.AST, width: int = 60) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _op(op: ast.AST) -> str:
    symbols = {
        ast.Lt: "<",
        ast.LtE: "<=",
        ast.Gt: ">",
        ast.GtE: ">=",
        ast.Eq: "==",
        ast.NotEq: "!=",
        ast.Is: "is",
        ast.IsNot: "is not",
        ast.In: "in",
        ast.NotIn: "not in",
        ast.And: "and",
        ast.Or: "or",
        ast.Add: "+",
        ast.Sub: "-",
        ast.Mult: "*",
        ast.Div: "/",
        ast.BitAnd: "&",
        ast.BitOr: "|",
        ast.Not: "not",
        ast.Invert: "~",
    }
    return symbols[type(op)]


def _locate(tree: ast.AST, route: tuple[tuple[str, int | None], ...]) -> ast.AST:
    node = tree
    for name, index in route:
        value = getattr(node, name)
        node = value if index is None else value[index]
    return node


def _replace(tree: ast.AST, route, new: ast.AST) -> None:
    parent = _locate(tree, route[:-1])
    name, index = route[-1]
    if index is None:
        setattr(parent, name, new)
    else:
        getattr(parent, name)[index] = new


def _splice(source: str, node: ast.AST, text: str) -> str:
    """``source`` with ``node``'s text (its positions count UTF-8 bytes) replaced."""
    data = source.encode()
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    begin = starts[node.lineno - 1] + node.col_offset
    end = starts[node.end_lineno - 1] + node.end_col_offset
    return (data[:begin] + text.encode() + data[end:]).decode()


def mutants_of(path: str, names: frozenset[str] | None, source: str) -> Iterator[Mutant]:
    """The mutants of one module, in source order, each checked to parse to the tree it
    means (duplicates and changes that leave the tree as it was are dropped)."""
    tree = ast.parse(source)
    original = ast.dump(tree)
    seen = {original}
    for site in sites(tree, names):
        if not site.wanted:
            continue
        for where, new, description in changes(site):
            target = site.node if not where else getattr(site.node, where)
            route = site.route if not where else (*site.route, (where, None))
            changed = copy.deepcopy(tree)
            _replace(changed, route, copy.deepcopy(new))
            meant = ast.dump(changed)
            if meant in seen:
                continue
            seen.add(meant)
            text = ast.unparse(new)
            if not isinstance(target, ast.stmt):
                text = f"({text})"
            mutated = _splice(source, target, text)
            try:
                same = ast.dump(ast.parse(mutated)) == meant
            except SyntaxError:
                same = False
            if not same:  # the text could not be spliced: the whole module, unparsed
                mutated = ast.unparse(changed) + "\n"
            lines = (target.lineno, target.end_lineno or target.lineno)
            yield Mutant(0, path, site.function, lines, description, mutated)


def all_mutants(tree_root: Path) -> list[Mutant]:
    found: list[Mutant] = []
    for path, names in TARGETS.items():
        source = (tree_root / path).read_text()
        found.extend(mutants_of(path, names, source))
    seen: dict[str, int] = {}
    for number, mutant in enumerate(found, start=1):
        mutant.number = number
        seen[mutant.key] = seen.get(mutant.key, 0) + 1
        if seen[mutant.key] > 1:  # the same change again in the same function
            mutant.key += f" #{seen[mutant.key]}"
    return found


# --- the private copy and the runs -------------------------------------------------------


def make_copy(worktree: bool) -> Path:
    """The committed tree (or the working tree's files) in a new temporary folder."""
    where = Path(tempfile.mkdtemp(prefix="autogradcli-mutate-"))
    if worktree:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        ).stdout.split(b"\0")
        for name in filter(None, listed):
            source = ROOT / os.fsdecode(name)
            if source.is_file():
                target = where / os.fsdecode(name)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
    else:
        archive = subprocess.run(
            ["git", "archive", "HEAD"], cwd=ROOT, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return where


class Tracer:
    """A pytest plugin: the lines of the target files each test executes."""

    def __init__(self, files: set[str]) -> None:
        self.files = files
        self.current = "<outside>"
        self.lines: dict[str, set[tuple[str, int]]] = {}
        self.seconds: dict[str, float] = {}
        self.failed: list[str] = []

    def _global(self, frame, event, arg):
        if frame.f_code.co_filename in self.files:
            return self._local
        return None

    def _local(self, frame, event, arg):
        if event == "line":
            lines = self.lines.setdefault(self.current, set())
            lines.add((frame.f_code.co_filename, frame.f_lineno))
        return self._local

    def start(self) -> None:
        import threading

        sys.settrace(self._global)
        threading.settrace(self._global)

    def pytest_runtest_protocol(self, item, nextitem):
        self.current = item.nodeid

    def pytest_runtest_logreport(self, report) -> None:
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration
        if report.failed and report.nodeid not in self.failed:
            self.failed.append(report.nodeid)

    def pytest_runtest_logfinish(self, nodeid, location) -> None:
        self.current = "<outside>"


def in_fork(
    copy_root: Path, work: Callable[[], int], log: Path, timeout: float, write: bool = False
) -> tuple[str, float]:
    """Run ``work`` in a forked child whose cwd and first ``sys.path`` entry are the copy,
    writing bytecode only if ``write``; ('exit N' | 'timeout', seconds)."""
    begun = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child
        code = 99
        try:
            os.setpgid(0, 0)
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.chdir(copy_root)
            sys.path.insert(0, str(copy_root))
            sys.dont_write_bytecode = not write
            code = int(work())
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    deadline = begun + timeout
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return f"exit {os.waitstatus_to_exitcode(status)}", time.monotonic() - begun
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
    except BaseException:  # interrupted: the child (and what it started) goes too
        _end(pid)
        raise
    _end(pid)
    return "timeout", time.monotonic() - begun


def _end(pid: int) -> None:
    """Kill the process group of a forked child (its own) and reap the child."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


PYTEST = ["-q", "-p", "no:cacheprovider", "-o", "addopts=", "--no-header"]


def where_imported(copy_root: Path, log: Path) -> str:
    """The file ``autogradcli`` is imported from in a forked run (must be in the copy)."""
    answer = copy_root / ".where"

    def work() -> int:
        import autogradcli

        answer.write_text(str(Path(autogradcli.__file__).resolve()))
        return 0

    in_fork(copy_root, work, log, 600)
    return answer.read_text()


def baseline(copy_root: Path, tests: list[str], log: Path) -> dict[str, Any]:
    """The unmutated tree's run: every test's lines of the targets, time and outcome."""
    files = {str((copy_root / p).resolve()) for p in TARGETS}
    out = copy_root / ".baseline.json"

    def work() -> int:
        import pytest

        tracer = Tracer(files)
        tracer.start()
        code = pytest.main([*PYTEST, *tests], plugins=[tracer])
        sys.settrace(None)
        relative = {str((copy_root / p).resolve()): p for p in TARGETS}
        lines = {
            test: sorted([relative[f], n] for f, n in found) for test, found in tracer.lines.items()
        }
        data = {
            "lines": lines,
            "seconds": tracer.seconds,
            "failed": tracer.failed,
            "modules": sorted(sys.modules),
        }
        out.write_text(json.dumps(data))
        return code

    status, seconds = in_fork(copy_root, work, log, 3600, write=True)
    for path in TARGETS:  # never a compiled mutant's original: each run compiles the source
        module = copy_root / path
        for compiled in module.parent.glob(f"__pycache__/{module.stem}.*.pyc"):
            compiled.unlink()
    data = json.loads(out.read_text())
    data["status"], data["wall"] = status, seconds
    return data


@dataclass
class Selection:
    """Which tests run each mutant, from the baseline."""

    order: list[str]  # every passing test, fastest first
    seconds: dict[str, float]
    covering: dict[tuple[str, int], set[str]] = field(default_factory=dict)
    kills: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, data: dict[str, Any]) -> Selection:
        seconds = data["seconds"]
        failed = set(data["failed"])
        order = sorted((t for t in seconds if t not in failed), key=lambda t: seconds[t])
        covering: dict[tuple[str, int], set[str]] = {}
        for test, lines in data["lines"].items():
            for path, line in lines:
                covering.setdefault((path, line), set()).add(test)
        return cls(order, seconds, covering)

    def tests(self, mutant: Mutant, everything: bool = False) -> list[str]:
        if everything or not mutant.function:
            return self.ranked(self.order)
        first, last = mutant.lines
        found: set[str] = set()
        for line in range(first, last + 1):
            found |= self.covering.get((mutant.path, line), set())
        if "<outside>" in found:
            return self.ranked(self.order)
        return self.ranked([t for t in self.order if t in found])

    def ranked(self, tests: list[str]) -> list[str]:
        """Tests that killed mutants before first (most kills first), then fastest first."""
        return sorted(tests, key=lambda t: (-self.kills.get(t, 0), self.seconds[t]))


def run_mutant(
    mutant: Mutant, copy_root: Path, selection: Selection, logs: Path, everything: bool
) -> None:
    tests = selection.tests(mutant, everything)
    mutant.tests = len(tests)
    if not tests:
        mutant.status = "uncovered"
        return
    target = copy_root / mutant.path
    original = target.read_text()
    target.write_text(mutant.source)
    log = logs / f"mutant-{mutant.number}.log"
    limit = 60 + 4 * sum(selection.seconds[t] for t in tests)

    def work() -> int:
        import pytest

        return pytest.main([*PYTEST, "-x", *tests])

    try:
        status, mutant.seconds = in_fork(copy_root, work, log, limit)
    finally:
        target.write_text(original)
    if status == "timeout":
        mutant.status = "timeout"
    elif status == "exit 0":
        mutant.status = "survived"
    else:
        mutant.status = "killed"
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith(("FAILED ", "ERROR ")):
                mutant.killer = line.split(" ", 1)[1].split(" - ")[0]
                break
        if mutant.killer in selection.seconds:
            selection.kills[mutant.killer] = selection.kills.get(mutant.killer, 0) + 1


def diff(mutant: Mutant, tree_root: Path) -> str:
    before = (tree_root / mutant.path).read_text().splitlines(keepends=True)
    after = mutant.source.splitlines(keepends=True)
    return "".join(difflib.unified_diff(before, after, mutant.path, mutant.path, n=1))


def line(mutant: Mutant) -> str:
    where = f"{Path(mutant.path).name}:{mutant.lines[0]}"
    return (
        f"{mutant.number:4d} {where:16s} {mutant.function or '<module>':20s} {mutant.description}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument("--only", help="run these mutants only (numbers, comma-separated)")
    parser.add_argument("--confirm", action="store_true", help="survivors: run every test")
    parser.add_argument("--worktree", action="store_true", help="the working tree, not HEAD")
    parser.add_argument("--keep", action="store_true", help="keep the copy and the logs")
    parser.add_argument("--tests", nargs="+", default=list(TESTS), help="test files")
    parser.add_argument("--json", type=Path, help="write each mutant's outcome here")
    args = parser.parse_args(argv)

    signal.signal(signal.SIGTERM, _interrupted)  # the copy is removed on the way out
    copy_root = make_copy(args.worktree)
    try:
        mutants = all_mutants(copy_root)
        if args.only:
            wanted = {int(n) for n in args.only.split(",")}
            mutants = [m for m in mutants if m.number in wanted]
        if args.list:
            for mutant in mutants:
                print(line(mutant))
            print(f"{len(mutants)} mutants")
            return 0
        return run(args, copy_root, mutants)
    finally:
        if args.keep:
            print(f"copy and logs kept in {copy_root}")
        else:
            shutil.rmtree(copy_root, ignore_errors=True)


def preload(names: list[str] | tuple[str, ...]) -> None:
    """Import ``names`` here, once, so that every fork starts with them (never the
    package under test, nor the tests)."""
    with open(os.devnull, "w") as quiet:
        saved = sys.stdout
        sys.stdout = quiet
        try:
            for name in names:
                if name.split(".")[0] in NEVER_PRELOAD or name in sys.modules:
                    continue
                with contextlib.suppress(BaseException):  # one that needs another first
                    __import__(name)
        finally:
            sys.stdout = saved
    loaded = [m for m in sys.modules if m.split(".")[0] in ("autogradcli", "tests")]
    assert not loaded, loaded
    gc.collect()
    gc.freeze()  # a fork's collections (pytest runs some at exit) skip all of this


def run(args: argparse.Namespace, copy_root: Path, mutants: list[Mutant]) -> int:
    preload(PRELOAD)
    logs = copy_root / ".mutants"
    logs.mkdir()
    begun = time.monotonic()
    origin = where_imported(copy_root, logs / "where.log")
    if not origin.startswith(str(copy_root.resolve())):
        print(f"autogradcli is imported from {origin}, not the copy {copy_root}: stopped")
        return 2
    print(f"copy: {copy_root} (autogradcli imported from there)", flush=True)
    tests = [t for t in args.tests if (copy_root / t).exists()]
    data = baseline(copy_root, tests, logs / "baseline.log")
    selection = Selection.of(data)
    preload(data["modules"])
    print(
        f"baseline: {len(selection.order)} tests pass in {data['wall']:.0f} s "
        f"(traced; {data['status']}); {len(data['failed'])} fail and are left out: "
        f"{data['failed']}",
        flush=True,
    )
    if not selection.order:
        print((logs / "baseline.log").read_text()[-3000:])
        return 2
    for mutant in mutants:
        run_mutant(mutant, copy_root, selection, logs, everything=False)
        if mutant.status in ("survived", "uncovered") and args.confirm:
            run_mutant(mutant, copy_root, selection, logs, everything=True)
        note = EQUIVALENT.get(mutant.key)
        extra = mutant.killer if mutant.status == "killed" else ""
        if note and mutant.status in ("survived", "uncovered"):
            extra = f"(equivalent: {note})"
        print(
            f"{line(mutant)}\n       -> {mutant.status} {mutant.seconds:.1f} s, "
            f"{mutant.tests} tests {extra}",
            flush=True,
        )
        if args.only:
            print(diff(mutant, copy_root))
    return summary(mutants, time.monotonic() - begun, args.json)


def summary(mutants: list[Mutant], seconds: float, out: Path | None) -> int:
    counts: dict[str, int] = {}
    for mutant in mutants:
        counts[mutant.status] = counts.get(mutant.status, 0) + 1
    alive = [m for m in mutants if m.status in ("survived", "uncovered")]
    equivalent = [m for m in alive if m.key in EQUIVALENT]
    missed = [m for m in alive if m.key not in EQUIVALENT]
    dead = counts.get("killed", 0) + counts.get("timeout", 0)
    total = len(mutants)
    print(
        f"\n{total} mutants in {seconds / 60:.1f} min: "
        + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    )
    if total:
        print(f"score: {dead}/{total} killed ({100 * dead / total:.1f} %)", end="")
        if total - len(equivalent):
            rest = total - len(equivalent)
            print(
                f"; {dead}/{rest} ({100 * dead / rest:.1f} %) leaving out "
                f"{len(equivalent)} equivalent"
            )
        else:
            print()
    for mutant in missed:
        print(f"not killed: {line(mutant)}  [{mutant.key}]")
    if out is not None:
        rows = [
            {k: getattr(m, k) for k in ("number", "key", "status", "seconds", "tests", "killer")}
            for m in mutants
        ]
        out.write_text(json.dumps(rows, indent=1))
    return 0 if not missed else 1


if __name__ == "__main__":
    sys.exit(main())
