"""A cell's Python around the tensors, read before the builder sees it: names bound to
Python numbers, dtypes and devices (``learning_rate = 1e-6``, ``dtype = torch.float``,
``device = torch.device("cpu")``), ``math.pi``/``math.e``/``pi`` as numbers, ``for NAME in
range(...)`` unrolled with NAME a number, ``if`` on Python numbers decided, and
``from torch.autograd import Function`` as a name. Nothing is evaluated from text: the
numbers are literals of the syntax tree and the arithmetic is Python's on them.

Control flow on tensors (d2l's ``while b.norm() < 1000:``, ``if b.sum() > 0:``) and plain
``def f(a): ... return c`` called later (``d = f(a)``, inlined with its own scope): the
lines are handed to the builder one at a time (a generator), so a tensor condition is
read from the run's values at that point (``decide``, the builder's) and only the path
taken becomes lines; the builder records each decision (``Branch``) for the run to read
again."""

from __future__ import annotations

import ast
import copy
import math
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from autogradcli.errors import ExpressionError
from autogradcli.lang.flow import Break, Enter, Flow, FlowUnroll, Jump, Leave, Return, breaks
from autogradcli.settings import Limits

# caps on what a cell's loops may run (Limits.max_iterations/max_lines, --max-iterations ...)
MAX_ITERATIONS = Limits.max_iterations
MAX_LINES = Limits.max_lines

DTYPE_NAMES: dict[str, str] = {
    "float": "float32",
    "float32": "float32",
    "double": "float64",
    "float64": "float64",
    "half": "float16",
    "float16": "float16",
    "bfloat16": "bfloat16",
}
NUMBERS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau, "inf": math.inf}
# from-imports kept as names only (nothing is imported): the classes these pages name
NAMED_IMPORTS = frozenset(
    {
        ("torch.autograd", "Function"),
        ("torch.autograd.function", "once_differentiable"),
        ("torch.autograd", "grad"),
        ("math", "pi"),
    }
)

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


@dataclass
class Unroller(FlowUnroll):
    """Rewrites a cell's module: Python-number lines folded, loops unrolled, ``if`` on
    numbers decided; the lines left are the tensor lines the builder reads. A tensor
    condition is handed to ``decide`` (the builder's: the run's values at that point)."""

    max_iterations: int = MAX_ITERATIONS
    max_lines: int = MAX_LINES
    numbers: dict[str, int | float | bool] = field(default_factory=dict)
    dtypes: dict[str, str] = field(default_factory=dict)
    devices: dict[str, str] = field(default_factory=dict)
    imported: set[str] = field(default_factory=set)  # math's pi imported as a name
    lines: int = 0
    iterations: int = 0
    used_devices: set[str] = field(default_factory=set)
    decide: Callable[[ast.expr, str, str, int], bool] | None = None
    defs: dict[str, ast.FunctionDef] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)  # the calls under way (innermost last)
    in_with: int = 0
    loops: int = 0  # loops under way in the current function (break/continue need one)
    text: str = ""  # the cell as written (a condition is shown as written)
    decisions: int = 0  # tensor conditions read so far
    settle: Callable[[bool], None] | None = None

    def statements(self, body: list[ast.stmt]) -> Iterator[ast.stmt | Flow]:
        for stmt in body:
            yield from self.statement(stmt)

    def block(self, body: list[ast.stmt]) -> list[ast.stmt]:
        try:
            out = list(self.statements(body))
        except Jump:  # break or continue inside the block
            raise ExpressionError("flow_in_with") from None
        if any(isinstance(s, Enter | Return | Leave) for s in out):
            raise ExpressionError("flow_in_with")
        return out  # type: ignore[return-value]

    def count(self, text: ast.AST) -> None:
        self.lines += 1
        if self.lines > self.max_lines:
            raise ExpressionError(
                "cell_lines_cap", cap=self.max_lines, text=ast.unparse(text).split("\n")[0]
            )

    def statement(self, stmt: ast.stmt) -> Iterator[ast.stmt | Flow]:
        self.count(stmt)
        if isinstance(stmt, ast.ImportFrom) and all(
            (stmt.module, a.name) in NAMED_IMPORTS and a.asname is None for a in stmt.names
        ):
            self.imported.update(a.name for a in stmt.names)
            return
        if isinstance(stmt, ast.FunctionDef) and self.define(stmt):
            return
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.IfExp):
            yield from self.statement(_as_if(stmt, stmt.value))  # c = b if t else 100 * b
            return
        if isinstance(stmt, ast.Assign) and self.python_binding(stmt):
            return
        if isinstance(stmt, ast.For):
            yield from self.loop(stmt)
        elif isinstance(stmt, ast.While):
            yield from self.while_loop(stmt)
        elif isinstance(stmt, ast.If):
            test = self.condition(stmt.test, f"if {self.written(stmt.test)}:", "if", stmt)
            yield from self.statements(stmt.body if test else stmt.orelse)
        elif isinstance(stmt, ast.With):
            stmt = copy.copy(stmt)
            self.in_with += 1
            try:
                stmt.body = self.block(stmt.body)
            finally:
                self.in_with -= 1
            yield stmt
        elif isinstance(stmt, ast.Break | ast.Continue):
            self.jump(stmt)
        elif isinstance(stmt, ast.Return) and self.calls:
            yield from self.returned(stmt)
        elif (called := self.called(stmt)) is not None:
            yield from self.call(stmt, *called)
        else:
            self.refuse_calls(stmt)
            for target in _targets(stmt):
                self.forget(target)
            yield self.substitute(stmt)

    def forget(self, name: str) -> None:
        for table in (self.numbers, self.dtypes, self.devices):
            table.pop(name, None)  # type: ignore[attr-defined]

    def python_binding(self, stmt: ast.Assign) -> bool:
        """``NAME = number``, ``NAME = torch.float``, ``NAME = torch.device("cpu")``."""
        if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
            return False
        name, value = stmt.targets[0].id, stmt.value
        dtype = self.dtype(value)
        device = self.device(value)
        number = self.number(value)
        if dtype is None and device is None and number is None:
            return False
        self.forget(name)
        if dtype is not None:
            self.dtypes[name] = dtype
        elif device is not None:
            self.devices[name] = device
        else:
            assert number is not None
            self.numbers[name] = number
        return True

    def dtype(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name) and node.id in self.dtypes:
            return self.dtypes[node.id]
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "torch"
        ):
            return DTYPE_NAMES.get(node.attr)
        return None

    def device(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name) and node.id in self.devices:
            return self.devices[node.id]
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) == "torch.device"
            and len(node.args) == 1
            and not node.keywords
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            return node.args[0].value
        return None

    def number(self, node: ast.AST) -> int | float | bool | None:
        """A Python number the syntax tree fixes (literals, the names bound to numbers,
        math's constants, and Python's arithmetic on them), else None."""
        if isinstance(node, ast.Constant) and type(node.value) in (int, float, bool):
            return node.value  # type: ignore[no-any-return]
        if isinstance(node, ast.Name):
            if node.id in self.numbers:
                return self.numbers[node.id]
            if node.id == "pi" and ("pi" in self.imported or "pi" not in self.numbers):
                return None  # the language's own pi where nothing else binds it
            return None
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "math"
        ):
            return NUMBERS.get(node.attr)
        if isinstance(node, ast.UnaryOp):
            inner = self.number(node.operand)
            if inner is None:
                return None
            if isinstance(node.op, ast.USub):
                return -inner
            if isinstance(node.op, ast.UAdd):
                return +inner
            if isinstance(node.op, ast.Not):
                return not inner
            return None
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = self.number(node.left), self.number(node.right)
            if left is None or right is None:
                return None
            try:
                return _BINARY[type(node.op)](left, right)  # type: ignore[no-any-return]
            except (ZeroDivisionError, OverflowError) as exc:
                raise ExpressionError(
                    "python_number_raised", text=ast.unparse(node), error=type(exc).__name__
                ) from None
        if isinstance(node, ast.Compare) and all(type(o) in _COMPARE for o in node.ops):
            values = [self.number(node.left), *(self.number(c) for c in node.comparators)]
            if any(v is None for v in values):
                return None
            return all(
                _COMPARE[type(op)](a, b)
                for op, a, b in zip(node.ops, values, values[1:], strict=False)
            )
        if isinstance(node, ast.BoolOp):
            found = [self.number(v) for v in node.values]
            if any(v is None for v in found):
                return None
            if isinstance(node.op, ast.And):
                return next((v for v in found if not v), found[-1])
            return next((v for v in found if v), found[-1])
        return None

    def loop(self, stmt: ast.For) -> Iterator[ast.stmt | Flow]:
        """``for NAME in range(...)``: its body once per number, NAME that number."""
        head = f"for {ast.unparse(stmt.target)} in {ast.unparse(stmt.iter)}:"
        call = stmt.iter
        if (
            not isinstance(stmt.target, ast.Name)
            or not isinstance(call, ast.Call)
            or not isinstance(call.func, ast.Name)
            or call.func.id != "range"
            or call.keywords
            or not 1 <= len(call.args) <= 3
            or stmt.orelse
        ):
            raise ExpressionError("loop_not_range", text=head)
        bounds = [self.number(a) for a in call.args]
        if any(type(b) is not int for b in bounds):
            raise ExpressionError("loop_bound", text=head)
        numbers = range(*bounds)  # type: ignore[arg-type]
        stops = breaks(stmt.body)  # with break, only the passes that run count
        if not stops and self.iterations + len(numbers) > self.max_iterations:
            raise ExpressionError(
                "loop_iterations_cap", text=head, count=len(numbers), cap=self.max_iterations
            )
        self.iterations += 0 if stops else len(numbers)
        name = stmt.target.id
        for value in numbers:
            if stops:
                self.one_more(head)
            self.forget(name)
            self.numbers[name] = value
            try:  # each line is copied where it is substituted
                yield from self.looped(stmt.body)
            except Break:
                break

    def substitute(self, stmt: ast.stmt) -> ast.stmt:
        """The line with the numbers, dtypes and devices its names hold written in."""
        return _Substitute(self).copy(stmt)  # type: ignore[no-any-return]

    def substitute_expr(self, node: ast.expr) -> ast.expr:
        return _Substitute(self).copy(node)  # type: ignore[no-any-return]


class _Substitute:
    """A copy of a syntax tree (as ``clone``) with what the unroller knows written in, in
    one pass: a name bound to a number, a dtype or pi, ``math.X``, and a ``device=`` or
    ``dtype=`` keyword; an f-string is copied as it is (the builder's print reads it)."""

    def __init__(self, unroller: Unroller) -> None:
        self.unroller = unroller

    def copy(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self.copy(n) for n in node]
        if not isinstance(node, ast.AST):
            return node
        if isinstance(node, ast.Name):
            found = self.name(node)
            if found is not None:
                return found
        elif isinstance(node, ast.Attribute):
            value = self.unroller.number(node)
            if value is not None:
                return _constant(value, node)
        elif isinstance(node, ast.keyword):
            found = self.keyword(node)
            if found is not None:
                return found
        elif isinstance(node, ast.JoinedStr):
            return clone(node)
        new = node.__class__()
        for name, value in ast.iter_fields(node):
            setattr(new, name, self.copy(value))
        for name in node._attributes:
            if hasattr(node, name):
                setattr(new, name, getattr(node, name))
        return new

    def name(self, node: ast.Name) -> ast.AST | None:
        if not isinstance(node.ctx, ast.Load):
            return None
        unroller = self.unroller
        if node.id in unroller.numbers:
            return _constant(unroller.numbers[node.id], node)
        if node.id in unroller.dtypes:
            return _dtype_node(unroller.dtypes[node.id], node)
        if node.id == "pi" and "pi" in unroller.imported:
            return _constant(math.pi, node)
        return None

    def keyword(self, node: ast.keyword) -> ast.AST | None:
        if node.arg == "device":
            device = self.unroller.device(node.value)
            if device is None:
                raise ExpressionError("device_keyword", text=ast.unparse(node.value))
            self.unroller.used_devices.add(device)
            return ast.keyword(arg="device", value=ast.Constant(device))
        if node.arg == "dtype":
            dtype = self.unroller.dtype(node.value)
            if dtype is not None:
                return ast.keyword(arg="dtype", value=_dtype_node(dtype, node.value))
        return None


def clone(node: Any) -> Any:
    """A copy of a syntax tree (faster than ``copy.deepcopy`` for the thousands of lines
    a loop unrolls); positions are kept, so each line shows as written."""
    if isinstance(node, list):
        return [clone(n) for n in node]
    if not isinstance(node, ast.AST):
        return node
    new = node.__class__()
    for name, value in ast.iter_fields(node):
        setattr(new, name, clone(value))
    for name in node._attributes:
        if hasattr(node, name):
            setattr(new, name, getattr(node, name))
    return new


def _constant(value: float | bool, like: ast.AST) -> ast.AST:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        inner = ast.copy_location(ast.Constant(-value), like)
        return ast.copy_location(ast.UnaryOp(ast.USub(), inner), like)
    return ast.copy_location(ast.Constant(value), like)


def _dtype_node(dtype: str, like: ast.AST) -> ast.AST:
    torch_name = ast.copy_location(ast.Name("torch", ast.Load()), like)
    return ast.copy_location(ast.Attribute(torch_name, dtype, ast.Load()), like)


def _as_if(stmt: ast.Assign, value: ast.IfExp) -> ast.If:
    """``NAME = A if TEST else B`` as the ``if`` Python runs: TEST first, then A or B."""
    branches = [ast.Assign(stmt.targets, v) for v in (value.body, value.orelse)]
    for branch in branches:
        ast.copy_location(branch, stmt)
    return ast.copy_location(ast.If(value.test, branches[:1], branches[1:]), stmt)


def _targets(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    return []
