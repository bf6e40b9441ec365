"""The program builder's lines for custom autograd Functions: ``class NAME(Function)``,
``from torch.autograd import Function`` (a name, nothing is imported), ``P3 = NAME.apply``,
and each call ``NAME.apply(x)`` / ``P3(x)`` as the vocabulary entry ``NAME.apply``."""

from __future__ import annotations

import ast
from typing import Any

from autogradcli.errors import ExpressionError
from autogradcli.lang.custom import (
    CustomFunction,
    is_function_class,
    output_name,
    outputs,
    read_class,
    register,
)
from autogradcli.settings import Limits

# from MODULE import NAME lines these pages write: names only, nothing is imported
NAMES = {
    ("torch.autograd", "Function"),
    ("torch.autograd.function", "Function"),
    ("torch.autograd.function", "once_differentiable"),
}


class CustomLines:
    """A mixin of the builder (it has ``text``, ``limits`` and ``namespaces``)."""

    text: str
    limits: Limits
    namespaces: dict[str, str]

    @property
    def customs(self) -> dict[str, CustomFunction]:
        """The Functions the cell defines, and the names bound to their ``.apply``."""
        found: dict[str, CustomFunction] | None = self.__dict__.get("_customs")
        if found is None:
            found = self.__dict__["_customs"] = {}
        return found

    def custom_line(self, stmt: ast.stmt) -> bool:
        """Whether the line is one of these (read here)."""
        if isinstance(stmt, ast.ImportFrom) and not stmt.level:
            pairs = {(stmt.module or "", a.name) for a in stmt.names}
            if pairs <= NAMES and all(a.asname is None for a in stmt.names):
                return True
        if isinstance(stmt, ast.ClassDef) and is_function_class(stmt, self.namespaces):
            fn = read_class(stmt, self.text, self.limits, self.namespaces)
            register(fn, self.limits)
            self.customs[fn.name] = fn
            return True
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and (fn := self.applied(stmt.value)) is not None
        ):
            self.customs[stmt.targets[0].id] = fn
            return True
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Tuple)
            and isinstance(stmt.value, ast.Call)
            and (fn := self.applied(stmt.value.func)) is not None
        ):
            self.unpack(stmt.targets[0], stmt.value, fn)
            return True
        return False

    def unpack(self, target: ast.Tuple, value: ast.Call, fn: CustomFunction) -> None:
        """``a, b = NAME.apply(x)``: a step per output (one call of the Function)."""
        count = outputs(fn)
        names = [e.id for e in target.elts if isinstance(e, ast.Name)]
        if len(names) != len(target.elts) or count != len(names):
            raise ExpressionError(
                "custom_function_unpack", count=count or 1, names=ast.unparse(target)
            )
        for k, written in enumerate(names):
            call = ast.Call(ast.Name(output_name(fn, k), ast.Load()), value.args, value.keywords)
            self.add_step(written, self.expression(call))  # type: ignore[attr-defined]

    def applied(self, node: ast.AST) -> CustomFunction | None:
        """The Function ``NAME.apply`` (or a name bound to it) names, if any."""
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "apply"
            and isinstance(node.value, ast.Name)
            and node.value.id in self.customs
        ):
            found = self.customs[node.value.id]
            return found if found.name == node.value.id else None
        if isinstance(node, ast.Name) and node.id in self.customs:
            found = self.customs[node.id]
            return found if found.name != node.id else None
        return None

    def custom_calls(self, node: Any) -> Any:
        """The expression with each call of a Function's ``.apply`` spelled as its entry
        (changed in place: the tree is this parse's own)."""
        if not self.customs:
            return node
        for part in ast.walk(node):
            if isinstance(part, ast.Call) and (fn := self.applied(part.func)) is not None:
                part.func = ast.Name(id=fn.op_name, ctx=ast.Load())
        return node
