"""Small readings of Python's ``ast`` that the program builder shares: a statement's
text, ``None``, ``print(...)``, a string, a method's owner, a flag's value."""

from __future__ import annotations

import ast
import io
import tokenize

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


def survey(module: ast.AST) -> tuple[bool, set[str]]:
    """Whether the text calls backward() or print(...) (what makes a cell), and every
    name it reads or writes: one walk of every node (as ``ast.walk``, in half its time:
    a long program's text is walked whole)."""
    cell, idents = False, set()
    stack = [module]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name):
            idents.add(node.id)
        elif isinstance(node, ast.Call) and not cell:
            func = node.func
            backward = isinstance(func, ast.Attribute) and func.attr == "backward"
            cell = backward or (isinstance(func, ast.Name) and func.id == "print")
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, ast.AST):
                stack.append(value)
            elif type(value) is list:
                stack.extend(v for v in value if isinstance(v, ast.AST))
    return cell, idents


def caret_power(text: str) -> bool:
    """Whether an expression's text writes ``^`` outside strings (read there as ``**``)."""
    if "^" not in text:  # no token to look for (a long program is not tokenized)
        return False
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return "^" in text
    return any(t.type == tokenize.OP and t.string in ("^", "^=") for t in tokens)
