"""Render a ``DerivativeResult``: Jacobian rows, blocks beside their references, verdict."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from autogradcli.messages import CLI, Style, cause_text, note_text
from autogradcli.policy.verdict import AGREE, ROUNDING, UNCHECKED
from autogradcli.render import LATEX
from autogradcli.render.numbers import (
    MARK_OF,
    STYLES,
    add_column,
    error_text,
    format_array,
    mark,
    shorten,
)
from autogradcli.results import DerivativeResult

TITLES = {
    "jacobian": "Jacobian d out / d input, shaped out.shape + input.shape",
    "hessian": "Hessian d² out / d a d b, shaped a.shape + b.shape",
    "jvp": "J·v = Σ d out / d input · tangent, in forward mode (torch.func.jvp)",
}


def render_derivatives(result: DerivativeResult, style: Style = CLI) -> RenderableType:
    """Header, the one-hot rows (jacobian --show-rows), the blocks, notes and the verdict."""
    parts: list[RenderableType] = [
        Text.assemble(
            (f"{result.kind} {result.expression}", "bold"),
            f"   device {result.device} · dtype {result.dtype} · rtol {result.rtol:g}, "
            f"atol {result.atol:g} · output shape {result.output_shape}"
            + ("" if result.seed is None else f" · seed {result.seed}"),
        )
    ]
    if result.rows:
        parts.append(_rows(result))
    if result.tangents:
        shown = ", ".join(f"{n} = {format_array(v)}" for n, v in result.tangents.items())
        parts.append(Text(f"tangents v: {shown}"))
    parts.append(_blocks(result))
    for name, text in result.derivatives.items():
        k = result.kind.split()[-1]
        parts.append(Text(f"SymPy: d^{k} out / d{name}^{k} = {shorten(text)}"))
    if LATEX.get():
        parts += [Text(f"LaTeX {key}: {tex}") for key, tex in result.latex.items()]
    causes: dict[str, list[str]] = {}
    for b in result.blocks:
        if b.cause is not None:
            causes.setdefault(MARK_OF[b.reference_verdict] + " " + cause_text(b.cause), []).append(
                b.key
            )
    for line, keys in causes.items():
        colour = STYLES[line[0]].split()[-1]
        parts.append(Text(f"{line[0]} {', '.join(keys)}: {line[2:]}", style=colour))
    parts += [Text(f"note: {note_text(n, style)}", style="yellow") for n in result.notes]
    who = "the numeric check" if result.expected_by == "numeric" else "SymPy"
    if any(b.numeric_agree is not None for b in result.blocks):
        who = "SymPy, and the numeric check,"
    verdict = result.verdict
    mark_ = MARK_OF[verdict]
    if verdict == AGREE:
        parts.append(Text(f"{mark_} autograd and {who} agree", style=STYLES[mark_]))
    elif verdict == ROUNDING:
        strict = "; --strict counts it as a disagreement" if result.strict else ""
        parts.append(
            Text(
                f"{mark_} autograd and {who} agree within {result.dtype} rounding (bound "
                f"{result.rounding_bound:.2g} relative; float64 agrees){strict}",
                style=STYLES[mark_],
            )
        )
    elif verdict == UNCHECKED:
        crossed = [b.cross_agree for b in result.blocks if b.cross_agree is not None]
        cross = "agrees" if all(crossed) else "disagrees"
        also = f" (torch.autograd.functional {cross})" if crossed else ""
        parts.append(
            Text(
                f"{mark_} not checked: autograd's {result.kind} is shown without a reference"
                f"{also}; exit code 1",
                style=STYLES[mark_],
            )
        )
    else:
        failing = ", ".join(b.key for b in result.blocks if not b.agree)
        parts.append(Text(f"{mark_} autograd and {who} disagree: {failing}", style=STYLES[mark_]))
    return Group(*parts)


def _rows(result: DerivativeResult) -> Table:
    table = Table(
        title="one backward pass per output element: out.backward(one_hot, retain_graph=True)",
        title_justify="left",
        show_lines=True,
    )
    names = list(result.rows[0].grads)
    for column in ("out index", "one-hot w", *(f"{n}.grad = row" for n in names)):
        add_column(table, column)
    for row in result.rows:
        cells = [str(list(row.index)), format_array(row.one_hot)]
        table.add_row(*cells, *(format_array(row.grads[n]) for n in names))
    return table


def _blocks(result: DerivativeResult) -> Table:
    title = TITLES.get(result.kind, f"derivative of {result.kind}, elementwise")
    table = Table(title=title, title_justify="left", show_lines=True)
    columns = ["wrt", "autograd"]
    cross = any(b.cross is not None for b in result.blocks)
    numeric = any(b.numeric is not None for b in result.blocks)
    columns += ["torch.autograd\n.functional"] if cross else []
    columns += [f"expected\n({result.expected_by})"]
    columns += ["numeric\n(central diff.)"] if numeric else []
    columns += ["max abs\nerror", "check"]
    for column in columns:
        add_column(table, column)
    for b in result.blocks:
        cells: list[RenderableType] = [b.key, format_array(b.autograd)]
        if cross:
            cells.append(format_array(b.cross) if b.cross is not None else "—")
        cells.append(format_array(b.expected))
        if numeric:
            cells.append(format_array(b.numeric))
        check = mark(b.verdict)
        if b.cross_agree is False:
            check.append(" (functional differs)")
        cells += [error_text(b.max_abs_error), check]
        table.add_row(*cells)
    return table
