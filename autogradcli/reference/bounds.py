"""Float64 with an error bound on every element: the reference past ``PRECISE_ELEMENTS``.

``Checked`` evaluates SymPy's expressions in float64 over whole tensors, like ``FLOAT64``,
and carries beside each node of the walk a bound on its relative error (a running forward
error analysis). Two channels: the rounding of this walk (the inputs taken as exact), and
what values not given as inputs (a reduction's total, a detached block) bring with them.

- a number: 0 if float64 holds it exactly, else u (u = 2**-53);
- ``a + b + ...``: sum of ``r_i·|a_i|``, plus u times each partial sum, over ``|result|``
  (``max r_i`` plus u per addition where every term has one sign);
- ``a·b·...``: sum of ``r_i``, plus u per product; ``b**e``: ``|e|·r_b + |e·log b|·r_e``;
- a function: ``|f'(a)|·r_a·|a| / |f(a)|``, twice that for the first-order slack, plus
  8u for the library (``abs`` and ``sign``: none);
- Heaviside, sign, DiracDelta, a comparison, a Piecewise's conditions, ``arg``: the element
  is wide (an infinite bound) where the argument's error can reach its switch;
- Max, Min and atan2 through their (Lipschitz) partial derivatives.

An element whose rounding bound passes ``TRUST`` (1e-12), or that is NaN or infinite from
finite inputs, is evaluated again in mpmath (``stable``, element by element); the others
keep their float64 values, now bounded. What inputs carry cannot be mended element by
element: a bound past ``LIMIT`` there (or in a sum, ``total``/``check_sum``, where terms
cancel) raises ``Untrusted``, and ``bounds.reference`` evaluates the whole precisely.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

import numpy as np
import sympy as sp

from autogradcli.reference.evaluate import (
    FUNCTIONS,
    PRECISE_ELEMENTS,
    RELATIONS,
    Arith,
    Float64,
    T,
    Untrusted,
    _Walk,
    close_floats,
    evaluate,
    evaluate_float,
    log1p_of,
)
from autogradcli.reference.precise import stable

U = 2.0**-53  # float64's unit roundoff
LIBM = 8 * U  # what one call of NumPy's elementary functions may be off, relative
TRUST = 1e-12  # an element whose rounding bound passes this is evaluated in mpmath
LIMIT = 1e-10  # a bound that mpmath element by element cannot mend, past this: Untrusted
JUMPS = (sp.Heaviside, sp.DiracDelta)
WALK_BLOCK = 1 << 18  # elements per block of a large walk (2 MiB of float64 per array)
Shape = tuple[int, ...]


@dataclass
class Stats:
    """Counts for the process: elements bounded in float64, elements evaluated in mpmath
    because their bound was too wide, and whole evaluations handed to ``stable``."""

    checked: int = 0
    precise: int = 0
    whole: int = 0


STATS = Stats()

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


def _scalar(r: Any) -> bool:
    return np.ndim(r) == 0


def _ratio(err: Any, value: Any, magnitude: Any = None) -> Any:
    """``err/|value|``, 0 where both are 0 (an exact 0), inf where only the value is;
    ``magnitude``: ``|value|`` when the caller has it."""
    if _zero(err):
        return 0.0
    value = np.abs(value) if magnitude is None else magnitude
    rel = np.true_divide(err, value)
    return np.where(np.asarray(err) == 0, 0.0, rel) if not np.all(value) else rel


def _one_sign(values: Sequence[Any]) -> bool:
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


class _Bounded(_Walk):
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
        if all(_scalar(r) for r in flat) and _one_sign(values):
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
            out.append(_ratio(err, value, magnitude))
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
        if name == "sign":
            return self._jump(arg)
        if name == "floor":  # a rounded division: exact, unless an integer is within reach
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
            out.append(_ratio(err, value))
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
            out.append(_ratio(reduce(np.maximum, errs), value) if errs else 0.0)
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
            out.append(_ratio(err, value))
        return out[0] + LIBM, out[1]


def _sum_rounding(values: np.ndarray) -> float:
    """A bound on NumPy's float64 sum of ``values`` relative to the sum of magnitudes:
    pairwise over a contiguous array (blocks of 128 in 8 lanes), in order otherwise."""
    n = values.size
    if n <= 1:
        return 0.0
    steps = 25 + math.ceil(math.log2(n)) if values.flags.c_contiguous else n
    return steps * U / (1 - steps * U)


class Checked(Float64):
    """Float64 over whole tensors, each element's error bounded; the elements whose bound
    is too wide are evaluated in mpmath (see the module's docstring). One per reference:
    it keeps the largest bound of what it has produced (``worst``), which values that are
    not inputs (a total, a detached block) are taken to carry."""

    name = "float64 with error bounds (mpmath where they are wide)"

    def __init__(self) -> None:
        self.inputs: dict[int, Any] = {}  # id -> array: exact, as given
        self.worst = 0.0

    def array(self, values: Any) -> np.ndarray:
        data = np.asarray(values, dtype=np.float64)
        self.inputs[id(data)] = data  # held, so the id stays this array's
        return data

    def _inherited(self, env: dict[sp.Symbol, Any], free: set[sp.Basic]) -> dict[int, float]:
        carried = 2 * self.worst + 4 * U
        return {
            id(env[s]): carried for s in free if s in env and self.inputs.get(id(env[s])) is None
        }

    def walk(self, expr: sp.Expr, env: dict[sp.Symbol, Any]) -> Any:
        """``expr`` in float64; the elements whose bound is too wide, in mpmath. Past
        ``WALK_BLOCK`` elements, where every input is a number or of the result's shape,
        a block of elements at a time through the whole formula (value and bound), so
        that no intermediate array is larger than a block."""
        free = expr.free_symbols
        carried = self._inherited(env, free)
        blocks = _blocks(env, free)
        if blocks is None:
            result, worst = self._walk(expr, env, carried)
            self.worst = max(self.worst, worst)
            return result
        shape, size = blocks
        out = np.empty(size, dtype=np.float64)
        flat = {s: np.reshape(v, -1) if np.ndim(v) else v for s, v in env.items() if s in free}
        worst = 0.0
        for start in range(0, size, WALK_BLOCK):
            part = {s: v[start : start + WALK_BLOCK] if np.ndim(v) else v for s, v in flat.items()}
            inherited = {id(part[s]): carried[id(env[s])] for s in part if id(env[s]) in carried}
            found, bound = self._walk(expr, part, inherited)
            out[start : start + WALK_BLOCK] = found
            worst = max(worst, bound)
        self.worst = max(self.worst, worst)
        return out.reshape(shape)

    def _walk(
        self, expr: sp.Expr, env: dict[sp.Symbol, Any], carried: dict[int, float]
    ) -> tuple[np.ndarray, float]:
        """One walk of ``expr`` over ``env``: its values (the wide elements in mpmath)
        and the largest bound of what it kept, inherited part included."""
        free = expr.free_symbols
        walk = _Bounded(expr, env, self, carried)
        result = np.asarray(walk.value(expr), dtype=np.float64)
        rounding, inherited = walk.bound(expr)
        shape = result.shape
        STATS.checked += result.size
        if _scalar(rounding):  # one bound for every element: no mask of its own
            wide = np.asarray(not float(rounding) <= TRUST)
        else:
            wide = ~(np.broadcast_to(rounding, shape) <= TRUST)
        inherited = float(np.max(inherited)) if np.size(inherited) else 0.0
        if not inherited <= LIMIT:
            raise Untrusted("untrusted_float64", term=str(expr), bound=inherited)
        if not np.isfinite(np.sum(result)):  # NaN or inf from finite inputs
            finite = reduce(
                np.logical_and,
                (np.isfinite(env[s]) for s in free if s in env),
                np.True_,
            )
            overflow = np.isinf(result) & finite
            if overflow.any():  # one first: past float64's range, the whole is precise
                first = np.zeros(overflow.shape, dtype=bool)
                first.flat[np.flatnonzero(overflow)[0]] = True
                _patch(expr, env, result, first)
            wide = wide | (~np.isfinite(result) & finite)
        worst = 0.0
        if not _scalar(rounding) or float(rounding) > TRUST:
            kept = np.broadcast_to(rounding, shape)[~wide]
            worst = float(np.max(kept, initial=0.0))
        else:
            worst = float(rounding)
        if wide.any():
            result = _patch(expr, env, result, wide).reshape(shape)
            worst = max(worst, 2 * U)
        return result, worst + inherited

    def _carried(self) -> float:
        """The bound of any array the model hands back: a product of two of ours."""
        return 2 * self.worst + 4 * U

    def total(self, values: Any) -> Any:
        values = np.asarray(values, dtype=np.float64)
        result = np.sum(values, dtype=np.float64)
        if not np.isfinite(result):
            if np.isfinite(values).all():  # finite terms, a sum past float64's range
                raise Untrusted("untrusted_float64", term="sum", bound=math.inf)
            return np.asarray(result)  # IEEE's inf or NaN, as exact arithmetic has it
        if values.size:
            one_sign = _one_sign([values])
            magnitude = abs(float(result)) if one_sign else float(np.sum(np.abs(values)))
            err = (self._carried() + _sum_rounding(values)) * magnitude
            self._trust(float(_ratio(err, result)), "sum")
        return np.asarray(result)

    def check_sum(self, parts: Any, shape: tuple[int, ...]) -> None:
        """Raise ``Untrusted`` where ``parts`` (arrays of ours) summed together and down to
        ``shape`` (over broadcast axes) may be off by more than ``LIMIT``."""
        parts = [np.asarray(p, dtype=np.float64) for p in parts]
        if len(parts) == 1 and parts[0].shape == tuple(shape):
            return
        with np.errstate(all="ignore"):
            total = reduce(np.add, (_to_shape(p, shape) for p in parts))
            finite = reduce(np.logical_and, (_to_shape(np.isfinite(p), shape) for p in parts))
            if _one_sign(parts) and np.isfinite(total).all():
                self._trust(self._carried() + (len(parts) + 1) * U, "sum")
                return
            magnitude = reduce(np.add, (_to_shape(np.abs(p), shape) for p in parts))
            steps = len(parts) + max(np.size(p) for p in parts) // max(math.prod(shape), 1)
            ratio = _ratio((self._carried() + steps * U) * magnitude, total)
            # a NaN or inf sum of terms not all finite is IEEE's, as exact arithmetic has it
            ratio = np.where(np.isfinite(total), ratio, np.where(finite, math.inf, 0.0))
        self._trust(float(np.max(ratio, initial=0.0)), "sum")

    def _trust(self, bound: float, term: str) -> None:
        if not bound <= LIMIT:
            raise Untrusted("untrusted_float64", term=term, bound=bound)
        self.worst = max(self.worst, bound)


def _to_shape(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``array`` summed (or, for booleans, all-ed) over the axes it was broadcast along
    to reach ``shape``."""
    ufunc = np.logical_and if array.dtype == bool else np.add
    extra = array.ndim - len(shape)
    out = ufunc.reduce(array, axis=tuple(range(extra))) if extra > 0 else array
    axes = tuple(i for i, size in enumerate(shape) if size == 1 and out.shape[i] != 1)
    return ufunc.reduce(out, axis=axes, keepdims=True) if axes else out


def _blocks(env: dict[sp.Symbol, Any], free: set[sp.Basic]) -> tuple[Shape, int] | None:
    """The shape and size of a walk over ``env``'s values of ``free`` that ``Checked.walk``
    takes a block at a time: past ``2·WALK_BLOCK`` elements, each value a number (0-d) or
    a contiguous array of that one shape. None otherwise (broadcasting, a view, a small
    walk)."""
    arrays = [env[s] for s in free if s in env and np.ndim(env[s])]
    shapes = {np.shape(a) for a in arrays}
    if len(shapes) != 1 or not all(np.asarray(a).flags.c_contiguous for a in arrays):
        return None
    shape = shapes.pop()
    size = math.prod(shape)
    return (shape, size) if size > 2 * WALK_BLOCK else None


def _patch(
    expr: sp.Expr, env: dict[sp.Symbol, Any], values: np.ndarray, wide: np.ndarray
) -> np.ndarray:
    """``values`` with the ``wide`` elements evaluated in mpmath (``stable``), each from
    the numbers in ``env`` at that element."""
    values = np.array(values, dtype=np.float64).reshape(values.shape or (1,))
    shape = values.shape
    at = np.nonzero(np.broadcast_to(np.reshape(wide, np.shape(wide) or (1,)), shape))
    count = at[0].size
    local = {
        s: np.broadcast_to(np.reshape(env[s], np.shape(env[s]) or (1,)), shape)[at]
        for s in expr.free_symbols
        if s in env
    }

    def compute(arith: Arith) -> tuple[np.ndarray, np.ndarray]:
        inputs = {s: arith.array(v) for s, v in local.items()}
        found = np.broadcast_to(evaluate(expr, inputs, arith), (count,))
        floats = np.asarray(arith.floats(found), dtype=np.float64)
        return floats, np.asarray(arith.isfinite(found), dtype=bool) & ~np.isfinite(floats)

    precise, huge = stable(compute, lambda a, b: close_floats(a[0], b[0]))
    STATS.precise += count
    if huge.any():  # finite, past float64's range: only a precise whole marks it so
        raise Untrusted("untrusted_float64", term=str(expr), bound=math.inf)
    values[at] = precise
    return values


def reference(compute: Callable[[Arith], T], elements: int, settled: Callable[[T, T], bool]) -> T:
    """``compute`` in the arithmetic the reference needs: precise (``stable``) up to
    ``PRECISE_ELEMENTS`` elements; beyond, float64 with an error bound on every element and
    mpmath at the elements whose bound is too wide (``bounds.Checked``), and precise as a
    whole where a bound cannot be met element by element (``Untrusted``)."""
    if elements <= PRECISE_ELEMENTS:
        return stable(compute, settled)
    try:
        return compute(Checked())
    except Untrusted:
        STATS.whole += 1
        return stable(compute, settled)


def precise_value(
    expr: sp.Expr, env: dict[sp.Symbol, np.ndarray], shape: tuple[int, ...]
) -> np.ndarray:
    """``expr`` at float64 numbers ``env``, evaluated for the reference (see ``reference``),
    broadcast to ``shape``."""

    def compute(arith: Arith) -> np.ndarray:
        inputs = {s: arith.array(v) for s, v in env.items()}
        return np.broadcast_to(evaluate_float(expr, inputs, arith), shape)

    sizes = [math.prod(shape), *(np.size(v) for v in env.values())]
    return np.array(reference(compute, max(sizes), close_floats))
