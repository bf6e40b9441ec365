"""Stage 6: the verdict of each check of a ``grad`` run (the policy is ``policy.verdict``).

Comparisons of autograd's numbers with the reference become verdicts and causes; the
float64 re-run and the forward pass's diagnosis are made only when a check needs them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from autogradcli.notes import Note
from autogradcli.policy.compare import Comparison, Marks, compare, isclose
from autogradcli.policy.verdict import (
    AGREE,
    DISAGREE,
    ROUNDING,
    UNCHECKED,
    Cause,
    rounding_relative,
    settle,
    worst,
)
from autogradcli.reference import Reference
from autogradcli.reference.expected import Expected
from autogradcli.reference.numeric import DEFAULT as NUMERIC
from autogradcli.results import PassResult, VariableResult
from autogradcli.settings import TOLERANCES
from autogradcli.torchside.run import Autograd, Passes, Session, float64_run
from autogradcli.verify.diagnose import (
    Compared,
    Evidence,
    check_cause,
    float64_noise,
    forward_cause,
    rounding_cause,
)


def times(scale: int, values: np.ndarray) -> np.ndarray:
    """``scale * values``; the array itself for one pass (no copy of a large gradient)."""
    return values if scale == 1 else scale * values


def bounds(expected: Expected, name: str, scale: int = 1) -> tuple[Any, Any] | None:
    """The numeric one-sided slopes for ``name``, times ``scale`` passes, or None."""
    if name not in expected.bounds:
        return None
    low, high = expected.bounds[name]
    return scale * low, scale * high


@dataclass(frozen=True)
class Float64Checks:
    """The float64 re-run's output and gradients, compared with the reference."""

    output: Comparison
    grads: dict[str, Comparison]
    numeric: dict[str, Comparison]


def float64_checks(
    session: Session,
    expected: Expected,
    numbers: Expected | None,
    reference: Reference,
    tolerance: tuple[float, float],
):
    """Run the same inputs (as the dtype rounded them) once in float64 and compare with the
    reference at float64's tolerance: the evidence a ≈ verdict needs. A numeric reference
    adds its estimated error to the absolute tolerance, and leaves out what it cannot check
    at the dtype's ``tolerance``."""
    run = float64_run(session)
    rtol, atol = TOLERANCES["float64"]
    output = compare(run.output, expected.output, rtol, atol, Marks(huge=expected.output_huge))
    grads, numeric = {}, {}
    for name, got in run.grads.items():
        error = reference.error_of(name)
        unknown = expected.unknown_of(name)
        loose = reference.unchecked(name, *tolerance)
        if loose is not None:
            unknown = loose if unknown is None else unknown | loose
        grads[name] = compare(
            got,
            expected.grads[name],
            rtol,
            atol if error is None else atol + np.where(np.isfinite(error), error, 0.0),
            Marks(expected.kinks[name], bounds(expected, name), expected.huge.get(name), unknown),
        )
        if numbers is not None:
            numeric[name] = compare(
                got,
                numbers.grads[name],
                max(rtol, NUMERIC.rtol),
                max(atol, NUMERIC.atol),
                Marks(
                    expected.kinks[name], bounds(numbers, name), unknown=numbers.unknown_of(name)
                ),
            )
    return Float64Checks(output, grads, numeric)


Pick = Callable[[Float64Checks], Comparison]


class Judge:
    """The checks of one ``grad`` run against its reference."""

    def __init__(
        self,
        session: Session,
        autograd: Autograd,
        reference: Reference,
        expected: Expected,
        numbers: Expected | None,
        plan: Passes,
        steps: int,
    ) -> None:
        settings = session.bound.settings
        self.session, self.autograd, self.plan = session, autograd, plan
        self.model, self.reference = reference.model, reference
        self.exact = reference.exact
        self.expected, self.numbers = expected, numbers
        self.rtol, self.atol = settings.tolerance  # a numeric reference leaves out what it
        # cannot check at them (``unchecked``), never widens them
        self.dtype = settings.dtype
        self.relative = rounding_relative(self.dtype, steps)
        self.output_check = compare(
            autograd.output,
            expected.output,
            self.rtol,
            self.atol,
            Marks(huge=expected.output_huge),
            self.relative,
        )
        self._float64: Float64Checks | None = None
        self._checks: dict[tuple[str, int, int], Comparison] = {}
        self._forward: Cause | None = None
        self._diagnosed = False
        self._noise: dict[str, np.ndarray] | None = None

    def check(self, name: str, grads: np.ndarray, scale: int) -> Comparison:
        """``grads`` of ``name`` against ``scale`` times the reference's gradient (each
        pass's array compared once: the last pass is also the final ``.grad``)."""
        key = (name, scale, id(grads))
        if key not in self._checks:
            self._checks[key] = self._check(name, grads, scale)
        return self._checks[key]

    def _check(self, name: str, grads: np.ndarray, scale: int) -> Comparison:
        e = self.expected
        return compare(
            grads,
            times(scale, e.grads[name]),
            self.rtol,
            self.atol,
            Marks(
                e.kinks[name], bounds(e, name, scale), e.huge.get(name), self.unchecked(name, scale)
            ),
            self.relative,
        )

    def unchecked(self, name: str, scale: int) -> np.ndarray | None:
        """Elements left out of ``name``'s check: where the reference has no number, and
        where a numeric reference is too loose for this tolerance."""
        unknown = self.expected.unknown_of(name)
        loose = self.reference.unchecked(name, self.rtol, self.atol, scale)
        if loose is None or not loose.any():
            return unknown
        return loose if unknown is None else unknown | loose

    def settle_variable(self, name: str, check: Comparison, scale: int, pick: Pick) -> str:
        """``settle``; unchecked where every element was left out, some of them because
        the numeric reference is too loose for this tolerance (nothing was checked)."""
        verdict = self.settle(check, pick)
        loose = self.reference.unchecked(name, self.rtol, self.atol, scale)
        nothing = loose is not None and loose.any() and check.excluded == loose.size
        return UNCHECKED if verdict == AGREE and nothing else verdict

    def numeric_check(self, name: str, grads: np.ndarray, scale: int) -> Comparison:
        assert self.numbers is not None
        return compare(
            grads,
            times(scale, self.numbers.grads[name]),
            max(self.rtol, NUMERIC.rtol),
            max(self.atol, NUMERIC.atol),
            Marks(
                self.expected.kinks[name],
                bounds(self.numbers, name, scale),
                unknown=self.numbers.unknown_of(name),
            ),
            self.relative,
        )

    def float64(self) -> Float64Checks | None:
        """The same inputs once more in float64 (lazily; None when the dtype is float64)."""
        if self.dtype == "float64":
            return None
        if self._float64 is None:
            tolerance = (self.rtol, self.atol)
            self._float64 = float64_checks(
                self.session, self.expected, self.numbers, self.reference, tolerance
            )
        return self._float64

    def settle(self, check: Comparison, pick: Pick) -> str:
        if check.agree:
            return AGREE
        f64 = self.float64()
        return settle(check, None if f64 is None else pick(f64))

    def cause(
        self,
        verdict: str,
        compared: Compared,
        pick: Pick,
        kinks: set[str] | frozenset[str] = frozenset(),
        noise: np.ndarray | None = None,
    ) -> Cause | None:
        """The cause of a ``verdict`` that is not agree (None for agree and unchecked):
        ``pick`` chooses the same check among float64's; ``kinks`` and ``noise`` as in
        ``diagnose.Evidence``."""
        if verdict in (AGREE, UNCHECKED):
            return None
        f64 = self.float64()
        f64_check = None if f64 is None else pick(f64)
        if verdict == ROUNDING:
            assert f64_check is not None
            return rounding_cause(compared.check, f64_check, self.dtype, self.relative)
        finite = all(bool(np.all(np.isfinite(v))) for v in self.session.seen.values())
        evidence = Evidence(self.dtype, self.forward(), f64_check, finite, kinks, noise)
        return check_cause(compared, evidence)

    def float64_noise(self) -> dict[str, np.ndarray]:
        """float64's rounding noise in each .grad (``diagnose.float64_noise``), computed once."""
        if self._noise is None:
            self._noise = float64_noise(self.session)
        return self._noise

    def forward(self) -> Cause | None:
        """Where the forward pass went wrong, if it did (computed once, against SymPy's
        reference or the numeric one: both give the forward pass's values)."""
        if not self._diagnosed:
            session = self.session
            trace = self.autograd.forward_values(session)
            self._forward = forward_cause(
                session.bound.program, trace, self.model, session.seen, self.dtype
            )
        self._diagnosed = True
        return self._forward

    def output(self) -> tuple[str, Cause | None]:
        check, e = self.output_check, self.expected
        verdict = self.settle(check, lambda f: f.output)
        compared = Compared(check, self.autograd.output, e.output, e.output_huge)
        return verdict, self.cause(verdict, compared, lambda f: f.output)

    def variable(self, name: str, derivative: str | None, chain: str | None) -> VariableResult:
        """Gradient, reference, verdict, cause and notes of one differentiated variable."""
        e = self.expected
        scale = self.plan.times(len(self.autograd.snapshots))
        grad, want = self.autograd.snapshots[-1][name], times(scale, e.grads[name])
        check = self.check(name, grad, scale)
        verdict = self.settle_variable(name, check, scale, lambda f: f.grads[name])
        huge = e.huge.get(name)
        codes = e.kink_notes[name]
        cause = None if verdict == AGREE else kink_cause(e, name, grad, scale, codes, self.dtype)
        if cause is not None:
            verdict = DISAGREE
        else:
            noise = None
            if self.dtype == "float64" and verdict == DISAGREE and self.exact:
                noise = times(scale, self.float64_noise()[name])
            compared = Compared(check, grad, want, huge)
            cause = self.cause(verdict, compared, lambda f: f.grads[name], codes, noise)
        unknown = e.unknown_of(name)
        marked = e.kinks[name] if unknown is None else e.kinks[name] | unknown
        loose = self.reference.unchecked(name, self.rtol, self.atol, scale)
        notes = variable_notes(codes, check, want, marked, name in e.sides, loose)
        notes += kink_notes(e, name, grad, scale, codes)
        notes += self.reference.unchecked_notes(name, self.rtol, self.atol, scale)
        numeric = numeric_error = numeric_verdict = None
        if self.numbers is not None and self.exact:
            numeric = times(scale, self.numbers.grads[name])
            third = self.numeric_check(name, grad, scale)
            numeric_error = third.max_abs_error
            numeric_verdict = self.settle(third, lambda f: f.numeric[name])
            off = int(self.numbers.unknown[name].sum())
            if off:
                notes.append(Note("numeric_off_domain", {"elements": off}))
            if third.bracketed:
                notes.append(kink_step_note(third.bracketed, "numeric check: "))
        return VariableResult(
            name=name,
            value=self.session.seen[name],
            requires_grad=True,
            grad=grad,
            expected=want,
            derivative=derivative,
            chain=chain,
            max_abs_error=check.max_abs_error,
            notes=tuple(notes),
            numeric=numeric,
            numeric_max_abs_error=numeric_error,
            verdict=verdict,
            cause=cause,
            numeric_verdict=numeric_verdict,
        )

    def passes(self) -> tuple[PassResult, ...]:
        """``.grad`` after each pass against its multiple of the reference."""
        results = []
        names = self.session.bound.names
        for index, grads in enumerate(self.autograd.snapshots, start=1):
            scale = self.plan.times(index)
            want = {n: times(scale, self.expected.grads[n]) for n in names}
            verdicts = [
                self.settle_variable(
                    n, self.check(n, grads[n], scale), scale, lambda f, n=n: f.grads[n]
                )
                for n in names
            ]
            results.append(PassResult(index, grads, want, worst(verdicts)))
        return tuple(results)


def kink_step_note(count: int, prefix: str = "") -> Note:
    """The numeric step crosses a kink at ``count`` elements."""
    data: dict[str, Any] = {"eps": NUMERIC.eps, "elements": count}
    if prefix:
        data["prefix"] = prefix
    return Note("numeric_kink", data)


def variable_notes(
    codes: set[str],
    check: Comparison,
    expected: np.ndarray,
    kinks: np.ndarray,
    sided: bool = False,
    loose: np.ndarray | None = None,
) -> list[Note]:
    """Notes on one variable: elements left out at kinks or with no reference number (with
    PyTorch's values at the kinks, as ``compare`` found them), infinite and undefined
    derivatives. Elements ``loose`` (the numeric reference cannot check them: notes of
    their own) are not counted here. ``kinks``: every element left out by the reference."""
    notes = []
    excluded, values = check.excluded, check.excluded_values
    if loose is not None and loose.any():
        excluded -= int(loose.sum())
    if excluded:
        notes.append(
            Note(
                "kink",
                {
                    "codes": sorted(codes),
                    "excluded": excluded,
                    "values": list(values),
                },
            )
        )
    with np.errstate(all="ignore"):
        ordinary = np.where(kinks, 0.0, expected) if kinks.any() else expected
        infinite, undefined = int(np.isinf(ordinary).sum()), int(np.isnan(ordinary).sum())
    if infinite:
        notes.append(Note("infinite_derivative", {"elements": infinite}))
    if undefined:
        notes.append(Note("undefined_derivative", {"elements": undefined}))
    if check.bracketed and not sided:  # the numeric step's bounds (SymPy's: kink_notes)
        notes.append(kink_step_note(check.bracketed))
    return notes


def _firsts(values: np.ndarray) -> list[float]:
    return [float(v) for v in np.unique(values)[:8]]


def kink_notes(
    expected: Expected, name: str, grad: np.ndarray, scale: int, codes: set[str]
) -> list[Note]:
    """``decided_notes`` for one variable of a ``grad`` run (``scale`` passes)."""
    smooth = expected.smooth_kinks.get(name)
    want = scale * np.broadcast_to(expected.grads[name], np.shape(grad))
    bounds = None
    if name in expected.sides and name in expected.bounds:  # SymPy's sides, not numeric
        bounds = (scale * expected.bounds[name][0], scale * expected.bounds[name][1])
    return decided_notes(codes, smooth, want, bounds, grad)


def decided_notes(
    codes: set[str] | frozenset[str],
    smooth: np.ndarray | None,
    want: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray] | None,
    actual: np.ndarray,
) -> list[Note]:
    """What the one-sided derivatives decided where an operation sits at its kink: the
    function is differentiable there after all (``want`` is its derivative), or it has a
    real kink that PyTorch's value (``actual``) must lie between (``bounds``)."""
    notes = []
    if smooth is not None and smooth.any():
        values = _firsts(np.broadcast_to(want, smooth.shape)[smooth])
        data = {"codes": sorted(codes), "elements": int(smooth.sum()), "values": values}
        notes.append(Note("kink_smooth", data))
    if bounds is not None:
        low, high = bounds
        real = ~np.isnan(low)
        if real.any():
            pairs = sorted(
                {(float(a), float(b)) for a, b in zip(low[real], high[real], strict=True)}
            )
            data = {
                "codes": sorted(codes),
                "elements": int(real.sum()),
                "sides": [list(p) for p in pairs[:4]],
                "values": _firsts(np.broadcast_to(actual, real.shape)[real]),
            }
            notes.append(Note("kink_between", data))
    return notes


def kink_cause(
    expected: Expected, name: str, grad: np.ndarray, scale: int, codes: set[str], dtype: str
) -> Cause | None:
    """The cause where a check fails at an element the one-sided derivatives decided
    (``kink_cause_at``), for one variable of a ``grad`` run."""
    if name not in expected.sides:
        return None
    grad = np.asarray(grad, dtype=np.float64)
    want = scale * np.broadcast_to(expected.grads[name], grad.shape)
    bounds = expected.bounds.get(name)
    if bounds is not None:
        bounds = (scale * bounds[0], scale * bounds[1])
    return kink_cause_at(grad, want, expected.smooth_kinks.get(name), bounds, codes, dtype)


def kink_cause_at(
    grad: np.ndarray,
    want: np.ndarray,
    smooth: np.ndarray | None,
    bounds: tuple[np.ndarray, np.ndarray] | None,
    codes: set[str] | frozenset[str],
    dtype: str,
) -> Cause | None:
    """The chain rule through a kink missed a derivative that exists
    (``nonsmooth_chain_rule``), autograd is NaN or infinite at a real kink
    (``non_differentiable``), or its value lies outside a real kink's interval
    (``kink_outside``); None when no decided element fails."""
    rtol, atol = TOLERANCES[dtype]
    grad = np.asarray(grad, dtype=np.float64)
    if smooth is not None and smooth.any():
        want = np.broadcast_to(want, grad.shape)
        miss = np.broadcast_to(smooth, grad.shape) & ~isclose(grad, want, rtol, atol)
        if miss.any():
            return _missed("nonsmooth_chain_rule", miss, grad, codes, dtype, derivative=want)
    if bounds is not None:
        low, high = (np.broadcast_to(b, grad.shape) for b in bounds)
        with np.errstate(all="ignore"):
            slack = atol + rtol * np.maximum(np.abs(low), np.abs(high))
            inside = (grad >= low - slack) & (grad <= high + slack)
        miss = ~np.isnan(low) & ~inside
        nonfinite = miss & ~np.isfinite(grad)
        if nonfinite.any():  # NaN or inf where the derivative does not exist
            data = {"elements": int(nonfinite.sum()), "points": sorted(codes), "dtype": dtype}
            return Cause("non_differentiable", data)
        if miss.any():
            return _missed("kink_outside", miss, grad, codes, dtype, low=low, high=high)
    return None


def _missed(
    code: str,
    miss: np.ndarray,
    grad: np.ndarray,
    codes: set[str] | frozenset[str],
    dtype: str,
    **at: np.ndarray,
) -> Cause:
    """A kink cause: the operations, how many elements missed, and the first of them (its
    index, autograd's value and the ``at`` arrays' values there)."""
    first = int(np.flatnonzero(miss)[0])
    data: dict[str, Any] = {
        "points": sorted(codes),
        "elements": int(miss.sum()),
        "index": _index(first, grad.shape),
        "autograd": float(grad.reshape(-1)[first]),
        "dtype": dtype,
    }
    data.update(
        {k: float(np.broadcast_to(v, grad.shape).reshape(-1)[first]) for k, v in at.items()}
    )
    return Cause(code, data)


def _index(flat: int, shape: tuple[int, ...]) -> list[int]:
    return [int(i) for i in np.unravel_index(flat, shape)] if shape else []
