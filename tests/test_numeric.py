"""Finite differences in autogradcli.reference.numeric against hand-derived closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autogradcli.errors import LimitError
from autogradcli.reference import numeric
from autogradcli.reference.numeric import (
    DEFAULT,
    NumericTolerance,
    agree,
    numeric_derivative,
    numeric_hessian,
    numeric_jacobian,
    numeric_vjp,
)


def assert_agrees(got: np.ndarray, want: np.ndarray, tol: NumericTolerance = DEFAULT) -> None:
    assert got.shape == np.shape(want)
    ok, error = agree(got, np.asarray(want, dtype=np.float64), tol)
    assert ok, (got, want, error)


# numeric_vjp


def test_vjp_of_weighted_square_is_2xw() -> None:
    x = np.array([[0.5, -1.0, 2.0], [3.0, 0.0, -0.25]])
    w = np.array([[1.0, 2.0, -1.0], [0.5, 3.0, 4.0]])
    x_before = x.copy()
    grad = numeric_vjp(lambda v: v["x"] ** 2, {"x": x}, w, ["x"])
    assert_agrees(grad["x"], 2 * x * w)
    assert np.array_equal(x, x_before)  # the caller's array is not perturbed


def test_vjp_of_zero_d_output_and_zero_d_input() -> None:
    grad = numeric_vjp(lambda v: np.sin(v["x"]), {"x": np.array(0.7)}, np.array(3.0), ["x"])
    assert grad["x"].shape == ()
    assert_agrees(grad["x"], 3 * np.cos(0.7))


def test_vjp_with_two_names_and_a_constant() -> None:
    x, y, c = np.array([1.0, -2.0]), np.array([3.0, 0.5]), np.array([2.0, 2.0])
    w = np.array([1.0, -1.0])
    grad = numeric_vjp(lambda v: v["x"] * v["y"] * v["c"], {"x": x, "y": y, "c": c}, w, ["x", "y"])
    assert set(grad) == {"x", "y"}
    assert_agrees(grad["x"], y * c * w)
    assert_agrees(grad["y"], x * c * w)


def test_vjp_without_weights_needs_one_element() -> None:
    x = np.array([1.0, 2.0, -3.0])
    grad = numeric_vjp(lambda v: np.sum(v["x"] ** 3, keepdims=True), {"x": x}, None, ["x"])
    assert_agrees(grad["x"], 3 * x**2)
    with pytest.raises(ValueError, match=r"one-element output; f returned shape \[3\]"):
        numeric_vjp(lambda v: v["x"] ** 2, {"x": x}, None, ["x"])


def test_vjp_weights_must_match_the_output_shape() -> None:
    with pytest.raises(ValueError, match="weights of shape"):
        numeric_vjp(lambda v: v["x"], {"x": np.ones(3)}, np.ones(2), ["x"])


def test_vjp_of_an_empty_input_calls_nothing() -> None:
    grad = numeric_vjp(lambda v: np.sum(v["x"]), {"x": np.zeros((0, 3))}, None, ["x"])
    assert grad["x"].shape == (0, 3)


# numeric_jacobian


def test_jacobian_of_x_times_sum_x() -> None:
    jac = numeric_jacobian(lambda v: v["x"] * np.sum(v["x"]), {"x": np.array([1.0, 2.0])}, ["x"])
    assert_agrees(jac["x"], [[4.0, 1.0], [2.0, 5.0]])


def test_jacobian_of_matrix_vector_product_is_the_matrix() -> None:
    a = np.array([[1.0, 2.0, 3.0], [-4.0, 0.5, 6.0]])
    jac = numeric_jacobian(
        lambda v: v["A"] @ v["x"], {"A": a, "x": np.array([1.0, -1.0, 2.0])}, ["x"]
    )
    assert_agrees(jac["x"], a)


def test_jacobian_shape_is_output_shape_then_input_shape() -> None:
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    jac = numeric_jacobian(lambda v: v["x"] ** 2, {"x": x}, ["x"])["x"]
    assert jac.shape == (2, 2, 2, 2)
    want = np.einsum("ij,ik,jl->ijkl", 2 * x, np.eye(2), np.eye(2))  # d x_ij^2 / d x_kl
    assert_agrees(jac, want)


def test_jacobian_of_identity_does_not_alias_the_working_copy() -> None:
    x = np.array([1.0, 2.0, 3.0])
    assert_agrees(numeric_jacobian(lambda v: v["x"], {"x": x}, ["x"])["x"], np.eye(3))


def test_jacobian_zero_d_output_and_empty_input() -> None:
    values = {"x": np.array(2.0), "e": np.zeros(0)}
    jac = numeric_jacobian(lambda v: v["x"] ** 3 + np.sum(v["e"]), values, ["x", "e"])
    assert_agrees(jac["x"], 12.0)
    assert jac["e"].shape == (0,)
    only_empty = numeric_jacobian(lambda v: np.ones(2) + np.sum(v["e"]), values, ["e"])
    assert only_empty["e"].shape == (2, 0)


# numeric_hessian

HESSIAN_TOL = NumericTolerance(atol=1e-5, rtol=1e-5)


def test_hessian_of_sum_of_cubes_is_diag_6x() -> None:
    x = np.array([1.0, -2.0, 0.5])
    hess = numeric_hessian(lambda v: np.sum(v["x"] ** 3), {"x": x}, ["x"])
    assert_agrees(hess[("x", "x")], np.diag(6 * x), HESSIAN_TOL)
    assert np.array_equal(hess[("x", "x")], hess[("x", "x")].T)


def test_hessian_of_xy_for_every_ordered_pair() -> None:
    values = {"x": np.array(1.5), "y": np.array(-2.0)}
    hess = numeric_hessian(lambda v: v["x"] * v["y"], values, ["x", "y"])
    assert set(hess) == {("x", "x"), ("x", "y"), ("y", "x"), ("y", "y")}
    assert all(block.shape == () for block in hess.values())
    got = [[hess[("x", "x")], hess[("x", "y")]], [hess[("y", "x")], hess[("y", "y")]]]
    assert_agrees(np.array(got), [[0.0, 1.0], [1.0, 0.0]], HESSIAN_TOL)


def test_hessian_of_squared_sum_is_two_everywhere() -> None:
    x = np.array([[0.5, 1.0], [-1.0, 2.0]])
    hess = numeric_hessian(lambda v: np.sum(v["x"]) ** 2, {"x": x}, ["x"])
    assert_agrees(hess[("x", "x")], 2 * np.ones((2, 2, 2, 2)), HESSIAN_TOL)


def test_hessian_mixed_blocks_are_transposes() -> None:
    values = {"a": np.array([1.0, 2.0]), "b": np.array([3.0, -1.0, 0.5])}
    hess = numeric_hessian(lambda v: np.sum(np.outer(v["a"] ** 2, v["b"])), values, ["a", "b"])
    assert_agrees(hess[("a", "b")], np.outer(2 * values["a"], np.ones(3)), HESSIAN_TOL)
    assert np.array_equal(hess[("b", "a")], hess[("a", "b")].T)


# numeric_derivative

DERIVATIVE_TOL = NumericTolerance(atol=0.0, rtol=1e-4)


@pytest.mark.parametrize(
    ("order", "closed_form"),
    [(1, np.cos), (2, lambda x: -np.sin(x)), (3, lambda x: -np.cos(x)), (4, np.sin)],
)
def test_derivatives_of_sine(order: int, closed_form) -> None:
    x = np.array([-2.0, -0.9, 0.3, 1.1, 2.5])  # away from the zeros of sin and cos
    assert_agrees(numeric_derivative(np.sin, x, order), closed_form(x), DERIVATIVE_TOL)


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_derivatives_of_exp(order: int) -> None:
    x = np.array([-1.0, 0.0, 1.5])
    assert_agrees(numeric_derivative(np.exp, x, order), np.exp(x), DERIVATIVE_TOL)


def test_third_derivative_of_fifth_power() -> None:
    x = np.array([-3.0, -1.0, 0.5, 2.0])
    got = numeric_derivative(lambda t: t**5, x, 3)
    assert_agrees(got, 60 * x**2, DERIVATIVE_TOL)
    assert numeric_derivative(lambda t: t**5, np.array(2.0), 3).shape == ()


def test_derivative_order_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        numeric_derivative(np.sin, np.array(1.0), 0)


# agree


def test_agree_special_values() -> None:
    nan, inf = np.nan, np.inf
    assert agree(np.array([nan, inf, -inf, 1.0]), np.array([nan, inf, -inf, 1.0])) == (True, 0.0)
    assert agree(np.array([-inf]), np.array([inf]))[0] is False
    assert agree(np.array([nan]), np.array([1.0]))[0] is False
    assert agree(np.array([1e300]), np.array([inf]))[0] is False
    assert agree(np.array([nan, inf]), np.array([nan, inf])) == (True, 0.0)  # no finite entries


def test_agree_tolerance_boundary() -> None:
    tol = NumericTolerance(atol=0.5, rtol=0.25)  # dyadic numbers: the sums below are exact
    assert agree(np.array([3.0]), np.array([2.0]), tol) == (True, 1.0)  # 1 == 0.5 + 0.25 * 2
    assert agree(np.array([3.0 + 2**-40]), np.array([2.0]), tol)[0] is False
    assert agree(np.array([1.0]), np.array([2.0]), tol) == (True, 1.0)  # relative to |other|
    assert agree(np.array([2.0]), np.array([1.0]), tol)[0] is False  # 1 > 0.5 + 0.25 * 1
    assert agree(np.array([1e-5]), np.array([0.0])) == (True, 1e-5)  # the default atol
    assert agree(np.array([1.1e-5]), np.array([0.0]))[0] is False


def test_agree_reports_max_error_over_finite_entries() -> None:
    ok, error = agree(np.array([1.0, np.nan, 5.0]), np.array([1.5, np.nan, 4.0]))
    assert (ok, error) == (False, 1.0)
    assert agree(np.zeros((2, 0)), np.zeros((2, 0))) == (True, 0.0)
    with pytest.raises(ValueError, match="cannot compare shapes"):
        agree(np.zeros(2), np.zeros(3))


# the evaluation cap


def test_evaluation_cap_raises_before_calling_f(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0

    def f(v: numeric.Values) -> np.ndarray:
        nonlocal calls
        calls += 1
        return np.sum(v["x"])

    big = {"x": np.zeros(numeric.MAX_EVALUATIONS // 2 + 1)}
    with pytest.raises(LimitError, match=r"needs 20003 forward evaluations; the limit is 20000"):
        numeric_vjp(f, big, None, ["x"])
    with pytest.raises(LimitError, match="use smaller inputs"):
        numeric_jacobian(f, big, ["x"])
    with pytest.raises(LimitError, match=r"Hessian needs 200344"):
        numeric_hessian(f, {"x": np.zeros(316)}, ["x"])  # 2 * 316 * 317 evaluations
    assert calls == 0
    monkeypatch.setattr(numeric, "MAX_EVALUATIONS", 8)
    numeric_jacobian(f, {"x": np.zeros(4)}, ["x"])  # exactly at the cap is allowed
    assert calls == 8


# a property

SHAPES = [(), (1,), (2,), (3,), (4,), (1, 3), (2, 2), (2, 1, 2)]


@st.composite
def arrays(draw: st.DrawFn) -> np.ndarray:
    shape = draw(st.sampled_from(SHAPES))
    size = int(np.prod(shape))
    return np.array(draw(st.lists(st.floats(-3, 3), min_size=size, max_size=size))).reshape(shape)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(a=st.floats(-5, 5), b=st.floats(-5, 5), c=st.floats(-5, 5), x=arrays())
def test_vjp_of_quadratic_matches_its_derivative(
    a: float, b: float, c: float, x: np.ndarray
) -> None:
    grad = numeric_vjp(lambda v: a * v["x"] ** 2 + b * v["x"] + c, {"x": x}, np.ones_like(x), ["x"])
    assert_agrees(grad["x"], 2 * a * x + b)


# Richardson's extrapolation and its budget


def test_extrapolated_slopes_estimate_their_error() -> None:
    x = np.array([0.3, -1.7, 2.5])
    ((_, found),) = numeric.extrapolated_slopes(
        lambda v: np.sum(np.sin(v["x"])), {"x": x}, None, ["x"]
    ).values()
    assert np.all(np.abs(found.value - np.cos(x)) <= found.error)
    assert np.all(found.error < 1e-10)


def test_extrapolated_slopes_cost_and_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0

    def f(v: numeric.Values) -> np.ndarray:
        nonlocal calls
        calls += 1
        return np.sum(v["x"] ** 3)

    x = {"x": np.array([1.0, -2.0])}  # |x| >= 1/4: 12 steps each
    numeric.extrapolated_slopes(f, x, None, ["x"])
    assert calls == 2 * 2 + 1 + 2 * 2 * numeric.LEVELS  # 53
    calls = 0
    numeric.extrapolated_slopes(f, {"x": np.array([1e-3])}, None, ["x"])
    assert calls == 2 + 1 + 2 * (numeric.LEVELS + 5)  # 1e-3 is 4**-5 or so: 5 more steps
    monkeypatch.setattr(numeric, "MAX_EVALUATIONS", 2 * 2 + 1 + 2 * 2 * 6)  # 6 levels each
    calls = 0
    ((_, found),) = numeric.extrapolated_slopes(f, x, None, ["x"]).values()
    assert calls == numeric.MAX_EVALUATIONS and np.isfinite(found.error).all()
    monkeypatch.setattr(numeric, "MAX_EVALUATIONS", 2 * 2 + 1 + 2 * 2 * 3)  # 3 < MIN_LEVELS
    calls = 0
    ((_, found),) = numeric.extrapolated_slopes(f, x, None, ["x"]).values()
    assert calls == 5 and np.isinf(found.error).all()  # the plain differences only
    monkeypatch.setattr(numeric, "MAX_EVALUATIONS", 4)
    with pytest.raises(LimitError, match=r"needs 5 forward evaluations; the limit is 4"):
        numeric.extrapolated_slopes(f, x, None, ["x"])


def test_extrapolated_slopes_where_the_function_is_nan_nearby() -> None:
    """log at 1e-5: the large steps leave the domain; the small ones settle."""
    x = np.array([1e-5, 2.0])

    def f(v: numeric.Values) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.sum(np.log(v["x"]))

    ((_, found),) = numeric.extrapolated_slopes(f, {"x": x}, None, ["x"]).values()
    assert np.all(np.abs(found.value - 1 / x) <= found.error)
    assert found.error[1] < 1e-10 and np.isfinite(found.error[0])
