"""A notebook cell's result: each line's event, the leaves' ``.grad`` beside SymPy's
sums, printed values."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from autogradcli.errors import AutogradCliError
from autogradcli.messages import CLI, Style
from autogradcli.notes import Note
from autogradcli.policy.verdict import (
    Cause,
    Verdict,
    agrees,
    worst,
)
from autogradcli.results.base import (
    SCHEMA_VERSION,
    Frozen,
    Judged,
    cause_dict,
    maybe,
    note_codes,
    note_texts,
    plain,
    strict,
)
from autogradcli.results.custom import FunctionCheck
from autogradcli.results.grad import GradResult, displayed, relabel


def _shown_value(value: Any) -> Any:
    """A printed value in JSON: a tensor as numbers (booleans as booleans), else as is."""
    if isinstance(value, np.ndarray):
        return value.tolist() if value.dtype == bool else plain(value)
    return value


@dataclass(frozen=True)
class LeafGrad(Frozen):
    """A leaf's ``.grad`` at one point of a cell, and what SymPy expects there: the sum
    of the backward() calls that reached it since its last reset (None: never filled)."""

    name: str
    grad: np.ndarray | None
    expected: np.ndarray | None
    max_abs_error: float | None = None
    verdict: str | None = None  # None: not checked (both None)
    cause: Cause | None = None
    derivative: str | None = None  # SymPy's derivative of this backward's target

    def to_dict(self) -> dict[str, Any]:
        return {
            "grad": maybe(self.grad),
            "expected": maybe(self.expected),
            "max_abs_error": self.max_abs_error,
            "verdict": self.verdict,
            "cause": cause_dict(self.cause),
            "derivative": self.derivative,
        }


@dataclass(frozen=True)
class Shown(Frozen):
    """One item of a ``print(...)``: what PyTorch gave, what SymPy expects, the check."""

    text: str
    value: Any
    expected: Any = None
    verdict: str | None = None  # None: shown, not checked (text, grad_fn)

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "value": _shown_value(self.value),
            "expected": _shown_value(self.expected),
            "verdict": self.verdict,
        }


@dataclass(frozen=True)
class CellEvent(Frozen):
    """One line of a cell that does something autograd shows: ``backward()`` (with its
    own gradient checked, ``check``), a reset of ``.grad``, or a ``print(...)``."""

    kind: str  # backward, reset or print
    statement: str
    grads: tuple[LeafGrad, ...] = ()
    shown: tuple[Shown, ...] = ()
    check: GradResult | None = None  # this backward() alone, from fresh leaves
    target: float | None = None  # a loop's repeated backward(): its one-element target
    printed: str | None = None  # a print Python formats: the line Python prints

    @property
    def verdict(self) -> Verdict | None:
        found = [g.verdict for g in self.grads] + [s.verdict for s in self.shown]
        found += [] if self.check is None else [self.check.verdict]
        return None if all(v is None for v in found) else worst(found)

    def to_dict(self, style: Style = CLI, shown: dict[str, str] | None = None) -> dict[str, Any]:
        """``shown``: the cell's names as the user sees them (``CellResult.display``)."""
        shown = shown or {}
        grads = {
            shown.get(g.name, g.name): {**g.to_dict(), "derivative": relabel(g.derivative, shown)}
            for g in self.grads
        }
        return {
            "kind": self.kind,
            "statement": self.statement,
            "grads": grads,
            "shown": [s.to_dict() for s in self.shown],
            "check": None if self.check is None else self.check.to_dict(style, shown),
            "verdict": self.verdict,
            **({} if self.target is None else {"target": self.target}),
            **({} if self.printed is None else {"printed": self.printed}),
        }


@dataclass(frozen=True)
class CellResult(Judged):
    """A notebook cell run line by line: each event checked; ``error`` is PyTorch's (or
    the cell's) refusal that stopped it, as Python would have stopped."""

    expression: str
    device: str
    dtype: str
    rtol: float
    atol: float
    events: tuple[CellEvent, ...]
    seed: int | None = None
    notes: tuple[Note, ...] = ()
    error: AutogradCliError | None = None  # the error that stopped the cell
    rounding_bound: float = 0.0
    strict: bool = False
    functions: tuple[FunctionCheck, ...] = ()  # each custom autograd Function's own check
    names: dict[str, str] | None = None  # display_names of the program that ran

    @property
    def verdict(self) -> Verdict:
        return worst([*(e.verdict for e in self.events), *(f.verdict for f in self.functions)])

    @property
    def agree(self) -> bool:
        return self.error is None and bool(agrees(self.verdict, self.strict))

    @property
    def grads(self) -> dict[str, np.ndarray | None]:
        """Each leaf's ``.grad`` at the end of the cell."""
        last = next((e for e in reversed(self.events) if e.grads), None)
        return {} if last is None else {g.name: g.grad for g in last.grads}

    @functools.cached_property
    def display(self) -> dict[str, str]:
        """Each name the cell holds as the user wrote it (``display_names``)."""
        seen = [g.name for e in self.events for g in e.grads]
        seen += [g.derivative for e in self.events for g in e.grads if g.derivative]
        checks = [e.check for e in self.events if e.check is not None]
        seen += [v.chain for c in checks for v in c.variables.values() if v.chain]
        return displayed(self.expression, seen=seen, known=self.names)

    @functools.cached_property
    def defined(self) -> tuple[frozenset[str], ...] | None:
        """For each event, the names bound before its line (a leaf a later line makes has
        no ``.grad`` to show there); None where the lines and events do not match up, and
        for a loop (the cell read again, unrolled, would cost seconds)."""
        from autogradcli.lang.parser import parse_expression
        from autogradcli.lang.tree import Backward, Leaf, Reset, Show, Step

        try:
            if any(
                isinstance(n, ast.For | ast.While) for n in ast.walk(ast.parse(self.expression))
            ):
                return None
            program = parse_expression(self.expression)
        except (AutogradCliError, SyntaxError, ValueError):
            return None
        made = {n for n in program.variables if n not in dict(program.names)}
        found: list[frozenset[str]] = []
        for statement in program.statements:
            if isinstance(statement, Leaf | Step):
                made.add(statement.name)
            elif isinstance(statement, Backward | Reset | Show):
                found.append(frozenset(made))
        return tuple(found) if len(found) >= len(self.events) else None

    def shown_grads(self, index: int) -> tuple[LeafGrad, ...]:
        """The ``.grad`` rows of event ``index`` (0-based) a user sees: a leaf made by a
        later line has none yet."""
        grads = self.events[index].grads
        if all(g.grad is not None or g.expected is not None for g in grads):
            return grads
        defined = self.defined
        if defined is None:
            return grads
        return tuple(g for g in grads if g.name in defined[index])

    def first_cause(self) -> Cause | None:
        for event in self.events:
            for g in event.grads:
                if g.verdict == self.verdict and g.cause is not None:
                    return g.cause
        return None

    def to_dict(self, style: Style = CLI) -> dict[str, Any]:
        error = None
        if self.error is not None:
            from autogradcli.messages import error_text

            error = {
                "type": self.error.kind,
                "code": self.error.code,
                "message": error_text(self.error, style),
            }
            if self.error.data.get("changes"):
                error["in_place"] = self.error.data["changes"]
        return strict(
            {
                "schema_version": SCHEMA_VERSION,
                "command": "cell",
                "expression": self.expression,
                "device": self.device,
                "dtype": self.dtype,
                "tolerance": {"rtol": self.rtol, "atol": self.atol},
                "seed": self.seed,
                "events": [e.to_dict(style, self.display) for e in self.events],
                "stopped": error,
                "notes": note_texts(self.notes, style),
                "note_codes": note_codes(self.notes),
                **({"functions": [f.to_dict() for f in self.functions]} if self.functions else {}),
                **self.verdict_fields(),
            }
        )
