"""Points where the derivative is not an ordinary number: each gets a verdict that names
the case and PyTorch's choice, one by one (agree, exit 0: nothing is wrong with autograd).

The numbers and verdicts go through the Python API; what only the command line does
(rendering, error lines, exit codes) through the CLI."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest

import autogradcli as ag
from tests.conftest import cli

INF, NAN = math.inf, math.nan


def assert_exactly(actual: Any, expected: Any) -> None:
    """Same shape and the same numbers, inf and NaN included (NaN equals NaN here)."""
    expected = np.asarray(expected, dtype=np.float64)
    assert np.shape(actual) == expected.shape, (actual, expected)
    np.testing.assert_array_equal(actual, expected)


def said(notes: Any) -> str:
    return " ".join(str(n) for n in notes)


CASES = [
    # (expr, values, variable, PyTorch's gradient, verdict, cause code, words the notes contain)
    ("relu(x)", {"x": "0"}, "x", 0.0, "agree", None, "relu'(0) is undefined"),
    ("abs(x)", {"x": "0"}, "x", 0.0, "agree", None, "abs'(0) is undefined"),
    ("max(x)", {"x": "[3.0, 3.0, 1.0]"}, "x", [0.5, 0.5, 0.0], "agree", None, "at a tie"),
    ("min(x)", {"x": "[1.0, 1.0, 3.0]"}, "x", [0.5, 0.5, 0.0], "agree", None, "at a tie"),
    ("norm(x)", {"x": "[0.0, 0.0]"}, "x", [0.0, 0.0], "agree", None, "at the zero vector"),
    ("sqrt(x)", {"x": "0"}, "x", INF, "agree", None, "the derivative is infinite at 1 element"),
    ("log(x)", {"x": "0"}, "x", INF, "agree", None, "the derivative is infinite at 1 element"),
    ("log(x)", {"x": "-1"}, "x", -1.0, "agree", None, "the output is NaN at 1 element(s)"),
    ("x**0.5", {"x": "-1"}, "x", NAN, "agree", None, "outside the function's real domain"),
    ("x**y", {"x": "0", "y": "2"}, "x", 0.0, "agree", None, "0/0 or 0*inf at 1 element(s)"),
    ("0**x", {"x": "2"}, "x", 0.0, "agree", None, "0/0 or 0*inf at 1 element(s)"),
    ("x**2", {"x": "nan"}, "x", NAN, "agree", None, "an input is NaN or infinite"),
    ("sqrt(relu(x))", {"x": "-1"}, "x", 0.0, "agree", None, ""),
    # a printed inf or NaN against a finite reference is never agree, and never left out
    ("exp(x)", {"x": "100"}, "x", INF, "disagree", "overflow", ""),
    ("x/x", {"x": "0"}, "x", NAN, "disagree", "domain", ""),
    ("sqrt(x)**2", {"x": "-1"}, "x", NAN, "disagree", "domain", ""),
    ("x*0", {"x": "inf"}, "x", 0.0, "disagree", "domain", "an input is NaN or infinite"),
    ("sqrt(x**2)", {"x": "0"}, "x", NAN, "disagree", "non_differentiable", ""),
    ("(x**2)**0.5", {"x": "0"}, "x", NAN, "disagree", "non_differentiable", ""),
    ("y = x*x; out = sqrt(y)", {"x": "0"}, "x", NAN, "disagree", "non_differentiable", ""),
    ("x*log(x)", {"x": "0"}, "x", NAN, "disagree", "zero_times_inf", ""),
]


@pytest.mark.parametrize(
    ("expr", "values", "name", "grad", "verdict", "cause", "words"),
    CASES,
    ids=[c[0] + " at " + next(iter(c[1].values())) for c in CASES],
)
def test_each_point_gets_the_policys_verdict_and_a_true_cause(
    expr, values, name, grad, verdict, cause, words
):
    r = ag.grad(expr, values)
    v = r.variables[name]
    assert_exactly(v.grad, grad)
    assert r.verdict == verdict
    assert r.agree is (verdict == "agree")  # the exit code: 0 when agree, else 1
    top = r.to_dict()["cause"]
    assert (top or {}).get("code") == cause
    if cause is not None:
        assert top["message"]
    if not np.isfinite(grad).all():  # a printed inf or NaN is judged on its own
        assert v.verdict == verdict
    assert words in said([*r.notes, *v.notes])


def test_the_exit_code_follows_the_verdict():
    # the CLI's side of the cases above: agree exits 0, disagree exits 1
    assert cli("grad", "relu(x)", "--x", "0", "--json").exit_code == 0
    assert cli("grad", "x/x", "--x", "0", "--json").exit_code == 1


CLAIM = re.compile(r"PyTorch's value there: ([^;]+);")


@pytest.mark.parametrize(
    ("expr", "options", "at"),
    [
        ("relu(x)", {"x": "[-1.0, 0.0, 2.0]", "weights": "ones"}, [1]),
        ("abs(x)", {"x": "[0.0, 3.0]", "weights": "ones"}, [0]),
        ("max(x)", {"x": "[3.0, 3.0, 1.0]"}, [0, 1]),
        ("max(x, 0)", {"x": "[3.0, 3.0, 1.0]"}, [0, 1]),
        ("norm(x)", {"x": "[0.0, 0.0]"}, [0, 1]),
        ("relu(x - y)", {"x": "[1.0, 2.0]", "y": "[1.0, 0.0]", "weights": "ones"}, [0]),
    ],
)
def test_every_claim_of_pytorchs_value_at_a_point_is_the_printed_grad(expr, options, at):
    r = ag.grad(expr, **options)
    for name, v in r.variables.items():
        for note in map(str, v.notes):
            for claim in CLAIM.findall(note):
                grads = np.atleast_1d(np.asarray(v.grad, dtype=float))
                printed = {float(grads[i]) for i in at}
                assert {float(c) for c in claim.split(", ")} == printed, (name, note)
    assert any(CLAIM.search(str(n)) for v in r.variables.values() for n in v.notes)


def test_max_with_dim_gives_the_tie_to_the_index_pytorch_returns():
    import torch

    x = torch.tensor([[3.0, 3.0, 1.0]], requires_grad=True)
    torch.max(x, dim=1).values.sum().backward()
    r = ag.grad("max(x, 1)", x="[[3.0, 3.0, 1.0]]", weights="ones")
    assert r.variables["x"].grad.tolist() == x.grad.tolist()
    assert str(r.variables["x"].notes[0]).startswith(
        "max is not differentiable at a tie; one-sided derivatives there: [0, 1] (a real "
        "kink); PyTorch's value there: 0, 1; 2 element(s)"
    )
    assert r.agree is True  # exit code 0


def test_second_derivative_of_relu_at_its_kink():
    r = ag.derivative("relu(x)", x="[0.0, 1.0]", order=2)
    block = {b.key: b for b in r.blocks}["x"]
    assert block.autograd.tolist() == [0.0, 0.0] and block.excluded == 1
    assert [str(n) for n in r.notes] == [
        "the second derivative at a kink (relu or abs at 0, max or min at a tie) is undefined "
        "(a jump in the first); PyTorch's value there: 0; 1 element(s) at that point are left "
        "out of the check"
    ]
    assert r.agree is True  # exit code 0


def test_rich_output_names_the_case():
    run = cli("grad", "relu(x)", "--x", "0")
    assert (
        "note (x): relu'(0) is undefined (SymPy's Heaviside(0) is 1/2); one-sided derivatives "
        "there: [0, 1] (a real kink); PyTorch's value there: 0;" in " ".join(run.stdout.split())
    )


@pytest.mark.parametrize(
    "args",
    [
        ["grad", "prod(x)", "--x", "[]"],
        ["grad", "sum(A @ B)", "--A", "zeros(2,0)", "--B", "zeros(0,3)"],
        ["grad", "sum(sqrt(x), 0)", "--x", "[0.0, 1.0]"],
        ["grad", "abs(x)**3", "--x", "1.0", "--order", "3"],
    ],
)
def test_edges_found_in_review_end_in_a_verdict(args):
    # the whole way through the CLI, rendering of empty tensors included
    run = cli(*args)
    assert run.exit_code == 0, (run.stdout[-300:], run.stderr)
    assert "agree" in run.stdout.splitlines()[-1]


def test_a_jacobian_entry_nan_from_a_one_hot_row_is_a_disagreement():
    # d out_1/d x_0 of log(x) is 0; backward(one_hot) sends 0 * log'(0) = 0 * inf = NaN
    r = ag.jacobian("log(x)", x="[0.0, 1.0]")
    assert r.agree is False and r.verdict == "disagree"  # exit code 1
    block = {b.key: b for b in r.blocks}["x"]
    assert_exactly(block.autograd, [[INF, 0.0], [NAN, 1.0]])
    assert r.to_dict()["cause"]["code"] == "zero_times_inf"


def test_jacobian_of_an_empty_input_is_one_error_line():
    run = cli("jacobian", "x", "--x", "[]")
    assert (run.exit_code, run.stderr) == (
        2,
        "Error: 'x' has no elements, so there is nothing to differentiate\n",
    )


def test_jacobian_honours_the_sympy_timeout():
    import time

    start = time.perf_counter()
    # SymPy's product of 125 symbols alone takes 20 s: far past 0.2 s
    r = ag.jacobian("prod(x)", x="full(250, 1.01)", sympy_seconds=0.2)
    assert time.perf_counter() - start < 30
    assert r.expected_by == "numeric"
    assert "(sympy_seconds); checked numerically instead" in said(r.notes)  # the API's words
    # and the CLI's, in the --json document
    assert "(--sympy-timeout); checked numerically instead" in " ".join(r.to_dict()["notes"])


# The numeric check near a kink or a domain edge (found by the mpmath differential test)

NEAR = [
    # (expr, values and settings, variable, autograd's gradient, words the notes must contain)
    ("abs(x)", {"x": "1e-7"}, "x", 1.0, "crosses a kink at 1 element(s)"),
    ("relu(x-1)", {"x": "1.0000001", "dtype": "float64"}, "x", 1.0, "crosses a kink"),
    ("norm(x)", {"x": "[1e-8, 0.0]"}, "x", [1.0, 0.0], "crosses a kink at 1 element(s)"),
    ("sqrt(x)", {"x": "1e-7"}, "x", 1581.138916015625, "NaN within the numeric step (1e-06)"),
    ("log(x)", {"x": "-1"}, "x", -1.0, "outside its real domain or at its edge"),
]


@pytest.mark.parametrize(
    ("expr", "options", "name", "grad", "words"), NEAR, ids=[c[0] for c in NEAR]
)
def test_numeric_step_across_a_kink_or_edge_is_named_not_a_false_disagree(
    expr, options, name, grad, words
):
    r = ag.grad(expr, **options, numeric=True)
    v = r.variables[name]
    assert_exactly(v.grad, grad)
    assert (v.agree, v.numeric_agree, r.agree) == (True, True, True)
    assert words in said(v.notes), [str(n) for n in v.notes]


def test_numeric_reference_at_300_ties_checks_a_subgradient():
    # beyond the exact check's 256 inputs; central differences give 0.5 at each tied zero,
    # the one-sided slopes 0 and 1, PyTorch 1/300
    r = ag.grad("max(x)", x="zeros(300)")
    assert r.expected_by == "numeric"
    v = r.variables["x"]
    assert v.grad[0] == pytest.approx(1 / 300)
    assert v.expected[0] == pytest.approx(0.5)
    assert (v.agree, r.agree) == (True, True)
    assert "crosses a kink at 300 element(s)" in said(v.notes)


def test_a_wrong_gradient_across_a_kink_is_still_caught(wrong_sin):
    # outside the one-sided slopes [0, 1] of relu: the bounds do not accept anything
    r = ag.grad("relu(sin(x))", x="1e-7", numeric=True)
    assert r.agree is False  # exit code 1
    assert r.variables["x"].numeric_agree is False


def test_x_to_a_fractional_power_at_zero():
    # d/dx x**y = y*x**(y-1): 0 for y = 1.5, inf for y = 0.5 (PyTorch's values), not 0/0
    for y, grad in (("1.5", 0.0), ("0.5", INF), ("-0.5", -INF)):
        r = ag.grad("x**y", x="0", y=y)
        assert_exactly(r.variables["x"].grad, grad)
        assert_exactly(r.variables["x"].expected, grad)
        assert r.agree is True


def test_abs_written_as_u_over_sign_u_by_sympy_is_zero_at_zero():
    # SymPy's d/dz abs(z/(2+sin(abs(x)))) contains x/sign(x); at x = 0 that is |x| = 0
    r = ag.grad("abs(z/(2+sin(abs(x))))", x="0", z="1e-9", dtype="float64")
    assert_exactly(r.variables["z"].expected, 0.5)
    assert r.agree is True


def test_numeric_column_overflow_in_float32_is_named():
    r = ag.grad("exp(x)", x="100", numeric=True)
    v = r.variables["x"]
    assert (r.agree, v.numeric_verdict, v.verdict) == (False, "disagree", "disagree")  # exit 1
    assert_exactly(v.grad, INF)
    assert v.cause.code == "overflow"
    message = v.to_dict()["cause"]["message"]
    assert message.startswith("overflow: exp(x) reaches 2.68812e+43, past float32")


def test_inspect_does_not_leave_out_a_nan_that_sympy_simplified_away():
    r = ag.grad("x/x", x="0", inspect=True)
    out = {t.name: t for t in r.tensors}["out"]
    assert r.agree is False  # exit code 1
    assert_exactly(out.value, NAN)
    assert_exactly(out.value_expected, 1.0)
    assert out.agree is False


@pytest.mark.parametrize(
    "expr", ["abs(asin(0.9*tanh(x)))", "log2(1 + abs(log2(1 + acos(0.9*tanh(x))**2)))"]
)
def test_sympy_complex_helpers_of_real_values_give_a_number(expr):
    # SymPy writes these derivatives with atan2, re, im and arg, as if asin/acos could be
    # complex; for real values they are evaluated, not sent to the numeric fallback
    r = ag.grad(expr, x="[0.95, -1.2]", weights="ones")
    assert (r.expected_by, r.agree) == ("SymPy", True)


def test_nan_from_zero_times_infinity_in_backward_is_named_and_is_a_disagreement():
    # max(log(x)) at x = [0, 1]: max sends 0 to log(0), whose backward is 0/0 = NaN in
    # PyTorch; the derivative (the max does not move with x[0] near 0) is 0
    r = ag.grad("max(log(x))", x="[0, 1]")
    v = r.variables["x"]
    assert r.agree is False  # exit code 1
    assert_exactly(v.grad, [NAN, 1.0])
    assert_exactly(v.expected, [0.0, 1.0])
    assert v.cause.code == "zero_times_inf"
    message = v.to_dict()["cause"]["message"]
    assert message.startswith("NaN from 0·inf in the backward pass at 1 element(s)")


@pytest.mark.parametrize(
    ("value", "grad"),
    [("[inf, inf, 1.0]", [0.5, 0.5, 0.0]), ("[-inf, -inf, -inf]", [1 / 3, 1 / 3, 1 / 3])],
)
def test_a_tie_of_infinities_is_a_tie(value, grad):
    # inf - inf is NaN in SymPy's Heaviside(x0 - x1); PyTorch splits the gradient as at any tie
    r = ag.grad("max(x)", x=value)
    v = r.variables["x"]
    assert r.agree is True  # exit code 0
    assert v.grad.tolist() == pytest.approx(grad)
    assert "max is not differentiable at a tie" in said(v.notes)
