"""Issue 29: the step-wise reference makes one SymPy term and one ``diff`` per kind of step
(``reference/terms.py``), and evaluates simple terms by a plan instead of the tree walk
(``evaluate._plan``). Both give the numbers, kinks and notes the step-by-step model gave
before them; SymPy's work no longer grows with the number of steps."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import sympy as sp

from autogradcli import api
from autogradcli.lang.parser import parse_expression
from autogradcli.reference import elementwise, terms
from autogradcli.reference.elementwise import SymbolicModel
from autogradcli.reference.evaluate import FLOAT64, Walk, _plan, close_floats
from autogradcli.reference.precise import precise
from autogradcli.settings import Limits

# Programs whose steps have patterns (some steps not: a reduction), with kinks met exactly,
# constants in every position a pattern treats differently, broadcasting and two inputs.
PROGRAMS: list[tuple[str, dict[str, Any]]] = [
    (
        "y1 = sin(x)\ny2 = y1*0.5 + sin(y1)\ny3 = y2*0.7 + sin(y2)\ny4 = y3/0.3 - 1.5*y2",
        {"x": [0.1, -2.0, 3.0]},
    ),
    (  # relu's kink at x = 2 (y1 - 1.0 = 0), abs's at x = 0
        "y1 = x*0.5\ny2 = relu(y1 - 1.0)*2.5 + abs(y1)\ny3 = y2*0.25",
        {"x": [2.0, 0.0, -1.0, 3.0]},
    ),
    (  # a step with a mean has no pattern; the steps around it do
        "y1 = x*0.5\nm = mean(y1)\ny2 = (y1 - m)**2*0.5\nout = y2*1.5 + m",
        {"x": [1.0, 2.0, 4.0]},
    ),
    (  # constants in an exponent, a comparison, beside pi: kept as written
        "y1 = x**0.5*1.5\ny2 = where(y1 > 0.5, y1*0.5, y1*2.0)\ny3 = y2 + pi*0.5",
        {"x": [0.04, 1.0, 4.0]},
    ),
    ("y1 = x*w*0.5\ny2 = y1*y1 + w*1.5\ny3 = y2*0.5 - y1", {"x": [1.0, -2.0, 0.5], "w": 3.0}),
    ("y1 = -0.5*x\ny2 = y1/0.25 - -0.75*y1\ny3 = exp(y2*0.1)*0.1", {"x": [0.3, -1.2]}),
    (  # past 256 elements: float64 with error bounds (bounds.Checked)
        "y1 = x*0.5\ny2 = y1*0.3 + sin(y1)\ny3 = y2*0.25 + y1/0.7\ny4 = exp(y3*0.1)*1.5",
        {"x": np.linspace(-3.0, 3.0, 1001)},
    ),
]


def _models(text: str, values: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> tuple:
    """The step-wise model with patterns and the same model made without them."""
    program = parse_expression(text, Limits(), given=frozenset(values))
    shapes = {n: np.shape(v) for n, v in values.items()}
    with_patterns = SymbolicModel(program, shapes, stepwise=True)
    with monkeypatch.context() as patched:
        patched.setattr(elementwise, "bind", lambda node, symbol_of: None)
        without = SymbolicModel(program, shapes, stepwise=True)
    steps = list(with_patterns.reductions.values())
    assert any(b.binding is not None for b in steps)
    assert all(b.binding is None for b in without.reductions.values())
    return with_patterns, without


@pytest.mark.parametrize(("text", "values"), PROGRAMS)
def test_patterns_give_the_numbers_kinks_and_notes_of_the_step_by_step_model(
    text: str, values: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    with_patterns, without = _models(text, values, monkeypatch)
    arrays = {n: np.asarray(v, dtype=np.float64) for n, v in values.items()}
    weights = np.ones(with_patterns.output.shape)
    names = frozenset(values)
    found = with_patterns.evaluate(arrays, weights, names)
    want = without.evaluate(arrays, weights, names)
    assert close_floats(found.output, want.output) and found.arithmetic == want.arithmetic
    for name in values:  # constants exact as written vs SymPy's Floats: within 2 ulps
        assert close_floats(found.grads[name], want.grads[name]), name
        np.testing.assert_array_equal(found.kinks[name], want.kinks[name])
        np.testing.assert_array_equal(found.huge[name], want.huge[name])
        assert found.kink_notes[name] == want.kink_notes[name]
    assert any(found.kinks[n].any() for n in values) == ("relu" in text)


def test_steps_alike_but_for_their_floats_share_one_pattern() -> None:
    def key(text: str) -> tuple[object, ...]:
        node = parse_expression(text, Limits(), given=frozenset({"y"})).root
        read = terms._read(node, lambda name: name == "y")
        assert read is not None
        return read[0]

    assert key("y*0.5 + sin(y)") == key("y*0.7001 + sin(y)")
    assert key("y/0.3") == key("y/1.5") != key("y*1.5")
    assert key("y*2") != key("y*3")  # integers stay in the pattern (SymPy simplifies them)
    assert key("y**0.5") != key("y**1.5")  # an exponent too
    assert key("0.5*2*y") != key("0.5*3*y")  # a constant beside a constant too
    assert key("y*0.0") != key("y*0.5")  # and zero


def test_sympy_differentiates_each_kind_of_step_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A program of 60 steps, each with its own constant, costs SymPy one term and one
    diff: the same as a program of 3 such steps."""
    monkeypatch.setattr(terms, "_PATTERNS", terms._Kept(terms.KEPT))
    monkeypatch.setattr(terms, "_DERIVATIVES", terms._Kept(terms.KEPT))
    made: list[sp.Expr] = []
    real = terms.diff
    monkeypatch.setattr(terms, "diff", lambda e, s: made.append(e) or real(e, s))
    counts = []
    for steps in (3, 60):
        lines = ["y1 = sin(x)"]
        lines += [f"y{i} = y{i - 1}*{0.5 + i / 1000} + sin(y{i - 1})" for i in range(2, steps + 1)]
        program = parse_expression("\n".join(lines), Limits(), given=frozenset({"x"}))
        model = SymbolicModel(program, {"x": ()}, stepwise=True)
        model.evaluate({"x": np.asarray(0.3)}, np.ones(()), frozenset({"x"}))
        counts.append(len(made))
    assert counts == [2, 2]  # sin(_0) and _0*_c0 + sin(_0), each by its one input


def test_a_program_of_distinct_steps_is_checked_exactly() -> None:
    steps = 300
    factors = {i: f"{0.5 + i / 10_000:.4f}" for i in range(2, steps + 1)}
    lines = ["y1 = sin(x)", *(f"y{i} = y{i - 1}*{f} + sin(y{i - 1})" for i, f in factors.items())]
    text = "\n".join(lines)
    result = api.grad(text, x=0.3, dtype="float64", max_length=len(text))
    assert result.verdict == "agree" and result.expected_by == "SymPy" and not result.notes
    y, dy = math.sin(0.3), math.cos(0.3)
    for factor in map(float, factors.values()):  # forward mode in plain floats
        y, dy = y * factor + math.sin(y), dy * (factor + math.cos(y))
    assert result.variables["x"].expected == pytest.approx(dy, rel=1e-9)


X, Y = sp.symbols("x y", real=True)


@pytest.mark.parametrize(
    "expr",
    [
        sp.sin(X) * 2 + X**3 / Y,
        sp.exp(X) - 1,
        sp.cos(sp.sin(X)) * sp.Float(0.1) + sp.pi * Y,
        (X + Y) ** 2 * sp.log(Y) + sp.tanh(X + Y),
        sp.Max(0, X) * sp.Float(0.5) + sp.Min(X, Y),  # relu
        sp.Heaviside(X) * sp.Float(0.5) / X + sp.cos(X),  # relu's derivative, inf at 0
        sp.Heaviside(X - 2, 0) * sp.exp(X * 400) + sp.Abs(X) * sp.sign(X),
    ],
)
def test_a_plan_gives_the_walk_s_numbers(expr: sp.Expr) -> None:
    plan = _plan(expr)
    assert plan is not None
    values = {X: np.array([0.5, -1.0, 2.0, 0.0, -2.0]), Y: np.array([3.0, 0.25, 1.0, 2.0, 0.0])}
    for arith in (FLOAT64, precise(128)):
        env = {s: arith.array(v) for s, v in values.items()}
        with np.errstate(all="ignore"):
            found = np.asarray(plan.run(env, arith), dtype=arith.dtype)
            want = np.asarray(Walk(expr, env, arith).value(expr), dtype=arith.dtype)
        assert np.array_equal(arith.floats(found), arith.floats(want), equal_nan=True)


@pytest.mark.parametrize(
    "expr",
    [
        sp.DiracDelta(X) * X,
        sp.Piecewise((X, X > 0), (0, True)),
        X**Y * Y / X,  # bases repeated: the walk merges the powers first
        X / sp.sign(X),
        sp.log(X, 2) * sp.erfc(X),  # no closed form the walk knows: its error
    ],
)
def test_the_walk_takes_what_a_plan_does_not(expr: sp.Expr) -> None:
    assert _plan(expr) is None


def test_rounding_steps_read_each_constant_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A product of 200 factors: each link's operands' constant values come from one walk
    of the tree (each link folding its whole left side again was quadratic)."""
    from autogradcli.lang import analysis

    asked: list[object] = []
    real = analysis.constant_value
    monkeypatch.setattr(analysis, "constant_value", lambda node: asked.append(node) or real(node))
    text = "*".join(["x"] * 200) + " + 0*x*x"  # 0*x counts nothing
    program = parse_expression(text, Limits())
    assert analysis.rounding_steps(program, {"x": ()}, Limits()) == 3 * 199 + 3 + 3
    assert asked == []
