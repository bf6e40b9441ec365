"""mpmath arithmetic for the reference: ``Precise(bits)`` computes on NumPy object arrays of
mpmath numbers at ``bits`` of working precision, in a private mpmath context (so threads do
not share it); outside a function's real domain the result is NaN, as in IEEE arithmetic.

``stable(compute)`` runs ``compute`` with rising precision until two runs give the same
float64 numbers: the reference for the verdict never shares the rounding of the dtype
under test (a cancellation such as ``exp(x) - 1`` at 1e-8 costs the precise arithmetic
nothing once its precision is high enough).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import mpmath
import numpy as np
import sympy as sp

from autogradcli.errors import ComputationError
from autogradcli.reference.evaluate import Arith, T, to_float, walk_tree
from autogradcli.reference.tables import FUNCTIONS

FIRST_BITS = 128  # about 38 digits: twice float64's, plus room
MAX_BITS = 4096  # about 1,230 digits; past this the reference is called unstable
# exp(v) past this |v| (every finite float64 is below it: exp of any input is computed) is
# not computed, nor a power past 2**MAX_ARGUMENT: a finite mpf of exponent HUGE_EXPONENT (or
# 0) stands in, past every value computed and float64's range, so that it is marked huge,
# never taken as inf; its log is past float64's range too
MAX_ARGUMENT = 2**1024
HUGE_EXPONENT = 2**1100
GROWING = ("exp", "sinh", "cosh")
KEPT_NUMBERS = 4096  # SymPy numbers each precise arithmetic keeps as mpf


class Unstable(ComputationError):
    """Precise evaluation did not settle within ``MAX_BITS`` bits."""


class Precise:
    """mpmath arithmetic at ``bits`` of precision over NumPy object arrays."""

    dtype: Any = object

    def __init__(self, bits: int) -> None:
        self.name = f"mpmath {bits} bits"
        self.ctx = mpmath.MPContext()
        self.ctx.prec = bits
        self.nan = self.ctx.mpf("nan")
        self.inf = self.ctx.mpf("inf")
        self.huge = self.ctx.ldexp(self.ctx.mpf(1), HUGE_EXPONENT)  # finite, past any float
        own = {"nonzero": self._nonzero, "trunc": self._trunc}
        self._funcs = {
            name: np.frompyfunc(
                own.get(attr) or self._real(getattr(self.ctx, attr), attr in GROWING), 1, 1
            )
            for name, (_, attr) in FUNCTIONS.items()
        }
        self._pow = np.frompyfunc(self._power, 2, 1)
        self._divide = np.frompyfunc(self._quotient, 2, 1)
        self._atan2 = np.frompyfunc(self.ctx.atan2, 2, 1)
        self._mpf = np.frompyfunc(self.ctx.mpf, 1, 1)
        self._float = np.frompyfunc(float, 1, 1)
        self._isnan = np.frompyfunc(self.ctx.isnan, 1, 1)
        self._isfinite = np.frompyfunc(self.ctx.isfinite, 1, 1)
        self._numbers: dict[sp.Expr, Any] = {}  # SymPy's numbers as mpf, made once

    def _real(self, fn: Callable[[Any], Any], growing: bool) -> Callable[[Any], Any]:
        mpf, ctx = self.ctx.mpf, self.ctx

        def real(v: Any) -> Any:
            if growing and ctx.isfinite(v) and abs(v) > MAX_ARGUMENT:
                if v > 0 or fn is ctx.cosh:
                    return self.huge
                return -self.huge if fn is ctx.sinh else ctx.mpf(0)
            result = fn(v)
            return result if isinstance(result, mpf) else self.nan  # mpc: outside the domain

        return real

    def _power(self, base: Any, exponent: Any) -> Any:
        ctx = self.ctx
        if base == 0 and exponent < 0:
            return self.inf  # IEEE: 0**-k is +inf
        if ctx.isnan(base) and exponent == 0:
            return ctx.mpf(1)  # IEEE: nan**0 is 1
        finite = ctx.isfinite(base) and ctx.isfinite(exponent) and base != 0
        # |log2 |base|| <= |mag(base)| + 1: the log is taken only where that bound is too big
        if finite and abs(exponent) * (abs(ctx.mag(base)) + 1) > MAX_ARGUMENT:
            size = abs(exponent) * abs(ctx.log(abs(base), 2))
            if size > MAX_ARGUMENT:  # a result of more than 2**MAX_ARGUMENT: not computed
                if (abs(base) > 1) != (exponent > 0):
                    return ctx.mpf(0)
                odd = base < 0 and ctx.isint(exponent) and int(exponent) % 2 == 1
                return -self.huge if odd else self.huge
        try:
            result = self.ctx.power(base, exponent)
        except ZeroDivisionError:
            return self.inf
        return result if isinstance(result, self.ctx.mpf) else self.nan

    def _nonzero(self, v: Any) -> Any:
        return self.ctx.mpf(0 if v == 0 else 1)

    def _trunc(self, v: Any) -> Any:
        return self.ctx.floor(v) if v >= 0 else self.ctx.ceil(v)

    def _quotient(self, top: Any, bottom: Any) -> Any:
        if bottom == 0:
            return top * self._power(bottom, -1)  # IEEE's x/0: x times 1/0 (inf)
        return top / bottom

    def number(self, value: sp.Expr) -> Any:
        found = self._numbers.get(value)
        if found is None:
            if len(self._numbers) >= KEPT_NUMBERS:
                self._numbers.clear()
            found = self._numbers[value] = self._scalar(value)
        return _object(found)

    def _scalar(self, value: sp.Expr) -> Any:
        ctx = self.ctx
        if value is sp.nan:
            return self.nan
        if value in (sp.zoo, sp.oo):
            return self.inf
        if value is sp.S.NegativeInfinity:
            return -self.inf
        if isinstance(value, sp.Float):
            return ctx.make_mpf(value._mpf_)
        if isinstance(value, sp.Rational):
            return ctx.mpf(int(value.p)) / int(value.q)
        if isinstance(value, sp.NumberSymbol):
            return ctx.make_mpf(value._as_mpf_val(ctx.prec))
        return ctx.mpf(to_float(value))

    def array(self, values: Any) -> np.ndarray:
        data = np.asarray(values)
        with np.errstate(all="ignore"):
            if data.dtype != object:
                data = data.astype(np.float64)
            return np.asarray(self._mpf(data), dtype=object)

    def floats(self, values: Any) -> np.ndarray:
        data = np.asarray(values)
        if data.dtype != object:
            return data.astype(np.float64)
        with np.errstate(all="ignore"):
            return np.asarray(self._float(data), dtype=np.float64)

    def isnan(self, values: Any) -> np.ndarray:
        return np.asarray(self._isnan(np.asarray(values, dtype=object)), dtype=bool)

    def isfinite(self, values: Any) -> np.ndarray:
        return np.asarray(self._isfinite(np.asarray(values, dtype=object)), dtype=bool)

    def power(self, base: Any, exponent: Any) -> Any:
        return self._pow(base, exponent)

    def divide(self, top: Any, bottom: Any) -> Any:
        return self._divide(top, bottom)

    def call(self, name: str, values: Any) -> Any:
        return self._funcs[name](values)

    def heaviside(self, values: Any, at_zero: float) -> Any:
        values = np.asarray(values, dtype=object)
        one, zero = self.ctx.mpf(1), self.ctx.mpf(0)
        step = np.where(np.asarray(values > 0, dtype=bool), one, zero)
        step = np.where(np.asarray(values == 0, dtype=bool), self.ctx.mpf(at_zero), step)
        return np.where(self.isnan(values), self.nan, step)

    def atan2(self, y: Any, x: Any) -> Any:
        return self._atan2(y, x)

    def total(self, values: Any) -> Any:
        return _object(self.ctx.fsum(np.asarray(values, dtype=object).reshape(-1)))

    def walk(self, expr: sp.Expr, env: dict[sp.Symbol, Any]) -> Any:
        """``expr`` over ``env`` (the tree walk)."""
        return walk_tree(expr, env, self)

    def check_sum(self, parts: Any, shape: tuple[int, ...]) -> None:
        """Nothing: the precision is raised until the numbers settle (``stable``)."""


def _object(value: Any) -> np.ndarray:
    out = np.empty((), dtype=object)
    out[()] = value
    return out


@functools.cache
def precise(bits: int) -> Precise:
    """One ``Precise`` per precision for the process (making one takes about 1.4 ms)."""
    return Precise(bits)


def stable(compute: Callable[[Arith], T], settled: Callable[[T, T], bool]) -> T:
    """``compute(Precise(bits))`` for bits = 128, 256, ... until two runs in a row are
    ``settled`` (their float64 numbers match); ``Unstable`` past ``MAX_BITS``."""
    bits = FIRST_BITS
    previous = compute(precise(bits))
    while bits < MAX_BITS:
        bits *= 2
        current = compute(precise(bits))
        if settled(previous, current):
            return current
        previous = current
    raise Unstable("unstable", bits=MAX_BITS)
