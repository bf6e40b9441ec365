"""The derivative column is the derivative of the number beside it: d out / d x_j summed over
the elements x_j is broadcast to and through every sum and mean (issue 28). Each text is
read back by the tool's own parser and evaluated by SymPy, apart from autograd, and
compared with ``.grad``."""

from __future__ import annotations

import numpy as np
import pytest

import autogradcli as ag
from autogradcli.lang.parser import parse_expression
from autogradcli.reference import sympy_model
from autogradcli.settings import Limits
from tests.conftest import cli

MATRIX = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]

# (expression, values, weights, {input: the derivative text expected})
CASES = [
    ("sum(a*x)", {"a": 2.0, "x": [1.0, 2.0, 3.0]}, None, {"a": "sum(x)", "x": "a"}),
    (
        "sigmoid(a) * x.sum()",
        {"a": 0.5, "x": [1.0, 2.0]},
        None,
        {"a": "sum(x)*exp(-a)/(1 + exp(-a))**2", "x": "1/(1 + exp(-a))"},
    ),
    ("mean((x - mean(x))**2)", {"x": [1.0, 2.0, 4.0, 7.0]}, None, {"x": "-sum(x)/8 + x/2"}),
    ("sum(X*b)", {"X": MATRIX, "b": [0.5, -1.0, 2.0]}, None, {"X": "b", "b": "sum(X, dim=0)"}),
    (
        "sum(X*c)",
        {"X": MATRIX, "c": [[0.5], [-1.0]]},
        None,
        {"X": "c", "c": "sum(X, dim=1, keepdim=True)"},
    ),
    ("sum(X + b)", {"X": MATRIX, "b": [0.5, -1.0, 2.0]}, None, {"X": "1", "b": "2"}),
    ("a*x", {"a": 2.0, "x": [1.0, 2.0, 3.0]}, [1.0, 0.0, 2.0], {"a": "sum(weights*x)"}),
    ("a*x", {"a": 2.0, "x": [1.0, 2.0, 3.0]}, "ones", {"a": "sum(x)", "x": "a"}),
    ("y = a*x; out = sum(y*y)", {"a": 2.0, "x": [1.0, 2.0, 3.0]}, None, {"a": "2*a*sum(x**2)"}),
    ("sum(exp(a*x)) / sum(x)", {"a": 0.3, "x": [1.0, 2.0, 3.0]}, None, {}),
    ("x.sum() * x.mean()", {"x": [1.0, 2.0, 3.0]}, None, {"x": "mean(x) + sum(x)/3"}),
    (
        "sum(X*b)",
        {"X": (np.arange(24.0).reshape(2, 3, 4) / 10).tolist(), "b": [[0.5], [-1.0], [2.0]]},
        None,
        {"b": "sum(sum(X, dim=2, keepdim=True), dim=0)"},
    ),
    ("mean(a + x)", {"a": 2.0, "x": [1.0, 2.0, 3.0]}, None, {"a": "1", "x": "1/3"}),
    ("sum(tanh(a*x + b)**2)", {"a": 0.7, "x": [1.0, -2.0, 3.0], "b": 0.1}, None, {}),
    (
        "sum(x*y)*a + mean(a*y)",
        {"a": 0.7, "x": [1.0, -2.0, 3.0], "y": [[1.0], [2.0]]},
        None,
        {"x": "a*sum(y, dim=0)", "y": "a*sum(x, dim=0, keepdim=True) + a/2"},
    ),
    ("m = x.mean(); c = x - m; out = (c*c).sum() + m", {"x": [1.0, 2.0, 5.0]}, None, {}),
    ("x - x.mean()", {"x": [1.0, 2.0, 5.0]}, [1.0, -2.0, 0.5], {}),
]


def _value_of(text: str, values: dict[str, np.ndarray]) -> np.ndarray:
    """The text read by the tool's parser and evaluated by SymPy's model (no autograd)."""
    program = parse_expression(text, given=frozenset(values))
    used = {n: values[n] for n in program.variables}
    model = sympy_model(program, {n: v.shape for n, v in used.items()}, Limits(), used)
    return np.asarray(model.value(program.root, used))


@pytest.mark.parametrize(("expression", "values", "weights", "texts"), CASES)
def test_the_derivative_text_evaluates_to_the_gradient(expression, values, weights, texts):
    result = ag.grad(expression, values, weights=weights, dtype="float64")
    arrays = {n: np.asarray(v, dtype=np.float64) for n, v in values.items()}
    if weights is not None and weights != "ones":
        arrays["weights"] = np.asarray(weights, dtype=np.float64)
    for name, variable in result.variables.items():
        if name in texts:
            assert variable.derivative == texts[name]
        shown = _value_of(variable.derivative, arrays)
        # the text is per element of the input: a size-1 axis it keeps or drops is the same
        if shown.size == variable.grad.size:
            shown = shown.reshape(variable.grad.shape)
        np.testing.assert_allclose(
            np.broadcast_to(shown, variable.grad.shape), variable.grad, rtol=1e-12, atol=1e-12
        )


def test_the_chain_rule_line_sums_a_broadcast_inside_a_sum() -> None:
    """∂y/∂m for y = (c**2 + m).sum() over two elements is 2, not 1."""
    code = "m = x.mean(); c = x*2; y = (c**2 + m).sum()"
    x = ag.grad(code, {"x": [1.0, 2.0]}, dtype="float64").variables["x"]
    assert x.chain == "∂y/∂x = ∂y/∂c·∂c/∂x + ∂y/∂m·∂m/∂x = (2*c)·(2) + (2)·(1/2)"
    np.testing.assert_array_equal(x.grad, [9.0, 17.0])


def test_the_report_shows_the_summed_derivative() -> None:
    """The issue's two commands, rendered as a user sees them (NO_COLOR, 100 columns)."""
    run = cli('grad "sum(a*x)" --a 2 --x "[1.,2.,3.]" --const x')
    assert run.exit_code == 0, run.stderr
    row = "│ a     │ 2         │ 6          │ 6                       │ sum(x)     │ 0       │"
    row += " ✓     │"
    assert row in run.stdout.splitlines()
    run = cli('grad "sigmoid(a) * x.sum()" --a 0.5 --x "[1.,2.]"')
    assert run.exit_code == 0, run.stderr
    rows = [line for line in run.stdout.splitlines() if line.startswith("│ x ")]
    assert rows == [
        "│ x     │ [1, 2] │ [0.622459,       │ [0.622459,       │ 1/(1 + exp(-a)) │"
        " 2.08e-08 at [0] │ ✓     │"
    ]


def test_passes_that_accumulate_multiply_the_derivative() -> None:
    """.grad after three passes is three times the derivative, and the column says so."""
    run = cli('grad "x*x" --x 2 --repeat 3')
    assert run.exit_code == 0, run.stderr
    rows = [line for line in run.stdout.splitlines() if line.startswith("│ x ")]
    assert rows == ["│ x     │ 2     │ 12         │ 12       │ 3*(2*x)    │ 0       │ ✓     │"]
    run = cli('grad "x*x" --x 2 --repeat 3 --zero-grad')
    rows = [line for line in run.stdout.splitlines() if line.startswith("│ x ")]
    assert rows == ["│ x     │ 2     │ 4          │ 4        │ 2*x        │ 0       │ ✓     │"]


CELL = """import torch
x = torch.tensor([2.0, 3.0], requires_grad=True)
c = torch.tensor([10.0, 20.0])
y = c * x**2
y.sum().backward(retain_graph=True)
y.sum().backward(retain_graph=True)
x.grad.zero_()
y.backward(gradient=torch.tensor([1.0, 0.0]))
"""


def test_a_cell_shows_the_derivative_added_to_what_grad_held() -> None:
    run = cli("grad", CELL)
    assert run.exit_code == 0, run.stderr
    rows = [line.rstrip() for line in run.stdout.splitlines() if line.startswith("   x ")]
    assert rows == [
        "   x  [40, 120]      [40, 120]         2*c*x               0              ✓",
        "   x  [80, 240]      [80, 240]         [40, 120] + 2*c*x   0              ✓",
        "   x  [0, 0]         [0, 0]            0              ✓",
        "   x  [40, 0]        [40, 0]           2*c*gradient*x      0              ✓",
    ]
