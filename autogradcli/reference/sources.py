"""What ``bounds.Checked``'s walks made: each result (small ones), its formula, the numbers
it was evaluated at and the bound on each of its elements.

A later walk that reads such a value takes that value's own bound on each element (not
the largest bound any walk has left), and where what a value inherits is too wide at some
elements (``y_pred - y`` where the two nearly cancel), those elements are evaluated
precisely from the formula written out through the walks that made its values, down to
the inputs (``written_out``): at those elements the reference is the exact value of the
whole formula, as ``stable`` gives it for every element of a whole evaluation.

A value is that walk's result only if it is the same array, or a view of the same memory
with the same shape and strides, and its elements are still the ones the walk produced
(a caller may write into a result: then it is no longer known, and the plain bound of
``Checked`` applies).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

KEPT = 1 << 16  # the largest result kept (elements); larger ones take the plain bound
KEPT_TOTAL = 1 << 20  # elements kept in all, for one reference
DEPTH = 64  # the deepest formula written out through results


@dataclass(frozen=True)
class Made:
    """One walk's result: held (so its id stays its own), its elements then, the formula
    and the numbers of its symbols, and the bound on each element (relative)."""

    result: np.ndarray
    values: np.ndarray
    expr: sp.Expr | None  # None: a total (not written out)
    env: dict[sp.Symbol, Any]
    bound: Any


class Sources:
    """The results of one reference's walks, by id."""

    def __init__(self) -> None:
        self.made: dict[int, Made] = {}
        self.kept = 0

    def takes(self, result: np.ndarray, env: dict[sp.Symbol, Any]) -> bool:
        """Whether ``result`` is kept: small enough, room left, float64, not in an input's
        or another value's memory."""
        size = result.size
        return (
            size <= KEPT
            and self.kept + size <= KEPT_TOTAL
            and result.dtype == np.float64
            and not any(np.may_share_memory(result, v) for v in env.values())
        )

    def add(
        self, result: np.ndarray, expr: sp.Expr | None, env: dict[sp.Symbol, Any], bound: Any
    ) -> np.ndarray:
        """Keep ``result`` (walked from ``expr`` at ``env``; ``takes``) with its elements'
        ``bound``; the array to hand on: read-only (the model forms new arrays from it,
        not in it), a copy of its own where it was a view."""
        if not result.flags.owndata:
            result = result.copy()
        self.kept += result.size
        numbers = {} if expr is None else {s: env[s] for s in expr.free_symbols if s in env}
        bound = np.array(np.broadcast_to(bound, result.shape)) if np.ndim(bound) else bound
        result.flags.writeable = False
        self.made[id(result)] = Made(result, result.copy(), expr, numbers, bound)
        return result

    def find(self, value: Any) -> Made | None:
        """The walk that made ``value`` (the array itself or the same elements viewed), if
        its elements are unchanged since."""
        if not isinstance(value, np.ndarray):
            return None
        for candidate in (value, value.base):
            made = self.made.get(id(candidate)) if candidate is not None else None
            if made is None or made.result is not candidate:
                continue
            result = made.result
            same = (
                value.shape == result.shape
                and value.strides == result.strides
                and _address(value) == _address(result)
            )
            if same and np.array_equal(value, made.values, equal_nan=True):
                return made
        return None

    def written_out(
        self, expr: sp.Expr, env: dict[sp.Symbol, Any], exact: Callable[[Any], bool], depth: int = 0
    ) -> tuple[sp.Expr, dict[sp.Symbol, Any]] | None:
        """``expr`` with each symbol whose value a walk made replaced by that walk's
        formula (again, down to the inputs), and the numbers of the symbols left; None
        where a value is neither ``exact`` nor made by a kept walk (a total, a product
        the model formed), or past ``DEPTH``."""
        if depth > DEPTH:
            return None
        numbers: dict[sp.Symbol, Any] = {}
        replaced: dict[sp.Basic, sp.Expr] = {}
        for symbol in sorted(expr.free_symbols, key=str):
            if symbol not in env:
                continue
            value = env[symbol]
            if exact(value):
                _take(numbers, replaced, symbol, value)
                continue
            made = self.find(value)
            inner = None
            if made is not None and made.expr is not None:
                inner = self.written_out(made.expr, made.env, exact, depth + 1)
            if inner is None:
                return None
            formula, inputs = inner
            renamed: dict[sp.Basic, sp.Expr] = {}
            for name, number in inputs.items():
                _take(numbers, renamed, name, number)
            replaced[symbol] = formula.xreplace(renamed) if renamed else formula
        return expr.xreplace(replaced), numbers


def _take(
    numbers: dict[sp.Symbol, Any], renamed: dict[sp.Basic, sp.Expr], symbol: sp.Symbol, value: Any
) -> None:
    """``symbol`` at ``value`` into ``numbers``; a fresh symbol (in ``renamed``) where the
    name is already taken by another array."""
    if symbol in numbers and numbers[symbol] is not value:
        fresh = sp.Dummy(symbol.name)
        renamed[symbol] = fresh
        numbers[fresh] = value
        return
    numbers[symbol] = value


def _address(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0])
