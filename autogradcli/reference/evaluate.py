"""Evaluate SymPy expressions at numbers, by walking their tree (no code generation).

Two kinds of arithmetic run the same walk:

- ``FLOAT64``: NumPy float64, vectorised over whole tensors; fast, and rounded like the
  computation it checks.
- ``precise.Precise(bits)``: mpmath numbers (NumPy object arrays) at ``bits`` of working
  precision, raised until the float64 numbers settle (``precise.stable``).

Past ``PRECISE_ELEMENTS`` elements ``bounds.reference`` runs ``bounds.Checked``: float64
with an error bound on every element, and mpmath at the elements whose bound is too wide.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import reduce
from typing import Any, Protocol, TypeVar

import numpy as np
import sympy as sp

from autogradcli.errors import ComputationError
from autogradcli.reference.tables import FUNCTIONS, RELATIONS

T = TypeVar("T")
PRECISE_ELEMENTS = 256  # elements evaluated precisely; beyond, float64 with error bounds


class NoClosedForm(ComputationError):
    """SymPy's derivative contains something with no numeric value (Derivative, Subs...)."""


class Untrusted(ComputationError):
    """Float64 cannot be trusted for a result, even with its wide elements made precise."""


class Arith(Protocol):
    """The operations the tree walk needs; arrays are NumPy arrays (float64 or object)."""

    name: str
    dtype: Any

    def number(self, value: sp.Expr) -> Any: ...
    def array(self, values: Any) -> np.ndarray: ...
    def floats(self, values: Any) -> np.ndarray: ...
    def isnan(self, values: Any) -> np.ndarray: ...
    def isfinite(self, values: Any) -> np.ndarray: ...
    def power(self, base: Any, exponent: Any) -> Any: ...
    def divide(self, top: Any, bottom: Any) -> Any: ...
    def call(self, name: str, values: Any) -> Any: ...
    def heaviside(self, values: Any, at_zero: float) -> Any: ...
    def atan2(self, y: Any, x: Any) -> Any: ...
    def total(self, values: Any) -> Any: ...
    def walk(self, expr: sp.Expr, env: dict[sp.Symbol, Any]) -> Any: ...
    def check_sum(self, parts: Any, shape: tuple[int, ...]) -> None: ...


class Float64:
    """NumPy float64 arithmetic (IEEE: inf and NaN where the math is undefined)."""

    name = "float64"
    dtype: Any = np.float64

    def number(self, value: sp.Expr) -> Any:
        return np.asarray(to_float(value))

    def array(self, values: Any) -> np.ndarray:
        return np.asarray(values, dtype=np.float64)

    def floats(self, values: Any) -> np.ndarray:
        return np.asarray(values, dtype=np.float64)

    def isnan(self, values: Any) -> np.ndarray:
        return np.isnan(np.asarray(values, dtype=np.float64))

    def isfinite(self, values: Any) -> np.ndarray:
        return np.isfinite(np.asarray(values, dtype=np.float64))

    def power(self, base: Any, exponent: Any) -> Any:
        base = np.asarray(base, dtype=np.float64)
        if np.ndim(exponent) == 0 and exponent == 2:
            return np.square(base)  # one correctly rounded product; pow() is 10x slower
        return np.power(base, exponent)

    def divide(self, top: Any, bottom: Any) -> Any:
        return np.divide(top, bottom)

    def call(self, name: str, values: Any) -> Any:
        return FUNCTIONS[name][0](values)

    def heaviside(self, values: Any, at_zero: float) -> Any:
        return np.heaviside(values, at_zero)

    def atan2(self, y: Any, x: Any) -> Any:
        return np.arctan2(y, x)

    def total(self, values: Any) -> Any:
        return np.asarray(np.sum(values, dtype=np.float64))

    def walk(self, expr: sp.Expr, env: dict[sp.Symbol, Any]) -> Any:
        """``expr`` over ``env`` (the tree walk)."""
        return walk_tree(expr, env, self)

    def check_sum(self, parts: Any, shape: tuple[int, ...]) -> None:
        """Nothing: the plain arithmetic does not bound its sums (see ``bounds.Checked``)."""


FLOAT64 = Float64()


def to_float(number: sp.Expr) -> float:
    """A SymPy number as a float (``zoo`` is inf, a value past float64's range is ±inf)."""
    if number is sp.zoo or number is sp.nan:
        return math.nan if number is sp.nan else math.inf
    try:
        return float(number)
    except (OverflowError, TypeError):
        return math.copysign(math.inf, 1 if number.is_positive else -1)


def evaluate(expr: sp.Expr, env: dict[sp.Symbol, Any], arith: Arith = FLOAT64) -> Any:
    """``expr`` at the numbers in ``env`` (arrays in ``arith``'s form), in ``arith``
    (``bounds.Checked``: float64 with every element's error bounded, the wide ones
    evaluated in mpmath)."""
    with np.errstate(all="ignore"):
        return np.asarray(arith.walk(expr, env), dtype=arith.dtype)


def evaluate_quiet(expr: sp.Expr, env: dict[sp.Symbol, Any], arith: Arith = FLOAT64) -> Any:
    """``evaluate`` for a caller already within ``np.errstate(all="ignore")``."""
    return np.asarray(arith.walk(expr, env), dtype=arith.dtype)


def _uses(expr: sp.Expr, env: dict[sp.Symbol, Any]) -> dict[sp.Expr, int]:
    """How many times each subexpression of ``expr`` is an argument of another (SymPy
    shares equal subexpressions, so the tree is a graph); names in ``env`` are not counted."""
    uses: dict[sp.Expr, int] = {}
    stack = [expr]
    while stack:
        node = stack.pop()
        for arg in node.args:
            if arg in env or not isinstance(arg, sp.Basic):
                continue
            seen = arg in uses
            uses[arg] = uses.get(arg, 0) + 1
            if not seen:
                stack.append(arg)
    return uses


def walk_tree(expr: sp.Expr, env: dict[sp.Symbol, Any], arith: Arith) -> Any:
    if len(env) <= PLANNED_NAMES and all(isinstance(k, sp.Symbol) for k in env):
        plan = _plan(expr)
        if plan is not None and all(s in env for s in plan.symbols):
            return plan.run(env, arith)
    return Walk(expr, env, arith).value(expr)


# The kinds of node a plan takes (``Walk._value`` takes each of them one way).
_SYMBOL, _NUMBER, _ADD, _MUL, _POW, _CALL, _SPECIAL = range(7)
PLANNED_NAMES = 16  # a plan runs over an ``env`` of at most these names (a step's)
KEPT_PLANS = 4096  # plans kept for the process, each of at most KEPT_STEPS nodes
KEPT_STEPS = 512


class _Plan:
    """A SymPy term's nodes in an order that evaluates each after its arguments, each
    shared node once: the same numbers as ``Walk`` (the same operations in ``arith``),
    without its lookups by term. Made only for terms of symbols, numbers, sums,
    products of distinct bases (a Heaviside factor's argument below 0 makes the product
    0, as in ``Walk._mul``), powers, the functions of ``FUNCTIONS`` and ``SPECIAL``'s
    (``_plan``); a value is dropped after its last use, as the walk drops it."""

    def __init__(self, steps: list[tuple[int, Any, tuple[int, ...]]]) -> None:
        self.steps = steps
        self.symbols = [data for kind, data, _ in steps if kind == _SYMBOL]
        last: dict[int, int] = {}
        for k, (kind, data, args) in enumerate(steps):
            last.update(dict.fromkeys((*args, *(data[0] if kind == _MUL else ())), k))
        self.dropped: list[list[int]] = [[] for _ in steps]
        for slot, k in last.items():
            self.dropped[k].append(slot)

    def run(self, env: dict[sp.Symbol, Any], arith: Arith) -> Any:
        values: list[Any] = [None] * len(self.steps)
        for k, (kind, data, args) in enumerate(self.steps):
            if kind == _SYMBOL:
                values[k] = env[data]
            elif kind == _NUMBER:
                values[k] = arith.number(data)
            elif kind == _ADD:
                values[k] = reduce(np.add, [values[a] for a in args])
            elif kind == _MUL:
                steps, bottoms = data
                factors = [values[a] for a in args]
                values[k] = self._product(factors, [values[s] for s in steps], bottoms, arith)
            elif kind == _POW:
                values[k] = arith.power(values[args[0]], values[args[1]])
            elif kind == _CALL:
                values[k] = arith.call(data, values[args[0]])
            else:
                values[k] = _special(data, [values[a] for a in args], arith)
            for slot in self.dropped[k]:
                values[slot] = None
        return values[-1]

    @staticmethod
    def _product(factors: list[Any], steps: list[Any], bottoms: int, arith: Arith) -> Any:
        """The factors' product (the last ``bottoms`` divide it, ``split_quotient``), 0
        where a Heaviside factor's argument (``steps``) is below 0 (even times inf)."""
        one = arith.number(sp.S.One)
        tops = factors[: len(factors) - bottoms]
        product = reduce(np.multiply, tops, one)
        if bottoms:
            product = arith.divide(product, reduce(np.multiply, factors[len(tops) :], one))
        off = reduce(np.logical_or, (np.asarray(v < 0, dtype=bool) for v in steps), np.False_)
        return np.where(off, arith.number(sp.S.Zero), product) if np.any(off) else product


_PLANS: dict[sp.Expr, _Plan | None] = {}


def _plan(expr: sp.Expr) -> _Plan | None:
    """The plan of ``expr`` (kept for the process), or None where the walk must take it
    (a condition, a jump, a merged power, ``u/sign(u)``, a function of several arguments)."""
    if expr in _PLANS:
        return _PLANS[expr]
    if len(_PLANS) >= KEPT_PLANS:
        _PLANS.clear()
    slots: dict[sp.Expr, int] = {}
    steps: list[tuple[int, Any, tuple[int, ...]]] = []
    stack: list[tuple[sp.Expr, bool]] = [(expr, False)]
    while stack:
        node, ready = stack.pop()
        if node in slots:
            continue
        kind = _kind(node)
        if kind is None:
            if len(steps) <= KEPT_STEPS:
                _PLANS[expr] = None
            return None
        args = () if kind in (_SYMBOL, _NUMBER) else node.args
        rest = log1p_of(node) if kind == _CALL else None
        if rest is not None:
            args = (rest,)
        if kind == _MUL:
            tops, bottoms = split_quotient(list(args))
            args = (*tops, *bottoms)
        if not ready and args:
            stack.append((node, True))
            stack.extend((a, False) for a in reversed(args) if a not in slots)
            continue
        data: Any = node if kind in (_SYMBOL, _NUMBER, _SPECIAL) else node.func.__name__
        if rest is not None:
            data = "log1p"
        if kind == _MUL:  # each Heaviside factor's argument (made before its factor)
            heavisides = tuple(slots[a.args[0]] for a in args if isinstance(a, sp.Heaviside))
            data = (heavisides, len(bottoms))
        slots[node] = len(steps)
        steps.append((kind, data, tuple(slots[a] for a in args)))
    plan = _Plan(steps)
    if len(steps) <= KEPT_STEPS:  # a large term's plan is made again: its memory is not kept
        _PLANS[expr] = plan
    return plan


def _kind(node: sp.Basic) -> int | None:
    """How a plan takes ``node`` (None: only the walk takes it)."""
    if isinstance(node, sp.Symbol):
        return _SYMBOL
    if node.is_Number or isinstance(node, sp.NumberSymbol):
        return _NUMBER
    if node.is_Add:
        return _ADD
    if node.is_Mul:
        bases = [a.base if a.is_Pow else a for a in node.args]
        delta = any(isinstance(a, sp.DiracDelta) for a in node.args)
        return None if delta or len(set(bases)) < len(bases) else _MUL
    if node.is_Pow:
        return None if isinstance(node.base, sp.sign) and node.exp == -1 else _POW
    if node.func.__name__ in FUNCTIONS and len(node.args) == 1:
        return _CALL
    if isinstance(node, sp.log):  # log(x, base): the walk takes it
        return None
    return _SPECIAL if isinstance(node, SPECIAL) else None


def log1p_of(node: sp.Expr) -> sp.Expr | None:
    """``t`` where ``node`` is ``log(1 + t)`` (SymPy writes log1p(t) so), else None:
    the walk takes it as log1p(t), without the cancellation of 1 + t where t is small."""
    if not isinstance(node, sp.log) or len(node.args) != 1 or not node.args[0].is_Add:
        return None
    terms = node.args[0].args
    if sp.S.One not in terms:
        return None
    return sp.Add(*(t for t in terms if t is not sp.S.One))


def split_quotient(factors: list[sp.Expr]) -> tuple[list[sp.Expr], list[sp.Expr]]:
    """A product's factors as numerator and denominator: ``y**-1`` (and a fraction's
    denominator) is divided by, not multiplied by as a rounded reciprocal (``u/sign(u)``
    stays the walk's own case)."""
    tops, bottoms = [], []
    for factor in factors:
        if isinstance(factor, sp.Rational) and factor.q != 1:  # x/3: divided by 3
            tops.append(sp.Integer(factor.p))
            bottoms.append(sp.Integer(factor.q))
            continue
        reciprocal = factor.is_Pow and factor.exp == -1 and not isinstance(factor.base, sp.sign)
        (bottoms if reciprocal else tops).append(factor.base if reciprocal else factor)
    return tops, bottoms


class Walk:
    """One evaluation of a SymPy tree over ``env`` in ``arith``, each shared subexpression
    computed once.

    A value is dropped from the cache once every node that takes it as an argument has
    been computed: an intermediate array of a large tensor (80 MB at 10^7 float64
    elements) lives no longer than it is needed. The cache only saves recomputation, so a
    count that misses a path (a merged power, a condition) costs time, never a number."""

    def __init__(self, expr: sp.Expr, env: dict[sp.Symbol, Any], arith: Arith) -> None:
        self.env, self.arith = env, arith
        self.cache: dict[sp.Expr, Any] = {}
        self.uses = _uses(expr, env)

    def value(self, node: sp.Expr) -> Any:
        if node in self.env:
            return self.env[node]
        if node not in self.cache:
            self.cache[node] = self._value(node)
            for arg in node.args:
                left = self.uses.get(arg, 0) - 1
                self.uses[arg] = left
                if left <= 0:
                    self.cache.pop(arg, None)
        return self.cache[node]

    def product(self, factors: Iterable[Any]) -> Any:
        return reduce(np.multiply, factors, self.arith.number(sp.S.One))

    def quotient(self, factors: list[sp.Expr]) -> Any:
        """The factors' product, ``y**-1`` divided by (``split_quotient``): one correctly
        rounded division, so an integer quotient stays one."""
        tops, bottoms = split_quotient(factors)
        whole = self.product(self.value(a) for a in tops)
        if not bottoms:
            return whole
        return self.arith.divide(whole, self.product(self.value(b) for b in bottoms))

    def _value(self, node: sp.Expr) -> Any:
        arith, value = self.arith, self.value
        if node.is_Number or isinstance(node, sp.NumberSymbol):
            return arith.number(node)
        if node.is_Add:
            return reduce(np.add, (value(a) for a in node.args))
        if node.is_Mul:
            return self._mul(node)
        if node.is_Pow and isinstance(node.base, sp.sign) and node.exp == -1:
            # SymPy writes Abs(u) as u/sign(u) inside derivatives; 1/sign(u) = sign(u) for
            # u != 0, and taking it so keeps u/sign(u) = |u| = 0 at u = 0 instead of 0/0
            return arith.call("sign", value(node.base.args[0]))
        if node.is_Pow:
            return arith.power(value(node.base), value(node.exp))
        rest = log1p_of(node)
        if rest is not None:
            return arith.call("log1p", value(rest))
        if node.func.__name__ in FUNCTIONS and len(node.args) == 1:
            return arith.call(node.func.__name__, value(node.args[0]))
        if isinstance(node, sp.log):  # log(x, base) stays log(x)/log(base) in SymPy
            return arith.call("log", value(node.args[0]))
        if isinstance(node, sp.Piecewise):
            return self._piecewise(node)
        if type(node) in RELATIONS or isinstance(node, (sp.And, sp.Or, sp.Not, sp.Xor, sp.ITE)):
            return self.truth(node)
        if isinstance(node, SPECIAL):
            return _special(node, [value(a) for a in node.args], arith)
        if node.has(sp.I) or node.is_real is False:
            raise ComputationError("no_real_value", term=str(node))
        raise NoClosedForm("no_closed_form", term=str(node))

    def truth(self, node: sp.Expr) -> Any:
        """A condition's truth, elementwise (a comparison with NaN is false, as in IEEE)."""
        if node is sp.true or node is sp.false:
            return np.asarray(bool(node))
        if isinstance(node, sp.Not):
            return ~self.truth(node.args[0])
        if isinstance(node, (sp.And, sp.Or, sp.Xor)):
            combine = {sp.And: np.logical_and, sp.Or: np.logical_or, sp.Xor: np.logical_xor}
            return reduce(combine[type(node)], (self.truth(a) for a in node.args))
        if isinstance(node, sp.ITE):  # a condition chosen by a condition (nested where)
            test, then, otherwise = (self.truth(a) for a in node.args)
            return np.where(test, then, otherwise)
        left, right = self.value(node.lhs), self.value(node.rhs)
        return np.asarray(RELATIONS[type(node)](left, right), dtype=bool)

    def _piecewise(self, node: sp.Piecewise) -> Any:
        result = self.arith.number(sp.nan)
        for expr, condition in reversed(node.args):  # the first branch that holds wins
            result = np.where(self.truth(condition), self.value(expr), result)
        return result

    def _mul(self, node: sp.Expr) -> Any:
        value, zero = self.value, self.arith.number(sp.S.Zero)
        bases = [a.base if a.is_Pow else a for a in node.args]
        if len(set(bases)) < len(bases):  # x**y*y/x is 0/0 at x = 0; y*x**(y-1) is not
            merged = sp.powsimp(node, combine="exp")
            if merged != node:
                return value(merged)
        steps = [a for a in node.args if isinstance(a, sp.Heaviside)]
        off = reduce(
            np.logical_or,
            (np.asarray(value(a.args[0]) < 0, dtype=bool) for a in steps),
            np.False_,
        )
        if np.any(off):  # Heaviside(a) = 0 on a < 0: this term is 0 there, even times inf
            return np.where(off, zero, self.quotient(list(node.args)))
        deltas = [a for a in node.args if isinstance(a, sp.DiracDelta)]
        rest = self.quotient([a for a in node.args if a not in deltas])
        for delta in deltas:  # x**2*DiracDelta(x) is 0: the factor vanishes where it fires
            at = np.asarray(value(delta.args[0]) == 0, dtype=bool)
            vanishes = at & np.asarray(rest == 0, dtype=bool)
            rest = np.where(vanishes, zero, rest * value(delta))
        return rest


SPECIAL = (sp.Heaviside, sp.DiracDelta, sp.atan2, sp.re, sp.im, sp.arg, sp.Max, sp.Min)


def _special(node: sp.Expr, args: list[Any], arith: Arith) -> Any:
    """The functions SymPy's derivatives bring that are not in the vocabulary: jumps
    (Heaviside, DiracDelta), the complex helpers of real values, Max and Min."""
    zero, nan = arith.number(sp.S.Zero), arith.number(sp.nan)
    if isinstance(node, sp.Heaviside):
        at_zero = to_float(node.args[1]) if len(node.args) > 1 else 0.5
        return arith.heaviside(args[0], at_zero)
    if isinstance(node, sp.DiracDelta):  # relu'', abs'' (and its derivatives)
        return np.where(np.asarray(args[0] == 0, dtype=bool), arith.number(sp.oo), zero)
    if isinstance(node, sp.atan2):  # SymPy's arg() of a maybe-complex asin/acos/...
        return arith.atan2(args[0], args[1])
    if isinstance(node, sp.re):  # of a real v: v
        return args[0]
    if isinstance(node, (sp.im, sp.arg)):  # of a real v: 0, and 0 or pi
        negative = np.asarray(args[0] < 0, dtype=bool) & isinstance(node, sp.arg)
        angle = np.where(negative, arith.number(sp.pi), zero)
        return np.where(arith.isnan(args[0]), nan, angle)
    pick = np.maximum if isinstance(node, sp.Max) else np.minimum
    undefined = reduce(np.logical_or, (arith.isnan(v) for v in args))
    return np.where(undefined, nan, reduce(pick, args))


def evaluate_float(expr: sp.Expr, env: dict[sp.Symbol, Any], arith: Arith = FLOAT64) -> np.ndarray:
    """``evaluate`` converted to a float64 array."""
    return arith.floats(evaluate(expr, env, arith))


def close_floats(a: np.ndarray, b: np.ndarray, ulps: int = 2) -> bool:
    """The same float64 numbers to within ``ulps`` units in the last place (NaN matches NaN)."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    with np.errstate(all="ignore"):
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        near = np.abs(a - b) <= ulps * np.spacing(np.abs(b))
    return bool(np.all(same | near))
