"""Right numbers called right, and wrong ones named by a true cause (issue 23, section 4):
softplus's threshold, reductions over an empty dim, permute of a 0-d tensor, the overflow
inside an operation, a definition that differs from PyTorch's, float64's own cancellation
in the backward pass, and the rounding count of the operations that ran."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import autogradcli as ag
from autogradcli.bind import bind
from autogradcli.errors import ComputationError
from autogradcli.lang import vocabulary
from autogradcli.lang.analysis import rounding_steps
from autogradcli.pipeline import start
from autogradcli.policy.compare import compare
from autogradcli.settings import Settings
from autogradcli.verify.diagnose import Compared, Evidence, check_cause, float64_noise


def sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z))


# --- softplus's threshold --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_softplus_past_its_threshold_is_x_itself(dtype: str) -> None:
    values = [-1.0, 0.01, 0.0625, 0.1, 1.0]  # 3x > 0.2 from 0.1 on
    r = ag.grad("sum(softplus(x, beta=3, threshold=0.2))", x=str(values), dtype=dtype)
    assert r.verdict == "agree" and r.output_cause is None
    want = [sigmoid(3 * v) if 3 * v <= 0.2 else 1.0 for v in values]
    assert r.grads["x"].tolist() == pytest.approx(want, rel=1e-6)
    assert r.grads["x"].tolist()[3:] == [1.0, 1.0]
    out = sum(math.log1p(math.exp(3 * v)) / 3 if 3 * v <= 0.2 else v for v in values)
    assert float(r.output) == pytest.approx(out, rel=1e-6)


def test_softplus_default_threshold_past_20() -> None:
    r = ag.grad("sum(F.softplus(x))", x="[-1.0, 19.5, 20.5, 25.0]")
    assert r.verdict == "agree"
    assert r.grads["x"].tolist()[2:] == [1.0, 1.0]


def test_softplus_note_names_the_threshold() -> None:
    assert "threshold" in vocabulary.OPS["softplus"].note
    assert "threshold" in vocabulary.OPS["softplus"].kink


# --- reductions over an empty dim, permute of a 0-d tensor ---------------------------------


@pytest.mark.parametrize(
    ("text", "output", "grad"),
    [
        ("sum(x, ())", 10.0, [[1.0, 1.0], [1.0, 1.0]]),
        ("torch.sum(x, [])", 10.0, [[1.0, 1.0], [1.0, 1.0]]),
        ("x.sum(dim=())", 10.0, [[1.0, 1.0], [1.0, 1.0]]),
        ("mean(x, ())", 2.5, [[0.25, 0.25], [0.25, 0.25]]),
        ("sum(mean(x, (), keepdim=True))", 2.5, [[0.25, 0.25], [0.25, 0.25]]),
        (
            "norm(x, dim=())",
            math.sqrt(30.0),
            [[v / math.sqrt(30.0) for v in r] for r in [[1, 2], [3, 4]]],
        ),
    ],
)
def test_an_empty_dim_reduces_over_every_dim(text: str, output: float, grad: list) -> None:
    r = ag.grad(text, x="[[1., 2.], [3., 4.]]", dtype="float64")
    assert r.verdict == "agree"
    assert r.output.shape == () and float(r.output) == pytest.approx(output, rel=1e-15)
    assert r.grads["x"].reshape(-1).tolist() == pytest.approx(np.ravel(grad), rel=1e-15)


def test_logsumexp_over_an_empty_dim_is_pytorchs() -> None:
    r = ag.grad("sum(logsumexp(x, (), keepdim=True))", x="[[1., 2.], [3., 4.]]", dtype="float64")
    total = sum(math.exp(v) for v in (1, 2, 3, 4))
    assert r.verdict == "agree" and float(r.output) == pytest.approx(math.log(total), rel=1e-15)
    want = [math.exp(v) / total for v in (1, 2, 3, 4)]
    assert r.grads["x"].reshape(-1).tolist() == pytest.approx(want, rel=1e-15)
    scalar = ag.grad("logsumexp(x, ())", x="2.0", dtype="float64")
    assert scalar.verdict == "agree" and scalar.grads["x"].tolist() == 1.0
    with pytest.raises(ComputationError) as caught:  # PyTorch 2.13 raises here itself
        ag.grad("logsumexp(x, ())", x="[1., 2.]")
    assert "doesn't match the broadcast shape" in str(caught.value)


@pytest.mark.parametrize("text", ["torch.permute(x, ())", "x.permute([])", "x.permute(())"])
def test_permute_of_a_number_by_no_dims(text: str) -> None:
    r = ag.grad(text, x="2.0", dtype="float64")
    assert r.verdict == "agree" and r.grads["x"].tolist() == 1.0 and float(r.output) == 2.0


def test_permute_of_a_vector_by_no_dims_is_one_error() -> None:
    with pytest.raises(ag.AutogradCliError) as caught:
        ag.grad("sum(x.permute([]))", x="[1.0, 2.0]")
    assert caught.value.code == "bad_permutation"


def test_pytorchs_type_error_on_arguments_is_one_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuses(torch, a, dims):  # what PyTorch does with an argument it does not take
        raise TypeError("permute() missing 1 required positional arguments: 'dims'")

    op = dataclasses.replace(vocabulary.OPS["permute"], torch=refuses)
    monkeypatch.setitem(vocabulary.OPS, "permute", op)
    with pytest.raises(ComputationError) as caught:
        ag.grad("x.permute(())", x="2.0")
    assert "missing 1 required positional" in str(caught.value)


# --- causes ----------------------------------------------------------------------------------


def test_norm_past_float32s_range_inside_is_overflow() -> None:
    r = ag.grad("norm(x)", x="[1e20, 1e20]")
    cause = r.output_cause
    assert r.verdict == "disagree" and cause is not None and cause.code == "overflow"
    assert cause.data["inside"] is True and cause.data["node"] == "norm(x)"
    assert cause.data["exact"] == pytest.approx(math.sqrt(2) * 1e20, rel=1e-7)
    assert str(cause).startswith("overflow inside norm(x): a value it computes on the way")
    assert r.variables["x"].cause is not None and r.variables["x"].cause.code == "overflow"


def test_a_definition_that_differs_from_pytorch_is_a_mismatch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reference as it was before threshold was honoured: float64 gives the same
    number as float32, so the cause is the definition, not precision loss."""

    def old(sp, a, beta=1.0, threshold=20.0):
        return sp.log(1 + sp.exp(sp.nsimplify(beta) * a)) / sp.nsimplify(beta)

    op = dataclasses.replace(vocabulary.OPS["softplus"], sympy=old)
    monkeypatch.setitem(vocabulary.OPS, "softplus", op)
    r = ag.grad("softplus(x, beta=3, threshold=0.2)", x="1.0")
    cause = r.output_cause
    assert r.verdict == "disagree" and cause is not None and cause.code == "mismatch"
    assert cause.data["node"] == "softplus(x, beta=3.0, threshold=0.2)"
    assert cause.data["value"] == 1.0 and cause.data["float64_value"] == 1.0
    assert cause.data["exact"] == pytest.approx(math.log1p(math.exp(3.0)) / 3, rel=1e-12)
    assert "and the reference's definition differ" in str(cause)


def _float64_failure(text: str, x: str) -> tuple[object, np.ndarray, np.ndarray, dict]:
    r = ag.grad(text, x=x, dtype="float64")
    bound = bind(text, {"x": x}, Settings(dtype="float64"))
    return r, r.grads["x"], r.variables["x"].expected, float64_noise(start(bound))


def test_float64_cancellation_in_backward_is_precision_loss() -> None:
    """d/dx 1e10*(x + cos(x)) = 1e10*(1 - sin(x)) cancels near pi/2: autograd adds 1e10
    and -1e10*sin(x) at the leaf."""
    r, got, want, noise = _float64_failure("1e10*(x + cos(x))", "1.5707963")
    assert r.variables["x"].verdict == "disagree"
    assert noise["x"] == pytest.approx(16 * 2.0**-53 * 2e10, rel=1e-6)
    check = compare(got, want, 1e-7, 1e-7)
    cause = check_cause(Compared(check, got, want), Evidence("float64", noise=noise["x"]))
    assert cause.code == "precision_loss" and cause.data["kind"] == "float64_noise"
    assert "within the noise of its own rounding" in str(cause)
    without = check_cause(Compared(check, got, want), Evidence("float64"))
    assert without.code == "mismatch"


def test_a_wrong_float64_gradient_is_still_a_mismatch() -> None:
    r, got, want, noise = _float64_failure("sum(exp(x))", "[1.0, 2.0]")
    assert r.verdict == "agree"
    wrong = got * 1.001  # a backward formula off by 0.1 %
    check = compare(wrong, want, 1e-7, 1e-7)
    cause = check_cause(Compared(check, wrong, want), Evidence("float64", noise=noise["x"]))
    assert cause.code == "mismatch" and cause.data["stable"] is True
    assert str(cause).startswith("a real mismatch: autograd's float64 numbers are off by")


# --- the rounding count ----------------------------------------------------------------------


def steps(text: str, **values: str) -> int:
    bound = bind(text, values, Settings())
    return rounding_steps(bound.program, bound.shapes, bound.limits)


def test_rounding_steps_count_the_operations_that_ran() -> None:
    assert steps("x", x="1.0") == 0
    assert steps("sin(x)", x="1.0") == 3
    assert steps("x + 0*sin(cos(x))", x="1.0") == 3  # the dead term counts nothing
    assert steps("x + sin(cos(x))*0.0", x="1.0") == 3
    assert steps("x + 1*sin(cos(x))", x="1.0") == 12
    assert steps("prod(x)", x="full(100, 1.5)") == 3 + 99  # 99 multiplications
    assert steps("prod(sin(x))", x="full(100, 1.5)") == 3 + 100 * 3 + 99
    assert steps("sum(x)", x="ones(4, 4)") == 3 + 4
    assert steps("sum(x, ())", x="ones(4, 4)") == steps("sum(x)", x="ones(4, 4)")
    assert steps("sum(x, 0)", x="ones(4, 4)") == 3 + 2
    assert steps("x + y", x="ones(4)", y="ones(4, 4)") == 3 + 2  # x.grad sums 4 rows
    assert steps("mse_loss(x, y)", x="ones(8)", y="ones(8)") == 3 + 3 + 3 + 3  # its definition


def test_a_product_of_100_within_float16_rounding_is_not_disagree() -> None:
    """Each of 99 multiplications rounds; the error (43 units here) is rounding, which the
    old count (10 steps) called a disagreement."""
    r = ag.grad("prod(x)", x="full(100, 1.0390625)", dtype="float16")
    assert r.verdict == "rounding"
    assert r.rounding_bound == (102 + 1) * 2.0**-11  # and one for the backward pass
    assert r.variables["x"].cause is not None and r.variables["x"].cause.code == "rounding"


@pytest.mark.parametrize("text", ["torch.linalg.norm(x, 2)", "torch.linalg.norm(x, ord=2)"])
def test_linalg_norm_with_an_order_is_refused(text: str) -> None:
    """For a matrix PyTorch's ord=2 is the largest singular value, not the 2-norm of all
    elements (found by the OpInfo test: the tool ran vector_norm and said ✓)."""
    with pytest.raises(ag.AutogradCliError) as caught:
        ag.grad(text, x="[[1., 2.], [3., 4.]]")
    assert caught.value.code == "linalg_norm_order"
    same = ag.grad("torch.linalg.norm(x)", x="[[1., 2.], [3., 4.]]", dtype="float64")
    assert same.verdict == "agree" and float(same.output) == pytest.approx(math.sqrt(30.0))


def test_logsumexp_of_an_empty_tensor_is_minus_infinity_as_in_pytorch():
    # SymPy's log(0) is zoo (no real value); PyTorch's logsumexp of nothing is -inf
    r = ag.grad("logsumexp(x, 0)", x=np.zeros(0), dtype="float64")
    assert r.verdict == "agree" and float(r.output) == -np.inf
    assert r.variables["x"].grad.shape == (0,)
