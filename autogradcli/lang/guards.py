"""Where Python itself acts on a cell's line before it has a value: ``^`` between numbers,
``math.f`` and ``np.f`` of numbers folded as Python folds them, and a ``Guard`` where Python
raises, or may, on the tensors of that moment (``a ^ b``, ``np.f(t)``, ``math.f(t)``)."""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from dataclasses import dataclass

from autogradcli.errors import ExpressionError
from autogradcli.lang.tree import (
    Node,
)
from autogradcli.lang.vocabulary import SPELLINGS


@dataclass(frozen=True)
class Guard:
    """A point of a cell's line where Python itself raises, or may, before the line has a
    value, checked on the tensors of that moment: ``a ^ b`` (``xor``: bitwise, which
    PyTorch refuses for floating point), ``np.f(t)`` (``numpy``: NumPy reads
    ``t.numpy()``, refused for a tensor that requires grad), ``math.f(t)`` (``math``:
    ``float(t)``, refused past one element, then Python's ``math.f``). ``operands`` are
    trees (or numbers) read under ``mode`` (the grad mode of a ``with`` block); ``func``
    is the ``math`` function's name."""

    kind: str
    operands: tuple[Node | float, ...]
    text: str
    mode: str = ""
    func: str = ""


class PythonSemantics(ast.NodeTransformer):
    """A cell's expression as Python runs it: ``^`` between numbers folded as Python does
    (or Python's TypeError), ``math.f`` of numbers folded with Python's ``math`` (only the
    vocabulary's names, on literals); what needs the tensors of that moment is recorded
    (kind, argument nodes, function), in evaluation order. Nothing is evaluated from
    text: the numbers are literals read from the syntax tree."""

    def __init__(self, path: Callable[[ast.AST], str | None]) -> None:
        self.path = path
        self.found: list[tuple[str, list[ast.expr], str]] = []

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if not isinstance(node.op, ast.BitXor):
            return node
        left, right = literal(node.left), literal(node.right)
        if left is not None and right is not None:
            if type(left) is int and type(right) is int:
                return ast.copy_location(ast.Constant(left ^ right), node)
            raise ExpressionError(
                "xor_numbers",
                text=ast.unparse(node),
                left=type(left).__name__,
                right=type(right).__name__,
            )
        self.found.append(("xor", [node.left, node.right], ""))
        return ast.copy_location(ast.BinOp(node.left, ast.Pow(), node.right), node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        path = self.path(node.func) or ""
        space, _, func = path.partition(".")
        if space not in ("np", "math") or path not in SPELLINGS:
            return node
        args = [
            e for a in node.args for e in (a.elts if isinstance(a, ast.List | ast.Tuple) else [a])
        ]
        numbers = [literal(a) for a in args]
        if space == "np":
            if any(n is None for n in numbers):
                self.found.append(("numpy", args, func))
            return node
        if numbers and not node.keywords and all(n is not None for n in numbers):
            value = math_value(func, numbers)  # type: ignore[arg-type]
            if value is not None:
                return ast.copy_location(ast.Constant(value), node)
        self.found.append(("math", args, func))
        if all(n is not None for n in numbers):
            return node  # Python raises here: the guard says so when the line runs
        # a Python float outside the graph: one element, no gradient through it
        summed = ast.Call(ast.Attribute(node, "sum", ast.Load()), [], [])
        return ast.Call(ast.Attribute(summed, "detach", ast.Load()), [], [])


def literal(node: ast.AST) -> int | float | None:
    """A number written as such (``2``, ``-0.5``), or None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = literal(node.operand)
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value  # type: ignore[no-any-return]
    return None


def math_value(func: str, numbers: list[float]) -> float | None:
    """Python's ``math.func(*numbers)`` where it is a finite number, else None (where it
    raises, the line raises when it runs)."""
    function = getattr(math, func, None)
    if function is None or func.startswith("_"):
        return None
    try:
        value = function(*numbers)
    except (ValueError, OverflowError, TypeError):
        return None
    if type(value) not in (int, float) or not math.isfinite(value):
        return None
    return value  # type: ignore[no-any-return]
