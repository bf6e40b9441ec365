"""The program builder's ``print(...)`` lines: names and expressions shown beside SymPy's
values, and ``t.item()``, ``t.tolist()``, Python numbers and f-strings of those printed as
Python prints them (a mixin of ``program._Builder``)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from autogradcli.errors import ExpressionError
from autogradcli.lang.cellstatements import Printed
from autogradcli.lang.guards import literal
from autogradcli.lang.syntax import method_of, statement_text
from autogradcli.lang.tree import Node, Show

if TYPE_CHECKING:
    from autogradcli.lang.tree import Statement


class PrintLines:
    """``print`` for the builder; it supplies ``used``, ``statements``, ``written`` and
    ``expression``."""

    used: set[str]
    statements: list[Statement]

    def written(self, stmt: ast.AST) -> str: ...  # the builder's

    def expression(self, node: ast.AST, readable: bool = False) -> Node: ...  # the builder's

    def show(self, args: list[ast.expr], keywords: list[ast.keyword], stmt: ast.Expr) -> None:
        """``print(...)``: names and expressions; ``t.item()``, ``t.tolist()``, Python
        numbers and f-strings of those are shown as Python prints them."""
        used = set(self.used)
        items: list[Node | str] = []
        formats: list[str] = []
        sep = " "
        if len(args) == 1 and isinstance(args[0], ast.JoinedStr):
            sep = ""
            args = self.formatted(args[0], stmt)
        for arg in args:
            number = literal(arg)
            method = method_of(arg)
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                items.append(arg.value)
                formats.append("text")
            elif number is not None or (isinstance(arg, ast.Constant) and arg.value is None):
                items.append(str(number if number is not None else arg.value))
                formats.append("text")
            elif isinstance(arg, ast.JoinedStr):
                raise ExpressionError("print_format", text=statement_text(stmt))
            elif method in ("item", "tolist") and not arg.args and not arg.keywords:  # type: ignore[attr-defined]
                owner = arg.func.value  # type: ignore[attr-defined]
                items.append(self.expression(owner, readable=True))
                formats.append(method)
            else:
                items.append(self.expression(arg, readable=True))
                formats.append("")
        if any(k.arg not in ("sep", "end", "flush") for k in keywords):
            raise ExpressionError("print_format", text=statement_text(stmt))
        for keyword in keywords:
            if keyword.arg == "sep":
                if not (
                    isinstance(keyword.value, ast.Constant) and isinstance(keyword.value.value, str)
                ):
                    raise ExpressionError("print_format", text=statement_text(stmt))
                sep = keyword.value.value
        plain = sep == " " and all(
            f == "" or (f == "text" and _is_written_text(a))
            for f, a in zip(formats, args, strict=True)
        )
        if plain:  # as before: each item beside what SymPy expects
            self.statements.append(Show(tuple(items), self.written(stmt)))
        else:
            self.statements.append(Printed(tuple(items), self.written(stmt), tuple(formats), sep))
        self.used = used  # showing a tensor builds nothing on it

    def formatted(self, text: ast.JoinedStr, stmt: ast.Expr) -> list[ast.expr]:
        """An f-string's parts: its text, and each ``{expression}`` without a format spec
        or conversion (only known expressions are formatted)."""
        parts: list[ast.expr] = []
        for value in text.values:
            if isinstance(value, ast.FormattedValue):
                if value.format_spec is not None or value.conversion not in (-1, 115):
                    raise ExpressionError("print_format", text=statement_text(stmt))
                parts.append(value.value)
            else:
                parts.append(value)
        return parts


def _is_written_text(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)
