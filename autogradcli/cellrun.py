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
from autogradcli.lang.cellstatements import Branch, Printed, stopped_at_condition
from autogradcli.lang.display import display_names
from autogradcli.lang.program import active_hooks
from autogradcli.lang.text import unparse
from autogradcli.lang.tree import Backward, Name, Node, Program, Rebuild, Reset, Show
from autogradcli.notes import Note
from autogradcli.pipeline import GradRequest, run_grad, steps_of
from autogradcli.policy.compare import compare
from autogradcli.policy.verdict import AGREE, DISAGREE, rounding_relative, settle
from autogradcli.reference import Model
from autogradcli.reference.choice import choose
from autogradcli.reference.expected import Expected
from autogradcli.results import CellEvent, CellResult, LeafGrad, Shown
from autogradcli.torchside.cell import TorchEvent
from autogradcli.torchside.cell import run_cell as torch_cell
from autogradcli.verify.cell import Ledger, backwards, needed, reads, requires_grad
from autogradcli.verify.custom import check_cell


def run_cell(bound: Bound) -> CellResult:
    """Every line of the cell in order, each event checked. A cell that stopped at a
    tensor condition when it was parsed (no values then) is read again with the run's."""
    bound = path_taken(bound)
    ran = torch_cell(bound)
    settings = bound.settings
    rtol, atol = settings.tolerance
    relative = rounding_relative(
        settings.dtype, steps_of(bound) + backwards(bound.program.statements)
    )
    ledger = Ledger(rtol, atol, relative, shapes=dict(bound.shapes))
    events: list[CellEvent] = []
    error = ran.error
    repeats = _Repeats(bound)
    for event in ran.events:
        try:
            events.append(_event(bound, event, ledger, ran.seen, repeats, ran.made))
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
        notes=tuple(dict.fromkeys([*bound.notes, *_check_notes(events), *path_notes(bound)])),
        error=error,
        rounding_bound=relative,
        strict=settings.strict,
        functions=check_cell(bound, ran.seen),  # custom autograd Functions: the user's backward
        names=display_names(bound.program),  # the report's names, without reading the cell again
    )


def path_taken(bound: Bound) -> Bound:
    """``bound`` itself, or, where it stopped at a tensor condition when it was parsed
    (``if``/``while`` on a tensor, no values then), the cell read again along the path
    its values take (``follow``). Whatever runs a bound cell's program calls it first."""
    if stopped_at_condition(bound.program):
        return follow(bound)
    return bound


def follow(bound: Bound) -> Bound:
    """The cell read again, each tensor condition from the values the run will have (its
    inputs, its seed, dtype and device): only the path taken becomes lines."""
    import secrets

    from autogradcli.bind import bind
    from autogradcli.lang.flow import PATH_ORACLE
    from autogradcli.torchside.cell import PathOracle

    program, settings = bound.program, bound.settings
    given = {n: bound.arrays[n] for n in program.variables if program.leaf(n) is None}
    const = [n for n in given if n not in bound.differentiate]
    known = [s for s in (program.seed, settings.seed, bound.seed) if s is not None]
    seed = known[0] if known else secrets.randbelow(2**31)
    chosen = settings if program.seed is not None else settings.but(seed=seed)
    token = PATH_ORACLE.set(PathOracle(given, set(given) - set(const), chosen, seed))
    try:
        again = bind(program.text, given, chosen, const=const)
    finally:
        PATH_ORACLE.reset(token)
    return replace(again, notes=tuple(dict.fromkeys([*bound.notes, *again.notes])))


def path_notes(bound: Bound) -> list[Note]:
    """What each tensor condition decided (the path the graph and the reference follow)."""
    seen: dict[tuple[int, str], list[bool | None]] = {}
    kinds: dict[tuple[int, str], str] = {}
    for s in bound.program.statements:
        if isinstance(s, Branch) and (s.outcome is not None or s.taken is None) and not s.open:
            seen.setdefault((s.line, s.text), []).append(s.outcome)
            kinds[(s.line, s.text)] = s.kind
    notes: list[Note] = []
    for (line, text), taken in seen.items():
        where = {"line": line, "text": text}
        true, false = taken.count(True), taken.count(False)
        if kinds[(line, text)] == "while":
            reached = false + taken.count(None)
            if reached == 1:
                notes.append(Note("flow_while", {**where, "count": true}))
            else:
                notes.append(Note("flow_while_again", {**where, "count": true, "reached": reached}))
        elif true + false == 1:
            notes.append(Note("flow_if", {**where, "value": bool(true)}))
        elif true + false:
            notes.append(Note("flow_if_again", {**where, "true": true, "false": false}))
    if notes:
        notes.append(Note("flow_path"))
    return notes


def _check_notes(events: list[CellEvent]) -> list[Note]:
    """What the backward() checks say of the whole cell, once: what the hooks change, and
    the inputs backward() sent no gradient (PyTorch leaves their .grad as it was)."""
    checks = [e.check for e in events if e.check is not None]
    return [n for c in checks for n in c.notes if n.code in ("hooks", "grad_unsent")]


# a backward() of one form run this many times (a loop's): its first and last passes are
# checked by grad's whole pipeline, the passes between run unchecked (said in the output)
REPEATED = 10


class _Repeats:
    """The cell's repeated forms: a backward() target (or printed expression) written
    out through its steps, how often it occurs, and the SymPy model built once for it."""

    def __init__(self, bound: Bound) -> None:
        self.steps = {s.name: s.node for s in bound.program.steps}
        self.counts: dict[str, int] = {}
        self.left: dict[str, int] = {}  # the passes of each form still to come
        self.models: dict[str, tuple[Model, tuple[str, ...]]] = {}  # a print's, built once
        self.keys: dict[int, str] = {}
        for statement in bound.program.statements:
            if isinstance(statement, Backward) and statement.gradient is None:
                key = self.key(statement.target)
                self.keys[id(statement)] = key
                self.counts[key] = self.counts.get(key, 0) + 1

    def key(self, node: Node) -> str:
        return unparse(_Inline(self.steps)(node))

    def repeated(self, statement: Backward) -> str | None:
        key = self.keys.get(id(statement))
        return key if key is not None and self.counts[key] >= REPEATED else None


class _Inline(Rebuild):
    """A tree with each step written out (the same form whatever the steps are named)."""

    def __init__(self, steps: dict[str, Node]) -> None:
        super().__init__()
        self.steps = steps

    def name(self, node: Name) -> Node:
        found = self.steps.get(node.id)
        return node if found is None else _Inline(self.steps)(found)


def _event(
    bound: Bound,
    event: TorchEvent,
    ledger: Ledger,
    seen: dict[str, np.ndarray],
    repeats: _Repeats,
    made: dict[str, dict[str, np.ndarray]],
) -> CellEvent:
    statement = event.statement
    if isinstance(statement, Backward):
        key = repeats.repeated(statement)
        if key is not None:
            repeats.left[key] = repeats.left.get(key, repeats.counts[key]) - 1
            first, last = key not in repeats.models, repeats.left[key] == 0
            if not (first or last):  # a loop's pass between its first and its last
                ledger.skip(_reached(bound, statement, repeats.steps))
                grads = _leaves(bound, event, ledger)
                return CellEvent("backward", statement.text, grads, target=_number(event.target))
            repeats.models.setdefault(key, (None, ()))  # type: ignore[arg-type]
        check = run_grad(_one_backward(bound, statement, event), GradRequest())
        ledger.add(check)
        grads = _leaves(bound, event, ledger, derivative=True)
        return CellEvent(
            "backward", statement.text, grads, check=check, target=_number(event.target)
        )
    if isinstance(statement, Reset):
        ledger.reset(statement.name, statement.to)
        return CellEvent("reset", statement.text, _leaves(bound, event, ledger))
    assert isinstance(statement, Show)
    formats = statement.formats if isinstance(statement, Printed) else ("",) * len(event.shown)
    shown = tuple(
        Shown(str(item), value)
        if how == "text"
        else _shown(bound, item, value, event, ledger, at, repeats)
        if (at := _then(repeats.steps, item, event, made, seen)) is not None
        else Shown(_written(bound, item), value)  # steps of several updates: not checked
        for item, value, how in zip(statement.items, event.shown, formats, strict=True)
    )
    return CellEvent("print", statement.text, shown=shown, printed=event.printed)


def _then(
    steps: dict[str, Node],
    item: Node | str,
    event: TorchEvent,
    made: dict[str, dict[str, np.ndarray]],
    seen: dict[str, np.ndarray],
) -> dict[str, np.ndarray] | None:
    """The leaves a printed item reads, as they were when its steps were computed (a step
    computed before ``p -= lr * p.grad`` keeps the values it had); None where its steps
    (or its own leaves) come from different updates."""
    if isinstance(item, str):
        return {**seen, **event.current}
    reads = [(made.get(s, event.current), _names(steps[s])) for s in needed(item, None, steps)]
    reads.append((event.current, _names(item)))  # the leaves it reads itself: as they are now
    found: dict[str, np.ndarray] = {}
    for then, names in reads:
        for name in names:
            if name not in seen:
                continue
            value = then.get(name, seen[name])
            if name in found and not np.array_equal(found[name], value):
                return None
            found[name] = value
    return {**seen, **event.current, **found}


def _reached(bound: Bound, statement: Backward, steps: dict[str, Node]) -> set[str]:
    """The differentiated leaves a backward() target reads (``steps``: the program's, by
    name, made once for the cell: a loop's cell has thousands)."""
    kept = reads(statement.target, None, steps)
    used = {n for s in kept for n in _names(steps[s])} | set(_names(statement.target))
    return {n for n in bound.program.variables if n in used and n in bound.differentiate}


def _evaluate(
    model: Model, values: dict[str, np.ndarray], differentiate: frozenset[str]
) -> Expected:
    """The model at a pass's values in float64 with an error bound on every element (as the
    reference evaluates past 256 elements); precise where a bound is too wide."""
    from autogradcli.reference.bounds import Checked
    from autogradcli.reference.elementwise import SymbolicModel
    from autogradcli.reference.evaluate import Untrusted

    if isinstance(model, SymbolicModel):
        try:
            return model.evaluate(values, np.ones(()), differentiate, arith=Checked())
        except Untrusted:
            pass
    return model.evaluate(values, np.ones(()), differentiate)


def _number(value: np.ndarray | None) -> float | None:
    """A one-element target as a number (a loss), else None."""
    return float(value.reshape(())) if value is not None and value.size == 1 else None


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
    arrays = {**bound.arrays, **event.current}  # a parameter updated in place: its values now
    return replace(
        bound,
        program=sub,
        arrays={n: arrays[n] for n in variables},
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
    repeats: _Repeats,
) -> Shown:
    """One printed item with what SymPy (or the program's own structure) expects."""
    if isinstance(item, str):
        return Shown(item, value)
    if isinstance(value, float | int | list):  # t.item(), t.tolist(): Python's numbers
        value = np.asarray(value, dtype=np.float64)
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
    key = "print:" + repeats.key(rebuilt)
    if key in repeats.models:  # a loop's print: the same expression at this pass's values
        want = _evaluate(repeats.models[key][0], values, frozenset()).output
    else:
        reference = choose(sub, shapes, bound.limits, values, None, frozenset())
        repeats.models[key] = (reference.model, inputs)
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
