"""Small readings of Python's ``ast`` that the program builder shares: a statement's
text, ``None``, ``print(...)``, a string, a method's owner, a flag's value."""

from __future__ import annotations

import ast

from autogradcli.errors import ExpressionError


def is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def method_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def owner_of(node: ast.Call) -> str | None:
    """``y`` of ``y.method(...)``."""
    func = node.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return func.value.id
    return None


def one_argument(args: ast.arguments) -> bool:
    plain = not (args.posonlyargs or args.kwonlyargs or args.vararg or args.kwarg)
    return plain and len(args.args) == 1 and not args.defaults


def is_print(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "print"
        and not node.keywords
    )


def is_text(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def fresh_name(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    return name


def statement_text(stmt: ast.AST) -> str:
    return ast.unparse(stmt).strip()


def truth(node: ast.AST, text: str = "") -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return node.value
    raise ExpressionError("flag_value", text=text or ast.unparse(node))


def keyword_flag(node: ast.Call, name: str) -> bool:
    for keyword in node.keywords:
        if keyword.arg == name:
            return truth(keyword.value, ast.unparse(node))
    return False
