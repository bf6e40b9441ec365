"""The torch side computes what the same line typed as Python computes, bit for bit;
the SymPy side gets the vector-Jacobian product right, reductions and edge points included."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import autogradcli as ag
from tests.conftest import cli

X = [0.3, 1.7, 2.9]
Y = [1.1, -0.4, 0.25]

LINES = [
    ("x*x*3 + y", lambda x, y: x * x * 3 + y),
    ("(x + y) - y", lambda x, y: (x + y) - y),
    ("x / y - x**3", lambda x, y: x / y - x**3),
    ("0.1*3*x + 2**3*y", lambda x, y: 0.1 * 3 * x + 2**3 * y),
    ("sin(x)*exp(-y) + tanh(x*y)", lambda x, y: torch.sin(x) * torch.exp(-y) + torch.tanh(x * y)),
    (
        "log(x) + log2(x) + log10(x) + sqrt(x) + y",
        lambda x, y: torch.log(x) + torch.log2(x) + torch.log10(x) + torch.sqrt(x) + y,
    ),
    (
        "sigmoid(y) * relu(y) + abs(y) - x",
        lambda x, y: torch.sigmoid(y) * torch.relu(y) + torch.abs(y) - x,
    ),
    ("x / sum(x) + y", lambda x, y: x / torch.sum(x) + y),
    ("(x - mean(x))**2 * y", lambda x, y: (x - torch.mean(x)) ** 2 * y),
    ("2**x + pi*y + e", lambda x, y: 2**x + math.pi * y + math.e),
    ("x^2 + y^3", lambda x, y: x**2 + y**3),
]


@pytest.mark.parametrize(("text", "line"), LINES, ids=[t for t, _ in LINES])
def test_same_numbers_as_the_python_line(text, line):
    x = torch.tensor(X, requires_grad=True)
    y = torch.tensor(Y, requires_grad=True)
    out = line(x, y)
    out.backward(torch.ones_like(out))
    result = ag.grad(text, {"x": X, "y": Y}, weights="ones", device="cpu")
    np.testing.assert_array_equal(result.output, out.detach().double().numpy())
    for name, leaf in (("x", x), ("y", y)):
        np.testing.assert_array_equal(result.variables[name].grad, leaf.grad.double().numpy())
    assert result.agree, {n: v.max_abs_error for n, v in result.variables.items()}


def test_cancelled_variable_keeps_a_zero_gradient_not_none():
    r = ag.grad("(x + y) - y", x="[1, 2]", y="3", weights="ones")
    assert r.agree is True
    y = r.variables["y"]
    assert y.grad is not None and y.grad.shape == ()
    assert y.grad.tolist() == 0.0  # 0.0 or -0.0
    assert y.expected is not None and y.expected.shape == () and y.expected.tolist() == 0.0
    assert y.agree is True


def test_broadcast_gradient_is_summed_over_the_broadcast_dimensions():
    r = ag.grad("x*y", x="[[1,2,3],[4,5,6]]", y="[10, 20, 30]", weights="ones")
    assert r.variables["y"].grad.tolist() == [5.0, 7.0, 9.0]
    assert r.variables["y"].expected.tolist() == [5.0, 7.0, 9.0]
    assert r.variables["x"].grad.tolist() == [[10, 20, 30], [10, 20, 30]]
    assert r.agree is True


def test_scalar_broadcast_against_a_column():
    r = ag.grad("sum(x*y)", x="ones(3,1)", y="[[1, 2]]")
    assert r.variables["x"].grad.tolist() == [[3.0], [3.0], [3.0]]
    assert r.variables["y"].grad.tolist() == [[3.0, 3.0]]
    assert r.agree is True


def test_reduction_inside_the_expression_matches_a_hand_derivation():
    # d/dx_j sum_i w_i x_i / S = w_j / S - sum_i w_i x_i / S**2, S = sum(x)
    x, w = np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.0])
    s = x.sum()
    expected = w / s - (w * x).sum() / s**2
    result = ag.grad("x/sum(x)", {"x": "[1,2,3]"}, weights="[1,2,3]", dtype="float64")
    np.testing.assert_allclose(result.variables["x"].expected, expected, rtol=1e-15)
    assert result.agree


def test_variance_like_expression():
    x = np.array([1.0, 2.0, 4.0])
    expected = 2 * (x - x.mean())  # d/dx sum((x-mean(x))**2); the mean's own term sums to 0
    result = ag.grad("sum((x-mean(x))**2)", {"x": x}, dtype="float64")
    np.testing.assert_allclose(result.variables["x"].expected, expected, atol=1e-15)
    assert result.agree


def test_nested_reductions():
    result = ag.grad("mean(x*sum(x**2))", {"x": "[1,2,3]"}, dtype="float64")
    x = np.array([1.0, 2.0, 3.0])
    # f = mean(x) * sum(x^2): df/dx = sum(x^2)/n + mean(x) * 2x
    np.testing.assert_allclose(
        result.variables["x"].expected, (x**2).sum() / 3 + x.mean() * 2 * x, rtol=1e-15
    )
    assert result.agree


def test_relu_at_zero_is_explained_not_a_disagreement():
    r = ag.grad("relu(x)", x="[-1, 0, 2]", weights="ones")
    assert r.agree is True
    x = r.variables["x"]
    assert x.grad.tolist() == [0.0, 0.0, 1.0]
    assert x.expected.tolist() == [0.0, 0.5, 1.0]
    assert x.agree is True
    assert [n.code for n in x.notes] == ["kink_between"]
    assert [str(n) for n in x.notes] == [
        "relu'(0) is undefined (SymPy's Heaviside(0) is 1/2); one-sided derivatives there: "
        "[0, 1] (a real kink); PyTorch's value there: 0; 1 element(s) checked to lie between them"
    ]


def test_abs_at_zero_agrees_and_is_noted():
    r = ag.grad("abs(x)", x="[0.0, -2]", weights="ones")
    assert r.agree is True
    x = r.variables["x"]
    assert x.grad.tolist() == [0.0, -1.0] and x.expected.tolist() == [0.0, -1.0]
    assert str(x.notes[0]).startswith(
        "abs'(0) is undefined (SymPy's sign(0) is 0); one-sided derivatives there: [-1, 1] "
        "(a real kink); PyTorch's value"
    )


def test_relu_kink_through_a_reduction_is_noted():
    r = ag.grad("relu(sum(x))", x="[1, -1]")
    assert r.agree is True
    x = r.variables["x"]
    assert x.agree is True
    assert str(x.notes[0]).startswith("relu'(0) is undefined")


def test_sqrt_at_zero_is_infinite_on_both_sides():
    r = ag.grad("sqrt(x)", x="[0.0, 4.0]", weights="ones")
    assert r.agree is True
    x = r.variables["x"]
    assert x.grad.tolist() == [math.inf, 0.25]
    assert x.expected.tolist() == [math.inf, 0.25]
    assert x.agree is True
    assert "the derivative is infinite at 1 element(s)" in [str(n) for n in x.notes]


def test_log_of_a_negative_is_nan_on_both_sides():
    r = ag.grad("log(x)", x="[-1.0, 1.0]", weights="ones")
    assert math.isnan(r.output[0]) and r.output[1] == 0.0 and r.output.shape == (2,)
    assert r.variables["x"].grad.tolist() == [-1.0, 1.0]  # PyTorch's 1/x ignores the domain
    assert r.agree is True


def test_repeat_compares_each_pass_with_k_times_the_single_gradient():
    r = ag.grad("x**3", x="2", repeat=3)
    assert [p.grads["x"].tolist() for p in r.passes] == [12.0, 24.0, 36.0]
    assert [p.expected["x"].tolist() for p in r.passes] == [12.0, 24.0, 36.0]
    assert all(p.agree for p in r.passes)
    assert r.agree is True


@pytest.mark.parametrize(
    ("dtype", "rtol", "atol"),
    [
        ("float32", 1.3e-6, 1e-5),
        ("float64", 1e-7, 1e-7),
        ("float16", 1e-3, 1e-5),
        ("bfloat16", 1.6e-2, 1e-5),
    ],
)
def test_dtype_defaults_to_torch_testing_tolerances(dtype, rtol, atol):
    r = ag.grad("x**2", x="1.5", dtype=dtype)
    assert r.dtype == dtype
    assert (r.rtol, r.atol) == (rtol, atol)
    assert r.variables["x"].grad.tolist() == 3.0
    assert r.agree is True


def test_tolerance_override():
    r = ag.grad("x**2", x="1.5", rtol=0.5, atol=0)
    assert (r.rtol, r.atol) == (0.5, 0.0)
    assert r.agree is True
    # and the flags on the command line reach the same settings
    run = cli("grad", "x**2", "--x", "1.5", "--rtol", "0.5", "--atol", "0", "--json")
    assert run.exit_code == 0 and run.json()["tolerance"] == {"rtol": 0.5, "atol": 0.0}


def test_inputs_are_seen_by_sympy_as_rounded_to_the_dtype():
    # 0.1 is not a float32; SymPy must use float32(0.1), so the check measures autograd only.
    # (The output x**2 itself is rounded to float32, so with zero tolerance it is only ≈.)
    r = ag.grad("x**2", x="0.1", rtol=0, atol=0)
    assert r.output_verdict == "rounding"
    x = r.variables["x"]
    assert x.value.tolist() == float(np.float32(0.1))
    assert x.grad.tolist() == x.expected.tolist() == 2 * float(np.float32(0.1))
    assert x.agree is True


def test_pi_and_e_become_variables_when_given_a_value():
    r = ag.grad("pi*x + e", x="1", pi="3", e="2")
    assert r.output.tolist() == 5.0
    assert r.variables["pi"].grad.tolist() == 1.0
    assert r.agree is True


@pytest.mark.parametrize("name", ["beta", "gamma", "E", "I", "S", "N", "O", "Q", "lam"])
def test_names_special_to_sympy_are_plain_variables(name):
    r = ag.grad(f"{name}**2", values={name: "3"})
    assert r.variables[name].grad.tolist() == 6.0
    assert r.variables[name].derivative == f"2*{name}"
    assert r.agree is True


def test_leaves_are_created_on_the_device_as_leaves():
    import autogradcli.torchside.build as computation

    leaf = computation.make_leaf(np.ones(2), torch.float32, torch.device("cpu"), True)
    assert leaf.is_leaf and leaf.requires_grad and leaf.grad_fn is None


def test_millions_of_elements_are_vectorised():
    # An element-by-element reference would take hours here; benchmarks/ times ten million.
    result = ag.grad(
        "sum(2*x**4 + x**3 + 3*x**2 + 5*x + 1)", {"x": "linspace(-1,1,2000000)"}, dtype="float64"
    )
    assert result.agree
    assert result.variables["x"].expected.shape == (2_000_000,)


def test_every_dtype_has_a_tolerance():
    from autogradcli.settings import DTYPES, TOLERANCES

    assert tuple(TOLERANCES) == DTYPES


def test_weights_are_not_accumulated_into_when_grad_aliases_them():
    # sum() of a 0-d input hands the weights tensor itself to .grad on the first pass.
    r = ag.grad("sum(z)", z="1.4", weights="ones", repeat=3)
    assert [p.grads["z"].tolist() for p in r.passes] == [1.0, 2.0, 3.0]
    assert r.weights is not None and r.weights.tolist() == 1.0
    assert r.agree is True
