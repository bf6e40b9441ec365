"""The one table of supported functions, with their PyTorch and SymPy counterparts.

Each entry takes the module (``torch`` or ``sympy``) as its first argument, so this
table imports neither and the parser can use it without loading them.
Caveats about points where the derivative is not an ordinary number stand beside
the entry they belong to.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Function:
    """One supported function: how PyTorch computes it and what SymPy calls it."""

    name: str
    torch: Callable[[Any, Any], Any]
    sympy: Callable[[Any, Any], Any]
    note: str = ""


def _entry(name: str, sympy_name: str | None = None, note: str = "") -> Function:
    """A function that has the same shape of call in torch and SymPy."""
    sympy_attr = sympy_name or name
    return Function(
        name,
        torch=lambda torch, a: getattr(torch, name)(a),
        sympy=lambda sympy, a: getattr(sympy, sympy_attr)(a),
        note=note,
    )


FUNCTIONS: dict[str, Function] = {
    f.name: f
    for f in (
        _entry("sin"),
        _entry("cos"),
        _entry("tan"),
        _entry("asin"),
        _entry("acos"),
        _entry("atan"),
        _entry("sinh"),
        _entry("cosh"),
        _entry("tanh"),
        _entry("asinh"),
        _entry("acosh"),
        _entry("atanh"),
        _entry("exp"),
        _entry("log", note="natural logarithm"),
        Function(
            "log2",
            torch=lambda torch, a: torch.log2(a),
            sympy=lambda sympy, a: sympy.log(a, 2),
        ),
        Function(
            "log10",
            torch=lambda torch, a: torch.log10(a),
            sympy=lambda sympy, a: sympy.log(a, 10),
        ),
        _entry("sqrt", note="sqrt'(0) is infinite"),
        _entry(
            "abs",
            "Abs",
            note="abs'(0) is undefined; PyTorch uses 0 (the minimum-norm subgradient), "
            "as does SymPy's sign(0)",
        ),
        Function(
            "sigmoid",
            torch=lambda torch, a: torch.sigmoid(a),
            sympy=lambda sympy, a: 1 / (1 + sympy.exp(-a)),
        ),
        Function(
            "relu",
            torch=lambda torch, a: torch.relu(a),
            sympy=lambda sympy, a: sympy.Max(0, a),
            note="relu'(0) is undefined; PyTorch uses 0, SymPy's Heaviside(0) is 1/2",
        ),
    )
}

# Reductions over all elements, giving a 0-d tensor. The symbolic side treats each one
# as a block of its own (see symbolic.py), so only the torch call is listed.
REDUCTIONS: dict[str, Callable[[Any, Any], Any]] = {
    "sum": lambda torch, a: torch.sum(a),
    "mean": lambda torch, a: torch.mean(a),
}

# Named constants, used unless a value is given for the name: (Python value, SymPy name).
CONSTANTS: dict[str, tuple[float, str]] = {
    "pi": (math.pi, "pi"),
    "e": (math.e, "E"),
}

# Which vocabulary function a jump in a SymPy derivative comes from: SymPy class name -> note.
KINKS: dict[str, str] = {
    "Heaviside": FUNCTIONS["relu"].note,
    "sign": FUNCTIONS["abs"].note,
}


def function_names() -> list[str]:
    """All callable names of the language, functions then reductions."""
    return [*FUNCTIONS, *REDUCTIONS]
