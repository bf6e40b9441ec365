"""Render a ``GradResult`` with Rich: header, output, gradient table, passes, verdict."""

from __future__ import annotations

import numpy as np
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from autogradcli.result import GradResult

OK, BAD = "✓", "✗"


def format_array(array: np.ndarray | None) -> str:
    """A number as ``93`` or ``4.5``; a tensor as nested rows, summarised when large."""
    if array is None:
        return "None"
    array = np.asarray(array, dtype=np.float64)
    if array.ndim == 0:
        return _number(float(array))
    return np.array2string(
        array,
        separator=", ",
        formatter={"float_kind": _number},
        threshold=100,
        edgeitems=3,
        max_line_width=60,
    )


def _number(value: float) -> str:
    return f"{value:.6g}"


def _mark(agree: bool | None) -> Text:
    if agree is None:
        return Text("—")
    return Text(OK, style="bold green") if agree else Text(BAD, style="bold red")


def _error(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def render(result: GradResult) -> Group:
    """The whole report as one Rich renderable."""
    parts: list = []
    header = Text.assemble(
        ("grad ", "bold"),
        (result.expression, "bold cyan"),
        f"   device {result.device} · dtype {result.dtype} · "
        f"rtol {result.rtol:g}, atol {result.atol:g}",
    )
    if result.seed is not None:
        header.append(f" · seed {result.seed}")
    parts.append(header)
    parts.append(_output_table(result))
    if result.weights is not None:
        parts.append(Text(f"external gradient (--weights): {format_array(result.weights)}"))
    parts.append(_gradient_table(result))
    for var in result.variables.values():
        for note in var.notes:
            parts.append(Text(f"note ({var.name}): {note}", style="yellow"))
    if len(result.passes) > 1:
        parts.append(_passes_table(result))
    parts.append(_verdict(result))
    return Group(*parts)


def _output_table(result: GradResult) -> Table:
    table = Table(title="output", title_justify="left", box=None, show_header=True)
    for column in ("", "value (torch)", "expected (SymPy)", "max abs error", "check"):
        table.add_column(column, overflow="fold")
    table.add_row(
        f"out {list(result.output.shape)}",
        format_array(result.output),
        format_array(result.output_expected),
        _error(result.output_max_abs_error),
        _mark(result.output_agree),
    )
    return table


def _gradient_table(result: GradResult) -> Table:
    table = Table(title="gradients", title_justify="left", show_lines=True)
    for column in (
        "variable",
        "value",
        ".grad\n(autograd)",
        "expected\n(SymPy)",
        "derivative\n(SymPy)",
        "max abs\nerror",
        "check",
    ):
        table.add_column(column, overflow="fold")
    for v in result.variables.values():
        if v.requires_grad:
            table.add_row(
                v.name,
                format_array(v.value),
                format_array(v.grad),
                format_array(v.expected),
                v.derivative or "—",
                _error(v.max_abs_error),
                _mark(v.agree),
            )
        else:
            table.add_row(
                v.name,
                format_array(v.value),
                "None",
                "— (requires_grad=False)",
                "—",
                "—",
                _mark(None),
            )
    return table


def _passes_table(result: GradResult) -> Table:
    table = Table(
        title=".grad accumulates over passes (no zero_grad)", title_justify="left", show_lines=True
    )
    table.add_column("pass")
    names = list(result.passes[0].grads)
    for name in names:
        table.add_column(f"{name}.grad", overflow="fold")
        table.add_column("expected\n(pass × single)", overflow="fold")
    table.add_column("check")
    for p in result.passes:
        cells = [str(p.index)]
        for name in names:
            cells += [format_array(p.grads[name]), format_array(p.expected[name])]
        table.add_row(*cells, _mark(p.agree))
    return table


def _verdict(result: GradResult) -> Text:
    if result.agree:
        return Text(f"{OK} autograd and SymPy agree", style="bold green")
    failing = [n for n, v in result.variables.items() if v.agree is False]
    if not result.output_agree:
        failing.insert(0, "output")
    what = ", ".join(failing) or "a pass"
    return Text(f"{BAD} autograd and SymPy disagree: {what}", style="bold red")


def print_result(result: GradResult, console: Console | None = None) -> None:
    """Print the report to ``console`` (stdout by default)."""
    (console or Console(highlight=False)).print(render(result))
