"""Compare autograd's numbers with SymPy's, with ``torch.testing.assert_close``'s tolerances."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Default (rtol, atol) per dtype, as torch.testing.assert_close documents them.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
}


@dataclass(frozen=True)
class Comparison:
    """Whether two arrays agree within tolerance, and by how much they differ."""

    agree: bool
    max_abs_error: float
    excluded: int = 0
    bracketed: int = 0  # elements accepted for lying between bounds (see ``compare``)


def compare(
    actual: np.ndarray,
    expected: np.ndarray,
    rtol: float,
    atol: float | np.ndarray,
    exclude: np.ndarray | None = None,
    bounds: tuple[np.ndarray, np.ndarray] | None = None,
) -> Comparison:
    """``|actual - expected| <= atol + rtol*|expected|`` elementwise; NaN equals NaN and
    an infinity equals the same infinity. Elements in ``exclude`` (points where the
    derivative is undefined) are left out of the verdict. ``bounds`` (low, high; NaN where
    there are none) accept an element that misses ``expected`` but lies between them within
    the same tolerance: the one-sided slopes where a numeric step crosses a kink. There the
    error is the distance from the interval."""
    actual, expected = np.broadcast_arrays(np.asarray(actual), np.asarray(expected))
    keep = np.ones(actual.shape, dtype=bool) if exclude is None else ~exclude
    with np.errstate(all="ignore"):
        close = np.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
        same = (actual == expected) | (np.isnan(actual) & np.isnan(expected))
        error = np.where(same, 0.0, np.abs(actual - expected))
        between = np.zeros(actual.shape, dtype=bool)
        if bounds is not None:
            low, high = (
                np.broadcast_to(np.asarray(b, dtype=np.float64), actual.shape) for b in bounds
            )
            slack = atol + rtol * np.maximum(np.abs(low), np.abs(high))
            between = ~close & (actual >= low - slack) & (actual <= high + slack)
            outside = np.maximum(np.maximum(low - actual, actual - high), 0.0)
            error = np.where(between, outside, error)
    checked = error[keep]
    if checked.size == 0:
        max_error = 0.0
    elif np.isnan(checked).any():
        max_error = math.nan
    else:
        max_error = float(checked.max())
    return Comparison(
        agree=bool((close | between)[keep].all()),
        max_abs_error=max_error,
        excluded=int((~keep).sum()),
        bracketed=int((between & keep).sum()),
    )
