"""What the reference says: output, gradients, and where they are not ordinary numbers.

Free of SymPy and torch: the SymPy models, the numeric check and the verdict all share it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Expected:
    """The reference's output value, each gradient, and where it is not ordinary.

    ``kinks`` marks non-differentiable points (with ``kink_notes`` naming them); ``unknown``
    marks elements the reference has no number for (a numeric step outside the domain);
    ``bounds`` (low, high; NaN where unused) are one-sided numeric slopes where a numeric
    step crosses a kink; ``huge`` marks values that are finite in exact arithmetic but
    past float64's range (shown as ±inf); ``arithmetic`` says how the numbers were made.
    ``sides`` (left, right; NaN elsewhere) are the one-sided partial derivatives of the whole
    function at the elements where an operation sits at its kink (``verify.reconcile``);
    ``smooth_kinks`` marks those among them where the two agree (the function is
    differentiable there, whatever the operation's rule)."""

    output: np.ndarray
    grads: dict[str, np.ndarray]
    kinks: dict[str, np.ndarray] = field(default_factory=dict)
    kink_notes: dict[str, set[str]] = field(default_factory=dict)
    unknown: dict[str, np.ndarray] = field(default_factory=dict)
    output_excluded: np.ndarray | None = None  # output elements left out of the check
    bounds: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    output_huge: np.ndarray | None = None
    huge: dict[str, np.ndarray] = field(default_factory=dict)
    arithmetic: str = "float64"
    sides: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    smooth_kinks: dict[str, np.ndarray] = field(default_factory=dict)

    def unknown_of(self, name: str) -> np.ndarray | None:
        return self.unknown.get(name)

    def settled_with(self, other: Expected) -> bool:
        """The same float64 numbers (to 2 ulps) as ``other``: precision no longer matters."""
        from autogradcli.reference.evaluate import close_floats

        return close_floats(self.output, other.output) and all(
            close_floats(self.grads[n], other.grads[n]) for n in self.grads
        )
