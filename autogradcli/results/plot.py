"""``plot``'s result: an elementwise expression sampled over a range, each point checked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from autogradcli.messages import CLI, Style
from autogradcli.policy.verdict import (
    agrees,
)
from autogradcli.results.base import SCHEMA_VERSION, Rendered, plain, strict


@dataclass(frozen=True)
class PlotResult(Rendered):
    """An elementwise expression sampled over a range of ``wrt``: f, autograd's K-th
    derivative and SymPy's at each point; the points where they disagree, the kinks the
    check left out and where the derivative is undefined (domain edges)."""

    expression: str
    wrt: str
    order: int
    x: np.ndarray
    f: np.ndarray
    f_expected: np.ndarray
    autograd: np.ndarray
    expected: np.ndarray
    disagree: np.ndarray
    kinks: np.ndarray
    undefined: np.ndarray
    fixed: dict[str, str]
    verdict: str
    strict: bool = False
    written: tuple[str, ...] = ()

    @property
    def agree(self) -> bool:
        return bool(agrees(self.verdict, self.strict))

    @property
    def not_finite(self) -> np.ndarray:
        """The points where f, autograd's or SymPy's derivative is NaN or infinite (an
        overflow, a point outside the domain): a picture leaves them out."""
        finite = np.isfinite(self.f) & np.isfinite(self.autograd) & np.isfinite(self.expected)
        return ~finite

    def to_dict(self, style: Style = CLI) -> dict[str, Any]:
        return strict(
            {
                "schema_version": SCHEMA_VERSION,
                "command": "plot",
                "expression": self.expression,
                "wrt": self.wrt,
                "order": self.order,
                "fixed": self.fixed,
                "x": plain(self.x),
                "f": plain(self.f),
                "f_expected": plain(self.f_expected),
                "autograd": plain(self.autograd),
                "expected": plain(self.expected),
                "disagree": self.disagree.tolist(),
                "kinks": self.kinks.tolist(),
                "undefined": self.undefined.tolist(),
                "written": list(self.written),
                "verdict": self.verdict,
                "agree": self.agree,
            }
        )
