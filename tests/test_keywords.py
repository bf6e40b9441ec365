"""Issue 26 §3: the spellings and keywords PyTorch documents, each against torch's own
result. Every case runs the tool in float64 (through the Python API) and the same call
written directly in PyTorch: the output and every ``.grad`` must be PyTorch's, the
verdict ✓ and the reference SymPy's (exact, not the numeric fallback). Where a spelling
stays refused, the exact error line names the nearest supported form."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import autogradcli as ag
from tests.conftest import cli

Values = dict[str, np.ndarray]

X = np.array([[1.5, -2.0, 0.5], [0.3, 0.7, -1.1]])
V = np.array([0.5, -1.25, 2.0, -0.75])
LOGITS = np.array([[0.2, -1.0, 0.7], [1.1, 0.4, -0.3], [-0.6, 0.9, 0.1], [0.5, -0.2, 0.8]])
LABELS = np.array([0.0, 2.0, 1.0, 2.0])


def check(
    text: str,
    values: Values,
    pytorch: Callable[..., torch.Tensor],
    indices: tuple[str, ...] = (),
    const: tuple[str, ...] = (),
    exact: bool = True,
) -> ag.GradResult:
    """The tool's run of ``text`` beside ``pytorch(**tensors)``: ``indices`` are integer
    tensors (long), ``const`` float tensors without a gradient."""
    result = ag.grad(text, values, dtype="float64", weights="ones", const=list(const))
    tensors = {
        n: torch.tensor(v, dtype=torch.long)
        if n in indices
        else torch.tensor(v, dtype=torch.float64, requires_grad=n not in const)
        for n, v in values.items()
    }
    out = pytorch(**tensors)
    out.backward(torch.ones_like(out))
    assert result.verdict == "agree", (text, result.verdict, result.first_cause())
    assert result.expected_by == ("SymPy" if exact else "numeric"), (text, result.notes)
    np.testing.assert_allclose(result.output, out.detach().numpy(), rtol=1e-12, atol=0)
    for name, tensor in tensors.items():
        if tensor.requires_grad:
            assert name in result.grads, name
            np.testing.assert_allclose(result.grads[name], tensor.grad.numpy(), rtol=1e-12)
        else:
            assert name not in result.grads or result.variables[name].grad is None
    return result


def refused(*args: str) -> str:
    """The one error line of ``autograd-cli grad ARGS`` (exit 2)."""
    run = cli("grad", *args)
    assert run.exit_code == 2, run.stdout
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("Error: ")
    return run.stderr.strip()


# --- div(rounding_mode=), add/sub(alpha=) ----------------------------------------------------


@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_div_with_a_rounding_mode_has_derivative_zero_as_in_pytorch(mode: str) -> None:
    values = {"x": X, "y": np.array([0.7, -0.9, 0.3])}
    r = check(
        f"(torch.div(x, y, rounding_mode='{mode}') * x).sum()",
        values,
        lambda x, y: (torch.div(x, y, rounding_mode=mode) * x).sum(),
    )
    assert not r.grads["y"].any()  # the rounded quotient has no slope: y's gradient is 0


def test_floor_divide_is_not_div_rounding_down_pytorch_gives_it_no_derivative() -> None:
    x = torch.tensor([1.5], requires_grad=True)
    with pytest.raises(RuntimeError, match="floor_divide is not implemented"):
        x.floor_divide(torch.tensor([0.7])).backward()
    assert refused("x.floor_divide(y)", "--x", "1.5", "--y", "0.7").startswith(
        "Error: .floor_divide() is not supported"
    )


def test_rounding_mode_none_is_true_division() -> None:
    check("torch.div(x, y, rounding_mode=None)", {"x": X, "y": X - 2.5}, lambda x, y: x / y)


@pytest.mark.parametrize(
    ("text", "alpha"), [("torch.add(x, y, alpha=2)", 2.0), ("x.sub(y, alpha=0.5)", -0.5)]
)
def test_add_and_sub_scale_other_by_alpha(text: str, alpha: float) -> None:
    check(text, {"x": X, "y": X * 3}, lambda x, y: torch.add(x, y, alpha=alpha))


# --- norms ---------------------------------------------------------------------------------

ORDERS = ["1", "3", "math.inf", "-math.inf", "float('-inf')", "-1.5", "0.5"]
TORCH_ORDERS = {"math.inf": math.inf, "-math.inf": -math.inf, "float('-inf')": -math.inf}


@pytest.mark.parametrize("order", ORDERS)
def test_vector_norm_of_every_order(order: str) -> None:
    p = TORCH_ORDERS.get(order) or float(order)
    check(
        f"torch.linalg.vector_norm(x, ord={order})",
        {"x": X},
        lambda x: torch.linalg.vector_norm(x, ord=p),
    )


def test_the_zero_norm_counts_and_has_no_gradient_in_pytorch() -> None:
    """PyTorch's ord=0 backward leaves no gradient (x.grad None alone); beside another
    use of x it adds nothing, as SymPy's derivative of a count (0) says."""
    check(
        "torch.linalg.vector_norm(x, ord=0) * x.sum()",
        {"x": np.array([[1.5, 0.0, 0.5], [0.0, 0.7, -1.1]])},
        lambda x: torch.linalg.vector_norm(x, ord=0) * x.sum(),
    )


@pytest.mark.parametrize("order", ["1", "3", "math.inf", "'fro'"])
def test_norms_p_along_a_dim(order: str) -> None:
    p = TORCH_ORDERS.get(order) or (order.strip("'") if "'" in order else float(order))
    check(f"torch.norm(x, p={order}, dim=1)", {"x": X}, lambda x: torch.norm(x, p=p, dim=1))


@pytest.mark.parametrize("order", ["'fro'", "1", "-1", "math.inf", "-math.inf"])
def test_a_matrix_norm_by_linalg_norm(order: str) -> None:
    p = TORCH_ORDERS.get(order) or (order.strip("'") if "'" in order else int(order))
    check(f"torch.linalg.norm(x, ord={order})", {"x": X}, lambda x: torch.linalg.norm(x, ord=p))


def test_linalg_norm_of_a_vector_with_an_order_is_a_vector_norm() -> None:
    check("torch.linalg.norm(v, 1)", {"v": V}, lambda v: torch.linalg.norm(v, 1))


def test_the_zero_vector_and_the_zero_element_are_kinks_pytorch_gives_zero() -> None:
    r = ag.grad("torch.linalg.vector_norm(x, ord=1)", x="[0., 2., -1.]", dtype="float64")
    assert r.verdict == "agree" and r.grads["x"].tolist() == [0.0, 1.0, -1.0]
    assert any("kink" in n.code for n in r.variables["x"].notes)


def test_norms_that_need_singular_values_are_refused_by_name() -> None:
    matrix = ("--x", "[[1., 2.], [3., 4.]]")
    tail = (
        "needs singular values (a matrix's 2-norm, -2-norm or nuclear norm), which SymPy has "
        "no closed form to check; use ord='fro', 1, -1, inf or -inf, or "
        "torch.linalg.vector_norm(x, ord) for the norm of all elements"
    )
    assert refused("torch.linalg.norm(x, 2)", *matrix) == (
        f"Error: 'linalg_norm(x, ord=2)': the norm of order 2 {tail}"
    )
    assert refused("torch.norm(x, p='nuc')", *matrix) == (
        f"Error: 'norm(x, p='nuc')': the norm of order 'nuc' {tail}"
    )
    assert refused("torch.norm(x, p=float('nan'))", *matrix) == (
        "Error: p of norm() must be a number, inf, -inf (math.inf, float('inf')) or 'fro', "
        "not float('nan')"
    )


# --- softmax/log_softmax(dtype=), clone(memory_format=), cumsum, cumprod, amax, amin -----


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_with_a_dtype(name: str) -> None:
    check(
        f"(torch.{name}(x, 1, dtype=torch.float64) * w).sum()",
        {"x": X, "w": X[::-1].copy()},
        lambda x, w: (getattr(torch, name)(x, 1, dtype=torch.float64) * w).sum(),
        const=("w",),
    )


def test_softmax_dtype_float64_in_a_float32_run_is_computed_in_float64() -> None:
    r = ag.grad("F.softmax(x, dim=0, dtype=torch.float64)", x="[1., 2., 3.]", weights="ones")
    assert r.verdict == "agree" and r.output.dtype == np.float64


def test_a_dtype_that_is_not_floating_is_refused() -> None:
    assert refused("torch.softmax(x, 0, dtype=torch.int64)", "--x", "[1., 2.]") == (
        "Error: dtype of softmax() must be one of torch.float32, torch.float64, "
        "torch.float16, torch.bfloat16, torch.float, torch.double, torch.half, not torch.int64"
    )


@pytest.mark.parametrize("layout", ["torch.preserve_format", "torch.contiguous_format"])
def test_clone_with_a_memory_format(layout: str) -> None:
    check(f"(x.clone(memory_format={layout}) * x).sum()", {"x": X}, lambda x: (x.clone() * x).sum())


def test_clone_channels_last_of_a_4d_tensor() -> None:
    data = np.arange(24.0).reshape(1, 2, 3, 4) / 7
    check(
        "(torch.clone(x, memory_format=torch.channels_last) ** 2).sum()",
        {"x": data},
        lambda x: (x.clone(memory_format=torch.channels_last) ** 2).sum(),
    )


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_running_sums_and_products(name: str, dim: int) -> None:
    data = np.array([[1.5, -2.0, 0.0], [0.3, 0.7, -1.1]])  # a zero inside a product
    check(f"torch.{name}(x, dim={dim})", {"x": data}, lambda x: getattr(torch, name)(x, dim))


def test_cumsum_with_a_dtype() -> None:
    check("x.cumsum(0, dtype=torch.float64)", {"x": V}, lambda x: x.cumsum(0))


@pytest.mark.parametrize("name", ["amax", "amin"])
@pytest.mark.parametrize("dims", ["", ", dim=1", ", dim=(0, 1), keepdim=True", ", 0"])
def test_amax_and_amin_share_a_tie_evenly(name: str, dims: str) -> None:
    tied = np.array([[2.0, -1.0, 2.0], [0.5, 2.0, -1.0]])
    keywords: dict[str, object] = {}
    if "dim=(0, 1)" in dims:
        keywords = {"dim": (0, 1), "keepdim": True}
    elif "dim=1" in dims:
        keywords = {"dim": 1}
    elif dims:
        keywords = {"dim": 0}
    check(f"torch.{name}(x{dims})", {"x": tied}, lambda x: getattr(torch, name)(x, **keywords))


# --- torch.inner ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [((4,), (4,)), ((2, 3), (4, 3)), ((2, 2, 3), (3,)), ((), (2, 3))],
)
def test_inner_beyond_vectors(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    rng = np.random.default_rng(26)
    values = {"x": rng.normal(size=a), "y": rng.normal(size=b)}
    check("torch.inner(x, y)", values, lambda x, y: torch.inner(x, y))


# --- losses: weight=, ignore_index=, (N, C, d1, ...) -----------------------------------------


def test_nll_loss_with_weights_and_an_ignored_target() -> None:
    values = {"x": LOGITS, "y": np.array([0.0, -100.0, 1.0, 2.0]), "w": np.array([0.5, 2.0, 1.5])}
    check(
        "F.nll_loss(x, y, weight=w)",
        values,
        lambda x, y, w: F.nll_loss(x, y, weight=w),
        indices=("y",),
        const=("w",),
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_with_weight_ignore_index_and_smoothing(reduction: str) -> None:
    values = {"x": LOGITS, "y": np.array([0.0, 2.0, 1.0, 2.0]), "w": np.array([0.5, 2.0, 1.5])}
    check(
        f"F.cross_entropy(x, y, weight=w, ignore_index=2, reduction='{reduction}', "
        "label_smoothing=0.1)",
        values,
        lambda x, y, w: F.cross_entropy(
            x, y, weight=w, ignore_index=2, reduction=reduction, label_smoothing=0.1
        ),
        indices=("y",),
        const=("w",),
    )


@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_class_losses_over_n_c_d1_d2(loss: str) -> None:
    rng = np.random.default_rng(3)
    values = {"x": rng.normal(size=(2, 3, 2, 2)), "y": rng.integers(0, 3, size=(2, 2, 2)) * 1.0}
    check(
        f"F.{loss}(x, y)",
        values,
        lambda x, y: getattr(F, loss)(x, y),
        indices=("y",),
    )


def test_cross_entropy_with_probabilities_over_n_c_d1_and_weights() -> None:
    rng = np.random.default_rng(4)
    target = rng.random(size=(2, 3, 2))
    values = {"x": rng.normal(size=(2, 3, 2)), "t": target / target.sum(1, keepdims=True)}
    values["w"] = np.array([1.0, 0.5, 2.0])
    check(
        "F.cross_entropy(x, t, w, label_smoothing=0.2)",
        values,
        lambda x, t, w: F.cross_entropy(x, t, w, label_smoothing=0.2),
        const=("t", "w"),
    )


def test_a_weight_of_the_wrong_length_is_refused() -> None:
    args = ("--x", "[[1., 2.], [3., 4.]]", "--y", "[0., 1.]", "--w", "[1., 2., 3.]")
    assert refused("F.nll_loss(x, y, weight=w)", *args) == (
        "Error: 'nll_loss(x, y, w)': weight must have shape [2] (one per class), not [3]"
    )


# --- F.one_hot, gather, indexing with integer tensors -----------------------------------------


def test_one_hot_picks_the_log_probabilities() -> None:
    check(
        "-(F.one_hot(y, num_classes=3) * F.log_softmax(x, dim=1)).sum(1).mean()",
        {"x": LOGITS, "y": LABELS},
        lambda x, y: -(F.one_hot(y, num_classes=3) * F.log_softmax(x, dim=1)).sum(1).mean(),
        indices=("y",),
    )


def test_one_hot_without_num_classes_is_refused_with_the_form_to_write() -> None:
    args = ("--x", "[[1., 2.], [3., 4.]]", "--y", "[0., 1.]")
    assert refused("(F.one_hot(y) * x).sum()", *args) == (
        "Error: 'one_hot(y)': F.one_hot needs num_classes here (PyTorch counts the classes "
        "from the values, which are not known before they run); write "
        "F.one_hot(t, num_classes=3)"
    )


@pytest.mark.parametrize("dim", [0, 1])
def test_gather_along_a_dim(dim: int) -> None:
    index = np.array([[0.0, 1.0, 0.0], [1.0, 1.0, 0.0]]) if dim == 0 else np.array([[2.0], [0.0]])
    check(
        f"(torch.gather(x, {dim}, i) ** 2).sum()",
        {"x": X, "i": index},
        lambda x, i: (torch.gather(x, dim, i) ** 2).sum(),
        indices=("i",),
    )


def test_gather_as_a_method_with_keywords() -> None:
    check(
        "x.gather(dim=1, index=i).sum()",
        {"x": X, "i": np.array([[2.0, 2.0], [1.0, 0.0]])},
        lambda x, i: x.gather(1, i).sum(),
        indices=("i",),
    )


def test_indexing_with_integer_tensors_as_the_tutorials_pick_probabilities() -> None:
    check(
        "-torch.log(F.softmax(x, dim=1)[torch.arange(4), y]).mean()",
        {"x": LOGITS, "y": LABELS},
        lambda x, y: -torch.log(F.softmax(x, dim=1)[torch.arange(4), y]).mean(),
        indices=("y",),
    )


def test_an_index_tensor_beside_a_slice() -> None:
    check(
        "(x[:, i] * 3).sum()",
        {"x": X, "i": np.array([2.0, 0.0, 2.0])},
        lambda x, i: (x[:, i] * 3).sum(),
        indices=("i",),
    )


def test_a_cell_with_index_tensors_prints_pytorchs_numbers() -> None:
    cell = (
        "logits = torch.tensor([[0.2, -1.0, 0.7], [1.1, 0.4, -0.3]], requires_grad=True)\n"
        "ys = torch.tensor([2, 0])\n"
        "probs = logits.softmax(dim=1)\n"
        "loss = -probs[torch.arange(2), ys].log().sum()\n"
        "loss.backward()\n"
        "print(logits.grad)\n"
    )
    r = ag.grad(cell, dtype="float64")
    logits = torch.tensor([[0.2, -1.0, 0.7], [1.1, 0.4, -0.3]], dtype=torch.float64)
    logits.requires_grad_()
    ys = torch.tensor([2, 0])
    (-logits.softmax(dim=1)[torch.arange(2), ys].log().sum()).backward()
    assert r.verdict == "agree"
    assert logits.grad is not None
    np.testing.assert_allclose(r.grads["logits"], logits.grad.numpy(), rtol=1e-12)


# --- torch.Tensor ----------------------------------------------------------------------------


def test_the_legacy_constructor_of_float_data_is_torch_tensor() -> None:
    check(
        "(torch.Tensor([1.5, -2.0]) * x).sum()",
        {"x": V[:2]},
        lambda x: (torch.tensor([1.5, -2.0], dtype=torch.float64) * x).sum(),
    )


@pytest.mark.parametrize(
    "text", ["torch.Tensor(2, 3).sum() * x", "(torch.Tensor([1, 2]) * x).sum()"]
)
def test_the_legacy_constructor_of_sizes_or_integers_is_refused(text: str) -> None:
    written = text.split(".sum()")[0].split(" * ")[0].lstrip("(").split(")")[0] + ")"
    assert refused(text, "--x", "1.") == (
        f"Error: '{written}': torch.Tensor is PyTorch's legacy constructor; it is taken for "
        "float data only (torch.Tensor([1., 2.])); use torch.tensor([1., 2.]) for values, "
        "torch.zeros(2, 3) for a shape"
    )


@pytest.mark.parametrize(
    ("x", "index"),
    [(np.arange(5.0), np.zeros((2, 0))), (np.array(2.0), np.array([0.0])), (V, np.array(3.0))],
    ids=["empty index of more dims", "number input", "number index"],
)
def test_gather_takes_pytorchs_edge_shapes(x: np.ndarray, index: np.ndarray) -> None:
    """OpInfo's samples: an empty index of any shape, a 0-d input or index (one dim). An
    output of no elements is checked numerically (the component-wise model cannot reshape
    a Jacobian of no rows)."""
    check(
        "torch.gather(x, 0, i) * 2",
        {"x": x, "i": index},
        lambda x, i: torch.gather(x, 0, i) * 2,
        indices=("i",),
        exact=index.size > 0,
    )


def test_gather_with_an_index_of_other_dims_is_refused_in_pytorchs_order() -> None:
    assert refused("torch.gather(x, 0, i).sum()", "--x", "[1., 2.]", "--i", "[[0.], [0.]]") == (
        "Error: 'gather(x, 0, i)': gather along dim 0 needs an index with as many dims as the "
        "input and no larger in the others; the shapes are [2] and [2, 1]"
    )


@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_a_rounded_division_of_many_elements_is_bounded_not_a_crash(mode: str) -> None:
    """Past the precisely evaluated elements the reference bounds float64's error: floor is
    exact unless an integer lies within the quotient's error (then evaluated precisely)."""
    rng = np.random.default_rng(26)
    values = {"x": rng.normal(size=(10, 1, 5)), "y": rng.normal(size=(10, 5))}
    check(
        f"torch.div(x, y, rounding_mode='{mode}') * x",
        values,
        lambda x, y: torch.div(x, y, rounding_mode=mode) * x,
    )
