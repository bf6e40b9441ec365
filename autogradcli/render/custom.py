"""Render a custom autograd Function's own check: per input, the user's backward beside
SymPy's derivative of the forward and central differences; where they differ, which
elements, both formulas, and how they differ."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from autogradcli.policy.verdict import AGREE
from autogradcli.render.numbers import add_column, format_array, mark
from autogradcli.results.custom import FunctionCheck

MAX_ELEMENTS = 8


def render_function(check: FunctionCheck) -> list[Any]:
    """The check's lines: a heading, a table of the inputs, the differences, the problems."""
    parts: list[Any] = []
    heading = Text.assemble(
        ("custom Function ", "bold"),
        (check.call, "bold cyan"),
        "  your backward, grad_output 0.75 to 1.25, float64  ",
    )
    heading.append_text(mark(check.verdict))
    parts.append(heading)
    if check.inputs:
        table = Table(box=None, padding=(0, 1), pad_edge=False, show_edge=False)
        for column in ["", "backward (yours)", "expected (SymPy)", "numeric (float64)", "check"]:
            add_column(table, column)
        for i in check.inputs:
            table.add_row(
                "   " + i.name,
                format_array(i.user),
                format_array(i.expected),
                format_array(i.numeric) if i.numeric is not None else Text("— (too large)"),
                mark(i.verdict),
            )
        parts.append(table)
    for i in check.inputs:
        if i.verdict == AGREE:
            continue
        shown = ", ".join(str(e) for e in i.elements[:MAX_ELEMENTS])
        more = ", ..." if len(i.elements) > MAX_ELEMENTS else ""
        where = f" at elements {shown}{more}" if i.elements else ""
        parts.append(Text(f"   {i.name}: your backward differs{where}", style="yellow"))
        if i.written:
            parts.append(Text(f"      yours      {i.written}"))
        if i.right:
            parts.append(Text(f"      the right  {i.right}"))
        if i.difference:
            parts.append(Text(f"      {i.difference}", style="yellow"))
    for problem in check.problems:
        parts.append(Text(f"   {problem}", style="yellow"))
    return parts
