"""Plain result objects: what was computed and checked, free of torch, ready to render."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class VariableResult:
    """One variable: its value, autograd's ``.grad``, SymPy's expected gradient, the check."""

    name: str
    value: np.ndarray
    requires_grad: bool
    grad: np.ndarray | None = None
    expected: np.ndarray | None = None
    derivative: str | None = None
    max_abs_error: float | None = None
    agree: bool | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class PassResult:
    """``.grad`` after pass ``index`` (1-based) of forward + backward, and the expected ``k x``."""

    index: int
    grads: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    agree: bool


@dataclass
class GradResult:
    """Everything ``compute_gradient`` found; ``agree`` is the verdict (exit code 0 or 1)."""

    expression: str
    device: str
    dtype: str
    rtol: float
    atol: float
    output: np.ndarray
    output_expected: np.ndarray
    output_max_abs_error: float
    output_agree: bool
    variables: dict[str, VariableResult]
    passes: list[PassResult]
    weights: np.ndarray | None = None
    seed: int | None = None

    @property
    def agree(self) -> bool:
        checks = [self.output_agree, *(p.agree for p in self.passes)]
        checks += [v.agree for v in self.variables.values() if v.agree is not None]
        return all(checks)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; arrays become numbers or nested lists (non-finite stay floats)."""
        return {
            "expression": self.expression,
            "device": self.device,
            "dtype": self.dtype,
            "tolerance": {"rtol": self.rtol, "atol": self.atol},
            "seed": self.seed,
            "output": {
                "value": plain(self.output),
                "expected": plain(self.output_expected),
                "shape": list(self.output.shape),
                "max_abs_error": self.output_max_abs_error,
                "agree": self.output_agree,
            },
            "weights": None if self.weights is None else plain(self.weights),
            "variables": {
                name: {
                    "value": plain(v.value),
                    "shape": list(v.value.shape),
                    "requires_grad": v.requires_grad,
                    "grad": None if v.grad is None else plain(v.grad),
                    "expected": None if v.expected is None else plain(v.expected),
                    "derivative": v.derivative,
                    "max_abs_error": v.max_abs_error,
                    "agree": v.agree,
                    "notes": v.notes,
                }
                for name, v in self.variables.items()
            },
            "passes": [
                {
                    "pass": p.index,
                    "grads": {n: plain(g) for n, g in p.grads.items()},
                    "expected": {n: plain(g) for n, g in p.expected.items()},
                    "agree": p.agree,
                }
                for p in self.passes
            ],
            "agree": self.agree,
        }


def plain(array: np.ndarray) -> Any:
    """A 0-d array as a float, others as nested lists of floats."""
    return np.asarray(array, dtype=np.float64).tolist()
