"""Render an ``Explanation``: the backward pass node by node, and J^T w for --weights."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from autogradcli.render.numbers import add_column, format_array, mark, mark_expected
from autogradcli.results import Explanation


def render_explanation(
    explanation: Explanation, output: str, hooked: bool = False
) -> RenderableType:
    """The node table, then the external-gradient table when weights were given
    (``hooked``: the program's hooks changed the gradients on the way)."""
    parts: list[RenderableType] = [_nodes(explanation, output, hooked)]
    if explanation.vjp:
        parts.append(_vjp(explanation, output))
    return Group(*parts)


def _nodes(explanation: Explanation, output: str, hooked: bool) -> Table:
    weights = explanation.weights
    what = f"∂{output}/∂node"  # backward() of a scalar: the external gradient is 1
    if weights is not None and not bool((weights == 1).all()):
        what = f"∂(Σ wᵢ·{output}ᵢ)/∂node"
    elif weights is not None and weights.size > 1:
        what = f"∂(Σ {output}ᵢ)/∂node"  # weights of ones: the gradient of the sum
    what += " as the program's hooks changed it" if hooked else ""
    table = Table(
        title=f"backward() node by node, in the order PyTorch ran them (numbers read at each node; "
        f"gradient in = {what}, checked against SymPy)",
        title_justify="left",
        show_lines=True,
    )
    columns = ("#", "PyTorch node", "gradient in", "to", "× local ∂\n(SymPy)", "= sent", "check")
    for column in columns:
        add_column(table, column)
    for step in explanation.steps:
        node = Text(" + ".join(step.grad_fns), style="bold")
        node.append(f"\n{step.label}" + (" (leaf)" if step.leaf else ""), style="")
        first = [str(step.index), node, format_array(step.arriving)]
        if step.leaf is not None:
            check = mark_expected(step.arriving_agree, step.arriving_expected)
            table.add_row(*first, f"{step.leaf}.grad", "+= (accumulate)", "", check)
            continue
        if not step.flows:
            check = mark_expected(step.arriving_agree, step.arriving_expected)
            table.add_row(*first, "—", "—", "—", check)
        for rank, flow in enumerate(step.flows):
            cells = first if rank == 0 else ["", "", ""]
            check = mark_expected(flow.agree, flow.expected)
            if rank == 0 and not step.arriving_agree:
                check = mark_expected(False, step.arriving_expected)
                check.append(" (gradient in)")
            table.add_row(*cells, flow.to, flow.local, format_array(flow.grad), check)
    return table


def _vjp(explanation: Explanation, output: str) -> Table:
    table = Table(
        title=f"the external gradient: {output}.backward(w) computes Jᵀw, the gradient of "
        f"sum({output} * w)",
        title_justify="left",
        show_lines=True,
    )
    for column in (
        "input",
        f"J = ∂{output}/∂input\n(SymPy, rows: {output})",
        "w",
        "Jᵀw\n(SymPy)",
        ".grad after\nbackward(w)",
        f"grad of\nsum({output}*w)",
        "check",
    ):
        add_column(table, column)
    for check in explanation.vjp:
        table.add_row(
            check.name,
            "too large to show" if check.jacobian is None else format_array(check.jacobian),
            format_array(explanation.weights),
            format_array(check.jtw),
            format_array(check.backward),
            format_array(check.sum_grad),
            mark(check.agree),
        )
    return table
