"""Property tests: random expressions of the grammar give autograd == SymPy in float64."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autogradcli as ag
from autogradcli.lang.parser import parse_expression
from autogradcli.lang.text import unparse

# Functions that stay finite and smooth for arguments in [-2, 2] after the guards below.
SAFE_UNARY = ["sin", "cos", "tanh", "atan", "sigmoid", "exp", "asinh"]
NAMES = ["x", "y"]


def expressions(depth: int = 3) -> st.SearchStrategy[str]:
    leaves = st.one_of(
        st.sampled_from(NAMES),
        st.integers(1, 5).map(str),
        st.sampled_from(["0.5", "1.25", "pi"]),
    )

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-", "*"]), inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"
            ),
            st.tuples(inner, inner).map(lambda t: f"({t[0]}) / (2 + sin({t[1]}))"),
            st.tuples(inner, st.integers(2, 3)).map(lambda t: f"({t[0]})**{t[1]}"),
            st.tuples(st.sampled_from(SAFE_UNARY), inner).map(
                lambda t: f"{t[0]}(tanh({t[1]}))" if t[0] == "exp" else f"{t[0]}({t[1]})"
            ),
            inner.map(lambda e: f"sqrt(1 + ({e})**2)"),
            inner.map(lambda e: f"log(2 + cos({e}))"),
            st.tuples(st.sampled_from(["sum", "mean"]), inner).map(lambda t: f"{t[0]}({t[1]})"),
        )

    return st.recursive(leaves, extend, max_leaves=depth * 3)


points = st.lists(st.floats(-2, 2, allow_nan=False, width=64), min_size=3, max_size=3)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(text=expressions(), xs=points, y=st.floats(-2, 2, allow_nan=False))
def test_autograd_matches_sympy_in_float64(text, xs, y):
    text = f"sum({text} + 0*x + 0*y)"  # both variables always present, output scalar
    result = ag.grad(text, {"x": xs, "y": y}, dtype="float64", device="cpu")
    assert result.agree, {
        n: (v.grad, v.expected, v.derivative) for n, v in result.variables.items()
    }
    assert np.isfinite(result.output)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(text=expressions())
def test_unparse_is_a_fixed_point_of_parsing(text):
    tree = parse_expression(text).root
    assert parse_expression(unparse(tree)).root == tree
