"""What a value made by an earlier walk carries (``reference.sources``).

``y_pred - y`` with both made by walks cancels where the fit is close: what the two carry
is too wide there, relative to the difference. Those elements are evaluated precisely from
the inputs through the formulas that made ``y_pred`` and ``y``; every element of the
result must then be right to the bound it is given, as mpmath at 50 digits has it. A value
whose formula is not known (an array the walk did not make, or one changed since) keeps
the plain bound and stays ``Untrusted``.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import sympy as sp

from autogradcli.reference import bounds
from autogradcli.reference.bounds import STATS, Checked
from autogradcli.reference.evaluate import Untrusted, evaluate

x, a, b, p, q, s = sp.symbols("x a b p q s", real=True)
X0 = 0.7  # the tangent's point: the fit is closest there


def _grid() -> np.ndarray:
    xs = np.linspace(0.0, 1.4, 401)
    return xs + 3e-7  # X0 is 3e-7 from a grid point: a residual of ~1e-14 there


def _made(arith: Checked, xs: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict]:
    """``y_pred = a + b*x`` (the tangent of sin at X0) and ``y = sin(x)``, each a walk."""
    env = {x: arith.array(xs), a: arith.array(np.sin(X0) - np.cos(X0) * X0)}
    env[b] = arith.array(np.cos(X0))
    y_pred = evaluate(a + b * x, env, arith)
    y = evaluate(sp.sin(x), env, arith)
    return y_pred, y, env


def _exact(xs: np.ndarray, coefficients: tuple[float, float]) -> list[float]:
    with mpmath.workdps(50):
        a0, b0 = (mpmath.mpf(c) for c in coefficients)
        return [float((a0 + b0 * mpmath.mpf(v) - mpmath.sin(mpmath.mpf(v))) ** 2) for v in xs]


def test_a_difference_of_made_values_is_right_at_every_element() -> None:
    arith, xs = Checked(), _grid()
    y_pred, y, env = _made(arith, xs)
    whole = STATS.whole
    found = np.asarray(evaluate((p - q) ** 2, {p: y_pred, q: y}, arith))
    right = np.asarray(_exact(xs, (float(env[a]), float(env[b]))))
    error = np.abs(found - right) / np.abs(right)
    assert STATS.whole == whole
    made = arith.sources.find(found)
    assert made is not None
    assert np.all(error <= made.bound)  # each element within the bound it is given
    assert float(np.max(error)) <= bounds.TRUST
    closest = int(np.argmin(np.abs(xs - X0)))
    assert error[closest] <= 4 * bounds.U  # mended: precise from the inputs
    # float64 alone is far off where the fit is closest: the elements were mended
    plain = (y_pred - y) ** 2
    assert float(np.max(np.abs(plain - right) / np.abs(right))) > 1e-6
    assert arith.worst <= bounds.LIMIT


def test_the_sum_of_made_squares_is_bounded_by_each_terms_own_bound() -> None:
    arith, xs = Checked(), _grid()
    y_pred, y, env = _made(arith, xs)
    squares = evaluate((p - q) ** 2, {p: y_pred, q: y}, arith)
    total = arith.total(squares)
    assert arith.sources.find(total) is not None  # a later walk reads it with its bound
    loss = np.asarray(evaluate(s, {s: total}, arith))
    with mpmath.workdps(50):
        right = mpmath.fsum(mpmath.mpf(t) for t in _exact(xs, (float(env[a]), float(env[b]))))
    bound = arith.sources.find(total).bound
    assert abs(float(loss) - float(right)) <= bound * abs(float(right))
    assert bound <= bounds.LIMIT


@pytest.mark.parametrize("how", ["copy", "changed"])
def test_a_value_not_as_the_walk_made_it_keeps_the_plain_bound(how: str) -> None:
    arith, xs = Checked(), _grid()
    y_pred, y, _ = _made(arith, xs)
    if how == "copy":
        y_pred = np.array(y_pred)  # an array the walk did not make: its formula unknown
    else:
        assert not y_pred.flags.writeable  # the model forms new arrays, not in a made one
        y_pred = y_pred * (1 + 2 * bounds.U)  # a product the model formed
    assert arith.sources.find(y_pred) is None
    with pytest.raises(Untrusted):
        evaluate((p - q) ** 2, {p: y_pred, q: y}, arith)


def test_a_view_of_a_made_value_is_that_value() -> None:
    arith, xs = Checked(), _grid()
    y_pred, _, _ = _made(arith, xs)
    view = np.broadcast_to(y_pred, y_pred.shape)
    assert arith.sources.find(view) is arith.sources.find(y_pred) is not None
    assert arith.sources.find(y_pred[::-1]) is None  # other elements at each position


def test_written_out_renames_a_symbol_that_means_two_arrays() -> None:
    arith = Checked()
    first, second = arith.array(np.arange(300.0)), arith.array(np.arange(300.0) + 1)
    made = evaluate(x * 2, {x: first}, arith)
    formula, numbers = arith.sources.written_out(
        x + p, {x: second, p: made}, lambda v: arith.inputs.get(id(v)) is v
    )
    assert len(numbers) == 2 and {id(v) for v in numbers.values()} == {id(first), id(second)}
    values = {str(k): v for k, v in numbers.items()}
    found = sp.lambdify(list(numbers), formula)(*numbers.values())
    np.testing.assert_array_equal(found, second + 2 * first)
    assert len(values) == 2
