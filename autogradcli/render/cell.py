"""Render a ``CellResult`` with Rich: each line that backward(), a reset or print(...)
made visible, the leaves' ``.grad`` against SymPy's sums, and the verdict."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from rich.console import Group
from rich.table import Table
from rich.text import Text

from autogradcli.messages import CLI, Style, cause_text, note_text
from autogradcli.policy.verdict import AGREE, ROUNDING
from autogradcli.render.custom import render_function
from autogradcli.render.numbers import (
    MARK_OF,
    STYLES,
    add_column,
    error_text,
    format_array,
    indented,
    mark,
    shorten,
)
from autogradcli.results import CellEvent, CellResult, HookResult, LeafGrad
from autogradcli.results.grad import relabel


def render_cell(result: CellResult, style: Style = CLI) -> Group:
    """The cell's report as one Rich renderable."""
    header = Text.assemble(
        ("cell", "bold"),
        f"   device {result.device} · dtype {result.dtype} · "
        f"rtol {result.rtol:g}, atol {result.atol:g}",
    )
    if result.seed is not None:
        header.append(f" · seed {result.seed}")
    parts: list[Any] = [header]
    seen: set[str] = set()
    looped = any(e.kind == "backward" and e.check is None for e in result.events)
    shown = dict(result.display)
    if not re.search(r"\bweights\b|^\s*gradient\s*=", result.expression, re.M):
        shown["weights"] = "gradient"  # backward(gradient=...) in the derivative's text
    before: dict[str, np.ndarray | None] = {}  # each leaf's expected .grad so far
    for number, event in enumerate(result.events, start=1):
        if looped and event.kind != "print" and event.statement in seen and _unchecked(event):
            continue  # a loop's pass run without a check: counted in the summary below
        seen.add(event.statement)
        if event.printed is not None:  # what Python prints, then the numbers' checks
            parts.append(Text(event.printed, overflow="fold"))  # folded, never cut
        parts.append(_line(number, event))
        grads = result.shown_grads(number - 1)
        if grads:
            parts.append(_grads(event, grads, shown, before))
        before.update({g.name: g.expected for g in event.grads})
        if event.check is not None:
            parts += [_hook(h) for h in event.check.hooks]
        for item in event.shown:
            if event.printed is not None and item.verdict is None:
                continue  # the printed line above has it as Python wrote it
            parts.append(_shown(item.text, item.value, item.expected, item.verdict))
        for g in grads:
            if g.verdict not in (None, AGREE) and g.cause is not None:
                name = shown.get(g.name, g.name)
                parts.append(Text(f"   {name}: {cause_text(g.cause)}", style="yellow"))
    for check in result.functions:  # custom autograd Functions: the user's backward
        parts += render_function(check)
    parts += _loops(result)
    for note in result.notes:
        parts.append(Text(f"note: {note_text(note, style)}", style="yellow"))
    if result.error is None:
        parts.append(_verdict(result))
    else:
        parts.append(Text("the cell stopped here, as Python would:", style="bold red"))
    return Group(*parts)


def _unchecked(event: CellEvent) -> bool:
    return event.check is None and all(g.verdict is None for g in event.grads)


def _loops(result: CellResult) -> list[Text]:
    """Each backward() a loop ran with passes unchecked: how many passes, which were
    checked, the worst error, and its target (the loss) from the first pass to the last."""
    lines: list[Text] = []
    texts = [e.statement for e in result.events if e.kind == "backward"]
    for text in dict.fromkeys(texts):
        passes = [e for e in result.events if e.kind == "backward" and e.statement == text]
        if len(passes) < 2:
            continue
        checked = [k for k, e in enumerate(passes, start=1) if not _unchecked(e)]
        if len(checked) == len(passes):
            continue  # not a loop's: each pass is shown above
        errors = [g.max_abs_error for e in passes for g in e.grads if g.max_abs_error is not None]
        line = Text(f"{text} ran {len(passes)} times; passes checked against SymPy: ")
        line.append(", ".join(str(k) for k in checked) or "none")
        if len(checked) < len(passes):
            line.append(f" (the other {len(passes) - len(checked)} ran unchecked)")
        if errors:
            line.append(f"; worst abs error {max(errors):.3g}")
        first, last = passes[0].target, passes[-1].target
        if first is not None and last is not None:
            trend = "down" if last < first else "not down"
            line.append(f"; target {first:.6g} → {last:.6g} ({trend})")
        lines.append(line)
    return lines


def _line(number: int, event: CellEvent) -> Text:
    text = Text.assemble((f"[{number}] ", "dim"), (event.statement, "bold cyan"), "  ")
    text.append_text(mark(event.verdict))
    return text


def _grads(
    event: CellEvent,
    grads: tuple[LeafGrad, ...],
    shown: dict[str, str],
    before: dict[str, np.ndarray | None],
) -> Table:
    """The leaves' ``.grad`` at one line, each under the name the user wrote; the
    derivative after what ``.grad`` held before (``[40, 120] + 2*c*x``): it accumulates."""
    table = Table(box=None, padding=(0, 1), pad_edge=False, show_edge=False)
    columns = ["", ".grad (torch)", "expected (SymPy)", "max abs error", "check"]
    if event.kind == "backward":
        columns.insert(3, "derivative (SymPy)")
    for column in columns:
        add_column(table, column, formula=column.startswith("derivative"))
    for g in grads:
        row = ["   " + shown.get(g.name, g.name), format_array(g.grad), format_array(g.expected)]
        if event.kind == "backward":
            row.append(Text(_short(_derivative(g, shown, before.get(g.name)))))
        row += [error_text(g.max_abs_error), mark(g.verdict)]
        table.add_row(*row)
    return table


def _derivative(g: LeafGrad, shown: dict[str, str], held: np.ndarray | None) -> str:
    """This backward()'s derivative, after the ``.grad`` it is added to (nothing when that
    is None or zero; its numbers up to 6 elements, else in words)."""
    text = relabel(g.derivative, shown)
    if text is None:
        return "—"
    if g.derivative is None or held is None or not np.any(held != 0):
        return text
    earlier = format_array(held).plain if np.size(held) <= 6 else ".grad before"
    return f"{earlier} + {text}" if "∂" not in text else f"{text}, added to {earlier}"


def _hook(hook: HookResult) -> Text:
    """A hook's run in this backward(): what it was given, and what it sent on."""
    text = Text(f"   hook on {hook.tensor}, {hook.hook}: ")
    if hook.received is None:
        text.append("no gradient reached it")
    elif hook.returned is None:
        verb = "printed" if "print(" in hook.hook else "received"
        text.append(f"{verb} ").append_text(format_array(hook.received))
        text.append(", sent on unchanged")
    else:
        text.append("received ").append_text(format_array(hook.received))
        text.append(", sent on ").append_text(format_array(hook.returned))
    return text.append("  ").append_text(mark(hook.agree))


def _short(text: str) -> str:
    return shorten(text, 80)


def _shown(text: str, value: Any, expected: Any, verdict: str | None) -> Text:
    head = f"   {text} = " if text != _plain(value) else "   "
    line = Text(head)
    line.append_text(indented(_value(value), len(head)))
    if verdict is not None:
        line.append("   ")
        line.append_text(mark(verdict))
        if verdict != AGREE:
            line.append("  expected ")
            line.append_text(indented(_value(expected), len(head)))
    return line


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _value(value: Any) -> Text:
    if isinstance(value, np.ndarray):
        if value.dtype == bool:
            return Text(str(value.tolist()))
        return format_array(value)
    return Text(str(value))


def _verdict(result: CellResult) -> Text:
    if result.verdict == AGREE:
        return Text(f"{MARK_OF[AGREE]} every line agrees with SymPy", style=STYLES[MARK_OF[AGREE]])
    if result.verdict == ROUNDING:
        return Text(
            f"{MARK_OF[ROUNDING]} every line agrees with SymPy within {result.dtype} rounding",
            style=STYLES[MARK_OF[ROUNDING]],
        )
    failing = [f"[{k}]" for k, e in enumerate(result.events, start=1) if e.verdict == "disagree"]
    wrong = [f.name for f in result.functions if f.verdict == "disagree"]
    if wrong and not failing:  # only a custom Function's own backward is wrong
        return Text(
            f"{MARK_OF['disagree']} the backward of {', '.join(wrong)} fails its check",
            style="bold red",
        )
    return Text(
        f"{MARK_OF['disagree']} autograd and SymPy disagree at line {', '.join(failing)}",
        style="bold red",
    )
