"""Values past float64's range: the reference keeps them finite (``huge``), never inf."""

from __future__ import annotations

import numpy as np
import pytest

import autogradcli as ag
from autogradcli.reference.evaluate import precise


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
