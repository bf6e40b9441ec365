"""How the one-sided derivatives at a kink are taken (``verify/reconcile.py``), pinned where
mutation testing found them unpinned (issue 23, section 6): how close two sides may be to be
one number, how far the step beside the point goes, which arithmetic takes it, and what is
decided where a side or SymPy's value has no number.

Each composite puts a second kink at a known distance from the first, so that a step of
another size, in another direction or in another arithmetic crosses it and reads other
sides. The sides are known by hand; the verdict and notes are read through the Python API."""

from __future__ import annotations

import numpy as np

import autogradcli as ag
from autogradcli.bind import bind
from autogradcli.reference import NumericModel
from autogradcli.reference.choice import choose
from autogradcli.settings import Settings
from autogradcli.verify.reconcile import kink_sides


def _notes(r: ag.GradResult, name: str = "x") -> list[tuple[str, dict]]:
    return [(n.code, n.data) for n in r.variables[name].notes]


def _between(elements: int, low: float, high: float) -> tuple[str, dict]:
    """The note of a real kink at ``elements`` elements (relu's, PyTorch's value 0)."""
    data = {"codes": ["relu"], "elements": elements, "sides": [[low, high]], "values": [0.0]}
    return ("kink_between", data)


# --- two sides that are one number --------------------------------------------------------


def test_sides_exactly_2_to_the_minus_40_apart_are_one_number():
    """relu(x)*(1 - 2**-40) - relu(-x) at 0: the sides are 1 (left) and 1 - 2**-40 (right),
    exactly 2**-40 of the larger apart: the edge of "one number". The function is
    differentiable there, so PyTorch's 0 is a missed derivative (✗, nonsmooth_chain_rule)."""
    r = ag.grad("relu(x)*(1 - 2**-40) - relu(-x)", {"x": 0.0}, dtype="float64")
    x = r.variables["x"]
    assert _notes(r) == [
        ("kink_smooth", {"codes": ["relu"], "elements": 1, "values": [1 - 2.0**-40]})
    ]
    assert (x.verdict, x.cause.code) == ("disagree", "nonsmooth_chain_rule")


def test_sides_just_inside_2_to_the_minus_40_of_the_larger_are_one_number():
    """4*(1 - 7e-13) and 4: 7e-13 of the larger apart, between 2**-41 (4.5e-13) and 2**-40
    (9.1e-13): relative to the sides' size, not absolute (2.8e-12 apart)."""
    r = ag.grad("4*(relu(x)*(1 - 7e-13) - relu(-x))", {"x": 0.0}, dtype="float64")
    assert [code for code, _ in _notes(r)] == ["kink_smooth"]


# --- the step beside the point ------------------------------------------------------------

# Two more kinks 1.5 * 2**-160 either side of 0: a step of 2**-160 stays short of them (the
# sides of relu(x) alone, 0 and 1), a step twice as long crosses one (2 on the right, or 1
# on the left: then the sides would be one number).
NEAR = "relu(x) + relu(x - 3*2**-161) - relu(-x - 3*2**-161)"


def test_the_step_beside_a_kink_stops_short_of_a_kink_1_5_steps_away():
    r = ag.grad(NEAR, {"x": 0.0}, dtype="float64")
    assert r.verdict == "agree"
    assert _notes(r) == [_between(1, 0.0, 1.0)]


def test_more_kinks_than_are_moved_one_at_a_time_are_moved_together_by_the_same_step():
    """40 elements at the kink (past the 32 moved one at a time): moved together, each by
    the same step, each reads the same sides."""
    r = ag.grad(f"sum({NEAR})", {"x": [0.0] * 40}, dtype="float64")
    assert r.verdict == "agree"
    assert _notes(r) == [_between(40, 0.0, 1.0)]


def test_up_to_32_kinks_each_side_is_a_partial_derivative_along_one_element():
    """relu(x - mean(x)/2) at 32 zeros: moving one element (the others stay) gives the
    partial derivatives, -31/64 on the left and 63/64 on the right (its own term, and half
    of 1/32 of the others' that are active); moving all 32 together would read 0 and 1/2."""
    r = ag.grad("sum(relu(x - mean(x)/2))", {"x": [0.0] * 32}, dtype="float64")
    assert r.verdict == "agree"
    assert _notes(r) == [_between(32, -31 / 64, 63 / 64)]


# --- which arithmetic takes the sides -----------------------------------------------------

# A second kink 2**-60 to the right of 1: a step of 2**-160 (mpmath, up to 16,384 input
# elements) stays short of it (sides 0 and 1); float64's next number after 1, 2**-52 away
# (past 16,384 elements), crosses it (sides 0 and 2: the documented limit of that path).
AFTER_ONE = "relu(x - 1) + relu(x - 1 - 2**-60) + sum(y)"


def test_up_to_16384_elements_the_sides_are_taken_in_mpmath():
    r = ag.grad(AFTER_ONE, {"x": 1.0, "y": np.ones(16384)}, dtype="float64")
    assert r.verdict == "agree"
    assert _notes(r) == [_between(1, 0.0, 1.0)]


def test_past_16384_elements_of_any_input_the_sides_are_float64s_next_numbers():
    """y, not x, has the 16,385 elements: the largest input decides the arithmetic."""
    r = ag.grad(AFTER_ONE, {"x": 1.0, "y": np.ones(16385)}, dtype="float64")
    assert r.verdict == "agree"
    assert _notes(r) == [_between(1, 0.0, 2.0)]


def test_float64s_next_numbers_are_taken_on_both_sides():
    """Past 16,384 elements, relu's sides at 0 are still 0 and 1 (one step each way)."""
    r = ag.grad("relu(x) + sum(y)", {"x": 0.0, "y": np.ones(16385)}, dtype="float64")
    assert _notes(r) == [_between(1, 0.0, 1.0)]


def test_past_16384_elements_sides_that_are_one_number_are_read_from_the_right_too():
    """The float64 path (y has 16,385 elements): relu(x)*(1 - 2**-40) - relu(-x) at 0 has
    the sides 1 (left) and 1 - 2**-40 (right), one number: the reference is the right
    side's, as in mpmath, so each side is read where it is (the next float below 0 for the
    left, above for the right), never the two swapped."""
    r = ag.grad(
        "relu(x)*(1 - 2**-40) - relu(-x) + sum(y)",
        {"x": 0.0, "y": np.ones(16385)},
        dtype="float64",
    )
    assert _notes(r) == [
        ("kink_smooth", {"codes": ["relu"], "elements": 1, "values": [1 - 2.0**-40]})
    ]
    assert float(r.variables["x"].expected) == 1 - 2.0**-40


# --- a model that cannot be evaluated beside the point ------------------------------------


def test_a_model_without_an_evaluation_beside_the_point_leaves_kinks_as_they_are():
    """The numeric model has no evaluation at a moved point: SymPy's kinks stay left out
    (PyTorch's convention), with no sides decided."""
    bound = bind("sum(relu(x))", {"x": [0.0, 1.0]}, Settings(dtype="float64"))
    exact = choose(
        bound.program, bound.shapes, bound.limits, bound.arrays, None, bound.differentiate
    )
    assert exact.expected.kinks["x"].tolist() == [True, False]
    numeric = NumericModel(bound.program, bound.shapes, bound.limits)
    assert kink_sides(numeric, bound.arrays, None, exact.expected) is exact.expected


# --- what the sides decide where SymPy or a side has no number ----------------------------


def test_a_real_kink_where_sympy_has_no_number_is_referenced_at_its_number_nearest_0():
    """relu(x) - relu(-x)/2 + x*sqrt(relu(x)) at 0: the sides are 1/2 and 1 (the last term
    is x**1.5 on the right, 0 on the left), SymPy's value is NaN there (x times
    sqrt(relu(x))'s 0/0), PyTorch's 0 lies outside. The reference is 1/2, the interval's
    number nearest 0, and the error PyTorch's distance from it."""
    r = ag.grad("relu(x) - relu(-x)/2 + x*sqrt(relu(x))", {"x": 0.0}, dtype="float64")
    x = r.variables["x"]
    assert (x.verdict, x.cause.code) == ("disagree", "kink_outside")
    assert (x.cause.data["low"], x.cause.data["high"]) == (0.5, 1.0)
    assert float(x.expected) == 0.5
    assert x.max_abs_error == 0.5


def test_a_one_at_a_time_move_that_lands_on_another_kink_leaves_the_element_out():
    """relu(x) + relu(x - 2**-160) at 0: the step to the right lands exactly on the second
    kink, so that side has no partial derivative (SymPy's there would count relu'(0) as
    1/2, giving a false 3/2): the element stays left out, PyTorch's convention."""
    r = ag.grad("relu(x) + relu(x - 2**-160)", {"x": 0.0}, dtype="float64")
    assert r.verdict == "agree"
    assert _notes(r) == [("kink", {"codes": ["relu"], "excluded": 1, "values": [0.0]})]


def test_a_zero_weight_does_not_hide_a_side_outside_the_domain():
    """relu(x) + sqrt(x) at [0, 1] with weights [0, 1]: left of 0, sqrt has no derivative,
    and 0 times no number is no number (as backward(w) computes 0*inf): the side is
    undecided, never a derivative 0 that a zero weight made up. The reference at 0 is
    NaN (0 times sqrt'(0)), PyTorch's NaN there is at relu's kink (✗, non_differentiable,
    not a missed derivative)."""
    r = ag.grad("relu(x) + sqrt(x)", {"x": [0.0, 1.0]}, weights=[0.0, 1.0], dtype="float64")
    x = r.variables["x"]
    assert np.isnan(x.expected[0]) and x.expected[1] == 1.5
    assert (x.verdict, x.cause.code) == ("disagree", "non_differentiable")
    assert _notes(r) == []
