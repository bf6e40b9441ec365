"""The verdict's edges that mutation testing found unpinned (issue 23, section 6): the
numeric fallback's elements left out beside elements it checks, the numeric column's own
tolerance, and the causes a numeric reference or a float64 run can and cannot give.

Each test states what a user reads in the result: the verdict, the cause and the notes,
exactly, through the Python API. The fallback is forced as in ``tests/test_fallback.py``
(SymPy's time limit made to expire at once)."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest

import autogradcli as ag
from autogradcli.settings import TOLERANCES
from tests.test_fallback import sympy_expires


def _codes(notes: tuple) -> list[str]:
    return [n.code for n in notes]


def _notes_data(notes: tuple) -> list[tuple[str, dict]]:
    return [(n.code, n.data) for n in notes]


# --- the numeric fallback: left out beside checked ----------------------------------------

# Ten elements at 0 (x**1.5 has no derivative from the left: no number there), one at 0.001
# (the forward pass is near 1e8 there, so its central differences are too coarse for
# float32's tolerance) and one at 100 (checked).
MIXED = "sum(x**1.5 + x**4 + x)"
MIXED_X = [0.0] * 10 + [0.001, 100.0]


@pytest.fixture(scope="module")
def mixed() -> ag.GradResult:
    with sympy_expires():
        return ag.grad(MIXED, {"x": MIXED_X})


def test_an_element_too_loose_to_check_is_left_out_beside_one_that_is_checked(mixed):
    """At 0.001 the numeric reference is 6e-4 from the exact 1 + 1.5*sqrt(0.001) while
    float32's .grad is right: judged, it would be a false ✗. It is left out and said so;
    the element at 100 is checked at float32's own tolerance, and the report is ✓."""
    r, x = mixed, mixed.variables["x"]
    assert r.expected_by == "numeric" and (r.rtol, r.atol) == TOLERANCES["float32"]
    exact = 1 + 1.5 * np.sqrt(0.001) + 4 * 0.001**3
    assert abs(x.grad[10] - exact) < 1e-6 < 5e-4 < abs(x.expected[10] - exact)
    assert (r.verdict, x.verdict, [p.verdict for p in r.passes]) == ("agree", "agree", ["agree"])
    assert x.cause is None  # the largest error is the checked element's:
    assert x.max_abs_error == abs(x.grad[11] - x.expected[11]) < 1e-5 + 1.3e-6 * 4e6
    assert _codes(x.notes) == ["kink", "numeric_unchecked", "numeric_coarse"]
    kink, unchecked, coarse = x.notes
    # the element at 0.001 is counted by numeric_unchecked, not here; PyTorch's values
    # are listed at kinks only (none here: the elements at 0 have no reference number)
    assert kink.data == {"codes": ["off_domain"], "excluded": 10, "values": []}
    assert (unchecked.data["elements"], unchecked.data["total"]) == (1, 12)
    assert 1e-3 < unchecked.data["error"] < 1e-2
    assert coarse.data["elements"] == 1
    # no undefined_derivative note: the NaN references at 0 are the elements left out
    assert np.isnan(x.expected[:10]).all()


def test_an_element_with_no_reference_number_is_left_out_when_the_rest_is_checked():
    """x**1.5 at 0 and 1 through the fallback: no number at 0 (the left step leaves the
    domain), every other element checked (none too loose): ✓, the element at 0 said."""
    with sympy_expires():
        r = ag.grad("sum(x**1.5)", {"x": [0.0, 1.0]})
    x = r.variables["x"]
    assert np.isnan(x.expected[0]) and (r.verdict, x.verdict) == ("agree", "agree")
    assert _notes_data(x.notes) == [
        ("kink", {"codes": ["off_domain"], "excluded": 1, "values": []})
    ]


def test_a_wrong_value_at_a_checked_element_beside_a_left_out_one_disagrees():
    """The same tensor with .grad made wrong at 100 only (by 10x float32's tolerance there):
    ✗, though two kinds of elements are left out beside it; the cause is read from the
    float64 re-run on the elements that are checked."""
    import autogradcli.pipeline as pipeline

    real = pipeline.run_passes

    def wrong_at_100(*args, **kwargs):
        autograd = real(*args, **kwargs)
        grad = autograd.snapshots[-1]["x"]
        grad[11] += 10 * (1e-5 + 1.3e-6 * abs(grad[11]))
        return autograd

    with sympy_expires(), mock.patch.object(pipeline, "run_passes", wrong_at_100):
        r = ag.grad(MIXED, {"x": MIXED_X})
    x = r.variables["x"]
    assert (r.verdict, x.verdict) == ("disagree", "disagree")
    assert _codes(x.notes) == ["kink", "numeric_unchecked", "numeric_coarse"]
    assert x.notes[0].data["excluded"] == 10
    # float64's re-run is right on the same elements (those left out stay out of it too):
    # float32 lost precision, beyond its rounding bound; not a mismatch
    assert (x.cause.code, x.cause.data["kind"]) == ("precision_loss", "beyond_bound")
    assert x.cause.data["float64_error"] < 1e-6


def test_a_variable_whose_elements_are_all_left_out_is_unchecked_not_agree():
    """x's elements: one with no number (0), one too loose (0.001, with y**4 near 1e8 in
    the same function). Nothing of x is checked: x is ? unchecked, y (checked) ✓, and the
    report is unchecked."""
    with sympy_expires():
        r = ag.grad("sum(x**1.5 + x**4) + y**4", {"x": [0.0, 0.001], "y": 100.0})
    x, y = r.variables["x"], r.variables["y"]
    assert (x.verdict, y.verdict, r.verdict) == ("unchecked", "agree", "unchecked")
    assert [p.verdict for p in r.passes] == ["unchecked"]
    assert _codes(x.notes) == ["kink", "numeric_unchecked", "numeric_coarse"]
    assert (x.notes[0].data["excluded"], x.notes[1].data["elements"]) == (1, 1)


def test_the_fallbacks_cause_is_read_from_the_gradients_not_a_forward_replay():
    """A numeric reference has no node values to replay the forward pass against: the
    cause of logsumexp's float32 error is the backward pass's, beyond the rounding bound,
    with float64's error (the float64 re-run agrees)."""
    with sympy_expires():
        r = ag.grad("1000*logsumexp(x, 0)", {"x": np.full(300, 10000.0)})
    assert r.expected_by == "numeric" and r.verdict == "disagree"
    (cause,) = r.causes()
    assert cause.code == "precision_loss"
    assert {k: cause.data[k] for k in ("node", "kind", "dtype")} == {
        "node": "backward",
        "kind": "beyond_bound",
        "dtype": "float32",
    }
    assert cause.data["float64_error"] < 1e-7 < 3e-4 < cause.data["error"]


def test_a_numeric_references_float64_mismatch_makes_no_claim_about_float64s_noise():
    """float64 against the numeric fallback, .grad made wrong: a mismatch, without the
    "stable" claim, which rests on replaying float64's backward pass against SymPy."""
    import autogradcli.pipeline as pipeline

    real = pipeline.run_passes

    def wrong(*args, **kwargs):
        autograd = real(*args, **kwargs)
        autograd.snapshots[-1]["x"] *= 1.001
        return autograd

    with sympy_expires(), mock.patch.object(pipeline, "run_passes", wrong):
        r = ag.grad("sum(exp(x))", {"x": [1.0, 2.0]}, dtype="float64")
    assert r.expected_by == "numeric" and r.verdict == "disagree"
    (cause,) = r.causes()
    assert cause.code == "mismatch" and set(cause.data) == {"float64_error", "dtype"}


def test_float64_cancellation_in_backward_is_named_as_such():
    """d/dx 1e10*(x + cos(x)) cancels near pi/2: float64's own rounding noise, not a
    mismatch (the bound comes from replaying float64's backward pass)."""
    r = ag.grad("1e10*(x + cos(x))", {"x": 1.5707963}, dtype="float64")
    x = r.variables["x"]
    assert x.verdict == "disagree"
    assert (x.cause.code, x.cause.data["kind"]) == ("precision_loss", "float64_noise")


# --- the numeric column: central differences at their own tolerance -----------------------


def test_the_numeric_column_is_judged_at_gradchecks_tolerance_not_a_tighter_dtypes():
    """float64's central differences of x**2 + 50000 at 1e-5 are off by 1.8e-6 (the
    rounding of 50000 divided by the step): within gradcheck's atol 1e-5, far outside
    float64's 1e-7. The numeric column agrees, as the SymPy column does."""
    r = ag.grad("x**2 + 50000", {"x": 1e-5}, dtype="float64", numeric=True)
    x = r.variables["x"]
    assert 1e-6 < abs(float(x.numeric) - 2e-5) < 1e-5
    assert (r.verdict, x.verdict, x.numeric_verdict) == ("agree", "agree", "agree")


def test_the_numeric_column_is_judged_at_the_dtypes_tolerance_where_it_is_looser():
    """bfloat16 rounds 10000 to 9984: 1.6e-3 off, within bfloat16's rtol 1.6e-2 (looser
    than gradcheck's 1e-3), so both columns agree."""
    r = ag.grad("10000*x", {"x": 1e-3}, dtype="bfloat16", numeric=True)
    x = r.variables["x"]
    assert float(x.grad) == 9984.0
    assert (x.verdict, x.numeric_verdict) == ("agree", "agree")


@pytest.mark.parametrize(
    ("text", "off"),
    [
        ("64*(exp(x)-1)/x + 1000000", (1.5e-5, 1e-4)),  # past float64's rtol at 34.8
        ("3e-3*(exp(x)-1)/x + 100000", (2e-6, 1e-5)),  # past float64's atol at 1.6e-3
    ],
)
def test_a_numeric_rounding_verdict_reads_float64_at_gradchecks_tolerance(text, off):
    """bfloat16 at 0.125 is 3.5 % off (≈ in both columns). Whether float64 agrees with the
    numeric column is judged at gradcheck's tolerance, within which its central
    differences are (the constant's rounding puts them ``off`` from the derivative), not at
    float64's own."""
    r = ag.grad(text, {"x": 0.125}, dtype="bfloat16", numeric=True)
    x = r.variables["x"]
    low, high = off
    assert low < abs(float(x.numeric) - float(x.expected)) < high
    assert (x.verdict, x.numeric_verdict) == ("rounding", "rounding")


def test_the_forward_passs_overflow_is_named_at_its_node_with_the_numeric_reference_too():
    """The forward diagnosis reads the forward pass's values, which the numeric reference
    gives as SymPy's does: the overflow is exp(x)'s, not the backward pass's."""
    exact = ag.grad("sum(exp(x))", {"x": [1.0, 100.0]})
    with sympy_expires():
        numeric = ag.grad("sum(exp(x))", {"x": [1.0, 100.0]})
    assert (exact.expected_by, numeric.expected_by) == ("SymPy", "numeric")
    for r in (exact, numeric):
        assert r.verdict == "disagree"
        assert str(r.first_cause()).startswith("overflow: exp(x) reaches 2.68812e+43")
