"""The SymPy side: the same expression as SymPy terms, its derivatives, and their values.

The expression is split into *blocks*: the output, and one block per reduction
(``sum(...)``/``mean(...)``). Inside a block everything is elementwise, so one SymPy
derivative per (block, symbol) is evaluated over the whole tensor at once with NumPy in
float64. A reduction appears in its parent block as a real symbol named after its text
(``sum(x)``), and the chain rule through it is the multivariate one:
``d out/d x = del out/del x + (del out/del sum(x)) * d sum(x)/d x``. Every derivative
here comes from ``sympy.diff``; nothing is taken from PyTorch.
"""

from __future__ import annotations

import itertools
import math
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import reduce

import numpy as np
import sympy as sp

from autogradcli.errors import ComputationError
from autogradcli.expression import (
    Binary,
    Call,
    Expression,
    Limits,
    Name,
    Node,
    Num,
    Shape,
    Unary,
    direct_inputs,
    infer_shape,
    is_full_reduction,
    program_shapes,
    unparse,
)
from autogradcli.vocabulary import CONSTANTS, FUNCTIONS, KINKS


@dataclass
class Block:
    """One elementwise piece: its SymPy expression and the shape it broadcasts to."""

    expr: sp.Expr
    shape: Shape
    kind: str | None = None  # "sum" or "mean" for a reduction block, None for the output


@dataclass
class Expected:
    """What SymPy says: the output value, each gradient, and where it is not ordinary."""

    output: np.ndarray
    grads: dict[str, np.ndarray]
    kinks: dict[str, np.ndarray] = field(default_factory=dict)
    kink_notes: dict[str, set[str]] = field(default_factory=dict)
    output_excluded: np.ndarray | None = None  # output elements left out of the check
    # (low, high) per variable, NaN where unused: the one-sided numeric slopes where a
    # numeric step crosses a kink (autograd must lie between them there)
    bounds: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


class SymbolicModel:
    """The expression in SymPy terms, split into elementwise blocks at each reduction."""

    def __init__(
        self, expression: Expression, shapes: dict[str, Shape], limits: Limits | None = None
    ) -> None:
        self.limits = limits or Limits()
        self.expression = expression
        self.shapes = program_shapes(expression, shapes, self.limits)
        self.symbols = {name: sp.Symbol(name, real=True) for name in expression.variables}
        self.reductions: dict[sp.Symbol, Block] = {}
        self._steps: dict[str, sp.Expr] = {}
        self.output = Block(
            self._build(expression.root), infer_shape(expression.root, self.shapes, self.limits)
        )
        self._derivatives: dict[tuple[int, sp.Symbol], sp.Expr] = {}
        self._exact_zeros = False
        self._marked: set[tuple[int, sp.Expr, bytes]] = set()  # kink sites already marked

    def _build(self, node: Node) -> sp.Expr:
        if isinstance(node, Num):
            return sp.Integer(node.value) if isinstance(node.value, int) else sp.Float(node.value)
        if isinstance(node, Name):
            if node.id in self.symbols:
                return self.symbols[node.id]
            step = self.expression.step(node.id)
            if step is not None:  # a program's steps are substituted
                if node.id not in self._steps:
                    self._steps[node.id] = self._build(step.node)
                return self._steps[node.id]
            return getattr(sp, CONSTANTS[node.id][1])
        if isinstance(node, Unary):
            inner = self._build(node.operand)
            return -inner if node.op == "-" else inner
        if isinstance(node, Binary):
            left, right = self._build(node.left), self._build(node.right)
            return {
                "+": lambda: left + right,
                "-": lambda: left - right,
                "*": lambda: left * right,
                "/": lambda: left / right,
                "**": lambda: left**right,
            }[node.op]()
        if isinstance(node, Call):
            if is_full_reduction(node):
                return self._reduction(node)
            if node.func not in FUNCTIONS:
                raise ComputationError(
                    f"{unparse(node)} is not elementwise; use the component-wise model"
                )
            return FUNCTIONS[node.func].sympy(sp, self._build(node.arg))
        raise TypeError(f"unknown node {node!r}")

    def _reduction(self, node: Call) -> sp.Symbol:
        inner = self._build(node.arg)  # steps substituted: mean(y) of y = 2*x is mean(2*x)
        text = unparse(node.arg) if not self.expression.steps else str(inner)
        symbol = sp.Symbol(f"{node.func}({text})", real=True)
        if symbol not in self.reductions:
            shape = infer_shape(node.arg, self.shapes, self.limits)
            self.reductions[symbol] = Block(inner, shape, node.func)
        return symbol

    def derivative(self, block: Block, symbol: sp.Symbol) -> sp.Expr:
        """SymPy's partial derivative of one block, cached."""
        key = (id(block), symbol)
        if key not in self._derivatives:
            self._derivatives[key] = sp.diff(block.expr, symbol)
        return self._derivatives[key]

    def derivative_text(self, name: str) -> str:
        """The elementwise derivative with respect to ``name``, outer sum/mean unwrapped."""
        block, scale = self.output, sp.Integer(1)
        while block.expr in self.reductions:
            inner = self.reductions[block.expr]
            if inner.kind == "mean":
                scale /= max(math.prod(inner.shape), 1)
            block = inner
        symbol = self.symbols[name]
        text = str(scale * self.derivative(block, symbol))
        through = sorted(
            str(r)
            for r in block.expr.free_symbols
            if r in self.reductions and self._uses(r, symbol)
        )
        if through:
            text += f"  [+ chain rule through {', '.join(through)}]"
        return text

    def _uses(self, reduction: sp.Symbol, symbol: sp.Symbol) -> bool:
        inner = self.reductions[reduction].expr.free_symbols
        return symbol in inner or any(self._uses(r, symbol) for r in inner if r in self.reductions)

    def value(self, node: Node, values: dict[str, np.ndarray]) -> np.ndarray:
        """SymPy's value of any subtree (a step, an operation) at ``values``, in float64."""
        expr = self._build(node)
        env: dict[sp.Symbol, np.ndarray] = {self.symbols[n]: v for n, v in values.items()}
        with np.errstate(all="ignore"):
            self._reduce_all(expr, env)
            result = evaluate_numeric(expr, env)
        return np.array(np.broadcast_to(result, infer_shape(node, self.shapes, self.limits)))

    def evaluate(
        self,
        values: dict[str, np.ndarray],
        weights: np.ndarray,
        differentiate: frozenset[str],
        exact_zeros: bool = False,
    ) -> Expected:
        """Output value and the vector-Jacobian product ``sum_i w_i d out_i / d x`` per variable.

        ``exact_zeros``: a zero weight contributes exactly 0 even where a derivative is
        infinite (for Jacobian rows: out_i does not depend on x_j at all); without it,
        0 * inf is NaN, as in PyTorch's ``backward(w)``."""
        env: dict[sp.Symbol, np.ndarray] = {self.symbols[n]: v for n, v in values.items()}
        ordered = [n for n in self.expression.variables if n in differentiate]
        with np.errstate(all="ignore"):
            self._reduce_all(self.output.expr, env)
            output = np.broadcast_to(evaluate_numeric(self.output.expr, env), self.output.shape)
            expected = Expected(
                output=np.array(output, dtype=np.float64),
                grads={n: np.zeros(self.shapes[n]) for n in ordered},
                kinks={n: np.zeros(self.shapes[n], dtype=bool) for n in ordered},
                kink_notes={n: set() for n in ordered},
            )
            upstream = np.broadcast_to(np.asarray(weights, dtype=np.float64), self.output.shape)
            self._exact_zeros = exact_zeros
            self._marked = set()
            self._vjp(self.output, upstream, env, expected, differentiate)
        return expected

    def _reduce_all(self, expr: sp.Expr, env: dict[sp.Symbol, np.ndarray]) -> None:
        """Evaluate every reduction under ``expr``, innermost first, into ``env``."""
        for symbol in expr.free_symbols:
            if symbol in self.reductions and symbol not in env:
                block = self.reductions[symbol]
                self._reduce_all(block.expr, env)
                inner = np.broadcast_to(evaluate_numeric(block.expr, env), block.shape)
                total = np.sum(inner, dtype=np.float64)
                if block.kind == "mean":
                    total = total / math.prod(block.shape) if block.shape else total
                env[symbol] = np.asarray(total)

    def _vjp(
        self,
        block: Block,
        upstream: np.ndarray,
        env: dict[sp.Symbol, np.ndarray],
        expected: Expected,
        differentiate: frozenset[str],
        kinks: bool = True,
    ) -> None:
        """Add ``upstream``'s vector-Jacobian product through ``block`` to ``expected.grads``
        (recursing into reductions); with ``kinks``, also mark the inputs that move a kink."""
        names = {s: n for n, s in self.symbols.items() if n in differentiate}
        for symbol in sorted(block.expr.free_symbols, key=str):  # a fixed order of sums
            if symbol not in names and symbol not in self.reductions:
                continue
            derivative = self.derivative(block, symbol)
            local = np.broadcast_to(evaluate_numeric(derivative, env), block.shape)
            contribution = upstream * local
            if self._exact_zeros:
                contribution = np.where(upstream == 0, 0.0, contribution)
            if kinks:
                for atom, at in kink_sites(derivative, env, block.shape):
                    site = (id(block), atom, at.tobytes())
                    if site not in self._marked:  # the same jump in several derivatives
                        self._marked.add(site)
                        self._mark_movers(atom, at, block.shape, env, expected, differentiate)
            if symbol in names:
                name = names[symbol]
                shape = self.shapes[name]
                expected.grads[name] = expected.grads[name] + reduce_to_shape(contribution, shape)
                continue
            inner = self.reductions[symbol]
            scale = np.sum(contribution, dtype=np.float64)
            if inner.kind == "mean" and inner.shape:
                scale = scale / math.prod(inner.shape)
            self._vjp(inner, np.full(inner.shape, scale), env, expected, differentiate, kinks)

    def _mark_movers(
        self,
        atom: sp.Expr,
        at: np.ndarray,
        shape: Shape,
        env: dict[sp.Symbol, np.ndarray],
        expected: Expected,
        differentiate: frozenset[str],
    ) -> None:
        """Mark the input elements whose change moves ``atom``'s argument at the elements
        ``at`` where it sits at its jump: a nonzero total derivative, through reductions too
        (in abs(sum(y) - y) the first argument, y1 + y2, does not move with y0). Random
        positive weights keep different kink elements from cancelling."""
        weights = np.where(at, np.random.default_rng(0).uniform(1.0, 2.0, shape), 0.0)
        moved = Expected(
            output=np.zeros(()),
            grads={n: np.zeros(self.shapes[n]) for n in expected.grads},
        )
        exact_zeros, self._exact_zeros = self._exact_zeros, True
        try:
            self._vjp(Block(atom.args[0], shape), weights, env, moved, differentiate, kinks=False)
        finally:
            self._exact_zeros = exact_zeros
        for name, grad in moved.grads.items():
            mask = grad != 0  # NaN counts as moved
            if mask.any():
                expected.kinks[name] |= mask
                expected.kink_notes[name].add(KINKS[type(atom).__name__])


def reduce_to_shape(array: np.ndarray, shape: Shape, ufunc: np.ufunc = np.add) -> np.ndarray:
    """Sum (or OR) a broadcast result back to the shape of the input it came from."""
    extra = array.ndim - len(shape)
    out = ufunc.reduce(array, axis=tuple(range(extra))) if extra > 0 else array
    axes = tuple(i for i, size in enumerate(shape) if size == 1 and out.shape[i] != 1)
    if axes:
        out = ufunc.reduce(out, axis=axes, keepdims=True)
    return np.array(np.broadcast_to(out, shape))


def find_kinks(
    derivative: sp.Expr, env: dict[sp.Symbol, np.ndarray], shape: Shape
) -> tuple[np.ndarray, set[str]]:
    """Where a jump function in ``derivative`` sits exactly at its jump, and which note applies."""
    mask = np.zeros(shape, dtype=bool)
    notes: set[str] = set()
    for atom, at_jump in kink_sites(derivative, env, shape):
        mask |= at_jump
        notes.add(KINKS[type(atom).__name__])
    return mask, notes


def kink_sites(
    derivative: sp.Expr, env: dict[sp.Symbol, np.ndarray], shape: Shape
) -> list[tuple[sp.Expr, np.ndarray]]:
    """Each jump function in ``derivative`` that sits exactly at its jump somewhere, with
    the mask of those elements."""
    sites = []
    whole = None
    for atom in derivative.atoms(sp.Heaviside, sp.sign, sp.DiracDelta):  # order is immaterial
        with np.errstate(invalid="ignore"):
            argument = evaluate_numeric(atom.args[0], env)
        at_jump = np.broadcast_to(argument == 0, shape)
        undefined = np.isnan(argument)
        if (  # inf - inf with no NaN among the inputs: a tie of infinities, on neither side
            undefined.any()
            and not isinstance(atom, sp.DiracDelta)
            and not any(np.isnan(v).any() for v in env.values())
        ):
            at_jump = at_jump | np.broadcast_to(undefined, shape)
        if isinstance(atom, sp.DiracDelta):  # only where it is not multiplied away
            if whole is None:
                with np.errstate(all="ignore"):
                    whole = np.broadcast_to(evaluate_numeric(derivative, env), shape)
            at_jump = at_jump & ~np.isfinite(whole)
        elif at_jump.any():  # a jump that does not change the value (x*sign(x)) is no kink
            at_jump = at_jump & _jumps(derivative, atom, env, shape)
        if at_jump.any():
            sites.append((atom, at_jump))
    return sites


def _jumps(
    derivative: sp.Expr, atom: sp.Expr, env: dict[sp.Symbol, np.ndarray], shape: Shape
) -> np.ndarray:
    """Where ``derivative`` differs on the two sides of ``atom``'s jump."""
    low, high = (0, 1) if isinstance(atom, sp.Heaviside) else (-1, 1)
    with np.errstate(all="ignore"):
        left = np.broadcast_to(evaluate_numeric(derivative.subs(atom, low), env), shape)
        right = np.broadcast_to(evaluate_numeric(derivative.subs(atom, high), env), shape)
    return ~((left == right) & np.isfinite(left))


_UNARY_NUMPY = {
    sp.sin: np.sin,
    sp.cos: np.cos,
    sp.tan: np.tan,
    sp.asin: np.arcsin,
    sp.acos: np.arccos,
    sp.atan: np.arctan,
    sp.sinh: np.sinh,
    sp.cosh: np.cosh,
    sp.tanh: np.tanh,
    sp.asinh: np.arcsinh,
    sp.acosh: np.arccosh,
    sp.atanh: np.arctanh,
    sp.exp: np.exp,
    sp.log: np.log,
    sp.Abs: np.abs,
    sp.sign: np.sign,
}


def evaluate_numeric(expr: sp.Expr, env: dict[sp.Symbol, np.ndarray]) -> np.ndarray:
    """Evaluate a SymPy expression with NumPy in float64, walking its tree (no code generation)."""
    cache: dict[sp.Expr, np.ndarray] = {}

    def value(node: sp.Expr) -> np.ndarray:
        if node in env:
            return env[node]
        if node in cache:
            return cache[node]
        result = _value(node)
        cache[node] = result
        return result

    def _value(node: sp.Expr) -> np.ndarray:
        if node.is_Number or isinstance(node, sp.NumberSymbol):
            return np.asarray(_to_float(node))
        if node.is_Add:
            return reduce(np.add, (value(a) for a in node.args))
        if node.is_Mul:
            bases = [a.base if a.is_Pow else a for a in node.args]
            if len(set(bases)) < len(bases):  # x**y*y/x is 0/0 at x = 0; y*x**(y-1) is not
                merged = sp.powsimp(node, combine="exp")
                if merged != node:
                    return value(merged)
            steps = [a for a in node.args if isinstance(a, sp.Heaviside)]
            off = reduce(np.logical_or, (value(a.args[0]) < 0 for a in steps), np.False_)
            if np.any(off):  # Heaviside(a) = 0 on a < 0: this term is 0 there, even times inf
                whole = reduce(np.multiply, (value(a) for a in node.args))
                return np.where(off, 0.0, whole)
            deltas = [a for a in node.args if isinstance(a, sp.DiracDelta)]
            rest = reduce(np.multiply, (value(a) for a in node.args if a not in deltas), 1.0)
            for delta in deltas:  # x**2*DiracDelta(x) is 0: the factor vanishes where it fires
                at = value(delta.args[0]) == 0
                rest = np.where(at & (rest == 0), 0.0, rest * value(delta))
            return rest
        if node.is_Pow and isinstance(node.base, sp.sign) and node.exp == -1:
            # SymPy writes Abs(u) as u/sign(u) inside derivatives (d/dz of
            # Abs(z/sin(Abs(x)))); 1/sign(u) = sign(u) for u != 0, and taking it so keeps
            # u/sign(u) = |u| = 0 at u = 0 instead of 0/0
            return np.sign(value(node.base.args[0]))
        if node.is_Pow:
            return np.power(value(node.base), value(node.exp))
        if node.func in _UNARY_NUMPY and len(node.args) == 1:
            return _UNARY_NUMPY[node.func](value(node.args[0]))
        if isinstance(node, sp.log):  # log(x, base) stays log(x)/log(base) in SymPy
            return np.log(value(node.args[0]))
        if isinstance(node, sp.Heaviside):
            at_zero = _to_float(node.args[1]) if len(node.args) > 1 else 0.5
            return np.heaviside(value(node.args[0]), at_zero)
        if isinstance(node, sp.DiracDelta):  # relu'', abs'' (and its derivatives)
            inner = value(node.args[0])
            return np.where(inner == 0, np.inf, 0.0)
        if isinstance(node, sp.atan2):  # SymPy's arg() of a maybe-complex asin/acos/...
            return np.arctan2(value(node.args[0]), value(node.args[1]))
        if isinstance(node, (sp.re, sp.im, sp.arg)):  # of a real v: v, 0, and 0 or pi
            inner = value(node.args[0])
            if isinstance(node, sp.re):
                return inner
            with np.errstate(invalid="ignore"):
                angle = np.where(inner < 0, math.pi, 0.0) if isinstance(node, sp.arg) else 0.0
            return np.where(np.isnan(inner), np.nan, angle)
        if isinstance(node, (sp.Max, sp.Min)):
            pick = np.maximum if isinstance(node, sp.Max) else np.minimum
            return reduce(pick, (value(a) for a in node.args))
        if node.has(sp.I) or node.is_real is False:
            raise ComputationError(
                f"SymPy's result contains {node}, which has no real numeric value here; "
                "check the expression's domain"
            )
        raise NoClosedForm(f"SymPy leaves {node} unevaluated")

    return np.asarray(value(expr), dtype=np.float64)


def _to_float(number: sp.Expr) -> float:
    if number is sp.zoo or number is sp.nan:
        return math.nan if number is sp.nan else math.inf
    try:
        return float(number)
    except (OverflowError, TypeError):
        return math.copysign(math.inf, 1 if number.is_positive else -1)


class NoClosedForm(ComputationError):
    """SymPy's derivative contains something with no numeric value (Derivative, Subs...)."""


class SympyTimeout(ComputationError):
    """SymPy's exact check took longer than allowed."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise ``SympyTimeout`` after ``seconds`` (main thread on POSIX; elsewhere no limit)."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable or seconds <= 0:
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise SympyTimeout(f"SymPy took more than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


MAX_CHAIN_PATHS = 6


def chain_rule(
    expression: Expression, shapes: dict[str, Shape], name: str, limits: Limits | None = None
) -> str | None:
    """The chain rule over a program's steps for input ``name``, e.g.
    ``∂out/∂z·∂z/∂y·∂y/∂x = (1/4)·(6*y)·(1)``; each factor is SymPy's derivative of one
    step with respect to one of its direct inputs. None for a plain expression."""
    if not expression.steps:
        return None
    limits = limits or Limits()
    all_shapes = program_shapes(expression, shapes, limits)
    units = {s.name: s.node for s in expression.steps}
    if expression.output not in units:
        units[expression.output] = expression.root
        all_shapes[expression.output] = infer_shape(expression.root, all_shapes, limits)
    local: dict[tuple[str, str], str] = {}

    def factor(unit: str, wrt: str) -> str:
        if (unit, wrt) not in local:
            node = units[unit]
            inputs = tuple(n for n in direct_inputs(node) if n in all_shapes)
            step = Expression(unparse(node), node, inputs)
            model = SymbolicModel(step, {n: all_shapes[n] for n in inputs}, limits)
            local[(unit, wrt)] = model.derivative_text(wrt)
        return local[(unit, wrt)]

    paths: list[list[str]] = []

    def walk_paths(unit: str, path: list[str]) -> None:
        for used in direct_inputs(units[unit]):
            if len(paths) > MAX_CHAIN_PATHS:
                return
            if used == name:
                paths.append([*path, unit, name])
            elif used in units:
                walk_paths(used, [*path, unit])

    walk_paths(expression.output, [])
    if all(len(p) == 2 for p in paths):  # no step between the output and the input
        return None
    if len(paths) > MAX_CHAIN_PATHS:
        return f"more than {MAX_CHAIN_PATHS} paths from {expression.output} to {name}"

    def term(path: list[str], show: Callable[[str, str], str]) -> str:
        pairs = list(itertools.pairwise(path))
        factors = [show(a, b) for a, b in pairs]
        # where a smaller tensor is spread over a larger one (m = mean(y) used in y - m),
        # the factors above it are summed over the larger one's elements
        spread = [
            k for k, (a, b) in enumerate(pairs) if _size(all_shapes[b]) < _size(all_shapes[a])
        ]
        if not spread:
            return "·".join(factors)
        k = spread[-1] + 1
        return "Σ[" + "·".join(factors[:k]) + "]" + "".join("·" + f for f in factors[k:])

    names = " + ".join(term(p, lambda a, b: f"∂{a}/∂{b}") for p in paths)
    values = " + ".join(term(p, lambda a, b: f"({factor(a, b)})") for p in paths)
    line = f"∂{expression.output}/∂{name} = {names} = {values}"
    if "Σ[" in line:
        line += " (Σ[...]: summed over the elements a smaller tensor is spread to)"
    return line


def _size(shape: Shape) -> int:
    return math.prod(shape)
