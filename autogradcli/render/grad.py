"""Render a ``GradResult`` with Rich: header, output, gradient table, passes, verdict."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from autogradcli.messages import CLI, Style, cause_text, note_text, spell
from autogradcli.policy.verdict import AGREE, ROUNDING, UNCHECKED
from autogradcli.render import LATEX
from autogradcli.render.numbers import (
    MARK_OF,
    STYLES,
    Fit,
    add_column,
    error_text,
    format_array,
    indented,
    mark,
    shorten,
    worst_at,
)
from autogradcli.results import Expectation, GradResult, Suggestion
from autogradcli.results.grad import Explanation, VariableResult, relabel, relabel_latex


def render(result: GradResult, style: Style = CLI) -> Group:
    """The whole report as one Rich renderable (options spelled in ``style``)."""
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
    parts.append(Fit(_output_table(result), _output_rows(result)))
    if result.weights is not None:
        what = spell("external gradient ([[weights]])", style)
        parts.append(Text(f"{what}: {format_array(result.weights)}"))
    parts.append(Fit(_gradient_table(result), _gradient_rows(result)))
    shown = result.display
    for var in result.variables.values():
        if var.chain:
            chain, expanded = relabel(var.chain, shown), relabel(var.derivative, shown)
            parts.append(
                Text(f"chain rule: {_short(chain or '')}, expanded: {_short(expanded or '')}")
            )
    parts += _causes(result)
    parts += [_suggestion(s, result.dtype) for s in result.suggestions]
    for var in result.variables.values():
        for note in var.notes:
            name = shown.get(var.name, var.name)
            parts.append(Text(f"note ({name}): {note_text(note, style)}", style="yellow"))
    for note in result.notes:
        parts.append(Text(f"note: {note_text(note, style)}", style="yellow"))
    if len(result.passes) > 1:
        parts.append(Text(f"passes: {result.mode}"))
        parts.append(_passes_table(result))
    if result.hooks:
        parts.append(_hooks_table(result))
    if result.tensors is not None:
        from autogradcli.render.tensors import render_tensors

        parts.append(render_tensors(result.tensors, style))
    if result.explanation is not None:
        from autogradcli.render.explain import render_explanation

        out = shown.get(result.output_name, result.output_name)
        explanation = _shown_explanation(result)
        parts.append(render_explanation(explanation, out, bool(result.hooks)))
    if LATEX.get():
        for var in result.variables.values():
            out, name = (relabel(n, shown) for n in (result.output_name, var.name))
            if var.latex is not None:
                tex = relabel_latex(var.latex, shown)
                parts.append(Text(f"LaTeX ∂{out}/∂{name}: {tex}"))
            if var.chain_latex is not None:
                parts.append(Text(f"LaTeX chain rule: {relabel_latex(var.chain_latex, shown)}"))
    parts += [_expectation(e) for e in result.expectations]
    parts.append(_verdict(result))
    return Group(*parts)


def _shown_explanation(result: GradResult) -> Explanation:
    """``--explain``'s rows under the user's names, a ``[y (line 2)]`` kept as text (the
    table reads a plain string as Rich markup)."""
    assert result.explanation is not None
    explanation = result.explanation.relabeled(result.display)
    if explanation is result.explanation:
        return explanation
    steps = tuple(
        replace(s, flows=tuple(replace(f, local=escape(f.local)) for f in s.flows))
        for s in explanation.steps
    )
    return replace(explanation, steps=steps)


def _expectation(e: Expectation) -> Text:
    """``expected x.grad = 93: ✓ autograd ✓ SymPy``."""
    line = Text(f"you expect {e.name}.grad = ")  # the name the user gave
    line.append_text(format_array(e.value))
    line.append(": autograd ")
    line.append_text(mark(e.autograd_agree))
    line.append(", SymPy ")
    line.append_text(mark(e.sympy_agree))
    return line


def _output_table(result: GradResult) -> Table:
    table = Table(title="output", title_justify="left", box=None, show_header=True)
    for column in (
        "",
        "value (torch)",
        f"expected ({result.expected_by})",
        "max abs error",
        "check",
    ):
        add_column(table, column)
    table.add_row(
        f"{result.display.get(result.output_name, result.output_name)} {list(result.output.shape)}",
        format_array(result.output),
        format_array(result.output_expected),
        error_text(result.output_max_abs_error),
        mark(result.output_verdict),
    )
    return table


def _gradient_table(result: GradResult) -> Table:
    table = Table(title="gradients", title_justify="left", show_lines=True)
    numeric = any(v.numeric is not None for v in result.variables.values())
    got = "returned\n(autograd.grad)" if _functional(result) else ".grad\n(autograd)"
    columns = ["input", "value", got, f"expected\n({result.expected_by})"]
    columns += ["numeric\n(central diff.)"] if numeric else []
    columns += ["derivative\n(SymPy)", "max abs\nerror", "check"]
    for column in columns:
        add_column(table, column, formula=column.startswith("derivative"))
    shown = result.display
    for v in result.variables.values():
        name = shown.get(v.name, v.name)
        if v.requires_grad:
            cells = [name, format_array(v.value), format_array(v.grad), format_array(v.expected)]
            if numeric:
                cells.append(format_array(v.numeric))
            check = mark(v.verdict)
            if v.numeric_verdict is not None:
                check = Text.assemble(
                    mark(v.verdict), " SymPy\n", mark(v.numeric_verdict), " numeric"
                )
            cells += [Text(_short(_derivative(result, v))), _error_at(v), check]
            table.add_row(*cells)
        else:
            cells = [name, format_array(v.value), "None", "— (requires_grad=False)"]
            cells += ["—"] if numeric else []
            table.add_row(*cells, "—", "—", mark(None))
    return table


def _derivative(result: GradResult, v: VariableResult) -> str:
    """SymPy's derivative as the names were written, times the passes whose gradients
    ``.grad`` holds (``3*(2*x)`` after three passes that accumulate): the derivative of
    the number beside it."""
    text = relabel(v.derivative, result.display)
    passes = len(result.passes)
    if text is None:
        return "—"
    if passes < 2 or result.zero_grad or _functional(result):
        return text
    if "∂" in text:  # component-wise: one entry, said in words
        return f"{text}, ×{passes} passes (.grad accumulates)"
    return f"{passes}*({text})"


def _error_at(v: VariableResult) -> str:
    """The largest error of a variable's gradient and, for a tensor, where it is."""
    return error_text(v.max_abs_error) + worst_at(v.grad, v.expected, v.max_abs_error)


def _gradient_rows(result: GradResult) -> Group:
    """The gradients table's rows stacked, for a terminal too narrow for the table."""
    lines: list[Text] = [Text("gradients", style="italic")]
    shown = result.display
    for v in result.variables.values():
        name = shown.get(v.name, v.name)
        value = indented(format_array(v.value), len(name) + 3)
        lines.append(Text.assemble((name, "bold"), " = ", value))
        if not v.requires_grad:
            lines.append(Text("  .grad              None (requires_grad=False)"))
            continue
        rows = [
            (".grad (autograd)", format_array(v.grad)),
            (f"expected ({result.expected_by})", format_array(v.expected)),
        ]
        if v.numeric is not None:
            rows.append(("numeric", format_array(v.numeric)))
        rows += [
            ("derivative (SymPy)", Text(_short(_derivative(result, v)))),
            ("max abs error", Text(_error_at(v))),
            ("check", mark(v.verdict)),
        ]
        if v.numeric_verdict is not None:
            rows.append(("numeric check", mark(v.numeric_verdict)))
        lines += [Text.assemble(f"  {label:<19}", indented(value, 21)) for label, value in rows]
    return Group(*lines)


def _output_rows(result: GradResult) -> Group:
    """The output table stacked, for a narrow terminal."""
    rows = [
        ("value (torch)", format_array(result.output)),
        (f"expected ({result.expected_by})", format_array(result.output_expected)),
        ("max abs error", Text(error_text(result.output_max_abs_error))),
        ("check", mark(result.output_verdict)),
    ]
    out = result.display.get(result.output_name, result.output_name)
    head = Text(f"output {out} {list(result.output.shape)}", style="italic")
    return Group(
        head, *(Text.assemble(f"  {label:<19}", indented(value, 21)) for label, value in rows)
    )


def _passes_table(result: GradResult) -> Table:
    """``.grad`` after each pass beside SymPy's expectation for that pass."""
    table = Table(show_lines=True)
    table.add_column("pass")
    names = list(result.passes[0].grads)
    for internal in names:
        name = result.display.get(internal, internal)
        table.add_column(name if _functional(result) else f"{name}.grad", overflow="ellipsis")
        table.add_column(
            "expected (SymPy)\n"
            + ("single" if result.zero_grad or _functional(result) else "pass × single"),
            overflow="ellipsis",
        )
    table.add_column("check")
    for p in result.passes:
        cells = [str(p.index)]
        for name in names:
            cells += [format_array(p.grads[name]), format_array(p.expected[name])]
        table.add_row(*cells, mark(p.verdict))
    return table


def _short(text: str) -> str:
    return shorten(text)


def _causes(result: GradResult) -> list[Text]:
    """One line per distinct cause: what makes a check ≈ or ✗, in its colour."""
    lines: dict[str, Text] = {}
    pairs = [("output", result.output_verdict, result.output_cause)]
    pairs += [(result.display.get(n, n), v.verdict, v.cause) for n, v in result.variables.items()]
    for name, verdict, cause in pairs:
        if cause is None or verdict is None:
            continue
        sentence = cause_text(cause)
        if sentence in lines:
            lines[sentence].append(f" (also {name})")
            continue
        symbol = MARK_OF[verdict]
        lines[sentence] = Text(f"{symbol} {name}: {sentence}", style=STYLES[symbol].split()[-1])
    return list(lines.values())


def _suggestion(suggestion: Suggestion, dtype: str) -> Text:
    """A stable form and what its re-run in the same dtype gave."""
    pairs = ", ".join(f"{new} for {old}" for old, new in suggestion.replaced)
    grads = ", ".join(f"{n}.grad = {format_array(g)}" for n, g in suggestion.grads.items())
    if suggestion.confirmed:
        return Text(
            f"suggestion: write {pairs}: re-run in {dtype}, it agrees ({grads})", style="green"
        )
    why = "" if suggestion.cause is None else f": {cause_text(suggestion.cause)}"
    return Text(
        f"tried {pairs}: re-run in {dtype}, it does not agree either ({grads}){why}; "
        "no stable form to suggest",
        style="yellow",
    )


def _hooks_table(result: GradResult) -> Table:
    """Each register_hook: the gradient it received and what it sent on, checked."""
    table = Table(
        title="hooks in the first backward() (gradient received, then sent on; checked "
        f"against {result.expected_by})",
        title_justify="left",
    )
    for column in ("tensor", "hook", "received", "expected", "sent on", "expected", "check"):
        add_column(table, column)
    for h in result.hooks:
        sent = h.received if h.returned is None else h.returned
        want = h.received_expected if h.returned_expected is None else h.returned_expected
        table.add_row(
            h.tensor,
            h.hook,
            format_array(h.received),
            format_array(h.received_expected),
            format_array(sent),
            format_array(want),
            mark(h.agree),
        )
    return table


def _verdict(result: GradResult) -> Text:
    numeric = any(v.numeric_verdict is not None for v in result.variables.values())
    who = "SymPy, and the numeric check," if numeric else result.expected_by
    if result.expected_by == "numeric":
        who = "the numeric check"
    verdict = result.verdict
    if verdict == AGREE:
        return Text(f"{MARK_OF[AGREE]} autograd and {who} agree", style=STYLES[MARK_OF[AGREE]])
    if verdict == ROUNDING:
        strict = "; --strict counts it as a disagreement" if result.strict else ""
        return Text(
            f"{MARK_OF[ROUNDING]} autograd and {who} agree within {result.dtype} rounding "
            f"(bound {result.rounding_bound:.2g} relative; float64 agrees){strict}",
            style=STYLES[MARK_OF[ROUNDING]],
        )
    unseen = [
        result.display.get(n, n) for n, v in result.variables.items() if v.verdict == UNCHECKED
    ]
    if verdict == UNCHECKED:
        return Text(
            f"{MARK_OF[UNCHECKED]} not checked: the numeric reference is too loose for "
            f"{result.dtype}'s tolerance at every element of {', '.join(unseen)} (see the "
            "notes); exit code 1",
            style=STYLES[MARK_OF[UNCHECKED]],
        )
    shown = result.display
    failing = [shown.get(n, n) for n, v in result.variables.items() if v.verdict == "disagree"]
    failing += [
        f"{shown.get(n, n)} (numeric)"
        for n, v in result.variables.items()
        if v.numeric_verdict == "disagree"
    ]
    if result.output_verdict == "disagree":
        failing.insert(0, "output")
    failing += [f"tensor {t.name}" for t in result.tensors or () if t.agree is False]
    failing += [f"hook on {h.tensor}" for h in result.hooks if h.agree is False]
    wrong = [e for e in result.expectations if not e.agree]
    if not failing and wrong and result.output_verdict != "disagree":
        names = ", ".join(f"{e.name}.grad" for e in wrong)
        return Text(
            f"{MARK_OF['disagree']} autograd and {who} agree with each other and disagree "
            f"with your {names}",
            style="bold red",
        )
    failing += [f"your {e.name}.grad" for e in wrong]
    if result.explanation is not None:
        failing += [
            f"backward node {s.index} ({s.label})" for s in result.explanation.steps if not s.agree
        ]
        failing += [f"Jᵀw for {v.name}" for v in result.explanation.vjp if not v.agree]
    what = ", ".join(failing) or "a pass"
    return Text(f"{MARK_OF['disagree']} autograd and {who} disagree: {what}", style="bold red")


def _functional(result: GradResult) -> bool:
    """The gradients came from torch.autograd.grad (--functional), not from .grad."""
    return "torch.autograd.grad" in result.mode
