"""The text of a tree, with the parentheses it needs (a fold)."""

from __future__ import annotations

from autogradcli.lang.tree import Binary, Call, Fold, Name, Node, Num, Unary

_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "@": 2, "**": 4}


def _needs_parens(child: Node, parent: int, right_side: bool) -> bool:
    if isinstance(child, Unary):
        return parent >= _PRECEDENCE["**"]
    if not isinstance(child, Binary):
        return isinstance(child, Num) and child.value < 0
    mine = _PRECEDENCE[child.op]
    return mine < parent or (mine == parent and right_side)


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
        return f"{left} {node.op} {right}" if mine == 1 else f"{left}{node.op}{right}"

    def call(self, node: Call, arg: str, other: str | None) -> str:
        args = [arg, *([] if other is None else [other])]
        args += [] if node.dim is None else [str(node.dim)]
        return f"{node.func}({', '.join(args)})"


_TEXT = _Text()


def unparse(node: Node) -> str:
    """Text of a subtree with the parentheses it needs."""
    return _TEXT(node)
