"""Stage 2: bind values to a parsed program; everything is checked before torch loads."""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from autogradcli.errors import UnknownVariableError, VariableError
from autogradcli.lang.parser import parse_expression
from autogradcli.lang.shapes import Shape, infer_shape, program_shapes
from autogradcli.lang.tree import Expression, Node
from autogradcli.lang.values import RandomSource, read_value
from autogradcli.settings import Limits, Settings, number


@dataclass(frozen=True)
class Bound:
    """A program with its inputs: arrays (float64, as given), every shape, the external
    gradient, what is differentiated, the settings, and the seed rand()/randn() used."""

    program: Expression
    arrays: dict[str, np.ndarray]
    shapes: dict[str, Shape]  # inputs and steps
    out_shape: Shape
    weights: np.ndarray | None
    differentiate: frozenset[str]
    settings: Settings
    seed: int | None  # reported when rand()/randn() drew a value

    @property
    def limits(self) -> Limits:
        return self.settings.limits

    @property
    def names(self) -> list[str]:
        """The differentiated inputs, in the program's order."""
        return [n for n in self.program.variables if n in self.differentiate]


def bind(
    expression: str | Expression,
    values: Mapping[str, Any],
    settings: Settings,
    *,
    weights: Any = None,
    const: Iterable[str] = (),
) -> Bound:
    """Parse (unless already parsed) and read everything; check names, shapes and sizes."""
    limits = settings.limits
    const = list(dict.fromkeys([const] if isinstance(const, str) else const))
    program = expression
    if isinstance(expression, str):
        program = parse_expression(expression, limits, given=frozenset(values))
    assert isinstance(program, Expression)
    check_names(program, values, const)
    seed = secrets.randbelow(2**31) if settings.seed is None else settings.seed
    random = RandomSource(seed, settings.dtype)
    arrays = {name: read_value(values[name], limits, random) for name in program.variables}
    shapes = program_shapes(program, {n: a.shape for n, a in arrays.items()}, limits)
    out_shape = infer_shape(program.root, shapes, limits)
    external = _weights(weights, arrays, out_shape, limits, random)
    return Bound(
        program=program,
        arrays=arrays,
        shapes=shapes,
        out_shape=out_shape,
        weights=external,
        differentiate=frozenset(n for n in program.variables if n not in const),
        settings=settings,
        seed=seed if random.used else None,
    )


def check_names(program: Expression, values: Mapping[str, Any], const: Iterable[str] = ()) -> None:
    """Every variable has a value; every value and ``const`` names a variable."""
    variables = list(program.variables)
    for name in [*values, *const]:
        if program.step(name) is not None:
            raise VariableError("value_for_step", name=name, variables=variables)
        if name not in variables:
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
) -> np.ndarray | None:
    """The external gradient as an array (PyTorch checks its shape), or None for backward()."""
    if spec is None:
        return None
    if isinstance(spec, str) and spec.strip() == "ones":
        return np.ones(out_shape)
    if isinstance(spec, str) and spec.strip() in arrays:
        return arrays[spec.strip()]
    return read_value(spec, limits, random)


def named_tensors(program: Expression) -> list[tuple[str, str, Node | None]]:
    """(name, kind, node) of every named tensor: inputs, steps, then the output."""
    named: list[tuple[str, str, Node | None]] = [(n, "input", None) for n in program.variables]
    named += [
        (s.name, "output" if s.name == program.output else "step", s.node) for s in program.steps
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

    def __post_init__(self) -> None:
        object.__setattr__(self, "repeat", number("repeat", self.repeat))
        for option, given in (("same_graph", self.same_graph), ("zero_grad", self.zero_grad)):
            if given and self.repeat < 2:
                raise VariableError("needs_repeat", option=option)
        if self.retain_graph and not self.same_graph:
            raise VariableError("retain_graph_alone")

    def times(self, index: int, kept_across_passes: bool = True) -> int:
        """What pass ``index`` multiplies a single gradient by (1 once zeroed or rebuilt)."""
        return 1 if self.zero_grad or not kept_across_passes else index

    @property
    def mode(self) -> str:
        if self.repeat == 1:
            return "one pass"
        how = (
            "backward() again on the same graph"
            + (" (retain_graph=True)" if self.retain_graph else "")
            if self.same_graph
            else "forward + backward each pass (a new graph)"
        )
        then = (
            "; .grad zeroed between passes (zero_grad)" if self.zero_grad else "; .grad accumulates"
        )
        return how + then


def retained_names(bound: Bound, names: list[str]) -> list[str]:
    """The non-leaf names whose gradient to keep; ``all`` means every step and the output."""
    program = bound.program
    intermediate = [n for n, kind, _ in named_tensors(program) if kind != "input"]
    if "all" in names:
        return intermediate
    for name in names:
        if name in program.variables:
            raise VariableError("retain_grad_input", name=name, intermediate=intermediate)
        if name not in intermediate:
            raise VariableError("retain_grad_unknown", name=name, intermediate=intermediate)
    return list(dict.fromkeys(names))
