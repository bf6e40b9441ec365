"""Tests that would catch a wrong verdict (issue 23, section 6).

Each pins an edge of the verdict policy that some mutant of ``policy/verdict.py``,
``policy/compare.py``, ``verify/judge.py`` or ``verify/reconcile.py`` moves
(``python scripts/mutate.py``; docs/trust.md, "Mutation testing"): a number just inside and
just outside each dtype's tolerance, the rounding bound per dtype and for a reduction, a
reference past float64's range, a disagreeing tensor past the fast path's 65,536 elements.
The end-to-end cases use only IEEE addition and subtraction, whose rounding is the same on
every machine, so the printed errors are exact.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import autogradcli as ag
from autogradcli.policy.compare import BLOCK, NO_MARKS, Comparison, Marks, compare, isclose
from autogradcli.policy.verdict import (
    MAX_RELATIVE,
    UNIT_ROUNDOFF,
    passes,
    reduction_steps,
    rounding_relative,
    settle,
    worst,
)
from autogradcli.settings import TOLERANCES

DTYPES = ("float32", "float64", "float16", "bfloat16")


# --- the tolerance, at its edge ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_each_dtypes_atol_is_the_edge_at_a_zero_reference(dtype):
    rtol, atol = TOLERANCES[dtype]
    zero = np.zeros(3)
    at = compare(np.array([0.0, atol, -atol]), zero, rtol, atol)
    assert (at.agree, at.max_abs_error, at.within_bound) == (True, atol, True)
    past = compare(np.array([0.0, np.nextafter(atol, 1.0), 0.0]), zero, rtol, atol)
    assert (past.agree, past.max_abs_error) == (False, np.nextafter(atol, 1.0))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_each_dtypes_rtol_is_the_edge_at_a_large_reference(dtype, sign):
    rtol, atol = TOLERANCES[dtype]
    reference = np.array([sign * 1000.0])
    bound = atol + rtol * 1000.0
    inside = compare(reference + sign * bound * (1 - 1e-6), reference, rtol, atol)
    outside = compare(reference + sign * bound * (1 + 1e-6), reference, rtol, atol)
    assert (inside.agree, outside.agree) == (True, False)
    assert outside.max_abs_error == pytest.approx(bound, rel=1e-5)


# (x + c) - c in each dtype with its default tolerance: the output's error is the rounding
# of x + c, just inside or just outside atol + rtol·|x| (IEEE addition: the same everywhere).
DEFAULT_EDGES = [
    # dtype, c, x, output verdict, the output's printed error
    ("float32", "256.0", 0.2259, "agree", 8.881092071533203e-06),
    ("float32", "256.0", 0.244, "disagree", 1.1965632438659668e-05),
    ("float64", "2**30", 0.2455, "agree", 8.77380371133718e-08),
    ("float64", "2**30", 0.0747, "disagree", 1.171112060521784e-07),
    ("float16", "0.25", 0.270751953125, "agree", 0.000244140625),
    ("float16", "0.25", 0.0797119140625, "rounding", 0.0001220703125),
    ("bfloat16", "0.25", 0.0771484375, "agree", 0.0009765625),
    ("bfloat16", "0.25", 0.0537109375, "rounding", 0.0009765625),
]


@pytest.mark.parametrize(("dtype", "c", "x", "verdict", "error"), DEFAULT_EDGES)
def test_a_number_just_inside_or_outside_the_default_tolerance(dtype, c, x, verdict, error):
    r = ag.grad(f"(x + {c}) - {c}", x=x, dtype=dtype)
    assert (r.output_verdict, r.verdict, r.output_max_abs_error) == (verdict, verdict, error)
    assert r.variables["x"].verdict == "agree"  # the gradient is exactly 1


def test_float32s_rtol_and_atol_are_not_swapped():
    """At |x| = 0.2259 the error 8.88e-6 is within 1e-5 + 1.3e-6·|x| but not within
    1.3e-6 + 1e-5·|x|: the tolerance read the wrong way round would give ✗."""
    rtol, atol = TOLERANCES["float32"]
    x = float(np.float32(0.2259))
    error = 8.881092071533203e-06
    assert error <= atol + rtol * x and error > rtol + atol * x
    assert ag.grad("(x + 256.0) - 256.0", x=0.2259).verdict == "agree"


def test_given_tolerances_reach_the_check_each_in_its_place():
    expr = "(x + 256.0) - 256.0"
    first = ag.grad(expr, x=0.2259, rtol=0, atol=0)
    error, value = first.output_max_abs_error, float(first.output_expected)
    assert (error, first.output_verdict) == (8.881092071533203e-06, "disagree")
    assert ag.grad(expr, x=0.2259, rtol=0, atol=error).verdict == "agree"
    below = float(np.nextafter(error, 0.0))
    assert ag.grad(expr, x=0.2259, rtol=0, atol=below).verdict == "rounding"
    relative = error / value * (1 + 1e-12)
    assert ag.grad(expr, x=0.2259, rtol=relative, atol=0).verdict == "agree"
    less = error / value * (1 - 1e-12)
    assert ag.grad(expr, x=0.2259, rtol=less, atol=0).verdict == "disagree"


# --- the rounding bound ------------------------------------------------------------------------


def test_the_unit_roundoff_of_each_dtype():
    assert UNIT_ROUNDOFF == {
        "float64": 2.0**-53,
        "float32": 2.0**-24,
        "float16": 2.0**-11,
        "bfloat16": 2.0**-8,
    }
    assert MAX_RELATIVE == 0.125


def test_the_rounding_bound_is_steps_times_u_up_to_an_eighth():
    assert rounding_relative("float32", 7) == 7 * 2.0**-24
    assert rounding_relative("float64", 3) == 3 * 2.0**-53
    assert rounding_relative("float32", 0) == rounding_relative("float32", 1) == 2.0**-24
    assert rounding_relative("float32", 2**21 - 1) == (2**21 - 1) * 2.0**-24 < 0.125
    assert rounding_relative("float32", 2**21) == rounding_relative("float32", 2**30) == 0.125
    assert rounding_relative("bfloat16", 31) == 31 / 256
    assert rounding_relative("bfloat16", 32) == rounding_relative("bfloat16", 33) == 0.125


def test_a_reduction_adds_ceil_log2_n_steps():
    assert [reduction_steps(n) for n in (0, 1, 2, 3, 4, 5, 1024, 1025)] == [
        0, 0, 1, 2, 2, 3, 10, 11,
    ]  # fmt: skip
    u = 2.0**-24
    bounds = {
        n: ag.grad("sum(sin(x))", x=np.ones(n), rtol=0, atol=0).rounding_bound
        for n in (1, 2, 1024, 1025)
    }
    assert [(bounds[n] - bounds[1]) / u for n in (2, 1024, 1025)] == [1.0, 10.0, 11.0]


def test_the_printed_rounding_bound_uses_each_dtypes_unit_roundoff():
    steps = {}
    for dtype in DTYPES:
        r = ag.grad("sin(x)", x=1, dtype=dtype, rtol=0, atol=0)
        steps[dtype] = r.rounding_bound / UNIT_ROUNDOFF[dtype]
        if dtype != "float64":  # float64 has no float64 re-run to call it rounding
            assert r.verdict == "rounding"
            assert r.variables["x"].cause.data["bound"] == r.rounding_bound
    assert len(set(steps.values())) == 1 and steps["float32"] == int(steps["float32"])


@pytest.mark.parametrize(
    ("dtype", "x", "verdict", "grad"),
    [
        # float32: 4.7 % off, within 1/8 but far past 10 steps of 2^-24
        ("float32", 1e-3, "disagree", 0.47698974609375),
        # bfloat16: 5.6 % off, past 10·2^-8 (3.9 %), within 1/8
        ("bfloat16", 0.25, "disagree", 0.625),
        # bfloat16: 3.5 % off, within 10·2^-8, float64 agrees
        ("bfloat16", 0.125, "rounding", 0.5625),
    ],
)
def test_the_gradients_rounding_bound_is_the_dtypes_not_an_eighth(dtype, x, verdict, grad):
    r = ag.grad("(exp(x)-1)/x", x=x, dtype=dtype)
    v = r.variables["x"]
    assert (float(v.grad), v.verdict) == (grad, verdict)
    assert v.cause.code == ("precision_loss" if verdict == "disagree" else "rounding")
    relative = abs(float(v.grad) - float(v.expected)) / abs(float(v.expected))
    assert (relative > r.rounding_bound) == (verdict == "disagree")
    assert relative < MAX_RELATIVE


def test_within_rounding_reports_the_error_and_the_bound_exactly():
    check = compare(np.array([1.0, 2.1]), np.array([1.0, 2.0]), 0.0, 0.0, relative=0.06)
    assert (check.agree, check.within_bound) == (False, True)
    assert check.max_relative_error == pytest.approx(0.05, rel=1e-12)
    assert check.max_abs_error == pytest.approx(0.1, rel=1e-12)
    beyond = compare(np.array([1.0, 2.1]), np.array([1.0, 2.0]), 0.0, 0.0, relative=0.04)
    assert (beyond.agree, beyond.within_bound) == (False, False)
    zero = compare(np.array([0.0, 2.1]), np.array([0.0, 2.0]), 0.0, 0.0, relative=0.06)
    assert zero.max_relative_error == pytest.approx(0.05, rel=1e-12)  # 0/0 is no error


def test_a_nonfinite_number_is_never_within_rounding():
    check = compare(np.array([np.inf, 1.0]), np.array([1.0, 1.1]), 0.0, 0.0, relative=0.125)
    assert (check.agree, check.within_bound, check.nonfinite) == (False, False, 1)
    assert check.max_relative_error == pytest.approx(0.1 / 1.1, rel=1e-12)


# --- settle, worst, passes ---------------------------------------------------------------------


def _cmp(agree: bool, within: bool = False) -> Comparison:
    return Comparison(agree=agree, max_abs_error=0.0, within_bound=within)


def test_settle_is_the_policys_table():
    yes, no = _cmp(True), _cmp(False)
    assert settle(_cmp(True), None) == "agree"
    assert settle(_cmp(True), no) == "agree"
    assert settle(_cmp(False, True), yes) == "rounding"
    assert settle(_cmp(False, True), no) == "disagree"
    assert settle(_cmp(False, True), None) == "disagree"
    assert settle(_cmp(False, False), yes) == "disagree"
    assert settle(_cmp(False, False), None) == "disagree"


def test_worst_reads_every_verdict():
    assert worst([]) == worst([None]) == worst(["agree", None]) == "agree"
    assert worst(["agree", "rounding", "agree"]) == "rounding"
    assert worst(["agree", "agree", "disagree"]) == "disagree"
    assert worst(["rounding", "unchecked", "agree"]) == "unchecked"
    assert worst(["unchecked", "disagree", None]) == "disagree"
    assert worst(iter(["agree", "rounding"])) == "rounding"


def test_passes_is_exit_code_zero():
    table = {
        (v, strict): passes(v, strict)
        for v in ("agree", "rounding", "unchecked", "disagree")
        for strict in (False, True)
    }
    assert [k for k, ok in table.items() if ok] == [
        ("agree", False),
        ("agree", True),
        ("rounding", False),
    ]


def test_a_pass_verdict_reads_every_variable():
    r = ag.grad("x + sqrt(y**2)", x=1, y=0, repeat=2)
    assert list(r.variables) == ["x", "y"]
    assert (r.variables["x"].verdict, r.variables["y"].verdict) == ("agree", "disagree")
    assert [p.verdict for p in r.passes] == ["disagree", "disagree"]
    good = ag.grad("x + sqrt(y**2)", x=1, y=2, repeat=2)
    assert [p.verdict for p in good.passes] == ["agree", "agree"]


# --- compare: what is left out, what is huge, what lies between ---------------------------------


def test_a_huge_reference_is_never_met_by_infinity():
    inf = np.array([np.inf, 2.0])
    plain = compare(inf, inf, 1e-7, 1e-7)
    assert (plain.agree, plain.nonfinite, plain.max_abs_error) == (True, 0, 0.0)
    huge = compare(inf, inf, 1e-7, 1e-7, Marks(huge=np.array([True, False])))
    assert (huge.agree, huge.nonfinite, huge.within_bound) == (False, 1, False)
    assert math.isnan(huge.max_abs_error)
    finite = compare(np.array([1e308, 2.0]), inf, 1e-7, 1e-7, Marks(huge=np.array([True, False])))
    assert (finite.agree, finite.nonfinite) == (False, 0)


def test_an_infinite_or_nan_reference_is_met_only_by_itself():
    want = np.array([np.inf, -np.inf, np.nan])
    assert compare(want.copy(), want, 0.1, 0.1).agree
    for wrong in ([np.inf, np.inf, np.nan], [np.inf, -np.inf, 1.0], [1e308, -np.inf, np.nan]):
        assert not compare(np.array(wrong), want, 0.1, 0.1).agree, wrong
    assert not isclose(np.array([np.nan]), np.array([1.0]), 1.0, 1.0)[0]


def test_elements_left_out_and_unknown():
    actual, want = np.array([5.0, np.nan, 1.0]), np.array([1.0, 1.0, 1.0])
    kink = np.array([True, False, False])
    off = np.array([False, True, False])
    left = compare(actual, want, 0.0, 0.0, Marks(exclude=kink, unknown=off))
    assert (left.agree, left.excluded, left.nonfinite, left.max_abs_error) == (True, 2, 0, 0.0)
    assert left.excluded_values[0] == 5.0
    nan_at_kink = compare(
        np.array([np.nan, 1.0]), np.ones(2), 0, 0, Marks(exclude=np.array([1, 0], bool))
    )
    assert (nan_at_kink.agree, nan_at_kink.nonfinite, nan_at_kink.nonfinite_at_kink) == (
        False,
        1,
        1,
    )
    assert nan_at_kink.excluded == 0
    nan_unknown = compare(
        np.array([np.nan, 1.0]), np.ones(2), 0, 0, Marks(unknown=np.array([1, 0], bool))
    )
    assert (nan_unknown.agree, nan_unknown.nonfinite, nan_unknown.excluded) == (True, 0, 1)


def test_many_excluded_values_show_the_first_eight():
    actual = np.arange(12.0)
    left = compare(actual, np.zeros(12), 0, 0, Marks(exclude=np.ones(12, bool)))
    assert left.excluded_values == tuple(float(v) for v in range(8))
    assert (left.agree, left.excluded, left.max_abs_error) == (True, 12, 0.0)


def test_bounds_accept_a_value_between_them_within_the_tolerance():
    want = np.array([0.5, 0.5])
    low, high = np.array([0.0, np.nan]), np.array([1.0, np.nan])
    rtol, atol = 0.01, 0.001
    slack = atol + rtol * 1.0
    for value, error in ((0.0, 0.0), (1.0, 0.0), (0.25, 0.0), (-slack, slack), (1 + slack, slack)):
        check = compare(np.array([value, 0.5]), want, rtol, atol, Marks(bounds=(low, high)))
        assert (check.agree, check.bracketed) == (True, 1), value
        assert check.max_abs_error == pytest.approx(error, abs=1e-15)  # the distance outside
    for value in (-slack * 1.01, 1 + slack * 1.01):
        check = compare(np.array([value, 0.5]), want, rtol, atol, Marks(bounds=(low, high)))
        assert (check.agree, check.bracketed) == (False, 0), value
        assert check.max_abs_error == pytest.approx(abs(value - 0.5), rel=1e-12)
    near = compare(np.array([1.0 + slack / 2, 0.5]), want, rtol, atol, Marks(bounds=(low, high)))
    assert near.max_abs_error == pytest.approx(slack / 2, rel=1e-9)  # the distance outside


def test_bounds_scale_their_slack_by_the_larger_side():
    want = np.array([-50.0])
    low, high = np.array([-100.0]), np.array([-10.0])
    rtol, atol = 0.01, 0.0
    inside = compare(np.array([-10.0 + 0.99]), want, rtol, atol, Marks(bounds=(low, high)))
    outside = compare(np.array([-10.0 + 1.01]), want, rtol, atol, Marks(bounds=(low, high)))
    assert (inside.agree, outside.agree) == (True, False)
    below = compare(np.array([-100.0 - 0.99]), want, rtol, atol, Marks(bounds=(low, high)))
    assert below.agree


def test_a_nan_between_bounds_is_not_between():
    check = compare(
        np.array([np.nan]),
        np.array([0.5]),
        0.0,
        0.0,
        Marks(bounds=(np.array([0.0]), np.array([1.0]))),
    )
    assert (check.agree, check.bracketed, check.nonfinite) == (False, 0, 1)


# --- past 65,536 elements: the fast path and the whole comparison agree ---------------------


def _both(actual, expected, rtol, atol):
    """compare's answer on the fast path, and the whole comparison's (an array atol)."""
    fast = compare(actual, expected, rtol, atol)
    whole = compare(actual, expected, rtol, np.full(actual.shape, atol))
    return fast, whole


@pytest.mark.parametrize("index", [0, BLOCK - 1, BLOCK, 69_999])
def test_one_element_just_outside_the_tolerance_anywhere_in_a_large_tensor(index):
    rng = np.random.default_rng(index)
    want = rng.uniform(-2.0, 2.0, 70_000)
    rtol, atol = TOLERANCES["float32"]
    actual = want.copy()
    actual[index] = want[index] + 1.01 * (atol + rtol * abs(want[index]))
    fast, whole = _both(actual, want, rtol, atol)
    assert (fast.agree, whole.agree) == (False, False)
    assert fast.max_abs_error == whole.max_abs_error > atol
    actual[index] = want[index] + 0.99 * (atol + rtol * abs(want[index]))
    fast, whole = _both(actual, want, rtol, atol)
    assert (fast.agree, whole.agree) == (True, True)
    assert fast.max_abs_error == whole.max_abs_error == abs(actual[index] - want[index])


def test_a_large_tensor_at_the_exact_edge_and_with_nan_and_inf():
    n = BLOCK + 10
    want = np.zeros(n)
    actual = np.zeros(n)
    actual[-1] = 1e-5  # |a - e| == atol exactly: agree
    fast, whole = _both(actual, want, 0.0, 1e-5)
    assert (fast.agree, fast.max_abs_error) == (whole.agree, whole.max_abs_error) == (True, 1e-5)
    want[:3], actual[:3] = [np.nan, np.inf, -np.inf], [np.nan, np.inf, -np.inf]
    fast, whole = _both(actual, want, 0.0, 1e-5)
    assert (fast.agree, fast.max_abs_error) == (whole.agree, whole.max_abs_error) == (True, 1e-5)
    actual[5] = np.nan  # NaN where the reference is 0
    fast, whole = _both(actual, want, 0.0, 1e-5)
    assert (fast.agree, fast.nonfinite) == (whole.agree, whole.nonfinite) == (False, 1)
    assert math.isnan(fast.max_abs_error) and math.isnan(whole.max_abs_error)


def test_exactly_block_elements_and_one_more():
    for n in (BLOCK, BLOCK + 1):
        want = np.ones(n)
        actual = want.copy()
        actual[n // 2] = np.inf
        fast, whole = _both(actual, want, 0.0, 0.0)
        assert (fast.agree, fast.nonfinite) == (whole.agree, whole.nonfinite) == (False, 1), n


def test_half_the_elements_overflowing_in_a_large_tensor_is_a_disagreement():
    """The issue's case: exp(x) over 70,000 elements, every other one past float32's
    range (x = 100)."""
    x = np.where(np.arange(70_000) % 2 == 0, 1.0, 100.0)
    r = ag.grad("exp(x)", x=x, weights="ones")
    v = r.variables["x"]
    assert (r.verdict, r.output_verdict, v.verdict) == ("disagree", "disagree", "disagree")
    assert v.cause.code == "overflow" and r.output_cause.code == "overflow"
    assert int(np.isinf(v.grad).sum()) == 35_000
    assert math.isinf(v.max_abs_error)


def test_the_fast_path_gives_the_whole_comparisons_answer_field_by_field():
    rng = np.random.default_rng(7)
    want = rng.uniform(-3.0, 3.0, BLOCK + 100)
    want[:2] = [np.inf, np.nan]
    actual = want * (1 + 1e-7)
    fast, whole = _both(actual, want, 1.3e-6, 1e-5)
    assert fast == whole
    assert (fast.excluded, fast.bracketed, fast.nonfinite, fast.nonfinite_at_kink) == (0, 0, 0, 0)
    assert (fast.within_bound, fast.max_relative_error, fast.excluded_values) == (True, 0.0, ())


def test_without_a_rounding_bound_within_bound_is_agreement():
    wrong = compare(np.array([1.5]), np.array([1.0]), 0.0, 0.0)
    assert (wrong.agree, wrong.within_bound, wrong.max_relative_error) == (False, False, 0.5)
    assert compare(np.array([1.0]), np.array([1.0]), 0.0, 0.0).within_bound


def test_the_fast_path_is_taken_exactly_where_it_applies():
    """``_agreeing`` answers a large comparison in which every element agrees, a block at
    a time (the 10^7-element row's memory depends on it), and hands back everything else."""
    from autogradcli.policy.compare import _agreeing

    n = BLOCK + 1
    want = np.linspace(-2.0, 2.0, n)
    want[:3] = [np.nan, np.inf, -np.inf]
    actual = want.copy()
    actual[-1] += 1e-6
    none = np.zeros(n, dtype=bool)
    found = _agreeing(actual, want, 1.3e-6, 1e-5, Marks(exclude=none, huge=none, unknown=none))
    assert found == Comparison(agree=True, max_abs_error=found.max_abs_error, within_bound=True)
    assert found.max_abs_error == pytest.approx(1e-6, rel=1e-9)
    assert _agreeing(actual, want, 1.3e-6, 1e-5, NO_MARKS) == found
    one = none.copy()
    one[5] = True
    handed_back = [
        _agreeing(actual[:BLOCK], want[:BLOCK], 1.3e-6, 1e-5, NO_MARKS),
        _agreeing(actual, want[::-1].copy().reshape(1, n), 1.3e-6, 1e-5, NO_MARKS),
        _agreeing(actual, want, 1.3e-6, np.full(n, 1e-5), NO_MARKS),
        _agreeing(actual, want, 1.3e-6, 1e-5, Marks(bounds=(want, want))),
        _agreeing(actual, want, 1.3e-6, 1e-5, Marks(exclude=one)),
        _agreeing(actual, want, 1.3e-6, 1e-5, Marks(huge=one)),
        _agreeing(actual, want, 1.3e-6, 1e-5, Marks(unknown=one)),
        _agreeing(list(actual), want, 1.3e-6, 1e-5, NO_MARKS),
        _agreeing(actual, list(want), 1.3e-6, 1e-5, NO_MARKS),
        _agreeing(actual, want, 0.0, 1e-7, NO_MARKS),  # one element off
    ]
    assert handed_back == [None] * len(handed_back)
    for index in (3, BLOCK - 1, BLOCK):  # NaN or inf where the reference is finite
        for bad in (np.nan, np.inf):
            wrong = actual.copy()
            wrong[index] = bad
            assert _agreeing(wrong, want, 1.3e-6, 1e-5, NO_MARKS) is None


def test_a_nan_at_a_kink_is_never_close_even_to_a_nan_reference():
    kink = np.array([True, False])
    check = compare(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]), 0.0, 0.0, Marks(exclude=kink))
    assert (check.agree, check.nonfinite, check.nonfinite_at_kink, check.excluded) == (
        False,
        1,
        1,
        0,
    )


def test_a_huge_reference_leaves_the_other_elements_judged():
    huge = np.array([True, False])
    wrong = compare(np.array([np.inf, 5.0]), np.array([np.inf, 1.0]), 0.0, 0.0, Marks(huge=huge))
    assert (wrong.agree, wrong.nonfinite) == (False, 1)
    right = compare(
        np.array([1.0, 2.0]), np.array([np.inf, 2.0]), 0, 0, Marks(exclude=huge, huge=huge)
    )
    assert (right.agree, right.excluded, right.max_abs_error) == (True, 1, 0.0)
    finite = compare(np.array([1e308, 5.0]), np.array([np.inf, 5.0]), 0.0, 0.0, Marks(huge=huge))
    assert (finite.agree, finite.nonfinite, finite.max_abs_error) == (False, 0, np.inf)


def test_the_relative_error_of_an_error_of_exactly_one():
    check = compare(np.array([3.0, 0.0]), np.array([2.0, 0.0]), 0.0, 0.0)
    assert (check.agree, check.max_abs_error, check.max_relative_error) == (False, 1.0, 0.5)
    nothing_finite = compare(np.array([np.nan]), np.array([1.0]), 0.0, 0.0, relative=0.1)
    assert (nothing_finite.within_bound, nothing_finite.max_relative_error) == (False, 0.0)


# --- the judge: passes, the float64 re-run ---------------------------------------------------


def test_repeated_passes_are_checked_against_multiples_of_the_reference():
    r = ag.grad("x*x", x=3, repeat=3)
    assert [p.verdict for p in r.passes] == ["agree"] * 3
    assert [float(p.expected["x"]) for p in r.passes] == [6.0, 12.0, 18.0]
    assert (float(r.variables["x"].grad), float(r.variables["x"].expected)) == (18.0, 18.0)


def test_the_float64_rerun_keeps_a_real_kinks_sides():
    """relu(x) + sin(x) at 0 has the sides 1 and 2; PyTorch's 1 lies between them. With no
    tolerance the float32 rounding of cos(1) at the other element is ≈, which needs the
    float64 re-run to agree, at the kink too: within the same sides."""
    r = ag.grad("sum(relu(x) + sin(x))", x="[0., 1.]", rtol=0, atol=0)
    v = r.variables["x"]
    assert (r.verdict, v.verdict, v.cause.code) == ("rounding", "rounding", "rounding")
    assert v.grad.tolist() == [1.0, 1.5403022766113281]
    assert v.expected.tolist()[0] == 1.5
    assert [n.code for n in v.notes] == ["kink_between"]


# --- notes and causes at kinks, with passes and weights ----------------------------------------


def test_a_smooth_kink_names_the_first_eight_values_times_the_passes():
    w = np.arange(1.0, 11.0)
    r = ag.grad("relu(x) - relu(-x)", x=np.zeros(10), weights=w, repeat=2)
    v = r.variables["x"]
    assert (v.verdict, v.cause.code) == ("disagree", "nonsmooth_chain_rule")
    assert (v.cause.data["elements"], v.cause.data["index"]) == (10, [0])
    assert (v.cause.data["autograd"], v.cause.data["derivative"]) == (0.0, 2.0)
    (note,) = v.notes
    assert (note.code, note.data["elements"]) == ("kink_smooth", 10)
    assert note.data["values"] == [2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0]
    three = ag.grad("relu(x) - relu(-x)", x=np.zeros(2), weights=[3.0, 3.0], repeat=2)
    assert three.variables["x"].cause.data["derivative"] == 6.0
    assert three.variables["x"].notes[0].data["values"] == [6.0]


def test_a_real_kink_names_its_first_four_pairs_of_sides_times_the_passes():
    r = ag.grad("relu(x)", x=np.zeros(6), weights=np.arange(1.0, 7.0), repeat=2)
    v = r.variables["x"]
    assert (v.verdict, v.requires_grad) == ("agree", True)
    (note,) = v.notes
    assert (note.code, note.data["elements"], note.data["values"]) == ("kink_between", 6, [0.0])
    assert note.data["sides"] == [[0.0, 2.0], [0.0, 4.0], [0.0, 6.0], [0.0, 8.0]]


def test_only_the_elements_at_a_smooth_kink_count_as_missed_there():
    r = ag.grad("sum(relu(x) - relu(-x) + exp(x))", x="[0., 100.]")
    cause = r.variables["x"].cause
    assert cause.code == "nonsmooth_chain_rule"
    assert (cause.data["elements"], cause.data["index"], cause.data["autograd"]) == (1, [0], 1.0)


def test_the_numeric_checks_kink_note_says_it_is_the_numeric_checks():
    v = ag.grad("abs(x)", x=1e-7, numeric=True).variables["x"]
    assert (v.verdict, v.numeric_verdict) == ("agree", "agree")
    assert [(n.code, n.data) for n in v.notes] == [
        ("numeric_kink", {"eps": 1e-06, "elements": 1, "prefix": "numeric check: "})
    ]


def test_the_numeric_check_keeps_its_own_tolerance_under_a_tighter_one():
    v = ag.grad("sin(x)", x=1, numeric=True, rtol=0, atol=0).variables["x"]
    assert (v.verdict, v.numeric_verdict) == ("rounding", "agree")
    assert 0 < v.numeric_max_abs_error < 1e-7


def test_one_infinite_element_of_an_input_is_a_nonfinite_input():
    r = ag.grad("sum(relu(x - y))", x="[inf, 1.]", y="[inf, 0.]")
    assert (r.verdict, r.first_cause().code) == ("disagree", "nonfinite_input")
    assert r.variables["y"].cause.code == "nonfinite_input"


def test_a_real_kinks_interval_has_the_dtypes_slack_at_both_ends():
    from autogradcli.verify.judge import kink_cause_at

    rtol, atol = TOLERANCES["float32"]
    for low, high in ((0.0, 1.0), (-100.0, -10.0)):
        slack = atol + rtol * max(abs(low), abs(high))
        bounds = (np.array([low]), np.array([high]))
        for value, code in (
            (low - slack, None),  # the very edge, as the check computes it
            (high + slack, None),
            (low - slack * 0.99, None),
            (high + slack * 0.99, None),
            (low - slack * 1.01, "kink_outside"),
            (high + slack * 1.01, "kink_outside"),
        ):
            cause = kink_cause_at(
                np.array([value]), np.array([0.5]), None, bounds, {"relu"}, "float32"
            )
            assert (cause and cause.code) == code, (low, high, value)
            if cause is not None:
                assert (cause.data["low"], cause.data["high"], cause.data["autograd"]) == (
                    low,
                    high,
                    value,
                )
    nan = kink_cause_at(np.array([np.nan]), np.array([0.5]), None, bounds, {"relu"}, "float32")
    assert (nan.code, nan.data["elements"]) == ("non_differentiable", 1)


def test_the_sides_are_taken_just_beside_the_kink_not_a_step_away():
    """x**2 adds 2x to each side: a step of 2**-160 leaves both sides 1 (smooth, PyTorch's
    0 is wrong); a step of size 1 would see -1 and 3 (a real kink that 0 lies in)."""
    v = ag.grad("relu(x) - relu(-x) + x**2", x=0).variables["x"]
    assert (v.verdict, v.cause.code, float(v.expected)) == ("disagree", "nonsmooth_chain_rule", 1.0)
    assert (v.cause.data["autograd"], v.cause.data["derivative"]) == (0.0, 1.0)


def test_the_verdicts_marks_ranks_and_defaults():
    from autogradcli.policy.verdict import Verdict, agrees

    assert [(v.mark, v.rank) for v in Verdict] == [("✓", 0), ("≈", 1), ("?", 2), ("✗", 3)]
    assert [v.passes() for v in Verdict] == [True, True, False, False]
    assert [v.passes(True) for v in Verdict] == [True, False, False, False]
    assert [agrees(v) for v in ("agree", "rounding", "unchecked", "disagree", None)] == [
        True,
        True,
        False,
        False,
        None,
    ]
    assert agrees("rounding", strict=True) is False
    made = Comparison(agree=False, max_abs_error=1.0)
    assert (made.within_bound, made.excluded, made.nonfinite, made.excluded_values) == (
        False,
        0,
        0,
        (),
    )


def test_a_huge_element_left_out_does_not_excuse_a_wrong_one_beside_it():
    huge = np.array([True, False])
    check = compare(
        np.array([1.0, 5.0]), np.array([np.inf, 2.0]), 0, 0, Marks(exclude=huge, huge=huge)
    )
    assert (check.agree, check.excluded, check.max_abs_error) == (False, 1, 3.0)


def test_a_large_tensor_with_a_matching_infinity_and_one_wrong_number():
    n = BLOCK + 1
    want, actual = np.zeros(n), np.zeros(n)
    want[0] = actual[0] = np.inf
    actual[5] = 1.0
    fast, whole = _both(actual, want, 0.0, 1e-5)
    assert (fast.agree, fast.max_abs_error) == (whole.agree, whole.max_abs_error) == (False, 1.0)
