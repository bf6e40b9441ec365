"""Render ``--inspect``: each named tensor as PyTorch holds it, like printing its attributes."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from autogradcli.messages import CLI, Style
from autogradcli.render.numbers import add_column, format_array, mark, mark_expected
from autogradcli.results import TensorResult


def _check(t: TensorResult) -> Text:
    """✓/✗, and for a failed check what SymPy expected (data, .grad or both)."""
    cell = mark(t.agree)
    if t.value_agree is False:
        cell.append_text(mark_expected(False, t.value_expected)[1:])
        cell.append(" (data)")
    if t.grad_agree is False:
        cell.append_text(mark_expected(False, t.grad_expected)[1:])
        cell.append(" (grad)")
    return cell


def render_tensors(tensors: tuple[TensorResult, ...], style: Style = CLI) -> RenderableType:
    """One row per tensor (data, requires_grad, is_leaf, grad_fn, grad), then why a grad is None."""
    table = Table(
        title="tensors after the last pass (value and .grad checked against SymPy)",
        title_justify="left",
        show_lines=True,
    )
    for column in ("tensor", "data", "requires_grad", "is_leaf", "grad_fn", "grad", "check"):
        add_column(table, column)
    reasons: dict[str, list[str]] = {}
    for t in tensors:
        table.add_row(
            f"{t.name}\n{t.kind} {list(t.value.shape)}",
            format_array(t.value),
            str(t.requires_grad),
            str(t.is_leaf),
            str(t.grad_fn),
            format_array(t.grad),
            _check(t),
        )
        why = t.grad_note_text(style)
        if why:
            reasons.setdefault(why, []).append(f"{t.name}.grad")
    notes = [
        Text(f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} None: {why}", style="yellow")
        for why, names in reasons.items()
    ]
    return Group(table, *notes)
