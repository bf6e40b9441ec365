"""The tensor algebra of real losses through `grad`: axis reductions, max/min at ties, every
`torch.matmul` case, transpose, dot, norm, softmax/log_softmax/logsumexp, the three losses of
the issue, the numeric fallback beyond the exact SymPy sizes, and ``numeric=True``.

The numbers go through the Python API (``ag.grad``); the CLI is used only for what it adds:
the rendered report and the one-line errors with exit code 2. Every expected number is a
hand-derived closed form computed here with NumPy, never the tool's own output."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autogradcli as ag
from tests.conftest import cli

if TYPE_CHECKING:
    from autogradcli.results import GradResult  # not exported by autogradcli

F64 = {"dtype": "float64"}
MAX_NOTE = "max is not differentiable at a tie"
MIN_NOTE = MAX_NOTE.replace("max", "min")


def tie_note(func: str, values: str, tied: int) -> str:
    """The note at a tie, with PyTorch's values there as printed (``%g``, comma separated)."""
    start = MAX_NOTE if func == "max" else MIN_NOTE
    return (
        f"{start}; one-sided derivatives there: [0, 1] (a real kink); PyTorch's value there: "
        f"{values}; {tied} element(s) checked to lie between them"
    )


def text(value: Any) -> str:
    """A value as text, as the CLI reads it (a nested list of float64 numbers, exact in repr)."""
    return json.dumps(np.asarray(value, dtype=np.float64).tolist())


def notes(found: Any) -> list[str]:
    """Notes as sentences (``str(note)``)."""
    return [str(note) for note in found]


def assert_grad(result: GradResult, name: str, closed: Any, rtol: float = 1e-10) -> None:
    """autograd's .grad and SymPy's expected both equal the closed form."""
    var = result.variables[name]
    closed = np.asarray(closed, dtype=np.float64)
    assert var.value.shape == closed.shape
    np.testing.assert_allclose(np.array(var.grad), closed, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(np.array(var.expected), closed, rtol=rtol, atol=rtol)
    assert var.agree is True


def softmax(z: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


X23 = np.array([[1.5, -2.0, 0.5], [3.0, 0.25, -1.0]])


# --- reductions over all elements and along a dim -------------------------------------------


@pytest.mark.parametrize(
    ("expression", "closed"),
    [
        ("sum(x)", lambda x: np.ones_like(x)),
        ("mean(x)", lambda x: np.ones_like(x) / x.size),
        ("prod(x)", lambda x: np.prod(x) / x),  # no zeros: d/dx_i prod = prod of the others
        ("sum(x**2)", lambda x: 2 * x),
        ("mean(x**3)", lambda x: 3 * x**2 / x.size),
    ],
)
def test_reductions_over_all_elements(expression, closed):
    r = ag.grad(expression, x=text(X23), **F64)
    assert r.expected_by == "SymPy" and r.agree is True
    assert_grad(r, "x", closed(X23))


def test_prod_with_a_zero_gives_the_product_of_the_others():
    r = ag.grad("prod(x)", x="[2.0, 0.0, 3.0]", **F64)
    assert_grad(r, "x", [0.0, 6.0, 0.0])
    r = ag.grad("prod(x)", x="[2.0, 0.0, 0.0]", **F64)
    assert_grad(r, "x", [0.0, 0.0, 0.0])


@pytest.mark.parametrize("dim", [0, 1, -1, -2])
@pytest.mark.parametrize("func", ["sum", "mean", "prod", "max", "min"])
def test_reductions_along_a_dim(func, dim):
    # sum(c * f(x, dim)) with c of the reduced shape: the gradient is c spread back along dim
    # times the local derivative of f (ones, 1/n, the product of the others, one-hot at the
    # unique max / min)
    axis = dim % 2
    n = X23.shape[axis]
    c = np.array([2.0, -1.0, 0.5]) if axis == 0 else np.array([2.0, -1.0])
    spread = np.expand_dims(c, axis)
    reduced = {"sum": np.sum, "mean": np.mean, "prod": np.prod, "max": np.max, "min": np.min}
    local = {
        "sum": np.ones_like(X23),
        "mean": np.ones_like(X23) / n,
        "prod": np.prod(X23, axis=axis, keepdims=True) / X23,
        "max": (X23.max(axis=axis, keepdims=True) == X23).astype(float),
        "min": (X23.min(axis=axis, keepdims=True) == X23).astype(float),
    }[func]
    r = ag.grad(f"sum(c * {func}(x, {dim}))", x=text(X23), c=text(c), const=["c"], **F64)
    assert float(r.output) == pytest.approx(np.sum(c * reduced[func](X23, axis=axis)))
    assert_grad(r, "x", spread * local)
    assert notes(r.variables["x"].notes) == [] and r.agree is True


def test_mean_along_the_middle_dim_of_a_3d_tensor():
    x = np.arange(12.0).reshape(2, 3, 2) / 4
    r = ag.grad("sum(mean(x, 1)**2)", x=text(x), **F64)
    m = x.mean(axis=1, keepdims=True)
    assert float(r.output) == pytest.approx(np.sum(m**2))
    assert_grad(r, "x", np.broadcast_to(2 * m / 3, x.shape))


# --- max / min at ties ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "x", "closed", "tied"),
    [
        ("max(x)", [1.0, 3.0, 3.0, 2.0], [0.0, 0.5, 0.5, 0.0], 2),
        ("min(x)", [1.0, 1.0, 3.0], [0.5, 0.5, 0.0], 2),
        ("max(x)", [2.0, 2.0, 2.0], [1 / 3, 1 / 3, 1 / 3], 3),
    ],
)
def test_max_min_over_all_elements_at_a_tie_split_evenly(expression, x, closed, tied):
    r = ag.grad(expression, x=text(x))
    var = r.variables["x"]
    assert var.grad.tolist() == pytest.approx(closed)  # PyTorch: 1/k to each of k tied elements
    shown = f"{1 / tied:.6g}"  # the printed value at each tied element
    assert notes(var.notes) == [tie_note(expression[:3], shown, tied)]
    assert var.agree is True and r.agree is True


@pytest.mark.parametrize(("func", "dim"), [("max", 1), ("max", -1), ("min", 0), ("min", -2)])
def test_max_min_along_a_dim_at_a_tie_give_all_to_one_index(func, dim):
    x = np.array([[1.0, 3.0, 3.0], [1.0, 0.0, 2.0]])  # max ties in row 0, min ties in column 0
    r = ag.grad(f"sum({func}(x, {dim}))", x=text(x))
    grad = np.array(r.variables["x"].grad)
    # all of each slice's gradient goes to one element, and it is one that reaches the extreme
    slices = np.moveaxis(grad, dim, -1).reshape(-1, x.shape[dim])
    values = np.moveaxis(x, dim, -1).reshape(-1, x.shape[dim])
    for g, v in zip(slices, values, strict=True):
        pick = getattr(np, func)(v)
        assert sorted(g) == [0.0] * (len(g) - 1) + [1.0] and v[np.argmax(g)] == pick
    # ... the index torch.max/min(x, dim) returns
    indices = getattr(torch, func)(torch.tensor(x), dim).indices
    one_hot = torch.zeros(x.shape, dtype=torch.float64).scatter_(dim, indices.unsqueeze(dim), 1.0)
    assert grad.tolist() == one_hot.tolist()
    assert notes(r.variables["x"].notes) == [tie_note(func, "0, 1", 2)]
    assert r.agree is True


def test_max_without_a_tie_has_no_note():
    r = ag.grad("max(x) + sum(min(y, 0))", x="[1.0, 3.0, 2.0]", y="[[1.0, 5.0], [2.0, 4.0]]")
    assert_grad(r, "x", [0.0, 1.0, 0.0])
    assert_grad(r, "y", [[1.0, 0.0], [0.0, 1.0]])
    assert notes(r.variables["x"].notes) == notes(r.variables["y"].notes) == []


def test_rich_note_at_a_tie():
    run = cli("grad", "max(x)", "--x", "[1.0, 3.0, 3.0]")
    assert run.exit_code == 0
    flat = " ".join(run.stdout.split())
    assert f"note (x): {tie_note('max', '0.5', 2)}" in flat
    assert run.stdout.rstrip().endswith("✓ autograd and SymPy agree")


# --- matrix products: every torch.matmul case -----------------------------------------------

RNG = np.random.default_rng(7)


def small(*shape: int) -> np.ndarray:
    """Small numbers with few binary digits, so products are exact in float64."""
    return RNG.integers(-4, 5, size=shape) / 2.0


def swap(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


# (shape of A, shape of B, dA, dB) for out = sum(C * (A @ B)), C of the product's shape;
# the closed forms are written out per case with einsum, as PyTorch defines each case
MATMUL = {
    "vector @ vector": ((3,), (3,), lambda a, b, c: c * b, lambda a, b, c: c * a),
    "matrix @ vector": (
        (2, 3), (3,), lambda a, b, c: np.outer(c, b), lambda a, b, c: a.T @ c
    ),
    "vector @ matrix": (
        (2,), (2, 3), lambda a, b, c: b @ c, lambda a, b, c: np.outer(a, c)
    ),
    "matrix @ matrix": ((2, 3), (3, 2), lambda a, b, c: c @ b.T, lambda a, b, c: a.T @ c),
    "batched @ batched": (
        (2, 2, 3),
        (2, 3, 2),
        lambda a, b, c: np.einsum("bij,bkj->bik", c, b),
        lambda a, b, c: np.einsum("bki,bkj->bij", a, c),
    ),
    "batched @ matrix (broadcast)": (
        (2, 2, 3),
        (3, 2),
        lambda a, b, c: np.einsum("bij,kj->bik", c, b),
        lambda a, b, c: np.einsum("bki,bkj->ij", a, c),  # summed over the batch
    ),
    "matrix @ batched (broadcast)": (
        (2, 3),
        (2, 3, 2),
        lambda a, b, c: np.einsum("bij,bkj->ik", c, b),
        lambda a, b, c: np.einsum("ki,bkj->bij", a, c),
    ),
    "vector @ batched": (
        (3,),
        (2, 3, 2),
        lambda a, b, c: np.einsum("bij,bj->i", b, c),
        lambda a, b, c: np.einsum("i,bj->bij", a, c),
    ),
    "batched @ vector": (
        (2, 2, 3),
        (3,),
        lambda a, b, c: np.einsum("bi,j->bij", c, b),
        lambda a, b, c: np.einsum("bij,bi->j", a, c),
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(MATMUL))
def test_matmul_case(case):
    shape_a, shape_b, da, db = MATMUL[case]
    a, b = small(*shape_a), small(*shape_b)
    product = np.matmul(a, b)
    c = small(*product.shape) + 0.25
    r = ag.grad("sum(C * (A @ B))", A=text(a), B=text(b), C=text(c), const=["C"], **F64)
    assert float(r.output) == pytest.approx(np.sum(c * product))
    assert_grad(r, "A", da(a, b, c))
    assert_grad(r, "B", db(a, b, c))
    assert r.expected_by == "SymPy" and r.agree is True


def test_vector_at_vector_is_a_scalar_with_the_other_as_gradient():
    r = ag.grad("v @ w", v="[1.0, 2.0, 3.0]", w="[1.0, -2.0, 3.0]")
    assert r.output.shape == () and float(r.output) == 6.0
    assert_grad(r, "v", [1.0, -2.0, 3.0])
    assert_grad(r, "w", [1.0, 2.0, 3.0])


# --- transpose, dot, norm -------------------------------------------------------------------


@pytest.mark.parametrize("transpose", ["T(A)", "A.T"])
def test_transpose_both_spellings(transpose):
    a, c = small(2, 3), small(3, 2)
    r = ag.grad(f"sum(C * {transpose})", A=text(a), C=text(c), const=["C"])
    assert_grad(r, "A", c.T)
    b = small(2, 2)
    r = ag.grad(f"sum({transpose} @ B)", A=text(a), B=text(b), **F64)
    # sum_ij (A^T B)_ij = sum_kij A_ki B_kj: dA_ki = sum_j B_kj, dB_kj = sum_i A_ki
    assert_grad(r, "A", np.repeat(b.sum(axis=1, keepdims=True), 3, axis=1))
    assert_grad(r, "B", np.repeat(a.sum(axis=1, keepdims=True), 2, axis=1))


def test_t_and_dot_t_give_the_same_document():
    values = {"A": "[[1.0, 2.0], [3.0, 4.0]]", "B": "[[1.0, 0.0], [2.0, 1.0]]"}
    first, second = ag.grad("sum(T(A) @ B)", values), ag.grad("sum(A.T @ B)", values)
    for name in ("A", "B"):
        assert first.grads[name].tolist() == second.grads[name].tolist()
    # sum(A^T B) = sum_k (sum_i A_ki)(sum_j B_kj) = 3*1 + 7*3
    assert float(first.output) == float(second.output) == 24.0


def test_dot_gradient_is_the_other_vector():
    x, y = np.array([3.0, -4.0, 0.5]), np.array([1.0, 2.0, -2.0])
    r = ag.grad("dot(x, y)", x=text(x), y=text(y), **F64)
    assert float(r.output) == float(np.dot(x, y))
    assert_grad(r, "x", y)
    assert_grad(r, "y", x)


@pytest.mark.parametrize("x", [[3.0, 4.0], [[1.0, 2.0], [2.0, -4.0]], [0.5, -1.5, 2.0]])
def test_norm_gradient_is_x_over_its_norm(x):
    x = np.array(x)
    r = ag.grad("norm(x)", x=text(x), **F64)
    assert float(r.output) == pytest.approx(np.sqrt(np.sum(x**2)))
    assert_grad(r, "x", x / np.sqrt(np.sum(x**2)))


# --- softmax, log_softmax, logsumexp --------------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_with_dim(dim):
    x = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 1.0]])
    c = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 0.0]])
    s = softmax(x, dim)
    r = ag.grad(f"sum(c * softmax(x, {dim}))", x=text(x), c=text(c), const=["c"], **F64)
    assert float(r.output) == pytest.approx(np.sum(c * s))
    # J^T c for softmax along dim: s * (c - sum(c * s, dim))
    assert_grad(r, "x", s * (c - np.sum(c * s, axis=dim, keepdims=True)))


@pytest.mark.parametrize("dim", [0, 1, -2])
def test_log_softmax_with_dim(dim):
    x = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 1.0]])
    c = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 0.0]])
    r = ag.grad(f"sum(c * log_softmax(x, {dim}))", x=text(x), c=text(c), const=["c"], **F64)
    assert float(r.output) == pytest.approx(np.sum(c * np.log(softmax(x, dim))))
    assert_grad(r, "x", c - softmax(x, dim) * np.sum(c, axis=dim, keepdims=True))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_logsumexp_gradient_is_softmax(dim):
    x = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 1.0]])
    c = np.array([2.0, -1.0, 0.5]) if dim == 0 else np.array([2.0, -1.0])
    r = ag.grad(f"sum(c * logsumexp(x, {dim}))", x=text(x), c=text(c), const=["c"], **F64)
    lse = np.log(np.sum(np.exp(x), axis=dim))
    assert float(r.output) == pytest.approx(np.sum(c * lse))
    assert_grad(r, "x", np.expand_dims(c, dim) * softmax(x, dim))
    r = ag.grad("logsumexp(v, 0)", v="[1.0, 2.0, 3.0]", **F64)
    assert_grad(r, "v", softmax(np.array([1.0, 2.0, 3.0]), 0))


# --- the three losses of the issue ----------------------------------------------------------

W = np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.25]])
XV, BV, YV = np.array([0.5, 1.5]), np.array([0.1, -0.2, 0.3]), np.array([1.0, 2.0, -1.0])
MSE = "mean((W @ x + b - y)**2)"
MSE_VALUES = {"W": text(W), "x": text(XV), "b": text(BV), "y": text(YV)}


def mse_closed(w, x, b, y) -> dict[str, np.ndarray]:
    """r = Wx + b - y, loss = |r|^2 / n: dW = 2/n r x^T, dx = 2/n W^T r, db = 2/n r, dy = -db."""
    r = w @ x + b - y
    n = r.size
    return {"W": 2 / n * np.outer(r, x), "x": 2 / n * w.T @ r, "b": 2 / n * r, "y": -2 / n * r}


CE = "-sum(t * log_softmax(z, 0))"
ZV, TV = np.array([1.0, 2.0, 0.5, -1.0]), np.array([0.0, 1.0, 0.0, 0.0])
L2W = np.array([[1.0, -2.0], [0.5, 3.0]])


def test_loss_mean_squared_error():
    result = ag.grad(MSE, MSE_VALUES, **F64)
    r = W @ XV + BV - YV
    assert float(result.output) == pytest.approx(np.mean(r**2))
    assert float(result.output_expected) == pytest.approx(np.mean(r**2))
    for name, closed in mse_closed(W, XV, BV, YV).items():
        assert_grad(result, name, closed)
    assert result.expected_by == "SymPy" and result.agree is True


def test_loss_cross_entropy():
    r = ag.grad(CE, z=text(ZV), t=text(TV), const=["t"], **F64)
    p = softmax(ZV, 0)
    assert float(r.output) == pytest.approx(-np.log(p[1]))
    assert_grad(r, "z", p - TV)  # softmax(z) - t for a one-hot t
    assert r.variables["t"].grad is None
    assert r.expected_by == "SymPy" and r.agree is True


def test_loss_cross_entropy_soft_labels_and_the_label_gradient():
    t = np.array([0.25, 0.5, 0.0, 0.25])
    r = ag.grad(CE, z=text(ZV), t=text(t), **F64)
    p = softmax(ZV, 0)
    assert_grad(r, "z", p * t.sum() - t)
    assert_grad(r, "t", -np.log(p))  # d/dt_i = -log_softmax(z)_i


def test_loss_l2_regularisation():
    r = ag.grad("sum(W**2)", W=text(L2W), **F64)
    assert float(r.output) == np.sum(L2W**2) == 14.25
    assert_grad(r, "W", 2 * L2W)
    assert r.variables["W"].derivative == "2*W"
    assert r.expected_by == "SymPy" and r.agree is True


@pytest.mark.parametrize(
    ("expression", "keywords", "closed"),
    [
        (MSE, MSE_VALUES, mse_closed(W, XV, BV, YV)),
        (CE, {"z": text(ZV), "t": text(TV), "const": ["t"]}, {"z": softmax(ZV, 0) - TV}),
        ("sum(W**2)", {"W": text(L2W)}, {"W": 2 * L2W}),
    ],
    ids=["mse", "cross-entropy", "l2"],
)
def test_losses_with_numeric_column(expression, keywords, closed):
    r = ag.grad(expression, **keywords, numeric=True)
    for name, value in closed.items():
        var = r.variables[name]
        np.testing.assert_allclose(var.grad, value, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(var.expected, value, rtol=1e-6, atol=1e-7)
        # central differences in float64: close to the closed form, with their own tolerance
        np.testing.assert_allclose(var.numeric, value, rtol=1e-6, atol=1e-6)
        assert var.numeric_agree is True and var.agree is True
    assert r.expected_by == "SymPy" and r.agree is True


def test_loss_l2_in_rich_output():
    run = cli("grad", "sum(W**2)", "--W", text(L2W))
    assert run.exit_code == 0
    rows = [" ".join(line.split()) for line in run.stdout.splitlines() if line.startswith("│ W")]
    # 2W = [[2, -4], [1, 6]], the value 14.25
    assert rows == ["│ W │ [[1, -2], │ [[2, -4], │ [[2, -4], │ 2*W │ 0 │ ✓ │"]
    assert "out [] 14.25 14.25 0 ✓" in " ".join(run.stdout.split())
    assert run.stdout.rstrip().endswith("✓ autograd and SymPy agree")


def test_loss_mse_in_rich_output_with_numeric():
    w = np.array([[1.0, 2.0], [3.0, -1.0]])
    run = cli("grad", MSE, "--W", text(w), "--x", "[0.5, 1.5]", "--b", "[0.5, -0.5]", "--y",
              "[1.0, 2.0]", "--numeric")  # fmt: skip
    assert run.exit_code == 0
    # r = Wx + b - y = [3.5, 0] + [0.5, -0.5] - [1, 2] = [3, -2.5], n = 2: dW = r x^T
    closed = mse_closed(w, np.array([0.5, 1.5]), np.array([0.5, -0.5]), np.array([1.0, 2.0]))
    assert closed["W"].tolist() == [[1.5, 4.5], [-1.25, -3.75]]
    lines = [" ".join(line.split()) for line in run.stdout.splitlines()]
    first = lines.index("│ W │ [[1, 2], │ [[1.5, │ [[1.5, │ [[1.5, │ ∂out/∂W[0, │ 0 │ ✓ SymPy │")
    # autograd, SymPy and central differences side by side, each [[1.5, 4.5], [-1.25, -3.75]]
    assert lines[first + 1].startswith("│ │ [3, -1]] │ 4.5], │ 4.5], │ 4.5], │")
    assert lines[first + 1].endswith("│ ✓ numeric │")
    assert lines[first + 2].startswith("│ │ │ [-1.25, │ [-1.25, │ [-1.25, │")
    assert "┃ input ┃ value ┃ (autograd) ┃ (SymPy) ┃ diff.) ┃ (SymPy) ┃ error ┃ check ┃" in lines
    assert run.stdout.rstrip().endswith("✓ autograd and SymPy, and the numeric check, agree")


# --- beyond the exact sizes: the numeric fallback -------------------------------------------

FALLBACK_NOTE = (
    "the exact SymPy check covers up to 256 input elements; this one has {n}; checked "
    "numerically instead (central differences, float64)"
)


def test_a_product_past_256_input_elements_is_checked_exactly():
    # products and reductions alone cost their terms, not their symbols (issue 29)
    # 17x17: 289 input elements (4,913 products; 20x20 made 8,000 for the same branch)
    r = ag.grad("sum(x @ x)", x="rand(17,17)", seed=1)
    assert r.expected_by == "SymPy"
    assert notes(r.notes) == []
    x = np.array(r.variables["x"].value)
    assert x.shape == (17, 17)
    # sum_ij (XX)_ij = 1^T X X 1: d/dX = 1 1^T X^T + X^T 1 1^T
    ones = np.ones((17, 17))
    closed = ones @ x.T + x.T @ ones
    var = r.variables["x"]
    np.testing.assert_allclose(var.grad, closed, rtol=1e-5)
    np.testing.assert_allclose(var.expected, closed, rtol=1e-6)
    assert var.agree is True and r.agree is True


def test_numeric_fallback_in_rich_output():
    run = cli("grad", "norm(x)", "--x", "linspace(1,2,400)")
    assert run.exit_code == 0
    flat = " ".join(run.stdout.split())
    assert "note: " + FALLBACK_NOTE.format(n=400) in flat
    assert run.stdout.rstrip().endswith("✓ autograd and the numeric check agree")


def test_the_input_cap_is_exact_at_256_elements_and_numeric_beyond():
    # sin: not products alone, so the cap of 256 input elements holds (issue 29)
    exact = ag.grad("dot(x, sin(y))", x="linspace(0,1,128)", y="linspace(1,2,128)")
    assert exact.expected_by == "SymPy" and notes(exact.notes) == []
    assert_grad(exact, "x", np.sin(np.linspace(1, 2, 128)), rtol=1e-6)
    beyond = ag.grad("dot(x, sin(y))", x="linspace(0,1,129)", y="linspace(1,2,129)")
    assert beyond.expected_by == "numeric"
    assert notes(beyond.notes) == [FALLBACK_NOTE.format(n=258)]
    slope = np.linspace(0, 1, 129) * np.cos(np.linspace(1, 2, 129))
    assert_grad(beyond, "y", slope, rtol=1e-6)
    assert beyond.agree is True


# --- bad input: one line, exit 2 ------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("sum(x, 2)", "--x", "[1.0, 2.0]"),
         "'sum(x, 2)': dim 2 is out of range for shape [2] (use -1..0)"),
        (("sum(mean(x, -3))", "--x", "ones(2,2)"),
         "'mean(x, -3)': dim -3 is out of range for shape [2, 2] (use -2..1)"),
        (("sum(x, 1)", "--x", "2.0"),
         "'sum(x, 1)': dim 1 is out of range for shape [] (use -1..0)"),
        (("sum(softmax(x))", "--x", "[1.0, 2.0]"),
         "softmax() needs its argument 'dim', e.g. softmax(x, 0)"),
        (("logsumexp(x)", "--x", "[1.0, 2.0]"),
         "logsumexp() needs its argument 'dim', e.g. logsumexp(x, 0)"),
        (("dot(A, A)", "--A", "ones(2,2)"),
         "dot(a, b) takes two 1-D tensors of the same length; 'dot(A, A)' has shapes [2, 2] "
         "and [2, 2] (use @ for matrices)"),
        (("dot(x, y)", "--x", "[1.0, 2.0]", "--y", "[1.0, 2.0, 3.0]"),
         "dot(a, b) takes two 1-D tensors of the same length; 'dot(x, y)' has shapes [2] and "
         "[3] (use @ for matrices)"),
        (("sum(x.t())", "--x", "ones(2,2,2)"),
         "'T(x)': T() and .t() transpose up to 2 dims; shape [2, 2, 2] has more; use "
         "transpose(x, 0, 1) or permute(x, ...)"),
        (("sum(A @ x)", "--A", "ones(2,3)", "--x", "[1.0, 2.0]"),
         "'A@x': shapes [2, 3] @ [2] do not match (3 columns against 2 rows)"),
        (("sum(A @ B)", "--A", "ones(2,3)", "--B", "ones(2,3)"),
         "'A@B': shapes [2, 3] @ [2, 3] do not match (3 columns against 2 rows)"),
        (("sum(x @ 2)", "--x", "[1.0, 2.0]"),
         "'x@2': @ needs tensors of at least 1 dimension, not shapes [2] and []; use * to scale"),
        (("sum(y @ x)", "--x", "[1.0, 2.0]", "--y", "3"),
         "'y@x': @ needs tensors of at least 1 dimension, not shapes [] and [2]; use * to scale"),
        (("norm(x, 'max')", "--x", "[1.0]"),  # p=0 is the count of non-zeros (issue 26)
         "p of norm() must be a number, inf, -inf (math.inf, float('inf')) or 'fro', not "
         "'max'"),
        (("dot(x)", "--x", "[1.0]"), "dot() needs its argument 'other', e.g. dot(x, y)"),
    ],
)  # fmt: skip
def test_bad_tensor_algebra_is_one_line_with_exit_2(args, message):
    run = cli("grad", *args)
    assert run.exit_code == 2 and run.stdout == ""
    assert run.stderr == f"Error: {message}\n"


# --- property: the MSE gradient for random small shapes -------------------------------------

finite = st.floats(-3, 3, allow_nan=False, allow_infinity=False)


@settings(
    max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data(), m=st.integers(1, 3), n=st.integers(1, 3))
def test_mse_gradient_equals_the_closed_form_for_any_small_shape(data, m, n):
    def draw(*shape: int) -> np.ndarray:
        size = int(np.prod(shape))
        flat = data.draw(st.lists(finite, min_size=size, max_size=size))
        return np.array(flat, dtype=np.float64).reshape(shape)

    w, x, b, y = draw(m, n), draw(n), draw(m), draw(m)
    r = ag.grad(MSE, W=text(w), x=text(x), b=text(b), y=text(y), **F64)
    assert float(r.output) == pytest.approx(np.mean((w @ x + b - y) ** 2), abs=1e-12)
    for name, closed in mse_closed(w, x, b, y).items():
        assert_grad(r, name, closed, rtol=1e-9)
    assert r.expected_by == "SymPy" and r.agree is True


# --- edge points: kinks and overflow ----------------------------------------------------------

NORM_NOTE = (
    "norm is not differentiable at the zero vector (nor the order-0 count where an element "
    "is 0); one-sided derivatives there: [-1, 1] "
    "(a real kink); PyTorch's value there: 0"
)


def test_norm_at_zero_is_pytorchs_subgradient_zero_with_a_note():
    r = ag.grad("norm(x)", x="[0.0, 0.0]")
    assert r.variables["x"].grad.tolist() == [0.0, 0.0]  # PyTorch's choice at the kink
    # a kink inside the domain: named as such, not as a NaN outside the domain
    assert notes(r.variables["x"].notes) == [
        f"{NORM_NOTE}; 2 element(s) checked to lie between them"
    ]
    assert r.agree is True


def test_cross_entropy_with_large_logits():
    # exp(1000) overflows float64, but the loss and its gradient are ordinary numbers
    r = ag.grad(CE, z="[1000.0, 0.0]", t="[0.0, 1.0]", const=["t"], dtype="float64")
    # loss = logsumexp(z) - z_1 = 1000 + log(1 + e^-1000) = 1000; grad = softmax(z) - t = [1, -1]
    assert float(r.output) == pytest.approx(1000.0)
    assert float(r.output_expected) == pytest.approx(1000.0)
    assert r.variables["z"].grad.tolist() == pytest.approx([1.0, -1.0])
    assert r.variables["z"].expected.tolist() == pytest.approx([1.0, -1.0])
    assert r.agree is True


def test_logsumexp_of_large_equal_values():
    r = ag.grad("logsumexp(x, 0)", x="[1000.0, 1000.0]", **F64)
    assert float(r.output_expected) == pytest.approx(1000 + np.log(2))
    assert_grad(r, "x", [0.5, 0.5])


def test_a_dim_may_be_written_with_a_plus_sign():
    plus = ag.grad("softmax(x, +1)", x="[[1.0, 2.0]]", weights="[[1.0, 0.0]]")
    plain = ag.grad("softmax(x, 1)", x="[[1.0, 2.0]]", weights="[[1.0, 0.0]]")
    assert plus.grads["x"].tolist() == plain.grads["x"].tolist()
    assert plus.agree is True
