"""Gradient hooks in a program: ``y.register_hook(lambda g: g * 2)``, a named hook
function, ``h.remove()``, and the hooks active at a point of a cell."""

from __future__ import annotations

import ast
from collections.abc import Callable

from autogradcli.errors import ExpressionError
from autogradcli.lang.analysis import check_constants
from autogradcli.lang.converter import Converter
from autogradcli.lang.syntax import (
    is_none,
    is_print,
    is_text,
    one_argument,
    owner_of,
)
from autogradcli.lang.tree import (
    Hook,
    Node,
    Statement,
    Unhook,
    walk_names,
)
from autogradcli.lang.vocabulary import CONSTANTS
from autogradcli.settings import Limits


def active_hooks(statements: list[Statement] | tuple[Statement, ...]) -> tuple[Hook, ...]:
    """The hooks registered and not removed by the end of ``statements``."""
    active: list[Hook] = []
    for statement in statements:
        if isinstance(statement, Hook):
            active.append(statement)
        elif isinstance(statement, Unhook):
            active = [h for h in active if h.handle != statement.handle]
    return tuple(active)


def as_lambda(stmt: ast.FunctionDef) -> ast.Lambda | None:
    """``def hook(g): return g * 2`` (or a body that prints ``g``) as the lambda it is;
    None for any other function."""
    if stmt.decorator_list or not one_argument(stmt.args):
        return None
    param = stmt.args.args[0].arg
    body = list(stmt.body)
    if body and isinstance(body[0], ast.Expr) and is_text(body[0].value):
        body = body[1:]  # a docstring
    if len(body) == 2 and isinstance(body[1], ast.Return):  # print(g), then return g or None
        back = body[1].value
        if back is None or is_none(back) or (isinstance(back, ast.Name) and back.id == param):
            body = body[:1]
    if len(body) != 1 or not isinstance(body[0], ast.Return | ast.Expr):
        return None
    value = body[0].value
    if value is None or (isinstance(body[0], ast.Expr) and not is_print(value)):
        return None
    one = ast.arguments(
        posonlyargs=[], args=[ast.arg(arg=param)], kwonlyargs=[], kw_defaults=[], defaults=[]
    )
    return ast.Lambda(args=one, body=value)


class HookLines:
    """The program builder's hook handling (mixed into ``program._Builder``)."""

    # the builder's state these methods read and write (see program._Builder)
    converter: Callable[..., Converter]
    current: dict[str, str]
    functions: dict[str, ast.Lambda]
    handles: dict[str, Hook]
    hooked: set[str]
    leaf_of: Callable[[str], str]
    limits: Limits
    registered: set[str]
    statements: list[Statement]
    used: set[str]
    written: Callable[[ast.AST], str]

    def hook(self, node: ast.Call, stmt: ast.stmt, handle: str) -> None:
        """``y.register_hook(lambda g: g * 2)``: the body is an expression in its argument
        (converted like any expression, never run), or ``print(g)``."""
        text = self.written(stmt)
        fn = node.args[0] if len(node.args) == 1 and not node.keywords else None
        if isinstance(fn, ast.Name) and fn.id in self.functions:  # defined before, by name
            self.registered.add(fn.id)
            fn = self.functions[fn.id]
        owner = owner_of(node)
        if owner is None or not isinstance(fn, ast.Lambda) or not one_argument(fn.args):
            raise ExpressionError("hook_form", text=text)
        param = fn.args.args[0].arg
        body: Node | None = None
        if is_print(fn.body):
            assert isinstance(fn.body, ast.Call)
            for arg in fn.body.args:
                if not (is_text(arg) or (isinstance(arg, ast.Name) and arg.id == param)):
                    raise ExpressionError("hook_print", text=text, param=param)
        else:
            body = self.converter()(fn.body)
            check_constants(body, self.limits)
            for name in walk_names(body):
                if name != param and name not in CONSTANTS:
                    raise ExpressionError("hook_body", text=text, param=param, name=name)
        target = self.leaf_of(owner)
        if target in self.current.values():
            self.used.add(target)
        hook = Hook(target, param, body, ast.unparse(fn), handle, text)
        self.hooked.add(target)
        self.statements.append(hook)
        if handle:
            self.handles[handle] = hook

    def unhook(self, node: ast.Call, stmt: ast.Expr) -> None:
        handle = owner_of(node)
        assert handle is not None
        self.statements.append(Unhook(handle, self.written(stmt)))
