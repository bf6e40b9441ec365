"""The verdict policy, in one place (docs/trust.md, "The verdict").

- ``agree`` (✓, exit 0): every checked number is within the dtype's tolerance of the
  reference, and finite wherever the reference is finite.
- ``rounding`` (≈, exit 0; 1 with ``strict``): every number is finite where the reference
  is, outside the tolerance but within the rounding bound, and the same computation in
  float64 agrees with the reference.
- ``disagree`` (✗, exit 1): anything else, with a ``Cause``.

The rounding bound is ``atol + min(steps·u, 1/8)·|reference|``: ``u`` is the dtype's unit
roundoff and ``steps`` the rounded operations autograd ran for the number (three per
operation of the expression, forward and backward, ``ceil(log2 n)`` more per reduction over
``n`` elements, one per accumulating backward pass). It never exceeds 12.5% of the
reference, so an error of 2x (or 10^8x) is never called rounding.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from autogradcli.policy.compare import Comparison


class Verdict(str, Enum):
    """A check's verdict. A ``str`` ("agree" == Verdict.AGREE, and JSON writes "agree"),
    declared from best to worst: ``worst`` of several checks is the last one present."""

    AGREE = "agree"  # ✓ exit 0
    ROUNDING = "rounding"  # ≈ exit 0, 1 with strict
    UNCHECKED = "unchecked"  # ? no reference could be had (past every check's budget)
    DISAGREE = "disagree"  # ✗ exit 1

    __str__ = str.__str__
    __format__ = str.__format__
    __repr__ = str.__repr__  # 'agree', as before the enum (docs and doctests show it)

    @property
    def mark(self) -> str:
        """The verdict's mark, the one place it is written: ✓ ≈ ? ✗."""
        return _MARKS[self]

    @property
    def rank(self) -> int:
        """Its place from best (0, agree) to worst."""
        return list(Verdict).index(self)

    def passes(self, strict: bool = False) -> bool:
        """Whether it gives exit code 0 (``strict``: only ``agree`` does)."""
        return passes(self, strict)

    @classmethod
    def worst(cls, verdicts: Iterable[str | None]) -> Verdict:
        """The verdict of several checks (None: not checked): the worst one, else agree."""
        return worst(verdicts)


_MARKS = {"agree": "✓", "rounding": "≈", "unchecked": "?", "disagree": "✗"}
AGREE, ROUNDING, UNCHECKED, DISAGREE = Verdict
VERDICTS = tuple(Verdict)

# Unit roundoff (half the machine epsilon) per dtype.
UNIT_ROUNDOFF: dict[str, float] = {
    "float64": 2.0**-53,
    "float32": 2.0**-24,
    "float16": 2.0**-11,
    "bfloat16": 2.0**-8,
}
MAX_RELATIVE = 0.125

# Cause codes of a verdict (the schema's list is this one), in the order they are looked for.
CAUSES = (
    "non_differentiable",  # NaN or inf at a point where the derivative does not exist
    "nonsmooth_chain_rule",  # the chain rule through a kink missed a derivative that exists
    "kink_outside",  # at a real kink, .grad outside the one-sided derivatives
    "overflow",  # a value passed the dtype's largest number
    "precision_loss",  # cancellation, or a value rounded to 0 or 1 (then fed to log, /, sqrt)
    "domain",  # PyTorch's forward is NaN where SymPy's (simplified) expression is defined
    "nonfinite_input",  # an input is NaN or infinite
    "zero_times_inf",  # NaN from 0·inf in the backward pass
    "mismatch",  # float64 disagrees too: a real mismatch
    "accumulation",  # a cell's .grad is not the sum of its backward() calls since a reset
    "grad_presence",  # a cell's .grad is None where it should be filled, or the reverse
    "rounding",  # not a disagreement: within the rounding bound, float64 agrees
)


@dataclass(frozen=True)
class Cause:
    """Why a check came out as it did: a stable ``code`` and the numbers behind it."""

    code: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, **self.data}

    def __str__(self) -> str:
        from autogradcli.messages import cause_text

        return cause_text(self)


def rounding_relative(dtype: str, steps: int) -> float:
    """The relative part of the rounding bound for ``steps`` rounded operations."""
    return min(max(steps, 1) * UNIT_ROUNDOFF[dtype], MAX_RELATIVE)


def reduction_steps(elements: int) -> int:
    """Rounding steps a pairwise sum of ``elements`` numbers adds."""
    return math.ceil(math.log2(elements)) if elements > 1 else 0


def settle(check: Comparison, float64: Comparison | None) -> Verdict:
    """The verdict of one check, given the same check of the float64 re-run (if any)."""
    return settle_confirmed(check, float64 is not None and float64.agree)


def settle_confirmed(check: Comparison, confirmed: bool) -> Verdict:
    """The verdict of one check whose float64 confirmation is known: agree within the
    tolerance; rounding within the bound when float64 agrees (``confirmed``); else
    disagree. A cell's ``.grad`` is a sum of backward() calls, each checked with its own
    float64 re-run: it is confirmed when none of them disagreed."""
    if check.agree:
        return AGREE
    if check.within_bound and confirmed:
        return ROUNDING
    return DISAGREE


def worst(verdicts: Iterable[str | None]) -> Verdict:
    """The verdict of several checks: any disagreement, else any rounding, else agree."""
    found = {v for v in verdicts if v is not None}
    return next((v for v in reversed(VERDICTS) if v in found), AGREE)


def agrees(verdict: str | None, strict: bool = False) -> bool | None:
    """The one rule for every ``agree``: the verdict passes (``passes``); a single check
    has no ``strict`` of its own, a result passes its own. None: not checked."""
    return None if verdict is None else passes(verdict, strict)


def passes(verdict: str, strict: bool) -> bool:
    """Whether a verdict gives exit code 0 (``strict``: only ``agree`` does)."""
    return verdict == AGREE or (verdict == ROUNDING and not strict)
