"""Beyond one `.grad`: `jacobian` (one backward pass per output element, one-hot external
gradients), `hessian` (create_graph=True) and `derivative` (`grad --order K`), each against
hand-derived closed forms computed here with NumPy; `numeric` as a third opinion; the errors.

The numbers go through the Python API; the command line's own tests (rendering, option
parsing, error lines and exit codes) through the CLI."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import torch

import autogradcli as ag
from tests.conftest import cli

F64 = {"dtype": "float64"}


def block_of(result: Any, key: str) -> Any:
    """The block ``key`` of a ``DerivativeResult``."""
    found = {b.key: b for b in result.blocks}
    return found[key]


def assert_block(result: Any, key: str, closed: Any, rtol: float = 1e-10) -> None:
    """autograd, the torch.autograd.functional cross-check (where there is one) and the
    reference all equal the closed form."""
    block = block_of(result, key)
    closed = np.asarray(closed, dtype=np.float64)
    assert block.autograd.shape == closed.shape
    np.testing.assert_allclose(block.autograd, closed, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(block.expected, closed, rtol=rtol, atol=rtol)
    if block.cross is not None:
        np.testing.assert_allclose(block.cross, closed, rtol=rtol, atol=rtol)
        assert block.cross_agree is True
    assert block.agree is True  # the JSON document's "agree" of the block


def notes(result: Any) -> list[str]:
    return [str(n) for n in result.notes]


def softmax(z: np.ndarray, axis: int = 0) -> np.ndarray:
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def assert_error(args: tuple[str, ...], message: str) -> None:
    run = cli(*args)
    assert run.exit_code == 2 and run.stdout == ""
    assert run.stderr == f"Error: {message}\n"


# --- jacobian -------------------------------------------------------------------------------


def seed003_jacobian(x: np.ndarray) -> np.ndarray:
    """out_i = x_i * sum(x): d out_i / d x_j = delta_ij sum(x) + x_i."""
    return np.eye(x.size) * x.sum() + x[:, None]


def test_jacobian_of_seed003():
    r = ag.jacobian("x*sum(x)", x="[1.0, 2.0]", rows=False)
    assert seed003_jacobian(np.array([1.0, 2.0])).tolist() == [[4.0, 1.0], [2.0, 5.0]]
    assert r.kind == "jacobian" and r.output_shape == [2]
    assert_block(r, "x", [[4.0, 1.0], [2.0, 5.0]])
    assert block_of(r, "x").cross_name == "torch.autograd.functional.jacobian"
    assert r.expected_by == "SymPy" and r.rows == () and r.agree is True


def test_show_rows_one_hot_vectors_and_each_row_of_the_jacobian():
    x = np.array([1.0, 2.0, -0.5])
    closed = seed003_jacobian(x)
    r = ag.jacobian("x*sum(x)", x=x, rows=True, **F64)
    assert [row.index for row in r.rows] == [(0,), (1,), (2,)]
    for i, row in enumerate(r.rows):
        assert row.one_hot.tolist() == np.eye(3)[i].tolist()  # backward(e_i) gives row i: e_i^T J
        assert row.grads["x"].tolist() == pytest.approx(closed[i].tolist())
    assert_block(r, "x", closed)


def test_show_rows_in_rich_output():
    run = cli("jacobian", "x*sum(x)", "--x", "[1.0, 2.0]", "--show-rows")
    assert run.exit_code == 0
    lines = [" ".join(line.split()) for line in run.stdout.splitlines()]
    assert "┃ out index ┃ one-hot w ┃ x.grad = row ┃" in lines
    assert [line for line in lines if line.startswith("│ [")] == [
        "│ [0] │ [1, 0] │ [4, 1] │",
        "│ [1] │ [0, 1] │ [2, 5] │",
    ]
    assert "│ x │ [[4, 1], │ [[4, 1], │ [[4, 1], │ 0 │ ✓ │" in lines
    assert "│ │ [2, 5]] │ [2, 5]] │ [2, 5]] │ │ │" in lines
    assert lines[-1] == "✓ autograd and SymPy agree"
    assert "one-hot w" not in cli("jacobian", "x*sum(x)", "--x", "[1.0, 2.0]").stdout


def test_jacobian_of_softmax_along_dim_1_of_a_matrix():
    x = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 1.0]])
    s = softmax(x, 1)
    # d s_ij / d x_kl = delta_ik (delta_jl s_ij - s_ij s_il): per row, diag(s) - s s^T
    closed = np.zeros((2, 3, 2, 3))
    for i in range(2):
        closed[i, :, i, :] = np.diag(s[i]) - np.outer(s[i], s[i])
    r = ag.jacobian("softmax(x, 1)", x=x, rows=True, **F64)
    assert r.output_shape == [2, 3] and block_of(r, "x").autograd.shape == (2, 3, 2, 3)
    assert_block(r, "x", closed)
    assert [row.index for row in r.rows] == [(i, j) for i in range(2) for j in range(3)]
    for k, row in enumerate(r.rows):
        i, j = row.index
        assert row.one_hot.reshape(-1).tolist() == np.eye(6)[k].tolist()
        np.testing.assert_allclose(row.grads["x"], closed[i, j], rtol=1e-12, atol=1e-15)


def test_jacobian_with_several_inputs_and_numeric():
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    x = np.array([1.0, -1.0, 2.0])
    r = ag.jacobian("A @ x", A=a, x=x, numeric=True, **F64)
    # (Ax)_i = sum_l A_il x_l: d/dA_kl = delta_ik x_l, d/dx = A
    closed_a = np.einsum("ik,l->ikl", np.eye(2), x)
    assert_block(r, "A", closed_a)
    assert_block(r, "x", a)
    for key, closed in (("A", closed_a), ("x", a)):
        np.testing.assert_allclose(block_of(r, key).numeric, closed, rtol=1e-6, atol=1e-6)
        assert block_of(r, key).numeric_agree is True
    assert r.agree is True


def test_jacobian_of_a_program_with_numeric_in_rich_output():
    run = cli("jacobian", "x**2", "--x", "[1.0, 2.0, 3.0]", "--numeric")
    assert run.exit_code == 0
    lines = [" ".join(line.split()) for line in run.stdout.splitlines()]
    # diag(2x) from autograd, torch.autograd.functional, SymPy and central differences
    assert "│ x │ [[2, 0, 0], │ [[2, 0, 0], │ [[2, 0, 0], │ [[2, 0, 0], │ 0 │ ✓ │" in lines
    assert "│ │ [0, 0, 6]] │ [0, 0, 6]] │ [0, 0, 6]] │ [0, 0, 6]] │ │ │" in lines
    assert lines[-1] == "✓ autograd and SymPy, and the numeric check, agree"


def test_jacobian_of_a_scalar_output_is_the_gradient_and_const_drops_a_block():
    r = ag.jacobian("sum(x**2)", x="[1.0, 2.0]")
    assert r.output_shape == [] and [b.key for b in r.blocks] == ["x"]
    assert_block(r, "x", [2.0, 4.0])
    r = ag.jacobian("x*y", x="[1.0, 2.0]", y="3.0", const=["y"])
    assert [b.key for b in r.blocks] == ["x"]
    assert_block(r, "x", np.eye(2) * 3.0)


def test_jacobian_through_steps_of_a_program():
    w, x = np.array([[1.0, 2.0], [0.5, -1.0]]), np.array([1.0, -1.0])
    r = ag.jacobian("h = W @ x; softmax(h, 0)", W=w, x=x, **F64)
    s = softmax(w @ x)
    ds = np.diag(s) - np.outer(s, s)  # chain rule: d s / d h times d h / d (W, x)
    assert_block(r, "x", ds @ w)
    assert_block(r, "W", np.einsum("ik,l->ikl", ds, x))


def test_jacobian_at_a_max_tie_names_pytorchs_choice():
    r = ag.jacobian("max(x, 1)", x="[[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]]")
    block = block_of(r, "x")
    # all of row 0 goes to one of the tied elements; row 1 to its unique max at index 0
    row0, row1 = block.autograd
    assert row0[0].tolist() in ([0, 1, 0], [0, 0, 1]) and row0[1].tolist() == [0, 0, 0]
    assert row1.tolist() == [[0, 0, 0], [1, 0, 0]]
    # the tied entries are real kinks: the one-sided derivatives are 0 and 1
    assert block.excluded == 0 and block.agree is True
    assert notes(r) == [
        "max is not differentiable at a tie; one-sided derivatives there: [0, 1] (a real "
        "kink); PyTorch's value there: 0, 1; 2 element(s) checked to lie between them"
    ]


def test_jacobian_beyond_the_exact_entries_falls_back_to_numeric():
    x = np.linspace(-1, 1, 70)
    r = ag.jacobian("softmax(x, 0)", x="linspace(-1, 1, 70)")
    assert r.expected_by == "numeric"
    assert notes(r) == [
        "the exact SymPy check covers up to 4096 Jacobian entries (output elements x input "
        "elements); this one has 4900; checked numerically instead (central differences, float64)"
    ]
    s = softmax(x)
    closed = np.diag(s) - np.outer(s, s)
    np.testing.assert_allclose(block_of(r, "x").autograd, closed, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(block_of(r, "x").expected, closed, rtol=1e-5, atol=1e-9)
    assert r.agree is True


def test_jacobian_at_the_exact_entries_cap_is_still_sympy():
    # x @ x with x 8 x 8: 64 output elements x 64 input elements = 4096 entries
    x = np.arange(64.0).reshape(8, 8) / 16
    r = ag.jacobian("x @ x", x=x, **F64)
    assert r.expected_by == "SymPy" and r.notes == ()
    # d (XX)_ij / d X_kl = delta_ik X_lj + X_ik delta_jl
    eye = np.eye(8)
    closed = np.einsum("ik,lj->ijkl", eye, x) + np.einsum("ik,jl->ijkl", x, eye)
    assert_block(r, "x", closed)


# --- hessian --------------------------------------------------------------------------------


def test_hessian_of_two_scalars():
    r = ag.hessian("x**2*y + y**3", x="1", y="2")
    x, y = 1.0, 2.0  # [[2y, 2x], [2x, 6y]]
    assert [b.key for b in r.blocks] == ["x,x", "x,y", "y,x", "y,y"]
    for key, value in {"x,x": 2 * y, "x,y": 2 * x, "y,x": 2 * x, "y,y": 6 * y}.items():
        assert_block(r, key, value)
    assert block_of(r, "x,x").cross_name == "torch.autograd.functional.hessian"
    assert r.kind == "hessian" and r.expected_by == "SymPy" and r.agree is True


def test_hessian_of_a_sum_of_cubes_is_diagonal():
    x = np.array([1.0, -2.0, 0.5])
    r = ag.hessian("sum(x**3)", x=x)
    assert_block(r, "x,x", np.diag(6 * x))


def test_hessian_of_cross_entropy_with_numeric():
    z, t = np.array([1.0, 2.0, 0.5]), np.array([0.0, 1.0, 0.0])
    r = ag.hessian("-sum(t * log_softmax(z, 0))", z=z, t=t, const=["t"], numeric=True, **F64)
    p = softmax(z)
    closed = np.diag(p) - np.outer(p, p)  # the Hessian of logsumexp; t drops out (sum t = 1)
    assert [b.key for b in r.blocks] == ["z,z"]
    assert_block(r, "z,z", closed)
    np.testing.assert_allclose(block_of(r, "z,z").numeric, closed, rtol=1e-5, atol=1e-6)
    assert block_of(r, "z,z").numeric_agree is True and r.agree is True


def test_hessian_of_cross_entropy_mixed_blocks_with_the_labels():
    z, t = np.array([1.0, 2.0, 0.5]), np.array([0.25, 0.75, 0.0])
    r = ag.hessian("-sum(t * log_softmax(z, 0))", t=t, z=z, **F64)
    p = softmax(z)
    # d loss / d t_i = -log p_i, so d^2 / dt_i dz_j = p_j - delta_ij;
    # d^2 / dz^2 = sum(t) (diag(p) - p p^T)
    assert_block(r, "t,t", np.zeros((3, 3)))
    assert_block(r, "t,z", p[None, :] - np.eye(3))
    assert_block(r, "z,t", (p[None, :] - np.eye(3)).T)
    assert_block(r, "z,z", t.sum() * (np.diag(p) - np.outer(p, p)))


def test_hessian_of_a_quadratic_form_with_matrix_and_vector_inputs():
    w, x = np.array([[1.0, 2.0], [0.5, -1.0]]), np.array([1.0, -1.0])
    r = ag.hessian("sum((W @ x)**2)", W=w, x=x, numeric=True)
    eye, out = np.eye(2), w @ x
    closed = {
        "W,W": 2 * np.einsum("ik,j,l->ijkl", eye, x, x),  # 2 delta_ik x_j x_l
        "W,x": 2 * (np.einsum("jl,i->ijl", eye, out) + np.einsum("il,j->ijl", w, x)),
        "x,x": 2 * w.T @ w,
    }
    closed["x,W"] = np.transpose(closed["W,x"], (2, 0, 1))
    for key, value in closed.items():
        assert_block(r, key, value, rtol=1e-6)
        np.testing.assert_allclose(block_of(r, key).numeric, value, rtol=1e-5, atol=1e-6)
        assert block_of(r, key).numeric_agree is True


def test_hessian_rich_output_with_numeric():
    run = cli("hessian", "x**2*y + y**3", "--x", "1", "--y", "2", "--numeric")
    assert run.exit_code == 0
    lines = [" ".join(line.split()) for line in run.stdout.splitlines()]
    assert "Hessian d² out / d a d b, shaped a.shape + b.shape" in lines
    rows = [line for line in lines if line[:4] in ("│ x,", "│ y,")]
    assert rows == [
        "│ x,x │ 4 │ 4 │ 4 │ 4 │ 0 │ ✓ │",
        "│ x,y │ 2 │ 2 │ 2 │ 2 │ 0 │ ✓ │",
        "│ y,x │ 2 │ 2 │ 2 │ 2 │ 0 │ ✓ │",
        "│ y,y │ 12 │ 12 │ 12 │ 12 │ 0 │ ✓ │",
    ]
    assert lines[-1] == "✓ autograd and SymPy, and the numeric check, agree"


# --- derivative (grad --order K) ------------------------------------------------------------


def test_order_2_of_x_cubed_is_12():
    r = ag.derivative("x**3", x="2", order=2)
    assert r.kind == "order 2" and r.derivatives == {"x": "6*x"}
    assert_block(r, "x", 12.0)
    assert block_of(r, "x").cross is None and r.agree is True


def test_order_2_rich_output():
    run = cli("grad", "x**3", "--x", "2", "--order", "2")
    assert run.exit_code == 0
    lines = [" ".join(line.split()) for line in run.stdout.splitlines()]
    assert "derivative of order 2, elementwise" in lines
    assert "│ x │ 12 │ 12 │ 0 │ ✓ │" in lines
    assert lines[-2:] == ["SymPy: d^2 out / dx^2 = 6*x", "✓ autograd and SymPy agree"]


def test_order_2_of_a_broadcast_input_is_the_sum_and_its_text_says_so():
    # y = 3 broadcast against x = [1, 2]: d^2/dy^2 is 2*x**2 summed over x's elements
    r = ag.derivative("x**2*y**2", x="[1, 2]", y="3", order=2, **F64)
    assert r.derivatives == {"x": "2*y**2", "y": "sum(2*x**2)"}
    assert r.latex["y"] == r"\sum \left(2 x^{2}\right)"
    assert_block(r, "y", 2 * 1**2 + 2 * 2**2)
    assert_block(r, "x", np.array([18.0, 18.0]))
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)  # PyTorch itself, not the tool
    y = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
    (first,) = torch.autograd.grad((x**2 * y**2).sum(), y, create_graph=True)
    (second,) = torch.autograd.grad(first, y)
    assert block_of(r, "y").autograd == second.item() == 10.0
    run = cli("grad", "x**2*y**2", "--x", "[1, 2]", "--y", "3", "--order", "2", "--json")
    assert run.exit_code == 0 and run.json()["derivatives"]["y"] == "sum(2*x**2)"


def test_order_1_is_the_plain_gradient_and_weights_ones_goes_with_any_order():
    # the CLI's dispatch: `grad --order 1` is grad itself (the numbers are checked through
    # the API below); `--weights ones` does not clash with --order K
    first = cli("grad", "sin(x)", "--x", "[0.5, 1.0]", "--order", "1", "--weights", "ones",
                "--json")  # fmt: skip
    assert first.exit_code == 0 and first.json()["command"] == "grad"
    assert list(first.json()["variables"]) == ["x"]
    second = cli("grad", "sin(x)", "--x", "[0.5, 1.0]", "--order", "2", "--weights", "ones",
                 "--json")  # fmt: skip
    assert second.exit_code == 0 and second.json()["kind"] == "order 2"


X = np.array([0.5, 1.0, -2.0])
SIN_ORDERS = {1: np.cos(X), 2: -np.sin(X), 3: -np.cos(X), 4: np.sin(X)}


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_orders_of_sin_cycle_through_cos_minus_sin_minus_cos_sin(order):
    closed = SIN_ORDERS[order]
    if order == 1:  # the plain gradient, as `grad --order 1 --weights ones` runs it
        r = ag.grad("sin(x)", x=X, weights="ones", **F64)
        np.testing.assert_allclose(r.grads["x"], closed, rtol=1e-12)
        np.testing.assert_allclose(r.expected["x"], closed, rtol=1e-12)
    else:
        r = ag.derivative("sin(x)", x=X, order=order, **F64)
        assert r.kind == f"order {order}"
        assert_block(r, "x", closed, rtol=1e-12)
    assert r.agree is True


@pytest.mark.parametrize("order", [2, 3, 4])
def test_orders_of_sin_with_numeric(order):
    r = ag.derivative("sin(x)", x=X, order=order, numeric=True, **F64)
    block = block_of(r, "x")
    np.testing.assert_allclose(block.numeric, SIN_ORDERS[order], rtol=1e-4, atol=1e-5)
    assert block.numeric_agree is True and r.agree is True


def test_order_3_of_x_to_the_fifth():
    x = np.array([1.0, 2.0, -0.5])
    r = ag.derivative("x**5", x=x, order=3, numeric=True)
    assert r.derivatives == {"x": "60*x**2"}
    assert_block(r, "x", 60 * x**2, rtol=1e-6)
    np.testing.assert_allclose(block_of(r, "x").numeric, 60 * x**2, rtol=1e-4)
    assert block_of(r, "x").numeric_agree is True


@pytest.mark.parametrize("order", [2, 3])
def test_order_of_a_scalar_broadcast_over_a_vector_sums_over_the_broadcast(order):
    x, y = np.array([1.0, 2.0, 3.0]), 2.0
    r = ag.derivative("x * y**3", x=x, y="2", order=order, numeric=True)
    # d^2/dy^2 (x_i y^3) = 6 x_i y, d^3/dy^3 = 6 x_i: summed over the elements y reaches
    closed_y = {2: 6 * y * x.sum(), 3: 6 * x.sum()}[order]
    assert closed_y == {2: 72.0, 3: 36.0}[order]
    assert_block(r, "y", closed_y)
    assert_block(r, "x", np.zeros(3))  # linear in x
    assert block_of(r, "y").numeric.shape == ()
    assert float(block_of(r, "y").numeric) == pytest.approx(closed_y, rel=1e-6)
    assert block_of(r, "y").numeric_agree is True and r.agree is True


def test_order_of_a_vector_broadcast_over_a_column():
    x, y = np.array([1.0, 2.0, 3.0]), np.array([[1.0], [2.0]])
    r = ag.derivative("x**3 * y", x=x, y=y, order=2)
    # out_ij = x_j^3 y_i: d^2/dx_j^2 summed over i = 6 x_j sum(y)
    assert_block(r, "x", 6 * x * y.sum())
    assert_block(r, "y", np.zeros((2, 1)))


# --- bad input: one line, exit 2 ------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("hessian", "x**2", "--x", "[1.0, 2.0]"),
         "the Hessian needs a one-element output; this one has shape [2]; reduce it with "
         "sum(...) or mean(...), or use autograd-cli jacobian"),
        (("hessian", "sum(x**3)", "--x", "[1.0, 2.0, 3.0]", "--max-entries", "8"),
         "the Hessian would have 9 entries; the limit is 8 (raise it with --max-entries)"),
        (("jacobian", "x*sum(x)", "--x", "[1.0, 2.0, 3.0]", "--max-entries", "8"),
         "the Jacobian would have 9 entries; the limit is 8 (raise it with --max-entries)"),
        (("jacobian", "x", "--x", "ones(400)"),
         "the Jacobian would have 160000 entries; the limit is 100000 (raise it with "
         "--max-entries)"),
        (("jacobian", "x**2", "--x", "[1.0, 2.0]", "--const", "x"),
         "every input is --const: there is nothing to differentiate"),
        (("grad", "x**3", "--x", "2", "--order", "9"),
         "--order takes a whole number from 1 to 8, not '9'"),
        (("grad", "x**3", "--x", "2", "--order", "0"),
         "--order takes a whole number from 1 to 8, not '0'"),
        (("grad", "x**3", "--x", "2", "--order", "2", "--explain"),
         "--order 2 cannot be combined with --explain"),
        (("grad", "x**3", "--x", "2", "--order", "3", "--inspect"),
         "--order 3 cannot be combined with --inspect"),
        (("grad", "x**3", "--x", "2", "--order", "2", "--weights", "[1.0]"),
         "--order 2 cannot be combined with --weights"),
        (("grad", "sum(x**3)", "--x", "[1.0, 2.0]", "--order", "2"),
         "--order works on elementwise expressions (no sum, mean or matrix algebra); for "
         "second derivatives of any scalar output use autograd-cli hessian"),
        (("grad", "x @ x", "--x", "[1.0, 2.0]", "--order", "2"),
         "--order works on elementwise expressions (no sum, mean or matrix algebra); for "
         "second derivatives of any scalar output use autograd-cli hessian"),
        (("grad", "softmax(x, 0)", "--x", "[1.0, 2.0]", "--order", "2"),
         "--order works on elementwise expressions (no sum, mean or matrix algebra); for "
         "second derivatives of any scalar output use autograd-cli hessian"),
    ],
)  # fmt: skip
def test_errors_are_one_line_with_exit_2(args, message):
    assert_error(args, message)


def test_errors_with_json_are_an_error_document_too():
    run = cli("hessian", "x**2", "--x", "[1.0, 2.0]", "--json")
    assert run.exit_code == 2 and run.stderr.startswith("Error: the Hessian needs")
    assert json.loads(run.stdout)["error"]["message"].startswith("the Hessian needs")


# --- found by the tests, then fixed: regression tests -----------------------------------


@pytest.mark.parametrize("order", [7, 8])
def test_high_orders_with_numeric_agree(order):
    x = np.array([0.5, 1.0, -2.0])
    closed = {7: -np.cos(x), 8: np.sin(x)}[order]
    r = ag.derivative("sin(x)", x=x, order=order, numeric=True, **F64)
    assert_block(r, "x", closed, rtol=1e-12)
    assert block_of(r, "x").numeric_agree is True
    assert r.agree is True  # exit code 0


@pytest.mark.parametrize(
    ("command", "expr", "options", "key", "closed"),
    [
        ("hessian", "sum(relu(x)**2)", {"x": "[1.0, -2.0]"}, "x,x", [[2.0, 0.0], [0.0, 0.0]]),
        ("hessian", "max(x)**2", {"x": "[1.0, 3.0, 2.0]"}, "x,x", np.diag([0.0, 2.0, 0.0])),
        ("derivative", "relu(x)**2", {"x": "[1.0, -2.0]", "order": 2}, "x", [2.0, 0.0]),
        ("derivative", "abs(x)**3", {"x": "[1.0, -2.0]", "order": 2}, "x", [6.0, 12.0]),
    ],
    ids=["hessian-relu", "hessian-max", "order-relu", "order-abs"],
)
def test_second_derivatives_through_kinks_away_from_the_kink(command, expr, options, key, closed):
    # (relu(x)^2)'' = 2 H(x), (|x|^3)'' = 6|x|, max(x)^2 = x_1^2 near [1, 3, 2]: SymPy's
    # DiracDelta terms vanish away from the kink
    r = getattr(ag, command)(expr, **options)
    assert_block(r, key, closed, rtol=1e-6)
    assert r.notes == () and r.agree is True


def test_second_derivative_of_relu_at_the_kink_is_excluded_with_a_note():
    r = ag.hessian("sum(relu(x)**2)", x="[0.0, 1.0]")
    block = block_of(r, "x,x")
    assert block.autograd.tolist() == [[0.0, 0.0], [0.0, 2.0]]  # PyTorch: relu'(0) = 0
    assert block.excluded == 1 and r.agree is True
    assert notes(r) == [
        "relu'(0) is undefined (SymPy's Heaviside(0) is 1/2); PyTorch's value there: 0; 1 "
        "element(s) at that point are left out of the check"
    ]


def test_second_derivative_of_abs_cubed_at_zero_is_zero_and_checked():
    r = ag.derivative("abs(x)**3", x="[0.0, -2.0]", order=2)
    assert block_of(r, "x").expected.tolist() == [0.0, 12.0]  # 6|x|
    assert_block(r, "x", [0.0, 12.0])
    assert block_of(r, "x").excluded == 0 and r.notes == ()


@pytest.mark.parametrize(
    ("expr", "x", "order"), [("x**2", "100", 5), ("x**3", "2", 8), ("exp(x)", "30", 3)]
)
def test_numeric_order_tolerance_covers_float64_rounding_of_the_differences(expr, x, order):
    # the K-th differences divide by h**K: x**2 at 100 gives about 1e-3 for a 5th derivative
    # of 0; the tolerance grows by the rounding bound and the note says by how much
    r = ag.derivative(expr, x=x, order=order, numeric=True, **F64)
    assert (r.agree, block_of(r, "x").numeric_agree) == (True, True)
    assert f"differences of order {order} amplify float64 rounding" in " ".join(notes(r))


def test_numeric_derivative_rounding_bound_covers_the_error():
    from autogradcli.reference.numeric import numeric_derivative_with_error

    x = np.array([100.0, 1000.0])
    value, bound = numeric_derivative_with_error(lambda t: t**2, x, 5)
    assert np.all(np.abs(value) <= bound)  # the true 5th derivative is 0
    assert np.all(bound < 1e3 * np.abs(value).max() + 1)  # and the bound is not absurdly loose


def test_numeric_order_still_catches_a_wrong_derivative(wrong_sin):
    r = ag.derivative("sin(x)", x="0.5", order=2, numeric=True)
    assert r.agree is False  # exit code 1
    assert block_of(r, "x").numeric_agree is False


@pytest.mark.parametrize(
    ("command", "expr", "options"),
    [
        ("jacobian", "exp(x)", {}),
        ("hessian", "sum(exp(x))", {}),
        ("derivative", "exp(x)", {"order": 2}),
    ],
    ids=["jacobian", "hessian", "order"],
)
def test_float32_overflow_in_derivatives_is_a_named_disagreement(command, expr, options):
    r = getattr(ag, command)(expr, x="[1, 100]", **options)
    block = r.blocks[0]
    assert (r.agree, block.verdict) == (False, "disagree")  # exit code 1
    assert block.cause.code == "overflow"
    message = block.to_dict()["cause"]["message"]
    assert message.startswith("overflow: exp(x) reaches 2.68812e+43, past")


def test_a_real_mismatch_in_a_jacobian_is_not_called_rounding(wrong_sin):
    r = ag.jacobian("sin(x)", x="[0.5, 1.0]")
    assert (r.agree, block_of(r, "x").rounding) == (False, None)  # exit code 1
    assert block_of(r, "x").cause.code == "mismatch"


def test_hessian_at_a_tie_names_max_in_its_note():
    said = " ".join(notes(ag.hessian("max(x)**2", x="[1.0, 1.0]")))
    assert "the second derivative at a kink (relu or abs at 0, max or min at a tie)" in said


@pytest.mark.parametrize("command", ["jacobian", "hessian"])
def test_jacobian_and_hessian_take_rtol_and_atol(command):
    doc = cli(command, "sum(x**2)", "--x", "[1.0, 2.0]", "--rtol", "0.01", "--atol", "0.5",
              "--json").json()  # fmt: skip
    assert doc["tolerance"] == {"rtol": 0.01, "atol": 0.5}


def test_a_hessian_past_every_budget_is_shown_unchecked():
    """200 inputs: SymPy's exact Hessian stops at 64 and the numeric one would need 80,400
    forward passes, so autograd's Hessian comes back with only torch's cross-check."""
    r = ag.hessian("sum(x**3)", x="linspace(0, 1, 200)")
    block = r.blocks[0]
    x = np.linspace(0, 1, 200)
    np.testing.assert_allclose(block.autograd, np.diag(6 * x), rtol=1e-6, atol=1e-6)
    assert (r.verdict, block.verdict, block.cross_agree) == ("unchecked", "unchecked", True)
    assert not r.agree and not block.agree and r.expected_by == "none"
    assert [n.code for n in r.notes] == ["unchecked"]
    run = cli("hessian", "sum(x**3)", "--x", "linspace(0, 1, 200)")
    assert run.exit_code == 1
    assert " ".join(run.stdout.split()).endswith(
        "? not checked: autograd's hessian is shown without a reference "
        "(torch.autograd.functional agrees); exit code 1"
    )
