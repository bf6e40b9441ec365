"""The numeric fallback (issue 23, section 3): where SymPy is not used, central differences
in float64, Richardson-extrapolated, with an error estimate per element. Elements whose
estimate is within a tenth of the dtype's tolerance are checked at that tolerance; the rest
are left out and counted in notes; ✓ never comes at a tolerance looser than the header's.

The fallback is forced the two ways it happens: past the symbol caps (300 input elements of
a reduction) and past SymPy's time limit (``within`` made to expire at once).
``AUTOGRAD_CLI_LONG=1`` runs the properties with many more examples.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autogradcli as ag
from autogradcli.bind import bind
from autogradcli.notes import Note
from autogradcli.policy.compare import Marks, compare
from autogradcli.reference import NumericModel
from autogradcli.reference.choice import choose
from autogradcli.reference.numeric import Extrapolated, extrapolate
from autogradcli.reference.timeout import SympyTimeout
from autogradcli.settings import TOLERANCES, Settings
from tests.conftest import cli

LONG = os.environ.get("AUTOGRAD_CLI_LONG") == "1"
EXAMPLES = 300 if LONG else 12
PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not LONG,
    suppress_health_check=[HealthCheck.too_slow],
)
END_TO_END = settings(PROPERTY, max_examples=40 if LONG else 3)  # 1.5 s each: 300 elements

LSE = "1000*logsumexp(x, 0)"
LSE_X = "full(300, 10000.0)"  # 300 input elements: past the exact check's 256


@contextmanager
def sympy_expires() -> Iterator[None]:
    """SymPy's exact check past its time limit at once: the numeric fallback stands in."""

    def expire(seconds: float, work: object) -> object:
        raise SympyTimeout("sympy_timeout", seconds=seconds)

    with mock.patch("autogradcli.reference.timeout.within", expire):
        yield


def note_codes(notes: tuple[Note, ...] | list[Note]) -> list[str]:
    return [n.code for n in notes]


# --- the example of the issue ------------------------------------------------------------


def test_logsumexp_at_scale_is_checked_at_float32s_tolerance():
    """The reference is 1000/300 to 4e-8 (its estimate: 1.1e-6, within a tenth of float32's
    1.4e-5 there), so float32's 3.33227 (3.2e-4 off) is judged at float32's tolerance, as
    SymPy's exact check judges it below the cap: precision loss, ✗."""
    r = ag.grad(LSE, x=LSE_X)
    assert r.expected_by == "numeric" and note_codes(r.notes) == ["numeric_fallback"]
    assert (r.rtol, r.atol) == TOLERANCES["float32"]
    x = r.variables["x"]
    assert np.abs(x.expected - 1000 / 300).max() < 1e-7
    assert np.abs(x.grad - 1000 / 300).max() > 3e-4  # float32's own rounding of the slope
    assert r.verdict == "disagree" and [c.code for c in r.causes()] == ["precision_loss"]
    assert note_codes(x.notes) == []  # every element checked


def test_logsumexp_in_float64_is_unchecked_and_says_float64_is_too_coarse():
    r = ag.grad(LSE, x=LSE_X, dtype="float64")
    assert (r.rtol, r.atol) == TOLERANCES["float64"]
    assert r.verdict == "unchecked" and r.agree is False
    x = r.variables["x"]
    assert x.verdict == "unchecked" and x.cause is None
    assert note_codes(x.notes) == ["numeric_unchecked", "numeric_coarse"]
    unchecked, coarse = x.notes
    assert (unchecked.data["elements"], unchecked.data["total"]) == (300, 300)
    assert 1e-7 < unchecked.data["error"] < 1e-5  # f is 1e7: u * |f| / h is about 1e-6
    assert coarse.data["elements"] == 300
    assert all(p.verdict == "unchecked" for p in r.passes)
    assert r.to_dict()["verdict"] == "unchecked"


def test_logsumexp_in_float64_on_the_command_line():
    run = cli("grad", LSE, "--x", LSE_X, "--dtype", "float64")
    assert run.exit_code == 1
    out = " ".join(run.stdout.split())
    assert "dtype float64 · rtol 1e-07, atol 1e-07" in out
    assert "x: 300 of 300 element(s) not checked: the numeric reference there" in out
    assert "the forward pass in float64 is too coarse" in out
    assert "--sympy-timeout for SymPy's exact check" in out
    assert out.endswith(
        "? not checked: the numeric reference is too loose for float64's tolerance at every "
        "element of x (see the notes); exit code 1"
    )


# --- the estimate's table ------------------------------------------------------------------


def test_extrapolation_of_an_exact_polynomial_table():
    """D(h) = 3 + h^2 + h^4 (a central difference of x^3/... with those error terms):
    R2 removes both, exactly, and the estimate is the rounding term alone."""
    h = 0.5 / 4.0 ** np.arange(6)
    central = (3 + h**2 + h**4)[None, :]
    found = extrapolate(central, h[None, :], np.array([1.0]))
    assert found.value[0] == pytest.approx(3.0, abs=1e-13)
    assert found.rounding[0] <= found.error[0] < 1e-11 and found.coarse()[0]


def test_too_few_levels_give_no_estimate():
    found = extrapolate(np.array([[1.0, 1.1, 1.2]]), np.ones((1, 3)), np.ones(1))
    assert found.value.tolist() == [1.2] and found.error.tolist() == [np.inf]
    assert found.loose(1.0, 1.0).tolist() == [True]


def test_loose_is_a_tenth_of_the_tolerance():
    found = Extrapolated(np.array([2.0, 2.0, 2.0]), np.array([1e-6, 2e-6, np.nan]), np.zeros(3))
    # atol 1e-5 + rtol 0 * 2: a tenth is 1e-6
    assert found.loose(0.0, 1e-5).tolist() == [False, True, True]
    assert found.loose(0.0, 1e-5, scale=2.0).tolist() == [True, True, True]


# --- a property: the numbers are as good as they claim -----------------------------------

UNARY = ["sin", "cos", "tanh", "exp", "sigmoid", "atan", "softplus"]


@st.composite
def smooth(draw: st.DrawFn, depth: int = 3) -> str:
    """A smooth expression of x (analytic on the reals)."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        c = draw(st.sampled_from(["0.5", "1.5", "-2", "3"]))
        return draw(st.sampled_from(["x", f"{c}*x", "x**2", f"(x + {c})"]))
    kind = draw(st.integers(0, 3))
    a = draw(smooth(depth - 1))
    if kind <= 1:
        return f"{draw(st.sampled_from(UNARY))}({a})"
    b = draw(smooth(depth - 1))
    if kind == 2:
        return draw(st.sampled_from([f"({a}) * ({b})", f"({a}) + ({b})", f"({a}) - ({b})"]))
    return f"({a}) / (1 + ({b})**2)"


values = st.lists(
    st.floats(-2.5, 2.5, allow_nan=False).map(lambda v: round(v, 3)), min_size=1, max_size=4
)


@PROPERTY
@given(text=smooth(), x=values)
def test_richardson_is_within_its_estimate_of_sympys_derivative(text: str, x: list[float]):
    """For smooth expressions, Richardson's numbers are within the error they claim of
    SymPy's exact derivative (evaluated in mpmath), at every element with an estimate, and
    every element gets one."""
    program = f"sum({text})"
    bound = bind(program, {"x": x}, Settings(dtype="float64"))
    exact = choose(
        bound.program, bound.shapes, bound.limits, bound.arrays, None, bound.differentiate
    )
    assert exact.exact
    model = NumericModel(bound.program, bound.shapes, bound.limits, precise=True)
    expected, accuracy = model.evaluate_with_error(bound.arrays, None, bound.differentiate)
    assert accuracy is not None
    want = exact.expected.grads["x"]
    got, error = expected.grads["x"], accuracy["x"].error
    assert np.isfinite(error).all(), (program, x, error)
    off = np.abs(got - want)
    assert (off <= error).all(), (program, x, got, want, error)


# --- adversarial placement: one wrong element among 300 ----------------------------------

ADVERSARY = "sum(sin(x) * x + 0.5 * x**2)"


def _derivative(x: np.ndarray) -> np.ndarray:
    return np.cos(x) * x + np.sin(x) + x


@pytest.fixture(scope="module")
def fallback_reference():
    """The fallback reference of ADVERSARY at 300 values (SymPy's time limit expired)."""
    x = np.linspace(-3, 3, 300)
    bound = bind(ADVERSARY, {"x": x}, Settings())
    with sympy_expires():
        reference = choose(
            bound.program, bound.shapes, bound.limits, bound.arrays, None, bound.differentiate
        )
    assert not reference.exact and note_codes(reference.notes) == ["timeout_fallback"]
    return x, reference


def test_the_fallback_checks_every_element_of_a_benign_tensor(fallback_reference):
    x, reference = fallback_reference
    rtol, atol = TOLERANCES["float32"]
    loose = reference.unchecked("x", rtol, atol)
    assert loose is not None and not loose.any()
    assert reference.unchecked_notes("x", rtol, atol) == []
    error = reference.error_of("x")
    assert (
        error is not None
        and (np.abs(reference.expected.grads["x"] - _derivative(x)) <= error).all()
    )
    right = _derivative(x).astype(np.float32).astype(np.float64)  # float32's rounding
    assert compare(right, reference.expected.grads["x"], rtol, atol, Marks(unknown=loose)).agree


@PROPERTY
@given(
    index=st.integers(0, 299),
    times=st.floats(3.0, 500.0),
    sign=st.sampled_from([-1.0, 1.0]),
)
def test_one_wrong_element_anywhere_is_found(fallback_reference, index, times, sign):
    """A gradient off by 3 to 500 times float32's tolerance at one element, anywhere among
    300 (most of it below the old 1e-3 relative of plain central differences), disagrees."""
    x, reference = fallback_reference
    rtol, atol = TOLERANCES["float32"]
    wrong = _derivative(x)
    wrong[index] += sign * times * (atol + rtol * abs(wrong[index]))
    loose = reference.unchecked("x", rtol, atol)
    check = compare(wrong, reference.expected.grads["x"], rtol, atol, Marks(unknown=loose))
    assert not check.agree and check.excluded == 0


@END_TO_END
@given(index=st.integers(0, 299), times=st.floats(3.0, 500.0))
def test_one_wrong_element_through_the_judge_is_a_disagreement(index, times):
    """End to end: autograd's .grad made wrong at one index (after the passes ran), judged
    by ``grad`` against the fallback reference: ✗, at float32's tolerance in the header."""
    import autogradcli.pipeline as pipeline

    real, reference_for = pipeline.run_passes, pipeline.reference_for

    def wrong_at_index(*args, **kwargs):
        autograd = real(*args, **kwargs)
        grad = autograd.snapshots[-1]["x"]
        grad[index] += times * (1e-5 + 1.3e-6 * abs(grad[index]))
        return autograd

    def once(*args, **kwargs):
        """The fallback reference of the first example (the same program at the same
        inputs in every example: only autograd's .grad differs), kept for the others."""
        if not _JUDGED:
            _JUDGED.append(reference_for(*args, **kwargs))
        return _JUDGED[0]

    with (
        sympy_expires(),
        mock.patch.object(pipeline, "run_passes", wrong_at_index),
        mock.patch.object(pipeline, "reference_for", once),
    ):
        r = ag.grad(ADVERSARY, x="linspace(-3, 3, 300)")
    assert (r.rtol, r.atol) == TOLERANCES["float32"] and r.expected_by == "numeric"
    assert r.variables["x"].verdict == "disagree" and r.verdict == "disagree"


_JUDGED: list[object] = []  # test_one_wrong_element_through_the_judge's reference


# --- ✓ never at a tolerance looser than the header's ---------------------------------------


@PROPERTY
@given(text=smooth(), x=values, dtype=st.sampled_from(["float32", "float64"]))
def test_agree_only_at_the_printed_tolerance(text: str, x: list[float], dtype: str):
    """Through the fallback, the header's tolerance is the dtype's, and ✓ means every
    checked element is within it of SymPy's exact derivative (plus the reference's tenth);
    elements left out are counted, and a variable with none checked is never ✓."""
    program = f"sum({text})"
    exact = ag.grad(program, x=x, dtype=dtype)  # SymPy's
    with sympy_expires():
        r = ag.grad(program, x=x, dtype=dtype)
    assert r.expected_by == "numeric" and (r.rtol, r.atol) == TOLERANCES[dtype]
    v, want = r.variables["x"], exact.variables["x"].expected
    unchecked = sum(n.data["elements"] for n in v.notes if n.code.startswith("numeric_un"))
    if unchecked == np.size(want):
        assert v.verdict == "unchecked" and r.verdict != "agree"
    if r.verdict == "agree" and unchecked == 0:
        room = 1.1 * (r.atol + r.rtol * np.abs(want))
        assert (np.abs(v.grad - want) <= room).all(), (program, x, v.grad, want)
