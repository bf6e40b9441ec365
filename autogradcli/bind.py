"""Stage 2: bind values to a parsed program; everything is checked before torch loads."""

from __future__ import annotations

import difflib
import math
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from autogradcli.errors import UnknownVariableError, VariableError
from autogradcli.lang.analysis import class_targets
from autogradcli.lang.display import display_names
from autogradcli.lang.parser import parse_expression
from autogradcli.lang.shapes import Shape, infer_shape
from autogradcli.lang.syntax import caret_power
from autogradcli.lang.tree import Backward, Leaf, Name, Node, Program, Show, Step, walk
from autogradcli.lang.values import (
    Constructed,
    RandomSource,
    check_literals,
    read_constructor,
    read_value,
)
from autogradcli.lang.vocabulary import CONSTANTS
from autogradcli.memory import Budget, parse_cost
from autogradcli.notes import Note
from autogradcli.settings import Limits, Settings, number


@dataclass(frozen=True)
class Bound:
    """A program with its inputs: arrays (float64, as given), every shape, the external
    gradient, what is differentiated, the settings, and the seed rand()/randn() used."""

    program: Program
    arrays: dict[str, np.ndarray]
    shapes: dict[str, Shape]  # inputs and steps
    out_shape: Shape
    weights: np.ndarray | None
    differentiate: frozenset[str]
    settings: Settings
    seed: int | None  # reported when rand()/randn() drew a value
    notes: tuple[Note, ...] = ()  # what binding noticed (a constant shadowed, a dtype)

    @property
    def limits(self) -> Limits:
        return self.settings.limits

    @property
    def names(self) -> list[str]:
        """The differentiated inputs, in the program's order."""
        return [n for n in self.program.variables if n in self.differentiate]


def bind(
    expression: str | Program,
    values: Mapping[str, Any],
    settings: Settings,
    *,
    weights: Any = None,
    const: Iterable[str] = (),
) -> Bound:
    """Parse (unless already parsed) and read everything; check names, shapes and sizes.
    Values the program defines (``x = torch.tensor(...)``) are read here, in order. Every
    value counts against one memory budget (``limits.memory``), all of them together."""
    limits = settings.limits
    budget = Budget(limits.memory)
    const = list(dict.fromkeys([const] if isinstance(const, str) else const))
    program = expression
    if isinstance(expression, str):
        if len(expression) <= limits.max_length:  # longer text is refused by the parser
            check_literals(expression, limits)
            what = f"parsing the expression ({len(expression)} characters)"
            budget.need(parse_cost(expression), what)
        program = parse_expression(expression, limits, given=frozenset(values))
    assert isinstance(program, Program)
    check_names(program, values, const)
    seed = _seed(program, settings)
    random = RandomSource(seed, settings.dtype)
    given = [n for n in program.variables if program.leaf(n) is None]
    arrays = {name: read_value(values[name], limits, random, budget) for name in given}
    reader = _Program(program, limits, random, {n: a.shape for n, a in arrays.items()}, budget)
    reader.read()
    arrays.update({n: c.array for n, c in reader.made.items()})
    settings, notes = _dtype(reader.made, settings)
    shapes = reader.shapes
    out_shape = infer_shape(program.root, shapes, limits)
    external = _weights(weights, arrays, out_shape, limits, random, budget)
    fixed = {v.name for v in program.leaves if not v.requires_grad}
    fixed |= class_targets(program, shapes)  # class indices are integers: no gradient
    notes += _shadowed(program, values)
    if not program.is_cell and caret_power(program.text):
        notes.append(Note("caret_power"))
    return Bound(
        program=program,
        arrays={n: arrays[n] for n in program.variables},
        shapes=shapes,
        out_shape=out_shape,
        weights=external,
        differentiate=frozenset(n for n in program.variables if n not in {*const, *fixed}),
        settings=settings,
        seed=seed if random.used else None,
        notes=tuple(notes),
    )


class _Program:
    """Reads the values a program defines, line by line, with the shapes so far (for
    ``len(y)``), and infers every step's shape."""

    def __init__(
        self,
        program: Program,
        limits: Limits,
        random: RandomSource,
        shapes: dict[str, Shape],
        budget: Budget,
    ) -> None:
        self.program, self.limits, self.random, self.budget = program, limits, random, budget
        self.shapes = dict(shapes)
        self.made: dict[str, Constructed] = {}

    def read(self) -> None:
        for statement in self.program.statements:
            if isinstance(statement, Leaf):
                self.leaf(statement)
            elif isinstance(statement, Step):
                self.lifted(statement.node)
                self.shapes[statement.name] = infer_shape(statement.node, self.shapes, self.limits)
            elif isinstance(statement, Backward):
                for node in (statement.target, statement.gradient):
                    self.lifted(node)
            elif isinstance(statement, Show):
                for item in statement.items:
                    self.lifted(item)
        for leaf in self.program.leaves:
            if leaf.name not in self.made:
                self.leaf(leaf)
        for step in self.program.steps:  # a program without statements (plain steps)
            if step.name not in self.shapes:
                self.lifted(step.node)
                self.shapes[step.name] = infer_shape(step.node, self.shapes, self.limits)
        self.lifted(self.program.root)

    def lifted(self, node: Any) -> None:
        """Constructors inside an expression, read before the expression's shape is."""
        if node is None or isinstance(node, str) or len(self.made) == len(self.program.leaves):
            return  # no value the program defines is left to read (a plain program's case)
        for part in walk(node):
            if isinstance(part, Name) and part.id not in self.made:
                leaf = self.program.leaf(part.id)
                if leaf is not None:
                    self.leaf(leaf)

    def leaf(self, leaf: Leaf) -> None:
        made = read_constructor(leaf.source, self.limits, self.random, self.shapes, self.budget)
        if made.integer and leaf.requires_grad:
            raise VariableError("integer_requires_grad", name=leaf.name, source=leaf.source)
        self.made[leaf.name] = made
        self.shapes[leaf.name] = made.array.shape


def _seed(program: Program, settings: Settings) -> int:
    """The seed of rand()/randn(): torch.manual_seed(n) in the program, the settings', or drawn."""
    if program.seed is not None:
        if settings.seed is not None and settings.seed != program.seed:
            raise VariableError("two_seeds", program=program.seed, given=settings.seed)
        return program.seed
    return secrets.randbelow(2**31) if settings.seed is None else settings.seed


def _dtype(made: dict[str, Constructed], settings: Settings) -> tuple[Settings, list[Note]]:
    """The dtype the program's constructors ask for (dtype=torch.float64), if any."""
    asked = {c.dtype for c in made.values() if c.dtype is not None}
    if not asked:
        return settings, []
    if len(asked) > 1:
        raise VariableError("mixed_dtypes", dtypes=sorted(asked))
    (dtype,) = asked
    if dtype == settings.dtype:
        return settings, []
    return settings.but(dtype=dtype), [Note("program_dtype", {"dtype": dtype})]


def _shadowed(program: Program, values: Mapping[str, Any]) -> list[Note]:
    """A value or an assignment named ``e`` or ``pi`` hides the constant: a note says so."""
    written = set(dict(program.names).values()) | set(values)
    return [Note("constant_shadowed", {"name": n}) for n in CONSTANTS if n in written]


def check_names(program: Program, values: Mapping[str, Any], const: Iterable[str] = ()) -> None:
    """Every variable has a value; every value and ``const`` names a variable."""
    variables = [n for n in program.variables if program.leaf(n) is None]
    for name in [*values, *const]:
        if program.step(name) is not None:
            raise VariableError("value_for_step", name=name, variables=variables)
        if program.leaf(name) is not None and name in values:
            raise VariableError("value_defined", name=name, source=program.leaf(name).source)  # type: ignore[union-attr]
        if name not in program.variables:
            raise UnknownVariableError(name, variables)
    for name in variables:
        if values.get(name) is None:
            raise VariableError("value_missing", name=name)


def _weights(
    spec: Any,
    arrays: dict[str, np.ndarray],
    out_shape: Shape,
    limits: Limits,
    random: RandomSource,
    budget: Budget,
) -> np.ndarray | None:
    """The external gradient as an array (PyTorch checks its shape), or None for backward()."""
    if spec is None:
        return None
    if isinstance(spec, str) and spec.strip() == "ones":
        budget.take(8 * math.prod(out_shape), "the inputs with the external gradient")
        return np.ones(out_shape)
    if isinstance(spec, str) and spec.strip() in arrays:
        return arrays[spec.strip()]
    return read_value(spec, limits, random, budget)


def named_tensors(program: Program) -> list[tuple[str, str, Node | None]]:
    """(name, kind, node) of every named tensor: inputs, steps, then the output. A step
    a later line changes in place (``y`` before ``y.add_(1)``) is that line's tensor, not one
    of its own, and is left out."""
    named: list[tuple[str, str, Node | None]] = [(n, "input", None) for n in program.variables]
    changed = {s.in_place.target for s in program.steps if s.in_place is not None}
    named += [
        (s.name, "output" if s.name == program.output else "step", s.node)
        for s in program.steps
        if s.name not in changed
    ]
    if program.step(program.output) is None:
        named.append((program.output, "output", program.root))
    return named


@dataclass(frozen=True)
class Passes:
    """How backward runs: ``repeat`` passes, each on a new graph or again on one graph
    (``same_graph``; ``retain_graph`` keeps it alive), ``zero_grad`` between passes."""

    repeat: int = 1
    same_graph: bool = False
    retain_graph: bool = False
    zero_grad: bool = False
    functional: bool = False  # torch.autograd.grad: gradients returned, .grad untouched

    def __post_init__(self) -> None:
        object.__setattr__(self, "repeat", number("repeat", self.repeat))
        if self.functional and self.zero_grad:
            raise VariableError("functional_combination", option="zero_grad")
        for option, given in (("same_graph", self.same_graph), ("zero_grad", self.zero_grad)):
            if given and self.repeat < 2:
                raise VariableError("needs_repeat", option=option)
        if self.retain_graph and not self.same_graph:
            raise VariableError("retain_graph_alone")

    def times(self, index: int, kept_across_passes: bool = True) -> int:
        """What pass ``index`` multiplies a single gradient by (1 once zeroed or rebuilt)."""
        return 1 if self.zero_grad or self.functional or not kept_across_passes else index

    @property
    def mode(self) -> str:
        if self.repeat == 1:
            return (
                "one pass, torch.autograd.grad (.grad untouched)" if self.functional else "one pass"
            )
        how = (
            "backward() again on the same graph"
            + (" (retain_graph=True)" if self.retain_graph else "")
            if self.same_graph
            else "forward + backward each pass (a new graph)"
        )
        then = (
            "; .grad zeroed between passes (zero_grad)" if self.zero_grad else "; .grad accumulates"
        )
        if self.functional:
            then = "; torch.autograd.grad each pass: returned, .grad untouched, nothing accumulates"
        return how + then


def retained_names(bound: Bound, names: list[str]) -> list[str]:
    """The non-leaf names whose gradient to keep; ``all`` means every step and the output.
    A name is one the user wrote: ``y`` is the value ``y`` holds after the last line (as
    ``y.retain_grad()`` there), ``y (line 2)`` an earlier one (``display_names``); the
    choices an error lists are written names only."""
    if not names:
        return []
    program = bound.program
    intermediate = [n for n, kind, _ in named_tensors(program) if kind != "input"]
    if "all" in names:
        return intermediate
    shown = display_names(program)
    known = {shown.get(n, n): n for n in intermediate}
    known.update({program.shown(n): n for n in intermediate})  # the last binding
    choices = list(dict.fromkeys(program.shown(n) for n in intermediate))
    for name in names:
        if name in known:
            continue
        if name in program.variables:
            raise VariableError("retain_grad_input", name=name, intermediate=choices)
        labels = [*choices, *(shown[n] for n in intermediate if n in shown)]
        near = next(iter(difflib.get_close_matches(name, labels, n=1, cutoff=0.6)), None)
        raise VariableError("retain_grad_unknown", name=name, intermediate=choices, near=near)
    return list(dict.fromkeys(known[n] for n in names))
