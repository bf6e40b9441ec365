"""Points where the derivative is not an ordinary number: each gets a verdict that names
the case and PyTorch's choice, one by one (exit 0: nothing is wrong with autograd)."""

from __future__ import annotations

import pytest

from tests.conftest import cli

INF, NAN = "Infinity", "NaN"

CASES = [
    # (args, variable, PyTorch's gradient, words the verdict must contain)
    (["relu(x)", "--x", "0"], "x", 0.0, "relu'(0) is undefined; PyTorch uses 0"),
    (["abs(x)", "--x", "0"], "x", 0.0, "abs'(0) is undefined; PyTorch uses 0"),
    (["max(x)", "--x", "[3.0, 3.0, 1.0]"], "x", [0.5, 0.5, 0.0], "splits the gradient evenly"),
    (["min(x)", "--x", "[1.0, 1.0, 3.0]"], "x", [0.5, 0.5, 0.0], "splits the gradient evenly"),
    (["norm(x)", "--x", "[0.0, 0.0]"], "x", [0.0, 0.0], "at 0 it is not differentiable and"),
    (["sqrt(x)", "--x", "0"], "x", INF, "the derivative is infinite at 1 element"),
    (["log(x)", "--x", "0"], "x", INF, "the derivative is infinite at 1 element"),
    (["log(x)", "--x", "-1"], "x", -1.0, "the output is NaN at 1 element(s): the expression is"),
    (["x**0.5", "--x", "-1"], "x", NAN, "outside the function's real domain"),
    (["exp(x)", "--x", "100"], "x", INF, "overflow: float32 holds numbers up to 3.4e+38"),
    (["x**y", "--x", "0", "--y", "2"], "x", 0.0, "0/0 or 0*inf at 1 element(s)"),
    (["0**x", "--x", "2"], "x", 0.0, "0/0 or 0*inf at 1 element(s)"),
    (["x/x", "--x", "0"], "x", NAN, "PyTorch's forward is NaN at 1 output element(s)"),
    (["sqrt(x)**2", "--x", "-1"], "x", NAN, "PyTorch's forward is NaN at 1 output element(s)"),
    (["x*0", "--x", "inf"], "x", 0.0, "an input is NaN or infinite"),
    (["x**2", "--x", "nan"], "x", NAN, "an input is NaN or infinite"),
    (["sqrt(relu(x))", "--x", "-1"], "x", 0.0, ""),
]


@pytest.mark.parametrize(
    ("args", "name", "grad", "words"), CASES, ids=[c[0][0] + " at " + c[0][2] for c in CASES]
)
def test_each_point_is_named_with_pytorchs_choice(args, name, grad, words):
    run = cli("grad", *args, "--json")
    assert run.exit_code == 0, run.stdout[:400]
    doc = run.json()
    assert doc["variables"][name]["grad"] == grad
    said = " ".join(
        [*doc["notes"], *doc["variables"][name]["notes"], doc["variables"][name]["rounding"] or ""]
    )
    assert words in said, said
    assert doc["agree"] is True


def test_max_with_dim_gives_the_tie_to_the_index_pytorch_returns():
    import torch

    x = torch.tensor([[3.0, 3.0, 1.0]], requires_grad=True)
    torch.max(x, dim=1).values.sum().backward()
    run = cli("grad", "max(x, 1)", "--x", "[[3.0, 3.0, 1.0]]", "--weights", "ones", "--json")
    doc = run.json()
    assert doc["variables"]["x"]["grad"] == x.grad.tolist()
    assert (
        "gives it all to the one index it returns for max(x, dim)"
        in doc["variables"]["x"]["notes"][0]
    )
    assert run.exit_code == 0


def test_second_derivative_of_relu_at_its_kink():
    run = cli("grad", "relu(x)", "--x", "[0.0, 1.0]", "--order", "2", "--json")
    doc = run.json()
    assert doc["blocks"]["x"]["autograd"] == [0.0, 0.0] and doc["blocks"]["x"]["excluded"] == 1
    assert doc["notes"] == [
        "the second derivative of relu or abs at 0 is undefined (a jump in the first); "
        "PyTorch uses 0"
    ]
    assert run.exit_code == 0


def test_rich_output_names_the_case():
    run = cli("grad", "relu(x)", "--x", "0")
    assert "note (x): relu'(0) is undefined; PyTorch uses 0, SymPy's Heaviside(0) is 1/2" in (
        " ".join(run.stdout.split("\n"))
    )


@pytest.mark.parametrize(
    "args",
    [
        ["grad", "prod(x)", "--x", "[]"],
        ["grad", "sum(A @ B)", "--A", "zeros(2,0)", "--B", "zeros(0,3)"],
        ["grad", "sum(sqrt(x), 0)", "--x", "[0.0, 1.0]"],
        ["grad", "abs(x)**3", "--x", "1.0", "--order", "3"],
        ["jacobian", "log(x)", "--x", "[0.0, 1.0]"],
    ],
)
def test_edges_found_in_review_end_in_a_verdict(args):
    run = cli(*args)
    assert run.exit_code == 0, (run.stdout[-300:], run.stderr)
    assert "agree" in run.stdout.splitlines()[-1]


def test_jacobian_of_an_empty_input_is_one_error_line():
    run = cli("jacobian", "x", "--x", "[]")
    assert (run.exit_code, run.stderr) == (
        2,
        "Error: 'x' has no elements, so there is nothing to differentiate\n",
    )


def test_jacobian_honours_the_sympy_timeout():
    import time

    start = time.perf_counter()
    run = cli("jacobian", "prod(x)", "--x", "full(250, 1.01)", "--sympy-timeout", "1", "--json")
    assert time.perf_counter() - start < 30
    assert run.json()["expected_by"] == "numeric"
    assert "(--sympy-timeout); checked numerically instead" in " ".join(run.json()["notes"])
