"""A notebook cell as a composition of the stages: the torch run of its lines in order
(``torchside.cell``), each backward() checked on its own by ``grad``'s pipeline, the
leaves' accumulated ``.grad`` and every printed value checked against SymPy
(``verify.cell``), and the result (``CellResult``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from autogradcli.bind import Bound
from autogradcli.errors import AutogradCliError
from autogradcli.lang.program import active_hooks
from autogradcli.lang.text import unparse
from autogradcli.lang.tree import Backward, Name, Node, Program, Rebuild, Reset, Show
from autogradcli.notes import Note
from autogradcli.pipeline import GradRequest, run_grad, steps_of
from autogradcli.policy.compare import compare
from autogradcli.policy.verdict import AGREE, DISAGREE, rounding_relative, settle
from autogradcli.reference.choice import choose
from autogradcli.results import CellEvent, CellResult, LeafGrad, Shown
from autogradcli.torchside.cell import TorchEvent
from autogradcli.torchside.cell import run_cell as torch_cell
from autogradcli.verify.cell import Ledger, backwards, needed, requires_grad


def run_cell(bound: Bound) -> CellResult:
    """Every line of the cell in order, each event checked."""
    ran = torch_cell(bound)
    settings = bound.settings
    rtol, atol = settings.tolerance
    relative = rounding_relative(
        settings.dtype, steps_of(bound) + backwards(bound.program.statements)
    )
    ledger = Ledger(rtol, atol, relative)
    events: list[CellEvent] = []
    error = ran.error
    for event in ran.events:
        try:
            events.append(_event(bound, event, ledger, ran.seen))
        except AutogradCliError as failure:  # SymPy's side of this line cannot be had
            error = failure
            break
    return CellResult(
        expression=bound.program.text,
        device=ran.device,
        dtype=settings.dtype,
        rtol=rtol,
        atol=atol,
        events=tuple(events),
        seed=bound.seed,
        notes=tuple(dict.fromkeys([*bound.notes, *_hook_notes(events)])),
        error=error,
        rounding_bound=relative,
        strict=settings.strict,
    )


def _hook_notes(events: list[CellEvent]) -> list[Note]:
    """What the hooks change, said once for the cell."""
    checks = [e.check for e in events if e.check is not None and e.check.hooks]
    return [n for c in checks for n in c.notes if n.code == "hooks"]


def _event(
    bound: Bound, event: TorchEvent, ledger: Ledger, seen: dict[str, np.ndarray]
) -> CellEvent:
    statement = event.statement
    if isinstance(statement, Backward):
        check = run_grad(_one_backward(bound, statement, event), GradRequest())
        ledger.add(check)
        grads = _leaves(bound, event, ledger, derivative=True)
        return CellEvent("backward", statement.text, grads, check=check)
    if isinstance(statement, Reset):
        ledger.reset(statement.name, statement.to)
        return CellEvent("reset", statement.text, _leaves(bound, event, ledger))
    assert isinstance(statement, Show)
    shown = tuple(
        _shown(bound, item, value, event, ledger, seen)
        for item, value in zip(statement.items, event.shown, strict=True)
    )
    return CellEvent("print", statement.text, shown=shown)


def _leaves(
    bound: Bound, event: TorchEvent, ledger: Ledger, derivative: bool = False
) -> tuple[LeafGrad, ...]:
    names = [n for n in bound.program.variables if n in bound.differentiate]
    return tuple(ledger.leaf(n, event.grads[n], derivative) for n in names)


def _one_backward(bound: Bound, statement: Backward, event: TorchEvent) -> Bound:
    """The program of one backward(): its target as the output, the steps it reads, the
    gradient it was given; run from fresh leaves, it is ``grad``'s own check."""
    program = bound.program
    steps = {s.name: s.node for s in program.steps}
    kept = needed(statement.target, None, steps)
    used = {n for s in kept for n in _names(steps[s])} | set(_names(statement.target))
    variables = tuple(n for n in program.variables if n in used)
    at = next(i for i, s in enumerate(program.statements) if s is statement)
    names = {*variables, *kept}
    hooks = tuple(h for h in active_hooks(program.statements[:at]) if h.target in names)
    sub = Program(
        text=statement.text,
        root=statement.target,
        variables=variables,
        steps=tuple(s for s in program.steps if s.name in kept),
        output=_output_name(program, statement.target),
        leaves=tuple(v for v in program.leaves if v.name in used),
        names=program.names,
        seed=program.seed,
        hooks=hooks,
    )
    assert event.target is not None
    return replace(
        bound,
        program=sub,
        arrays={n: bound.arrays[n] for n in variables},
        out_shape=event.target.shape,
        weights=event.gradient,
        differentiate=frozenset(n for n in variables if n in bound.differentiate),
        notes=(),
    )


def _names(node: Node) -> list[str]:
    from autogradcli.lang.tree import walk_names

    return list(walk_names(node))


def _output_name(program: Program, target: Node) -> str:
    if isinstance(target, Name):
        return program.shown(target.id)
    return unparse(target)


class _GradNames(Rebuild):
    """``x.grad`` read in a printed expression, as an input ``x_grad_`` of SymPy's side."""

    def name(self, node: Name) -> Node:
        return Name(node.id.replace(".", "_") + "_") if "." in node.id else node


def _shown(
    bound: Bound,
    item: Node | str,
    value: Any,
    event: TorchEvent,
    ledger: Ledger,
    seen: dict[str, np.ndarray],
) -> Shown:
    """One printed item with what SymPy (or the program's own structure) expects."""
    if isinstance(item, str):
        return Shown(item, value)
    if isinstance(item, Name) and "." in item.id:
        return _attribute(bound, item.id, value, event, ledger)
    program = bound.program
    rebuilt = _GradNames()(item)
    values = dict(seen)
    shapes = dict(bound.shapes)
    for name in _names(item):
        if "." in name:
            owner = name.split(".")[0]
            values[name.replace(".", "_") + "_"] = ledger.expected.get(owner)
            shapes[name.replace(".", "_") + "_"] = bound.shapes[owner]
    inputs = tuple(dict.fromkeys(n for n in _names(rebuilt) if n in values))
    steps = {s.name: s.node for s in program.steps}
    kept = needed(rebuilt, None, steps)
    inputs = tuple(
        dict.fromkeys([n for s in kept for n in _names(steps[s]) if n in values] + list(inputs))
    )
    sub = Program(
        text=unparse(item),
        root=rebuilt,
        variables=inputs,
        steps=tuple(s for s in program.steps if s.name in kept),
    )
    values = {n: values[n] for n in inputs}
    reference = choose(sub, shapes, bound.limits, values, None, frozenset())
    want = reference.expected.output
    if isinstance(value, np.ndarray) and value.dtype == bool:
        want = np.asarray(want, dtype=bool)
    return Shown(_written(bound, item), value, want, _same(value, want, bound, ledger))


def _written(bound: Bound, item: Node) -> str:
    if isinstance(item, Name):
        owner, _, attr = item.id.partition(".")
        return bound.program.shown(owner) + ("." + attr if attr else "")
    return unparse(item)


def _same(value: Any, want: Any, bound: Bound, ledger: Ledger) -> str:
    if isinstance(value, np.ndarray) and value.dtype == bool:
        return AGREE if np.array_equal(value, want) else DISAGREE
    check = compare(value, want, ledger.rtol, ledger.atol, relative=ledger.relative)
    return settle(check, None)  # a printed value has no float64 re-run: agree or disagree


def _attribute(bound: Bound, name: str, value: Any, event: TorchEvent, ledger: Ledger) -> Shown:
    owner, attr = name.split(".")
    program = bound.program
    text = program.shown(owner) + "." + attr
    steps = {s.name: s.node for s in program.steps}
    tracked = requires_grad(Name(owner), steps, bound.differentiate)
    if attr == "grad":
        if owner in bound.differentiate:
            leaf = ledger.leaf(owner, value, False)
            return Shown(text, value, leaf.expected, leaf.verdict)
        return Shown(text, value, None, AGREE if value is None else DISAGREE)
    if attr == "requires_grad":
        return Shown(text, value, tracked, AGREE if value == tracked else DISAGREE)
    if attr == "is_leaf":
        want = owner in program.variables or not tracked
        return Shown(text, value, want, AGREE if value == want else DISAGREE)
    if attr == "shape":
        want = list(bound.shapes[owner])
        return Shown(text, value, want, AGREE if value == want else DISAGREE)
    return Shown(text, value)  # grad_fn: PyTorch's class name, nothing to check it against
