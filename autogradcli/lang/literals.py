"""Value text before it is read: its parse (``ast``, never evaluated) once its lists are
within the element cap, and the element and memory checks every value passes before its
array is allocated."""

from __future__ import annotations

import ast
import math
import re
from typing import Any

import numpy as np

from autogradcli.errors import LimitError, ValueSpecError
from autogradcli.lang.lookalikes import lookalike
from autogradcli.memory import FLOAT64, Budget, array_cost, parse_cost
from autogradcli.settings import Limits


def short(text: str) -> str:
    """``text``, cut to 60 characters for an error message."""
    return text if len(text) <= 60 else text[:57] + "..."


def parse_text(text: str, limits: Limits, budget: Budget, what: str) -> ast.Expression:
    """``ast.parse`` of value text, once its lists are known to be within the element cap
    (``check_literals``) and its parse within the memory budget."""
    check_literals(text, limits)
    budget.need(parse_cost(text), f"parsing {what} ({len(text)} characters)")
    try:
        return ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        similar = lookalike(text)
        if similar is not None:
            raise ValueSpecError("value_lookalike", text=short(text), **similar) from None
        raise ValueSpecError("value_unreadable", text=short(text)) from None


_LIST_PARTS = re.compile(rb"[\[\]]|[0-9.]+(?:[eE][+-]?[0-9]+)?")


def check_literals(text: str, limits: Limits) -> None:
    """Refuse text holding a bracketed list of more numbers than ``limits.max_elements``
    before anything parses it (the parse costs hundreds of bytes per number). A list of
    N numbers is at least 2N - 1 characters long, so shorter text is not scanned."""
    if len(text) < 2 * limits.max_elements + 1:
        return
    data = text.encode("utf-8", "replace")
    depth, count = 0, 0
    for part in _LIST_PARTS.finditer(data):
        token = part.group()
        if token == b"[":
            depth += 1
        elif token == b"]":
            depth = max(depth - 1, 0)
            if depth == 0:
                count = 0
        elif depth and token != b".":
            count += 1
            if count > limits.max_elements:
                raise LimitError("list_too_large", limit=limits.max_elements)


def literal_shape(node: ast.List | ast.Tuple) -> tuple[int, ...]:
    """The shape a literal list will have (its first elements' lengths), or its count of
    numbers as one size when it is ragged: known before any list is built."""
    shape: list[int] = []
    first: ast.AST = node
    while isinstance(first, (ast.List, ast.Tuple)) and len(shape) <= 33:
        shape.append(len(first.elts))
        if not first.elts:
            break
        first = first.elts[0]
    count, stack = 0, [node]
    while stack:
        item = stack.pop()
        if isinstance(item, (ast.List, ast.Tuple)):
            stack.extend(item.elts)
        else:
            count += 1
    return tuple(shape) if math.prod(shape) == count else (count,)


def as_array(data: Any, limits: Limits) -> np.ndarray:
    """``data`` as a float64 array within the element cap (a ragged list refused)."""
    try:
        array = np.asarray(data, dtype=np.float64)
    except (ValueError, TypeError):
        raise ValueSpecError("ragged_list") from None
    check_elements(array.shape, limits)
    return array


def check_elements(
    shape: tuple[int, ...],
    limits: Limits,
    budget: Budget | None = None,
    peak: int = FLOAT64,
) -> None:
    """Refuse a shape with more elements than ``limits.max_elements``, or whose float64
    array (and ``peak`` bytes per element while it is made) would pass the memory
    ``budget``; the array's bytes are counted in it. Before anything is allocated."""
    size = math.prod(shape)
    if size > limits.max_elements:
        raise LimitError("value_too_large", shape=list(shape), size=size, limit=limits.max_elements)
    if budget is not None:
        what = f"the inputs with a value of shape {list(shape)}"
        budget.take(array_cost(shape), what, peak=array_cost(shape, peak))


def is_len(node: ast.AST) -> bool:
    """``len(name)``."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "len"
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.Name)
    )
