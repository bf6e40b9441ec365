"""Valid generated questions for fuzzing the whole pipeline, and the driver that runs one.

A case is drawn from a stream of integers (``Draw``): hypothesis's ``st.data()`` in the test
suite, atheris's ``FuzzedDataProvider`` in fuzz/fuzz_pipeline.py. It is a program built from
the vocabulary's functions over ``x`` and ``y``, their values and shapes, and the command
with random options. ``run_case`` sends it through the API, renders the result with Rich and
as JSON (validated against the schema), and through ``check`` and the piped shell as the
same command line. A traceback, an internal error or a schema rejection is a finding.
"""

from __future__ import annotations

import io
import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

UNARY = ["sin", "cos", "tanh", "exp", "sigmoid", "relu", "abs", "atan", "erf", "softplus"]
UNARY += ["gelu", "silu", "elu", "logsigmoid", "log1p", "expm1", "sqrt", "log"]
BINARY = ["+", "-", "*", "/", "**"]
CALLS2 = ["maximum", "minimum"]
SHAPES: list[tuple[int, ...]] = [(), (2,), (3,), (2, 3)]
NUMBERS = [0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 0.25, 3.0, -1.5, 1e-3, 7.0]
COMMANDS = ["grad", "grad", "grad", "jacobian", "hessian", "graph", "order"]
DTYPES = ["float32", "float64"]

Draw = Callable[[int, int], int]  # an integer in [lo, hi]


@dataclass
class Case:
    """One generated question, as API keywords and as a command line."""

    command: str
    expression: str
    values: dict[str, list[Any] | float] = field(default_factory=dict)
    dtype: str = "float32"
    repeat: int = 1
    weights: str | None = None
    order: int = 2

    def line(self) -> str:
        """The same question as a command line (check files and shell lines)."""
        words = ["grad" if self.command == "order" else self.command, self.expression]
        for name, value in self.values.items():
            words += [f"--{name}", json.dumps(value)]
        words += ["--dtype", self.dtype]
        if self.command == "order":
            words += ["--order", str(self.order)]
        if self.command == "grad":
            words += ["--repeat", str(self.repeat)]
            if self.weights is not None:
                words += ["--weights", self.weights]
        return shlex.join(words)


def _pick(draw: Draw, options: list[Any]) -> Any:
    return options[draw(0, len(options) - 1)]


def _term(draw: Draw, depth: int, names: list[str]) -> str:
    kind = draw(0, 5) if depth > 0 else 0
    if kind == 0:
        return _pick(draw, [*names, "2", "0.5", "3"])
    if kind in (1, 2):
        return f"{_pick(draw, UNARY)}({_term(draw, depth - 1, names)})"
    if kind == 3:
        left, right = _term(draw, depth - 1, names), _term(draw, depth - 1, names)
        op = _pick(draw, BINARY)
        if op == "**":
            return f"({left})**{_pick(draw, ['2', '3', '0.5', '-1'])}"
        return f"({left}) {op} ({right})"
    if kind == 4:
        left, right = _term(draw, depth - 1, names), _term(draw, depth - 1, names)
        return f"{_pick(draw, CALLS2)}({left}, {right})"
    inner = _term(draw, depth - 1, names)
    return f"where(({inner}) > 0, {inner}, {_term(draw, depth - 1, names)})"


def _value(draw: Draw, shape: tuple[int, ...]) -> list[Any] | float:
    if not shape:
        return _pick(draw, NUMBERS)
    size = 1
    for n in shape:
        size *= n
    flat = [_pick(draw, NUMBERS) for _ in range(size)]
    if len(shape) == 1:
        return flat
    return [flat[i * shape[1] : (i + 1) * shape[1]] for i in range(shape[0])]


def draw_case(draw: Draw) -> Case:
    """A valid question: shapes that broadcast, a reduction where the command needs one."""
    command = _pick(draw, COMMANDS)
    names = ["x", "y"][: draw(1, 2)]
    shape = _pick(draw, SHAPES)
    shapes = {"x": shape, "y": _pick(draw, [(), shape])}
    if command == "order":  # elementwise, K-th derivative of scalar inputs
        shapes = dict.fromkeys(names, ())
    body = _term(draw, draw(1, 3), names)
    used = [n for n in names if re.search(rf"\b{n}\b", body)]
    if not used:  # a constant program: give it an input
        body, used = f"({body}) + 0*x", ["x"]
    scalar = command in ("hessian", "order") or draw(0, 1) == 1
    if scalar and command != "order":
        body = f"{_pick(draw, ['sum', 'mean'])}({body})"
    case = Case(command, body, dtype=_pick(draw, DTYPES), order=draw(1, 3))
    case.values = {n: _value(draw, shapes[n]) for n in used}
    if command == "grad":
        case.repeat = draw(1, 2)
        if not scalar:  # backward() of a tensor needs its gradient
            case.weights = _pick(draw, ["ones", "randn"])
    return case


def api_result(case: Case) -> Any:
    """The case through the Python API."""
    import autogradcli as ag

    settings = ag.Settings(dtype=case.dtype, limits=ag.Limits(sympy_seconds=10.0))
    if case.command == "grad":
        return ag.grad(
            case.expression, case.values, settings=settings, repeat=case.repeat,
            weights=case.weights,
        )  # fmt: skip
    if case.command == "order":
        return ag.derivative(case.expression, case.values, order=case.order, settings=settings)
    if case.command == "graph":
        return ag.backward_graph(case.expression, case.values, settings=settings, saved=True)
    run = ag.jacobian if case.command == "jacobian" else ag.hessian
    return run(case.expression, case.values, settings=settings)


def run_case(case: Case, validate: Callable[[dict[str, Any]], None]) -> str:
    """API, Rich and JSON for one case; "result" or the domain error's code. Anything else
    (a traceback, a schema rejection) propagates: a finding."""
    from rich.console import Console

    from autogradcli.errors import AutogradCliError
    from autogradcli.render import renderable

    try:
        result = api_result(case)
    except AutogradCliError as exc:
        str(exc)  # the sentence is made without error
        return exc.code
    Console(file=io.StringIO(), width=100, color_system=None).print(renderable(result))
    document = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    validate(document)
    return "result"


def run_lines_of(cases: list[Case], validate: Callable[[dict[str, Any]], None]) -> None:
    """The cases as one ``check`` file (JSON Lines validated, no internal error) and as
    piped shell lines (one outcome per line, no traceback)."""
    from autogradcli.cli.batch import read_cases, run_all

    text = "\n".join(c.line() for c in cases)
    done = run_all(read_cases(text), jobs=1)
    assert len(done) == len(cases)
    for d in done:
        assert not (d.error or "").startswith("internal error"), (d.case.text, d.error)
        validate(d.to_dict())
