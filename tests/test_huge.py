"""Values past float64's range: the reference keeps them finite (``huge``), never inf."""

from __future__ import annotations

import numpy as np
import pytest

import autogradcli as ag
from autogradcli.reference.precise import precise


def test_exp_of_a_large_argument_is_finite_in_mpmath() -> None:
    arith = precise(128)
    value = arith.call("exp", arith.array(np.array([5.28e8, 2.0**70, -(2.0**70)])))
    assert list(arith.isfinite(value)) == [True, True, True]
    assert list(arith.floats(value)) == [np.inf, np.inf, 0.0]
    powers = arith.power(arith.array([-3.0, 3.0, 0.5]), 2.0**70)
    assert list(arith.isfinite(powers)) == [True, True, True]
    assert list(arith.floats(powers)) == [np.inf, np.inf, 0.0]


def test_an_overflow_to_inf_is_not_agreement() -> None:
    result = ag.grad("exp(exp(exp(x)))", x=3.0, dtype="float64")
    assert result.verdict == "disagree"
    assert result.output_verdict == "disagree" and result.output_cause.code == "overflow"
    assert result.variables["x"].cause.code == "overflow"


def test_the_smaller_overflow_stays_disagree() -> None:
    result = ag.grad("exp(exp(exp(x)))", x=2.0, dtype="float64")
    assert result.verdict == "disagree" and result.output_cause.code == "overflow"


@pytest.mark.parametrize(
    ("expression", "output", "grad"),
    [
        ("softplus(x)", [4988429.2, 0.0], [1.0, 0.0]),
        ("logsigmoid(x)", [0.0, -4988429.2], [0.0, 1.0]),
    ],
)
def test_large_values_of_softplus_and_logsigmoid(
    expression: str, output: list[float], grad: list[float]
) -> None:
    x = np.array([4988429.2, -4988429.2])
    result = ag.grad(expression, x=x, dtype="float64", weights=np.ones(2))
    assert result.verdict == "agree"
    assert result.output_expected.tolist() == output
    assert result.variables["x"].expected.tolist() == grad


def test_a_large_tensor_past_float64_is_marked_huge() -> None:
    """Past 256 elements float64 overflows too; its elements go precise, never inf = inf."""
    x = np.full(300, 1.0)
    x[5] = 3.0
    result = ag.grad("sum(exp(exp(exp(x))))", x=x, dtype="float64")
    assert result.verdict == "disagree"
    assert result.variables["x"].cause.code == "overflow"


def test_logsigmoid_keeps_a_tiny_output_and_a_large_negative_one() -> None:
    """log(1 + exp(-x)) at 501 is -exp(-501) (not the 0 of 1 + tiny in any precision), and
    at -1e20 is -1e20 (exp(1e20) is computed, not a stand-in whose log is 8.4e23)."""
    x = np.array([501.0, -1e20, 1.0])
    result = ag.grad("F.logsigmoid(x)", {"x": x}, dtype="float64", weights="ones")
    assert result.verdict == "agree"
    assert result.output_expected[0] == pytest.approx(-2.6209851870952267e-218, rel=1e-15)
    assert result.output_expected[1] == -1e20


def test_softplus_written_out_past_float64_expects_the_finite_value() -> None:
    """log(1 + exp(x)) at 1e20: float64's exp overflows (PyTorch gives inf), the value is 1e20."""
    result = ag.grad(
        "log(1 + exp(x))", {"x": np.array([1e20, 0.0])}, dtype="float64", weights="ones"
    )
    assert result.verdict == "disagree"
    assert result.output_expected[0] == 1e20
    assert np.isinf(result.output[0])
