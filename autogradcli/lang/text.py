"""The text of a tree, with the parentheses it needs (a fold)."""

from __future__ import annotations

import ast
import functools
import re
from typing import Any

from autogradcli.lang.tree import (
    COMPARISONS,
    Binary,
    Call,
    Fold,
    Index,
    Name,
    Node,
    Num,
    Slice,
    Unary,
)

_PRECEDENCE = {**dict.fromkeys(COMPARISONS, 0), "+": 1, "-": 1, "*": 2, "/": 2, "@": 2, "**": 4}


def _needs_parens(child: Node, parent: int, right_side: bool) -> bool:
    if isinstance(child, Unary):
        return parent >= _PRECEDENCE["**"]
    if not isinstance(child, Binary):
        return isinstance(child, Num) and child.value < 0
    mine = _PRECEDENCE[child.op]
    return mine < parent or (mine == parent and right_side)


def _param(value: Any) -> str:
    return repr(value) if isinstance(value, (str, tuple)) else str(value)


def _item(item: Any) -> str:
    if isinstance(item, Slice):
        text = (
            f"{'' if item.start is None else item.start}:{'' if item.stop is None else item.stop}"
        )
        return text + ("" if item.step is None else f":{item.step}")
    if item is Ellipsis:
        return "..."
    if isinstance(item, tuple):
        return f"[{', '.join(map(str, item))}]"
    return str(item)


class _Text(Fold[str]):
    def num(self, node: Num) -> str:
        return repr(node.value)

    def name(self, node: Name) -> str:
        return node.id

    def unary(self, node: Unary, operand: str) -> str:
        inner = node.operand
        low = isinstance(inner, Binary) and _PRECEDENCE[inner.op] < _PRECEDENCE["**"]
        return f"{node.op}({operand})" if low else f"{node.op}{operand}"

    def binary(self, node: Binary, left: str, right: str) -> str:
        mine = _PRECEDENCE[node.op]
        if _needs_parens(node.left, mine, right_side=node.op == "**"):
            left = f"({left})"
        if _needs_parens(node.right, mine, right_side=node.op != "**"):
            right = f"({right})"
        return f"{left} {node.op} {right}" if mine <= 1 else f"{left}{node.op}{right}"

    def call(self, node: Call, args: list[str]) -> str:
        from autogradcli.lang.vocabulary import OPS

        op = OPS.get(node.func)
        shown = [f"[{', '.join(args)}]"] if op is not None and op.sequence else list(args)
        given = node.options
        if op is not None and op.order:  # gather(x, 1, i): PyTorch's positional order
            named = dict(zip(op.tensors, args, strict=False))
            named.update({p: _param(given[p]) for p in op.order if p in given})
            return f"{node.func}({', '.join(named[n] for n in op.order if n in named)})"
        if node.func == "take":  # x[torch.arange(4), ys]: the subscript it was written as
            tensors = iter(args[1:])
            items = [next(tensors) if i == "#" else _item(i) for i in given["pattern"]]
            return self.index(Index(node.args[0], ()), args[0]).removesuffix("[]") + (
                f"[{', '.join(items)}]"
            )
        positional = True  # leading dims stay positional, as in sum(x, 0) or transpose(x, 0, 1)
        for param in op.params if op is not None else ():
            if param.name not in given:
                positional = False
                continue
            value = _param(given[param.name])
            positional = positional and param.kind in ("int", "dims", "ints")
            shown.append(value if positional else f"{param.name}={value}")
        return f"{node.func}({', '.join(shown)})"

    def index(self, node: Index, value: str) -> str:
        inner = node.value
        wrapped = isinstance(inner, (Binary, Unary)) or (isinstance(inner, Num) and inner.value < 0)
        base = f"({value})" if wrapped else value
        return f"{base}[{', '.join(_item(i) for i in node.items)}]"


_TEXT = _Text()


def unparse(node: Node) -> str:
    """Text of a subtree with the parentheses it needs."""
    return _TEXT(node)


_LINE = re.compile(r".*?(?:\r\n|\r|\n)|.+$", re.S)


@functools.lru_cache(maxsize=8)
def _lines(text: str) -> tuple[str, ...]:
    """The text's lines with their ends, split as ``ast.get_source_segment`` splits them
    (once per text: splitting it again for each line is quadratic in a long program)."""
    return tuple(_LINE.findall(text))


def source_segment(text: str, node: ast.AST) -> str | None:
    """``ast.get_source_segment(text, node)``, with the text's lines split once."""
    end_line = getattr(node, "end_lineno", None)
    end_col = getattr(node, "end_col_offset", None)
    if end_line is None or end_col is None:
        return None
    lines = _lines(text)
    first, last, start = node.lineno - 1, end_line - 1, node.col_offset  # type: ignore[attr-defined]
    if first == last:
        return lines[first].encode()[start:end_col].decode()
    head = lines[first].encode()[start:].decode()
    tail = lines[last].encode()[:end_col].decode()
    return "".join([head, *lines[first + 1 : last], tail])
