"""The reference past 256 elements: every element judged against a right number.

Float64 with an error bound on each element (``reference/bounds.py``), mpmath where the
bound is wide. A cancellation float64 shares with autograd, placed at a random element,
must give ✗ with the exact number there; a benign tensor stays on the float64 fast path.
``AUTOGRAD_CLI_LONG=1`` runs many more placements.
"""

from __future__ import annotations

import os

import mpmath
import numpy as np
import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autogradcli as ag
from autogradcli.reference.bounds import STATS, Checked
from autogradcli.reference.evaluate import Untrusted, evaluate

LONG = os.environ.get("AUTOGRAD_CLI_LONG") == "1"
EXAMPLES = 200 if LONG else 4
SIZE = 300


def exact_slope(expr: str, at: float) -> float:
    """The derivative at ``at`` (a float, as torch holds it), in mpmath at 60 digits."""
    with mpmath.workdps(60):
        f = {
            "exp": lambda x: (mpmath.exp(x) - 1) / x,
            "cos": lambda x: (1 - mpmath.cos(x)) / x**2,
        }[expr]
        return float(mpmath.diff(f, mpmath.mpf(at)))


CASES = {"exp": "sum((exp(x)-1)/x)", "cos": "sum((1-cos(x))/x**2)"}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    index=st.integers(0, SIZE - 1),
    case=st.sampled_from(sorted(CASES)),
    dtype=st.sampled_from(["float32", "float64"]),
)
def test_a_shared_cancellation_anywhere_is_caught(index: int, case: str, dtype: str) -> None:
    x = np.ones(SIZE)
    x[index] = 1e-8
    result = ag.grad(CASES[case], x=x, dtype=dtype)
    at = float(np.float32(1e-8)) if dtype == "float32" else 1e-8
    expected = result.variables["x"].expected
    assert result.variables["x"].verdict == "disagree"
    assert result.verdict == "disagree"
    assert expected[index] == pytest.approx(exact_slope(case, at), rel=1e-12, abs=1e-22)
    if case == "exp":  # every other element: d/dx (e^x - 1)/x at 1 is 1
        assert np.delete(expected, index) == pytest.approx(1.0, rel=1e-12)


def test_the_cosine_output_is_wrong_too() -> None:
    x = np.ones(SIZE)
    x[150] = 1e-8
    result = ag.grad("sum((1-cos(x))/x**2)", x=x, dtype="float64")
    assert result.output_verdict == "disagree"
    assert float(result.output_expected) == pytest.approx(299 * (1 - np.cos(1.0)) + 0.5, rel=1e-12)
    assert float(result.output) == pytest.approx(137.45, abs=0.01)


def test_a_cancellation_deeper_than_64_bits() -> None:
    """exp(1e-20) is 1 in float64 and in an 80-bit long double alike."""
    x = np.ones(SIZE)
    x[7] = 1e-20
    result = ag.grad("sum((exp(x)-1)/x)", x=x, dtype="float64")
    assert result.verdict == "disagree"
    assert result.variables["x"].expected[7] == pytest.approx(0.5, rel=1e-12)
    assert float(result.output_expected) == pytest.approx(299 * (np.e - 1) + 1, rel=1e-12)


def test_a_benign_tensor_stays_in_float64() -> None:
    x = np.random.default_rng(0).uniform(0.5, 2.0, 20_000)
    before = (STATS.checked, STATS.precise, STATS.whole)
    result = ag.grad("sum(3*(x+2)**2 + exp(x))", x=x, dtype="float64")
    assert result.verdict == "agree"
    assert STATS.checked - before[0] >= 2 * x.size  # output and gradient, every element
    assert (STATS.precise, STATS.whole) == before[1:]  # mpmath ran on no element
    assert result.variables["x"].expected == pytest.approx(6 * (x + 2) + np.exp(x), rel=1e-14)


def test_a_disagreeing_tensor_over_65536_elements() -> None:
    x = np.full(70_000, 2.0)
    x[69_999] = 1e-9
    before = STATS.precise
    result = ag.grad("sum((exp(x)-1)/x)", x=x, dtype="float64")
    assert result.verdict == "disagree"
    assert result.variables["x"].expected[69_999] == pytest.approx(0.5, rel=1e-8)
    assert result.variables["x"].expected[0] == pytest.approx((np.exp(2) + 1) / 4, rel=1e-12)
    assert 1 <= STATS.precise - before <= 16  # the bad element (in each evaluation), not all


def test_a_sum_that_cancels_is_not_trusted() -> None:
    arith = Checked()
    with pytest.raises(Untrusted):
        arith.total(np.array([1.0, -1.0 + 2**-40] * 200))
    assert float(Checked().total(np.arange(1000.0))) == 499_500.0


def test_an_accumulation_that_cancels_is_not_trusted() -> None:
    arith = Checked()
    with pytest.raises(Untrusted):
        arith.check_sum([np.full(400, 1.0), np.full(400, -1.0 + 2**-40)], (400,))
    arith.check_sum([np.full(400, 1.0), np.full(400, 2.0)], (400,))
    with pytest.raises(Untrusted):  # summed down a broadcast axis
        arith.check_sum([np.tile([1.0, -1.0 + 2**-40], (2, 150))], (2, 1))


def test_a_comparison_near_its_switch_goes_to_mpmath() -> None:
    x = sp.Symbol("x", real=True)
    expr = sp.Piecewise((sp.Integer(1), sp.exp(x) - 1 > 0), (sp.Integer(-1), True))
    values = np.full(400, 0.5)
    values[3] = 1e-20  # exp(x) - 1 is 0 in float64, 1e-20 exactly: the branch is 1
    arith = Checked()
    before = STATS.precise
    out = evaluate(expr, {x: arith.array(values)}, arith)
    assert out[3] == 1.0 and STATS.precise - before == 1
