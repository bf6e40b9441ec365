"""Compare autograd's numbers with the reference, with ``torch.testing.assert_close``'s
tolerances. The policy that turns comparisons into a verdict is in ``verdict.py``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np


@dataclass(frozen=True)
class Comparison:
    """How autograd's numbers relate to the reference's.

    ``agree``: every checked element is within tolerance, and none is NaN or infinite where
    the reference is finite. ``excluded`` elements sit at a non-differentiable point (with
    a finite autograd value: PyTorch's convention, shown in ``excluded_values``);
    ``nonfinite`` counts NaN or infinities against a finite reference (never excluded),
    ``nonfinite_at_kink`` those among them at a non-differentiable point. ``within_bound``:
    every element finite where the reference is, and within ``atol + relative·|ref|`` (the
    rounding bound handed to ``compare``)."""

    agree: bool
    max_abs_error: float
    excluded: int = 0
    bracketed: int = 0  # elements accepted for lying between bounds (see ``compare``)
    nonfinite: int = 0
    nonfinite_at_kink: int = 0
    within_bound: bool = False
    max_relative_error: float = 0.0
    excluded_values: tuple[float, ...] = ()


@dataclass(frozen=True, eq=False)
class Marks:
    """The elements a comparison treats apart (None: none). ``exclude``: a
    non-differentiable point; ``bounds``: (low, high) one-sided slopes, NaN where there are
    none; ``huge``: a reference finite in exact arithmetic but past float64's range;
    ``unknown``: the reference has no number."""

    exclude: np.ndarray | None = None
    bounds: tuple[np.ndarray, np.ndarray] | None = None
    huge: np.ndarray | None = None
    unknown: np.ndarray | None = None


NO_MARKS = Marks()


def compare(
    actual: np.ndarray,
    expected: np.ndarray,
    rtol: float,
    atol: float | np.ndarray,
    marks: Marks = NO_MARKS,
    relative: float = 0.0,
) -> Comparison:
    """``|actual - expected| <= atol + rtol*|expected|`` elementwise; NaN equals NaN and
    an infinity equals the same infinity, except where ``marks.huge`` marks a reference
    that is finite in exact arithmetic but past float64's range. Elements in
    ``marks.exclude`` (points where the derivative is undefined) are left out while
    autograd is finite there; a NaN or an infinity there is a failure. Elements in
    ``marks.unknown`` (the reference has no number: a numeric step outside the domain) are
    left out whatever autograd gives. ``marks.bounds`` (low, high; NaN where there are
    none) accept an element that misses ``expected`` but lies between them within the same
    tolerance: the one-sided slopes where a numeric step crosses a kink. There the error is
    the distance from the interval. ``relative``: the rounding band of ``within_bound``."""
    quick = _agreeing(actual, expected, rtol, atol, marks)
    if quick is not None:
        return quick
    bounds = marks.bounds
    actual, expected = np.broadcast_arrays(np.asarray(actual), np.asarray(expected))
    shape = actual.shape
    none = np.zeros(shape, dtype=bool)
    kinks = none if marks.exclude is None else np.broadcast_to(marks.exclude, shape)
    huge = none if marks.huge is None else np.broadcast_to(marks.huge, shape)
    unknown = none if marks.unknown is None else np.broadcast_to(marks.unknown, shape)
    with np.errstate(all="ignore"):
        bad = ~np.isfinite(actual)
        if bad.any():  # NaN or inf against a finite (or huge) reference, or at a kink
            bad &= (np.isfinite(expected) | huge | kinks) & ~unknown
        close = isclose(actual, expected, rtol, atol)
        if bad.any():
            close &= ~bad
        if huge.any():
            close &= ~huge
        between = none
        if bounds is not None:
            low, high = (np.broadcast_to(np.asarray(b, dtype=np.float64), shape) for b in bounds)
            slack = atol + rtol * np.maximum(np.abs(low), np.abs(high))
            between = ~close & ~bad & (actual >= low - slack) & (actual <= high + slack)
        excluded = (kinks & ~bad) | unknown
        some = bool(excluded.any())  # boolean indexing copies: only when something is left out
        keep = ~excluded
        fine = close | between if bounds is not None else close
        agree = bool(fine[keep].all() if some else fine.all())
        error = _errors(actual, expected, huge, between, bounds, shape)
        checked = error[keep] if some else error.ravel()
        max_error = 0.0
        if checked.size:
            max_error = math.nan if np.isnan(checked).any() else float(checked.max())
        within, relative_max = agree, 0.0
        if not agree:
            outcome = _Outcome(fine, bad, keep)
            within, relative_max = _band(actual, expected, error, outcome, relative, atol)
    values = ()
    if some:
        values = tuple(float(v) for v in np.unique(actual[kinks & ~bad])[:8])  # PyTorch's, at kinks
    return Comparison(
        agree=agree,
        max_abs_error=max_error,
        excluded=int(excluded.sum()),
        bracketed=int((between & keep).sum()) if bounds is not None else 0,
        nonfinite=int(bad.sum()),
        nonfinite_at_kink=int((bad & kinks).sum()),
        within_bound=within,
        max_relative_error=relative_max,
        excluded_values=values,
    )


BLOCK = 1 << 16  # elements per block of a large comparison (512 KiB of float64)


def _agreeing(
    actual: np.ndarray,
    expected: np.ndarray,
    rtol: float,
    atol: float | np.ndarray,
    marks: Marks,
) -> Comparison | None:
    """``compare``'s answer for a large comparison in which every element agrees, worked
    out a block at a time (no array of the whole size is made); None when it does not
    apply (no elements left out, no bounds, the same shape, a single ``atol``) or when an
    element does not agree, and ``compare`` works it out whole. The same rule as below:
    ``_errors`` and ``isclose`` run on each block."""
    if not (isinstance(actual, np.ndarray) and isinstance(expected, np.ndarray)):
        return None
    if actual.size <= BLOCK or actual.shape != expected.shape or np.ndim(atol) or marks.bounds:
        return None
    if any(m is not None and m.any() for m in (marks.exclude, marks.huge, marks.unknown)):
        return None
    a, e = actual.reshape(-1), expected.reshape(-1)
    none = np.zeros(min(BLOCK, a.size), dtype=bool)
    largest, nan = 0.0, False
    with np.errstate(all="ignore"):
        for start in range(0, a.size, BLOCK):
            part, want = a[start : start + BLOCK], e[start : start + BLOCK]
            close = isclose(part, want, rtol, atol)
            bad = ~np.isfinite(part)
            if bad.any():
                close &= ~(bad & np.isfinite(want))
            if not close.all():
                return None
            off = none[: part.size]
            error = _errors(part, want, off, off, None, part.shape)
            nan = nan or bool(np.isnan(error).any())
            largest = max(largest, float(error.max()))
    return Comparison(agree=True, max_abs_error=math.nan if nan else largest, within_bound=True)


def isclose(
    actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float | np.ndarray
) -> np.ndarray:
    """``np.isclose(actual, expected, rtol, atol, equal_nan=True)`` in fewer passes over
    memory (it matters at 10^7 elements): ``|a - e| <= atol + rtol·|e|``, an infinity equal
    to the same infinity, NaN equal to NaN."""
    with np.errstate(all="ignore"):
        diff = np.asarray(np.subtract(actual, expected, dtype=np.float64))
        np.abs(diff, out=diff)
        bound = np.asarray(np.abs(expected, dtype=np.float64))
        bound *= rtol
        bound += atol
        close = diff <= bound
        del diff, bound
        infinite = ~np.isfinite(expected)
        if infinite.any():  # there only the same infinity, or NaN against NaN, is close
            same = (actual == expected) | (np.isnan(actual) & np.isnan(expected))
            close = np.where(infinite, same, close)
    return close


class _Outcome(NamedTuple):
    """Per element: within tolerance or bounds (``fine``), NaN or infinite against a
    finite reference (``bad``), counted in the verdict (``keep``)."""

    fine: np.ndarray
    bad: np.ndarray
    keep: np.ndarray


def _band(
    actual: np.ndarray,
    expected: np.ndarray,
    error: np.ndarray,
    outcome: _Outcome,
    relative: float,
    atol: float | np.ndarray,
) -> tuple[bool, float]:
    """Whether every kept element is within the rounding band ``atol + relative·|ref|``,
    and the largest relative error of a finite element."""
    fine, bad, keep = outcome
    band = isclose(actual, expected, relative, atol)
    within = bool((fine | band)[keep].all() and not bad.any())
    ratios = np.where(error == 0, 0.0, error / np.abs(expected))[keep & ~bad]
    ratios = ratios[~np.isnan(ratios)]
    return within, float(ratios.max()) if ratios.size else 0.0


def _errors(
    actual: np.ndarray,
    expected: np.ndarray,
    huge: np.ndarray,
    between: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray] | None,
    shape: tuple[int, ...],
) -> np.ndarray:
    """|actual - expected| (0 where both are the same number, NaN or infinity); within
    bounds, the distance from the interval."""
    same = actual == expected
    nan = np.isnan(actual)
    if nan.any():
        same |= nan & np.isnan(expected)
    if huge.any():
        same &= ~huge
    error = np.asarray(np.subtract(actual, expected, dtype=np.float64))
    np.abs(error, out=error)
    error[same] = 0.0
    if bounds is not None and between.any():
        low, high = (np.broadcast_to(np.asarray(b, dtype=np.float64), shape) for b in bounds)
        outside = np.maximum(np.maximum(low - actual, actual - high), 0.0)
        error = np.where(between, outside, error)
    return error
