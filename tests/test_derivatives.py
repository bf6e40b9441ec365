"""Beyond one `.grad`: `jacobian` (one backward pass per output element, one-hot external
gradients), `hessian` (create_graph=True) and `grad --order K`, each against hand-derived
closed forms computed here with NumPy; `--numeric` as a third opinion; the errors."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from tests.conftest import cli

F64 = ("--dtype", "float64")


def text(value: Any) -> str:
    return json.dumps(np.asarray(value, dtype=np.float64).tolist())


def run_json(*args: str, code: int = 0) -> dict[str, Any]:
    run = cli(*args, "--json")
    assert run.exit_code == code, (run.stdout, run.stderr)
    return run.json()


def assert_block(doc: dict[str, Any], key: str, closed: Any, rtol: float = 1e-10) -> None:
    """autograd, the torch.autograd.functional cross-check (where there is one) and the
    reference all equal the closed form."""
    block = doc["blocks"][key]
    closed = np.asarray(closed, dtype=np.float64)
    assert block["shape"] == list(closed.shape)
    np.testing.assert_allclose(block["autograd"], closed, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(block["expected"], closed, rtol=rtol, atol=rtol)
    if block["cross_check"] is not None:
        np.testing.assert_allclose(block["cross_check"]["value"], closed, rtol=rtol, atol=rtol)
        assert block["cross_check"]["agree"] is True
    assert block["agree"] is True


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
    doc = run_json("jacobian", "x*sum(x)", "--x", "[1.0, 2.0]")
    assert seed003_jacobian(np.array([1.0, 2.0])).tolist() == [[4.0, 1.0], [2.0, 5.0]]
    assert doc["kind"] == "jacobian" and doc["output_shape"] == [2]
    assert_block(doc, "x", [[4.0, 1.0], [2.0, 5.0]])
    assert doc["blocks"]["x"]["cross_check"]["by"] == "torch.autograd.functional.jacobian"
    assert doc["expected_by"] == "SymPy" and doc["rows"] == [] and doc["agree"] is True


def test_show_rows_one_hot_vectors_and_each_row_of_the_jacobian():
    x = np.array([1.0, 2.0, -0.5])
    closed = seed003_jacobian(x)
    doc = run_json("jacobian", "x*sum(x)", "--x", text(x), "--show-rows", *F64)
    assert [r["index"] for r in doc["rows"]] == [[0], [1], [2]]
    for i, row in enumerate(doc["rows"]):
        assert row["one_hot"] == np.eye(3)[i].tolist()  # backward(e_i) gives row i: e_i^T J
        assert row["grads"]["x"] == pytest.approx(closed[i].tolist())
    assert_block(doc, "x", closed)


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
    doc = run_json("jacobian", "softmax(x, 1)", "--x", text(x), "--show-rows", *F64)
    assert doc["output_shape"] == [2, 3] and doc["blocks"]["x"]["shape"] == [2, 3, 2, 3]
    assert_block(doc, "x", closed)
    assert [r["index"] for r in doc["rows"]] == [[i, j] for i in range(2) for j in range(3)]
    for k, row in enumerate(doc["rows"]):
        i, j = row["index"]
        assert np.array(row["one_hot"]).reshape(-1).tolist() == np.eye(6)[k].tolist()
        np.testing.assert_allclose(row["grads"]["x"], closed[i, j], rtol=1e-12, atol=1e-15)


def test_jacobian_with_several_inputs_and_numeric():
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    x = np.array([1.0, -1.0, 2.0])
    doc = run_json("jacobian", "A @ x", "--A", text(a), "--x", text(x), "--numeric", *F64)
    # (Ax)_i = sum_l A_il x_l: d/dA_kl = delta_ik x_l, d/dx = A
    closed_a = np.einsum("ik,l->ikl", np.eye(2), x)
    assert_block(doc, "A", closed_a)
    assert_block(doc, "x", a)
    for key, closed in (("A", closed_a), ("x", a)):
        np.testing.assert_allclose(doc["blocks"][key]["numeric"], closed, rtol=1e-6, atol=1e-6)
        assert doc["blocks"][key]["numeric_agree"] is True
    assert doc["agree"] is True


def test_jacobian_of_a_program_with_numeric_in_rich_output():
    run = cli("jacobian", "x**2", "--x", "[1.0, 2.0, 3.0]", "--numeric")
    assert run.exit_code == 0
    lines = [" ".join(line.split()) for line in run.stdout.splitlines()]
    # diag(2x) from autograd, torch.autograd.functional, SymPy and central differences
    assert "│ x │ [[2, 0, 0], │ [[2, 0, 0], │ [[2, 0, 0], │ [[2, 0, 0], │ 0 │ ✓ │" in lines
    assert "│ │ [0, 0, 6]] │ [0, 0, 6]] │ [0, 0, 6]] │ [0, 0, 6]] │ │ │" in lines
    assert lines[-1] == "✓ autograd and SymPy, and the numeric check, agree"


def test_jacobian_of_a_scalar_output_is_the_gradient_and_const_drops_a_block():
    doc = run_json("jacobian", "sum(x**2)", "--x", "[1.0, 2.0]")
    assert doc["output_shape"] == [] and list(doc["blocks"]) == ["x"]
    assert_block(doc, "x", [2.0, 4.0])
    doc = run_json("jacobian", "x*y", "--x", "[1.0, 2.0]", "--y", "3.0", "--const", "y")
    assert list(doc["blocks"]) == ["x"]
    assert_block(doc, "x", np.eye(2) * 3.0)


def test_jacobian_through_steps_of_a_program():
    w, x = np.array([[1.0, 2.0], [0.5, -1.0]]), np.array([1.0, -1.0])
    doc = run_json("jacobian", "h = W @ x; softmax(h, 0)", "--W", text(w), "--x", text(x), *F64)
    s = softmax(w @ x)
    ds = np.diag(s) - np.outer(s, s)  # chain rule: d s / d h times d h / d (W, x)
    assert_block(doc, "x", ds @ w)
    assert_block(doc, "W", np.einsum("ik,l->ikl", ds, x))


def test_jacobian_at_a_max_tie_names_pytorchs_choice():
    doc = run_json("jacobian", "max(x, 1)", "--x", "[[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]]")
    block = doc["blocks"]["x"]
    # all of row 0 goes to one of the tied elements; row 1 to its unique max at index 0
    row0, row1 = np.array(block["autograd"])
    assert row0[0].tolist() in ([0, 1, 0], [0, 0, 1]) and row0[1].tolist() == [0, 0, 0]
    assert row1.tolist() == [[0, 0, 0], [1, 0, 0]]
    assert block["excluded"] == 2 and block["agree"] is True
    assert doc["notes"] == [
        "max is not differentiable at a tie; PyTorch's value there: 0, 1; 2 element(s) at that "
        "point are left out of the check"
    ]


def test_jacobian_beyond_the_exact_entries_falls_back_to_numeric():
    x = np.linspace(-1, 1, 70)
    doc = run_json("jacobian", "softmax(x, 0)", "--x", "linspace(-1, 1, 70)")
    assert doc["expected_by"] == "numeric"
    assert doc["notes"] == [
        "the exact SymPy check covers up to 4096 Jacobian entries (output elements x input "
        "elements); this one has 4900; checked numerically instead (central differences, float64)"
    ]
    s = softmax(x)
    closed = np.diag(s) - np.outer(s, s)
    np.testing.assert_allclose(doc["blocks"]["x"]["autograd"], closed, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(doc["blocks"]["x"]["expected"], closed, rtol=1e-5, atol=1e-9)
    assert doc["agree"] is True


def test_jacobian_at_the_exact_entries_cap_is_still_sympy():
    # x @ x with x 8 x 8: 64 output elements x 64 input elements = 4096 entries
    x = np.arange(64.0).reshape(8, 8) / 16
    doc = run_json("jacobian", "x @ x", "--x", text(x), *F64)
    assert doc["expected_by"] == "SymPy" and doc["notes"] == []
    # d (XX)_ij / d X_kl = delta_ik X_lj + X_ik delta_jl
    eye = np.eye(8)
    closed = np.einsum("ik,lj->ijkl", eye, x) + np.einsum("ik,jl->ijkl", x, eye)
    assert_block(doc, "x", closed)


# --- hessian --------------------------------------------------------------------------------


def test_hessian_of_two_scalars():
    doc = run_json("hessian", "x**2*y + y**3", "--x", "1", "--y", "2")
    x, y = 1.0, 2.0  # [[2y, 2x], [2x, 6y]]
    assert list(doc["blocks"]) == ["x,x", "x,y", "y,x", "y,y"]
    for key, value in {"x,x": 2 * y, "x,y": 2 * x, "y,x": 2 * x, "y,y": 6 * y}.items():
        assert_block(doc, key, value)
    assert doc["blocks"]["x,x"]["cross_check"]["by"] == "torch.autograd.functional.hessian"
    assert doc["kind"] == "hessian" and doc["expected_by"] == "SymPy" and doc["agree"] is True


def test_hessian_of_a_sum_of_cubes_is_diagonal():
    x = np.array([1.0, -2.0, 0.5])
    doc = run_json("hessian", "sum(x**3)", "--x", text(x))
    assert_block(doc, "x,x", np.diag(6 * x))


def test_hessian_of_cross_entropy_with_numeric():
    z, t = np.array([1.0, 2.0, 0.5]), np.array([0.0, 1.0, 0.0])
    doc = run_json("hessian", "-sum(t * log_softmax(z, 0))", "--z", text(z), "--t", text(t),
                   "--const", "t", "--numeric", *F64)  # fmt: skip
    p = softmax(z)
    closed = np.diag(p) - np.outer(p, p)  # the Hessian of logsumexp; t drops out (sum t = 1)
    assert list(doc["blocks"]) == ["z,z"]
    assert_block(doc, "z,z", closed)
    np.testing.assert_allclose(doc["blocks"]["z,z"]["numeric"], closed, rtol=1e-5, atol=1e-6)
    assert doc["blocks"]["z,z"]["numeric_agree"] is True and doc["agree"] is True


def test_hessian_of_cross_entropy_mixed_blocks_with_the_labels():
    z, t = np.array([1.0, 2.0, 0.5]), np.array([0.25, 0.75, 0.0])
    doc = run_json("hessian", "-sum(t * log_softmax(z, 0))", "--t", text(t), "--z", text(z), *F64)
    p = softmax(z)
    # d loss / d t_i = -log p_i, so d^2 / dt_i dz_j = p_j - delta_ij;
    # d^2 / dz^2 = sum(t) (diag(p) - p p^T)
    assert_block(doc, "t,t", np.zeros((3, 3)))
    assert_block(doc, "t,z", p[None, :] - np.eye(3))
    assert_block(doc, "z,t", (p[None, :] - np.eye(3)).T)
    assert_block(doc, "z,z", t.sum() * (np.diag(p) - np.outer(p, p)))


def test_hessian_of_a_quadratic_form_with_matrix_and_vector_inputs():
    w, x = np.array([[1.0, 2.0], [0.5, -1.0]]), np.array([1.0, -1.0])
    doc = run_json("hessian", "sum((W @ x)**2)", "--W", text(w), "--x", text(x), "--numeric")
    eye, r = np.eye(2), w @ x
    closed = {
        "W,W": 2 * np.einsum("ik,j,l->ijkl", eye, x, x),  # 2 delta_ik x_j x_l
        "W,x": 2 * (np.einsum("jl,i->ijl", eye, r) + np.einsum("il,j->ijl", w, x)),
        "x,x": 2 * w.T @ w,
    }
    closed["x,W"] = np.transpose(closed["W,x"], (2, 0, 1))
    for key, value in closed.items():
        assert_block(doc, key, value, rtol=1e-6)
        np.testing.assert_allclose(doc["blocks"][key]["numeric"], value, rtol=1e-5, atol=1e-6)
        assert doc["blocks"][key]["numeric_agree"] is True


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


# --- grad --order K -------------------------------------------------------------------------


def test_order_2_of_x_cubed_is_12():
    doc = run_json("grad", "x**3", "--x", "2", "--order", "2")
    assert doc["kind"] == "order 2" and doc["derivatives"] == {"x": "6*x"}
    assert_block(doc, "x", 12.0)
    assert doc["blocks"]["x"]["cross_check"] is None and doc["agree"] is True


def test_order_2_rich_output():
    run = cli("grad", "x**3", "--x", "2", "--order", "2")
    assert run.exit_code == 0
    lines = [" ".join(line.split()) for line in run.stdout.splitlines()]
    assert "derivative of order 2, elementwise" in lines
    assert "│ x │ 12 │ 12 │ 0 │ ✓ │" in lines
    assert lines[-2:] == ["SymPy: d^2 out / dx^2 = 6*x", "✓ autograd and SymPy agree"]


X = np.array([0.5, 1.0, -2.0])
SIN_ORDERS = {1: np.cos(X), 2: -np.sin(X), 3: -np.cos(X), 4: np.sin(X)}


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_orders_of_sin_cycle_through_cos_minus_sin_minus_cos_sin(order):
    doc = run_json("grad", "sin(x)", "--x", text(X), "--order", str(order), "--weights", "ones",
                   *F64)  # fmt: skip
    closed = SIN_ORDERS[order]
    if order == 1:  # the plain gradient
        np.testing.assert_allclose(doc["variables"]["x"]["grad"], closed, rtol=1e-12)
        np.testing.assert_allclose(doc["variables"]["x"]["expected"], closed, rtol=1e-12)
    else:
        assert doc["kind"] == f"order {order}"
        assert_block(doc, "x", closed, rtol=1e-12)
    assert doc["agree"] is True


@pytest.mark.parametrize("order", [2, 3, 4])
def test_orders_of_sin_with_numeric(order):
    doc = run_json("grad", "sin(x)", "--x", text(X), "--order", str(order), "--numeric", *F64)
    block = doc["blocks"]["x"]
    np.testing.assert_allclose(block["numeric"], SIN_ORDERS[order], rtol=1e-4, atol=1e-5)
    assert block["numeric_agree"] is True and doc["agree"] is True


def test_order_3_of_x_to_the_fifth():
    x = np.array([1.0, 2.0, -0.5])
    doc = run_json("grad", "x**5", "--x", text(x), "--order", "3", "--numeric")
    assert doc["derivatives"] == {"x": "60*x**2"}
    assert_block(doc, "x", 60 * x**2, rtol=1e-6)
    np.testing.assert_allclose(doc["blocks"]["x"]["numeric"], 60 * x**2, rtol=1e-4)
    assert doc["blocks"]["x"]["numeric_agree"] is True


@pytest.mark.parametrize("order", [2, 3])
def test_order_of_a_scalar_broadcast_over_a_vector_sums_over_the_broadcast(order):
    x, y = np.array([1.0, 2.0, 3.0]), 2.0
    doc = run_json("grad", "x * y**3", "--x", text(x), "--y", "2", "--order", str(order),
                   "--numeric")  # fmt: skip
    # d^2/dy^2 (x_i y^3) = 6 x_i y, d^3/dy^3 = 6 x_i: summed over the elements y reaches
    closed_y = {2: 6 * y * x.sum(), 3: 6 * x.sum()}[order]
    assert closed_y == {2: 72.0, 3: 36.0}[order]
    assert_block(doc, "y", closed_y)
    assert_block(doc, "x", np.zeros(3))  # linear in x
    assert doc["blocks"]["y"]["numeric"] == pytest.approx(closed_y, rel=1e-6)
    assert doc["blocks"]["y"]["numeric_agree"] is True and doc["agree"] is True


def test_order_of_a_vector_broadcast_over_a_column():
    x, y = np.array([1.0, 2.0, 3.0]), np.array([[1.0], [2.0]])
    doc = run_json("grad", "x**3 * y", "--x", text(x), "--y", text(y), "--order", "2")
    # out_ij = x_j^3 y_i: d^2/dx_j^2 summed over i = 6 x_j sum(y)
    assert_block(doc, "x", 6 * x * y.sum())
    assert_block(doc, "y", np.zeros((2, 1)))


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
         "Invalid value for '--order': Input should be less than or equal to 8. See "
         "'root grad --help'."),
        (("grad", "x**3", "--x", "2", "--order", "0"),
         "Invalid value for '--order': Input should be greater than or equal to 1. See "
         "'root grad --help'."),
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
    run = cli("grad", "sin(x)", "--x", text(x), "--order", str(order), "--numeric", *F64,
              "--json")  # fmt: skip
    doc = run.json()
    assert_block(doc, "x", closed, rtol=1e-12)
    assert doc["blocks"]["x"]["numeric_agree"] is True
    assert run.exit_code == 0


@pytest.mark.parametrize(
    ("args", "key", "closed"),
    [
        (("hessian", "sum(relu(x)**2)", "--x", "[1.0, -2.0]"), "x,x", [[2.0, 0.0], [0.0, 0.0]]),
        (("hessian", "max(x)**2", "--x", "[1.0, 3.0, 2.0]"), "x,x", np.diag([0.0, 2.0, 0.0])),
        (("grad", "relu(x)**2", "--x", "[1.0, -2.0]", "--order", "2"), "x", [2.0, 0.0]),
        (("grad", "abs(x)**3", "--x", "[1.0, -2.0]", "--order", "2"), "x", [6.0, 12.0]),
    ],
    ids=["hessian-relu", "hessian-max", "order-relu", "order-abs"],
)
def test_second_derivatives_through_kinks_away_from_the_kink(args, key, closed):
    # (relu(x)^2)'' = 2 H(x), (|x|^3)'' = 6|x|, max(x)^2 = x_1^2 near [1, 3, 2]: SymPy's
    # DiracDelta terms vanish away from the kink
    doc = run_json(*args)
    assert_block(doc, key, closed, rtol=1e-6)
    assert doc["notes"] == [] and doc["agree"] is True


def test_second_derivative_of_relu_at_the_kink_is_excluded_with_a_note():
    doc = run_json("hessian", "sum(relu(x)**2)", "--x", "[0.0, 1.0]")
    block = doc["blocks"]["x,x"]
    assert block["autograd"] == [[0.0, 0.0], [0.0, 2.0]]  # PyTorch: relu'(0) = 0
    assert block["excluded"] == 1 and doc["agree"] is True
    assert doc["notes"] == [
        "relu'(0) is undefined (SymPy's Heaviside(0) is 1/2); PyTorch's value there: 0; 1 "
        "element(s) at that point are left out of the check"
    ]


def test_second_derivative_of_abs_cubed_at_zero_is_zero_and_checked():
    doc = run_json("grad", "abs(x)**3", "--x", "[0.0, -2.0]", "--order", "2")
    assert doc["blocks"]["x"]["expected"] == [0.0, 12.0]  # 6|x|
    assert_block(doc, "x", [0.0, 12.0])
    assert doc["blocks"]["x"]["excluded"] == 0 and doc["notes"] == []


@pytest.mark.parametrize(
    ("expr", "x", "order"), [("x**2", "100", 5), ("x**3", "2", 8), ("exp(x)", "30", 3)]
)
def test_numeric_order_tolerance_covers_float64_rounding_of_the_differences(expr, x, order):
    # the K-th differences divide by h**K: x**2 at 100 gives about 1e-3 for a 5th derivative
    # of 0; the tolerance grows by the rounding bound and the note says by how much
    run = cli("grad", expr, "--x", x, "--order", str(order), "--numeric", *F64, "--json")
    doc = run.json()
    assert (run.exit_code, doc["blocks"]["x"]["numeric_agree"]) == (0, True)
    assert f"differences of order {order} amplify float64 rounding" in " ".join(doc["notes"])


def test_numeric_derivative_rounding_bound_covers_the_error():
    from autogradcli.reference.numeric import numeric_derivative_with_error

    x = np.array([100.0, 1000.0])
    value, bound = numeric_derivative_with_error(lambda t: t**2, x, 5)
    assert np.all(np.abs(value) <= bound)  # the true 5th derivative is 0
    assert np.all(bound < 1e3 * np.abs(value).max() + 1)  # and the bound is not absurdly loose


def test_numeric_order_still_catches_a_wrong_derivative(wrong_sin):
    run = cli("grad", "sin(x)", "--x", "0.5", "--order", "2", "--numeric", "--json")
    assert run.exit_code == 1
    assert run.json()["blocks"]["x"]["numeric_agree"] is False


@pytest.mark.parametrize(
    "args",
    [
        ("jacobian", "exp(x)", "--x", "[1, 100]"),
        ("hessian", "sum(exp(x))", "--x", "[1, 100]"),
        ("grad", "exp(x)", "--x", "[1, 100]", "--order", "2"),
    ],
    ids=["jacobian", "hessian", "order"],
)
def test_float32_overflow_in_derivatives_is_a_named_disagreement(args):
    run = cli(*args, "--json")
    doc = run.json()
    block = next(iter(doc["blocks"].values()))
    assert (run.exit_code, doc["agree"], block["verdict"]) == (1, False, "disagree")
    assert block["cause"]["code"] == "overflow"
    assert block["cause"]["message"].startswith("overflow: exp(x) reaches 2.68812e+43, past")


def test_a_real_mismatch_in_a_jacobian_is_not_called_rounding(wrong_sin):
    run = cli("jacobian", "sin(x)", "--x", "[0.5, 1.0]", "--json")
    doc = run.json()
    assert (run.exit_code, doc["blocks"]["x"]["rounding"]) == (1, None)
    assert doc["blocks"]["x"]["cause"]["code"] == "mismatch"


def test_hessian_at_a_tie_names_max_in_its_note():
    doc = cli("hessian", "max(x)**2", "--x", "[1.0, 1.0]", "--json").json()
    said = " ".join(doc["notes"])
    assert "the second derivative at a kink (relu or abs at 0, max or min at a tie)" in said


@pytest.mark.parametrize("command", ["jacobian", "hessian"])
def test_jacobian_and_hessian_take_rtol_and_atol(command):
    doc = cli(command, "sum(x**2)", "--x", "[1.0, 2.0]", "--rtol", "0.01", "--atol", "0.5",
              "--json").json()  # fmt: skip
    assert doc["tolerance"] == {"rtol": 0.01, "atol": 0.5}
