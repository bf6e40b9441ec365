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
keep their float64 values, now bounded. A value an earlier walk made carries that walk's
bound on each element (``reference.sources``); where what values carry passes ``TRUST``
(past ``LIMIT`` somewhere, or at no more than ``PRECISE_ELEMENTS`` elements), those
elements are evaluated in mpmath from the inputs, through the formulas that made the
values. Where a value's formula is not known (a total, a product the model formed), a
bound past ``LIMIT`` (or in a sum, ``total``/``check_sum``, where terms cancel) raises
``Untrusted``, and ``bounds.reference`` evaluates the whole precisely.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from typing import Any

import numpy as np
import sympy as sp

from autogradcli.reference.evaluate import (
    PRECISE_ELEMENTS,
    Arith,
    Float64,
    T,
    Untrusted,
    close_floats,
    evaluate,
    evaluate_float,
)
from autogradcli.reference.nodebounds import Bounded, U, is_scalar, relative_to, same_sign
from autogradcli.reference.precise import stable
from autogradcli.reference.sources import Sources

TRUST = 1e-12  # an element whose rounding bound passes this is evaluated in mpmath
LIMIT = 1e-10  # a bound that mpmath element by element cannot mend, past this: Untrusted
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
        self.sources = Sources()  # the walks' results, their formulas and bounds

    def array(self, values: Any) -> np.ndarray:
        data = np.asarray(values, dtype=np.float64)
        self.inputs[id(data)] = data  # held, so the id stays this array's
        return data

    def _inherited(self, env: dict[sp.Symbol, Any], free: set[sp.Basic]) -> dict[int, Any]:
        """The bound each value not given as an input carries: a walk's result its own
        (on each element), any other the largest bound of what was made (``_carried``)."""
        carried: dict[int, Any] = {}
        for s in free:
            if s in env and self.inputs.get(id(env[s])) is None:
                made = self.sources.find(env[s])
                carried[id(env[s])] = self._carried() if made is None else made.bound
        return carried

    def _exact(self, value: Any) -> bool:
        return self.inputs.get(id(value)) is value

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
            inherited = {
                id(part[s]): float(np.max(carried[id(env[s])]))
                for s in part
                if id(env[s]) in carried
            }
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
        walk = Bounded(expr, env, self, carried)
        result = np.asarray(walk.value(expr), dtype=np.float64)
        rounding, inherited = walk.bound(expr)
        shape = result.shape
        STATS.checked += result.size
        if is_scalar(rounding):  # one bound for every element: no mask of its own
            wide = np.asarray(not float(rounding) <= TRUST)
        else:
            wide = ~(np.broadcast_to(rounding, shape) <= TRUST)
        each, bad = inherited, np.zeros((), dtype=bool)  # each: what each element carries
        inherited = float(np.max(each)) if np.size(each) else 0.0
        if not inherited <= TRUST:  # NaN too: the elements past TRUST, precise if it can
            bad = ~(np.broadcast_to(each, shape) <= TRUST)
            mended = self._mend(expr, env, result, bad, inherited)
            if mended is not None:
                result, bad = mended
                each = np.where(bad, 0.0, each)
                inherited = float(np.max(each, initial=0.0))
            elif not inherited <= LIMIT:
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
        if not is_scalar(rounding) or float(rounding) > TRUST:
            kept = np.broadcast_to(rounding, shape)[~wide]
            worst = float(np.max(kept, initial=0.0))
        else:
            worst = float(rounding)
        if bad.any():
            wide = np.broadcast_to(wide, shape) & ~bad  # mended: the whole's, precisely
        if wide.any():
            result = _patch(expr, env, result, wide).reshape(shape)
        if wide.any() or bad.any():
            worst = max(worst, 2 * U)
        if self.sources.takes(result, env):
            rounded = np.where(wide | bad, 2 * U, np.broadcast_to(rounding, shape))
            result = self.sources.add(result, expr, env, rounded + each)
        return result, worst + inherited

    def _mend(
        self, expr: sp.Expr, env: dict[sp.Symbol, Any], result: np.ndarray, bad: Any, top: float
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """``result`` with the elements ``bad`` (what its values carry passes ``TRUST``
        there) evaluated precisely from the inputs, through the formulas of the walks
        that made those values (``Sources.written_out``), and ``bad``; None where a
        value's formula is not known (a total, a product the model formed), or where the
        largest bound ``top`` is within ``LIMIT`` and more than ``PRECISE_ELEMENTS`` pass."""
        if not self.sources.made or (top <= LIMIT and np.sum(bad) > PRECISE_ELEMENTS):
            return None
        whole = self.sources.written_out(expr, env, self._exact)
        if whole is None:
            return None
        formula, numbers = whole
        return _patch(formula, numbers, result, bad).reshape(result.shape), bad

    def _carried(self) -> float:
        """The bound of any array the model hands back: a product of two of ours."""
        return 2 * self.worst + 4 * U

    def total(self, values: Any) -> Any:
        """The sum, bounded: what its terms carry (a walk's result: each term its own
        bound; else ``_carried``) and the summation's rounding, relative to the sum."""
        made = self.sources.find(values)
        values = np.asarray(values, dtype=np.float64)
        result = np.asarray(np.sum(values, dtype=np.float64))
        if not np.isfinite(result):
            if np.isfinite(values).all():  # finite terms, a sum past float64's range
                raise Untrusted("untrusted_float64", term="sum", bound=math.inf)
            return result  # IEEE's inf or NaN, as exact arithmetic has it
        if values.size:
            one_sign = same_sign([values])
            magnitude = abs(float(result)) if one_sign else float(np.sum(np.abs(values)))
            carried = self._carried() * magnitude
            if made is not None:
                carried = float(np.sum(np.abs(values) * made.bound))
            bound = float(relative_to(carried + _sum_rounding(values) * magnitude, result))
            self._trust(bound, "sum")
            if self.sources.takes(result, {}):
                result = self.sources.add(result, None, {}, bound)
        return result

    def check_sum(self, parts: Any, shape: tuple[int, ...]) -> None:
        """Raise ``Untrusted`` where ``parts`` (arrays of ours) summed together and down to
        ``shape`` (over broadcast axes) may be off by more than ``LIMIT``."""
        parts = [np.asarray(p, dtype=np.float64) for p in parts]
        if len(parts) == 1 and parts[0].shape == tuple(shape):
            return
        with np.errstate(all="ignore"):
            total = reduce(np.add, (_to_shape(p, shape) for p in parts))
            finite = reduce(np.logical_and, (_to_shape(np.isfinite(p), shape) for p in parts))
            if same_sign(parts) and np.isfinite(total).all():
                self._trust(self._carried() + (len(parts) + 1) * U, "sum")
                return
            magnitude = reduce(np.add, (_to_shape(np.abs(p), shape) for p in parts))
            steps = len(parts) + max(np.size(p) for p in parts) // max(math.prod(shape), 1)
            ratio = relative_to((self._carried() + steps * U) * magnitude, total)
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
