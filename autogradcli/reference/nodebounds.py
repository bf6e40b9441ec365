"""The bound on each node of ``bounds.Checked``'s float64 walk: for every kind of node,
its relative error from its arguments' (two channels: this walk's rounding, and what
values not given as inputs carry); the rules are listed in ``bounds``' docstring."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import reduce
from typing import Any

import numpy as np
import sympy as sp

from autogradcli.reference.evaluate import FUNCTIONS, RELATIONS, Arith, Walk, log1p_of

U = 2.0**-53  # float64's unit roundoff
LIBM = 8 * U  # what one call of NumPy's elementary functions may be off, relative
JUMPS = (sp.Heaviside, sp.DiracDelta)

# f'(a) from the argument a and the value v = f(a), in NumPy (magnitudes are what count)
SLOPES: dict[str, Any] = {
    "sin": lambda a, v: np.cos(a),
    "cos": lambda a, v: np.sin(a),
    "tan": lambda a, v: 1 + np.square(v),
    "asin": lambda a, v: 1 / np.sqrt(np.abs(1 - np.square(a))),
    "acos": lambda a, v: 1 / np.sqrt(np.abs(1 - np.square(a))),
    "atan": lambda a, v: 1 / (1 + np.square(a)),
    "sinh": lambda a, v: np.cosh(a),
    "cosh": lambda a, v: np.sinh(a),
    "tanh": lambda a, v: 1 - np.square(v),
    "asinh": lambda a, v: 1 / np.sqrt(1 + np.square(a)),
    "acosh": lambda a, v: 1 / np.sqrt(np.abs(np.square(a) - 1)),
    "atanh": lambda a, v: 1 / np.abs(1 - np.square(a)),
    "exp": lambda a, v: v,
    "log": lambda a, v: 1 / a,
    "erf": lambda a, v: 2 / math.sqrt(math.pi) * np.exp(-np.square(a)),
}


def _zero(r: Any) -> bool:
    return np.ndim(r) == 0 and float(r) == 0.0


def is_scalar(r: Any) -> bool:
    return np.ndim(r) == 0


def relative_to(err: Any, value: Any, magnitude: Any = None) -> Any:
    """``err/|value|``, 0 where both are 0 (an exact 0), inf where only the value is;
    ``magnitude``: ``|value|`` when the caller has it."""
    if _zero(err):
        return 0.0
    value = np.abs(value) if magnitude is None else magnitude
    rel = np.true_divide(err, value)
    return np.where(np.asarray(err) == 0, 0.0, rel) if not np.all(value) else rel


def same_sign(values: Sequence[Any]) -> bool:
    """Whether every element of every array is >= 0, or every one <= 0 (no cancellation)."""
    if min(float(np.min(v)) for v in values) >= 0:
        return True
    return max(float(np.max(v)) for v in values) <= 0


def _exact(number: sp.Expr) -> bool:
    """Whether float64 holds the SymPy number exactly."""
    if number in (sp.nan, sp.zoo, sp.oo, sp.S.NegativeInfinity):
        return True
    if isinstance(number, (sp.Rational, sp.Float)):
        try:
            return sp.Rational(float(number)) == number
        except (OverflowError, ValueError):
            return False
    return False


Bound = tuple[Any, Any]  # (rounding, inherited): relative error bounds, scalars or arrays


class Bounded(Walk):
    """The float64 walk (the same numbers as ``FLOAT64``'s) with each node's bound."""

    def __init__(
        self, expr: sp.Expr, env: dict[sp.Symbol, Any], arith: Arith, inherited: dict[Any, float]
    ) -> None:
        super().__init__(expr, env, arith)
        self.inherited = inherited
        self.bounds: dict[sp.Expr, Bound] = {}

    def value(self, node: sp.Expr) -> Any:
        if node in self.env:
            return self.env[node]
        if node not in self.cache:
            result = self._value(node)
            self.bounds[node] = self._bound(node, result)
            self.cache[node] = result
            for arg in node.args:
                left = self.uses.get(arg, 0) - 1
                self.uses[arg] = left
                if left <= 0:
                    self.cache.pop(arg, None)
                    self.bounds.pop(arg, None)
        return self.cache[node]

    def bound(self, node: sp.Expr) -> Bound:
        """The bound of a node already computed (or of a value in ``env``)."""
        if node in self.env:
            return 0.0, self.inherited.get(id(self.env[node]), 0.0)
        if node not in self.bounds:
            self.value(node)
        return self.bounds[node]

    def _bound(self, node: sp.Expr, value: Any) -> Bound:
        if node.is_Number or isinstance(node, sp.NumberSymbol):
            return (0.0 if _exact(node) else U), 0.0
        if node.is_Add:
            return self._add(node.args, value)
        if node.is_Mul:
            return self._bound_mul(node)
        if node.is_Pow and isinstance(node.base, sp.sign) and node.exp == -1:
            return self._jump(node.base.args[0])
        if node.is_Pow:
            return self._pow(node)
        rest = log1p_of(node)
        if rest is not None:
            return self._log1p(rest, value)
        name = node.func.__name__
        if (name in FUNCTIONS and len(node.args) == 1) or isinstance(node, sp.log):
            return self._call("log" if isinstance(node, sp.log) else name, node.args[0], value)
        if isinstance(node, sp.Piecewise):
            return self._bound_piecewise(node)
        if type(node) in RELATIONS or isinstance(node, (sp.And, sp.Or, sp.Not, sp.Xor, sp.ITE)):
            return self._conditions(node)
        if isinstance(node, JUMPS):
            return self._jump(node.args[0])
        if isinstance(node, sp.arg):
            wide, inherited = self._jump(node.args[0])
            return wide + U, inherited
        if isinstance(node, sp.re):
            return self.bound(node.args[0])
        if isinstance(node, sp.im):
            return 0.0, 0.0
        if isinstance(node, (sp.Max, sp.Min)):
            return self._lipschitz(node.args, value)
        if isinstance(node, sp.atan2):
            return self._atan2(node, value)
        return math.inf, 0.0

    def _add(self, args: Sequence[sp.Expr], value: Any) -> Bound:
        bounds = [self.bound(a) for a in args]
        flat = [r for b in bounds for r in b]
        if len(args) == 2 and all(_zero(r) for r in flat):
            return U, 0.0  # one rounding of an exact sum
        values = [self.value(a) for a in args]
        if all(is_scalar(r) for r in flat) and same_sign(values):
            rounding = max(float(b[0]) for b in bounds) + (len(args) - 1) * U
            return rounding, max(float(b[1]) for b in bounds)
        out = []
        magnitude = np.abs(value)
        for channel in (0, 1):
            err: Any = 0.0
            for v, b in zip(values, bounds, strict=True):
                if not _zero(b[channel]):
                    term = np.abs(v)
                    term *= b[channel]
                    err = err + term
            if channel == 0:
                partial = values[0]
                for v in values[1:-1]:  # the last partial sum is the value itself
                    partial = partial + v
                    err = err + U * np.abs(partial)
                err = err + U * magnitude
            out.append(relative_to(err, value, magnitude))
        return out[0], out[1]

    def _bound_mul(self, node: sp.Expr) -> Bound:
        bases = [a.base if a.is_Pow else a for a in node.args]
        if len(set(bases)) < len(bases):
            merged = sp.powsimp(node, combine="exp")
            if merged != node:
                return self.bound(merged)
        bounds = [self.bound(a) for a in node.args]
        rounding = reduce(np.add, (b[0] for b in bounds)) + (len(bounds) - 1) * U
        return rounding, reduce(np.add, (b[1] for b in bounds))

    def _pow(self, node: sp.Expr) -> Bound:
        base, exponent = self.value(node.base), self.value(node.exp)
        rb, re = self.bound(node.base), self.bound(node.exp)
        out = []
        for channel in (0, 1):
            rel: Any = 0.0
            if not _zero(rb[channel]):
                rel = np.abs(exponent) * rb[channel]
            if not _zero(re[channel]):
                rel = rel + np.abs(exponent * np.log(np.abs(base))) * re[channel]
            out.append(rel)
        square = np.ndim(exponent) == 0 and exponent == 2
        return out[0] + (U if square else 2 * U), out[1]

    def _call(self, name: str, arg: sp.Expr, value: Any) -> Bound:
        if name in ("sign", "nonzero"):
            return self._jump(arg)
        if name in ("floor", "trunc"):  # rounded division: exact, unless an integer is in reach
            return self._floor(arg)
        if name == "Abs":
            return self.bound(arg)
        return self._through(arg, value, lambda a: SLOPES[name](a, value) * a)

    def _log1p(self, rest: sp.Expr, value: Any) -> Bound:
        """``log1p(t)``: an error ``r·|t|`` in t moves it by ``r·|t|/|1 + t|``."""
        return self._through(rest, value, lambda t: t / (1 + t))

    def _through(self, arg: sp.Expr, value: Any, scale: Callable[[Any], Any]) -> Bound:
        """A function's error from its argument's: ``2·|scale(a)|`` times each channel's
        bound (twice for the first-order slack; 0 stays 0), relative to ``value``, plus
        the library's."""
        rb = self.bound(arg)
        out = []
        for channel in (0, 1):
            if _zero(rb[channel]):
                out.append(0.0)
                continue
            err = 2 * np.abs(scale(self.value(arg))) * rb[channel]
            out.append(relative_to(err, value))
        return out[0] + LIBM, out[1]

    def _reach(self, node: sp.Expr) -> tuple[Any, Any]:
        """Where ``node``'s error can reach 0 (counting both channels, and the inherited
        one alone): its switch is not sure there."""
        r0, r1 = self.bound(node)
        total = np.asarray(r0 + r1) >= 0.5
        return total, np.asarray(r1) >= 0.5

    def _floor(self, arg: sp.Expr) -> Bound:
        """``floor(q)``: no error, but infinite where q's error can reach an integer."""
        r0, r1 = self.bound(arg)
        if _zero(r0) and _zero(r1):
            return 0.0, 0.0
        a = np.abs(self.value(arg))
        gap = np.abs(self.value(arg) - np.round(self.value(arg)))
        total, inherited = a * (r0 + r1) >= gap, a * r1 >= gap
        return np.where(total, math.inf, 0.0), np.where(inherited, math.inf, 0.0)

    def _jump(self, arg: sp.Expr) -> Bound:
        if all(_zero(r) for r in self.bound(arg)):
            return 0.0, 0.0
        total, inherited = self._reach(arg)
        return np.where(total, math.inf, 0.0), np.where(inherited, math.inf, 0.0)

    def _relations(self, condition: sp.Basic) -> Bound:
        """Infinite where one of ``condition``'s comparisons is not sure."""
        wide: Any = 0.0
        inherited: Any = 0.0
        if not isinstance(condition, sp.Basic):
            return wide, inherited
        for relation in condition.atoms(sp.core.relational.Relational):
            lhs, rhs = relation.lhs, relation.rhs
            bl, br = self.bound(lhs), self.bound(rhs)
            if all(_zero(r) for r in (*bl, *br)):
                continue
            left, right = self.value(lhs), self.value(rhs)
            gap = np.abs(left - right)
            err0 = (bl[0] + bl[1]) * np.abs(left) + (br[0] + br[1]) * np.abs(right)
            err1 = bl[1] * np.abs(left) + br[1] * np.abs(right)
            # unsure: the gap is within the error (an exact tie, error 0, is sure)
            wide = np.where(~(gap > 2 * err0) & ~(err0 == 0), math.inf, wide)
            inherited = np.where(~(gap > 2 * err1) & ~(err1 == 0), math.inf, inherited)
        return wide, inherited

    def _conditions(self, node: sp.Basic) -> Bound:
        return self._relations(node)

    def _bound_piecewise(self, node: sp.Piecewise) -> Bound:
        r0: Any = math.inf
        r1: Any = 0.0
        for expr, condition in reversed(node.args):
            holds = self.truth(condition)
            b = self.bound(expr)
            r0, r1 = np.where(holds, b[0], r0), np.where(holds, b[1], r1)
        for _, condition in node.args:
            w0, w1 = self._relations(condition)
            r0, r1 = r0 + w0, r1 + w1
        return r0, r1

    def _lipschitz(self, args: Sequence[sp.Expr], value: Any) -> Bound:
        """Max and Min move no more than their arguments."""
        out = []
        for channel in (0, 1):
            errs = [
                b * np.abs(self.value(a)) for a in args if not _zero(b := self.bound(a)[channel])
            ]
            out.append(relative_to(reduce(np.maximum, errs), value) if errs else 0.0)
        return out[0], out[1]

    def _atan2(self, node: sp.Expr, value: Any) -> Bound:
        y, x = node.args
        vy, vx = self.value(y), self.value(x)
        by, bx = self.bound(y), self.bound(x)
        out = []
        for channel in (0, 1):
            if _zero(by[channel]) and _zero(bx[channel]):
                out.append(0.0)
                continue
            err = 2 * np.abs(vx * vy) * (by[channel] + bx[channel]) / (vx * vx + vy * vy)
            out.append(relative_to(err, value))
        return out[0] + LIBM, out[1]
