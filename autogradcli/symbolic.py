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
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

from autogradcli.errors import ComputationError
from autogradcli.evaluate import (
    FLOAT64,
    Arith,
    close_floats,
    evaluate,
    reference,
)
from autogradcli.expected import Expected
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
            self._derivatives[key] = diff(block.expr, symbol)
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
        """SymPy's value of any subtree (a step, an operation) at ``values``, precise (see
        ``evaluate.reference``), as float64."""
        return self.value_range(node, values)[0]

    def value_range(
        self, node: Node, values: dict[str, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray]:
        """``value``, and where it is finite but past float64's range (shown as ±inf)."""
        expr = self._build(node)
        shape = infer_shape(node, self.shapes, self.limits)

        def compute(arith: Arith) -> tuple[np.ndarray, np.ndarray]:
            env = {self.symbols[n]: arith.array(v) for n, v in values.items()}
            self._reduce_all(expr, env, arith)
            return in_range(arith, np.broadcast_to(evaluate(expr, env, arith), shape))

        size = self._size(values, shape)
        return reference(compute, size, lambda a, b: close_floats(a[0], b[0]))

    def _size(self, values: dict[str, np.ndarray], *shapes: Shape) -> int:
        sizes = [np.size(v) for v in values.values()] + [math.prod(s) for s in shapes]
        sizes += [math.prod(b.shape) for b in self.reductions.values()]
        return max(sizes, default=1)

    def evaluate(
        self,
        values: dict[str, np.ndarray],
        weights: np.ndarray,
        differentiate: frozenset[str],
        exact_zeros: bool = False,
        arith: Arith | None = None,
    ) -> Expected:
        """Output value and the vector-Jacobian product ``sum_i w_i d out_i / d x`` per variable,
        precise (see ``evaluate.reference``) unless ``arith`` is given.

        ``exact_zeros``: a zero weight contributes exactly 0 even where a derivative is
        infinite (for Jacobian rows: out_i does not depend on x_j at all); without it,
        0 * inf is NaN, as in PyTorch's ``backward(w)``."""

        def compute(arith: Arith) -> Expected:
            return self._evaluate(values, weights, differentiate, exact_zeros, arith)

        if arith is not None:
            return compute(arith)
        size = self._size(values, self.output.shape)
        return reference(compute, size, Expected.settled_with)

    def _evaluate(
        self,
        values: dict[str, np.ndarray],
        weights: np.ndarray,
        differentiate: frozenset[str],
        exact_zeros: bool,
        arith: Arith,
    ) -> Expected:
        env = {self.symbols[n]: arith.array(v) for n, v in values.items()}
        ordered = [n for n in self.expression.variables if n in differentiate]
        self._reduce_all(self.output.expr, env, arith)
        output = np.broadcast_to(evaluate(self.output.expr, env, arith), self.output.shape)
        grads = {n: arith.array(np.zeros(self.shapes[n])) for n in ordered}
        kinks = {n: np.zeros(self.shapes[n], dtype=bool) for n in ordered}
        notes: dict[str, set[str]] = {n: set() for n in ordered}
        upstream = np.broadcast_to(arith.array(weights), self.output.shape)
        self._exact_zeros = exact_zeros
        self._marked = set()
        with np.errstate(all="ignore"):
            self._vjp(self.output, upstream, env, grads, kinks, notes, differentiate, arith)
        return expected_from(arith, output, grads, kinks, notes)

    def _reduce_all(self, expr: sp.Expr, env: dict[sp.Symbol, Any], arith: Arith) -> None:
        """Evaluate every reduction under ``expr``, innermost first, into ``env``."""
        for symbol in expr.free_symbols:
            if symbol in self.reductions and symbol not in env:
                block = self.reductions[symbol]
                self._reduce_all(block.expr, env, arith)
                inner = np.broadcast_to(evaluate(block.expr, env, arith), block.shape)
                total = arith.total(inner)
                if block.kind == "mean" and block.shape:
                    total = total * arith.number(sp.Rational(1, math.prod(block.shape)))
                env[symbol] = total

    def _vjp(
        self,
        block: Block,
        upstream: np.ndarray,
        env: dict[sp.Symbol, Any],
        grads: dict[str, Any],
        kinks: dict[str, np.ndarray] | None,
        notes: dict[str, set[str]],
        differentiate: frozenset[str],
        arith: Arith,
    ) -> None:
        """Add ``upstream``'s vector-Jacobian product through ``block`` to ``grads``
        (recursing into reductions); with ``kinks``, also mark the inputs that move a kink."""
        names = {s: n for n, s in self.symbols.items() if n in differentiate}
        zero = arith.number(sp.Integer(0))
        for symbol in sorted(block.expr.free_symbols, key=str):  # a fixed order of sums
            if symbol not in names and symbol not in self.reductions:
                continue
            derivative = self.derivative(block, symbol)
            local = np.broadcast_to(evaluate(derivative, env, arith), block.shape)
            contribution = upstream * local
            if self._exact_zeros:
                contribution = np.where(np.asarray(upstream == 0, dtype=bool), zero, contribution)
            if kinks is not None:
                for atom, at in kink_sites(derivative, env, block.shape, arith):
                    site = (id(block), atom, at.tobytes())
                    if site not in self._marked:  # the same jump in several derivatives
                        self._marked.add(site)
                        args = (atom, at, block.shape, env, grads, differentiate, arith)
                        for name, mask in self._movers(*args).items():
                            kinks[name] |= mask
                            notes[name].add(KINKS[type(atom).__name__])
            if symbol in names:
                name = names[symbol]
                grads[name] = grads[name] + reduce_to_shape(contribution, self.shapes[name])
                continue
            inner = self.reductions[symbol]
            scale = arith.total(contribution)
            if inner.kind == "mean" and inner.shape:
                scale = scale * arith.number(sp.Rational(1, math.prod(inner.shape)))
            spread = np.broadcast_to(scale, inner.shape)
            self._vjp(inner, spread, env, grads, kinks, notes, differentiate, arith)

    def _movers(
        self,
        atom: sp.Expr,
        at: np.ndarray,
        shape: Shape,
        env: dict[sp.Symbol, Any],
        grads: dict[str, Any],
        differentiate: frozenset[str],
        arith: Arith,
    ) -> dict[str, np.ndarray]:
        """The input elements whose change moves ``atom``'s argument at the elements ``at``
        where it sits at its jump: a nonzero total derivative, through reductions too (in
        abs(sum(y) - y) the first argument, y1 + y2, does not move with y0). Random
        positive weights keep different kink elements from cancelling."""
        weights = np.where(at, np.random.default_rng(0).uniform(1.0, 2.0, shape), 0.0)
        moved = {n: arith.array(np.zeros(self.shapes[n])) for n in grads}
        exact_zeros, self._exact_zeros = self._exact_zeros, True
        try:
            block = Block(atom.args[0], shape)
            upstream = arith.array(weights)
            self._vjp(block, upstream, env, moved, None, {}, differentiate, arith)
        finally:
            self._exact_zeros = exact_zeros
        found = {}
        for name, grad in moved.items():
            mask = np.asarray(grad != 0, dtype=bool) | arith.isnan(grad)  # NaN counts as moved
            if mask.any():
                found[name] = mask
        return found


def diff(expr: sp.Expr, symbol: sp.Symbol, order: int = 1) -> sp.Expr:
    """``sympy.diff``, with SymPy's ``u/sign(u)`` for ``Abs(u)`` written back as ``Abs(u)``
    (the same number where u != 0; at u = 0 it is 0 where the quotient is 0/0)."""
    return abs_form(sp.diff(expr, symbol, order))


def abs_form(expr: sp.Expr) -> sp.Expr:
    """``expr`` with each product ``u * sign(u)**-1`` written as ``Abs(u)``."""

    def split(product: sp.Expr) -> tuple[sp.Expr, list[sp.Expr]] | None:
        factors = list(product.args)
        for factor in product.args:
            if factor.is_Pow and isinstance(factor.base, sp.sign) and factor.exp == -1:
                inner = list(sp.Mul.make_args(factor.base.args[0]))
                rest = [f for f in factors if f is not factor]
                if all(f in rest for f in inner):
                    for f in inner:
                        rest.remove(f)
                    return factor.base.args[0], rest
        return None

    return expr.replace(
        lambda e: e.is_Mul and split(e) is not None,
        lambda e: sp.Mul(sp.Abs(split(e)[0]), *split(e)[1]),  # type: ignore[index]
    )


def reduce_to_shape(array: np.ndarray, shape: Shape, ufunc: np.ufunc = np.add) -> np.ndarray:
    """Sum (or OR) a broadcast result back to the shape of the input it came from."""
    array = np.asarray(array)
    extra = array.ndim - len(shape)
    out = ufunc.reduce(array, axis=tuple(range(extra))) if extra > 0 else array
    axes = tuple(i for i, size in enumerate(shape) if size == 1 and out.shape[i] != 1)
    if axes:
        out = ufunc.reduce(out, axis=axes, keepdims=True)
    return np.array(np.broadcast_to(out, shape))


def find_kinks(
    derivative: sp.Expr, env: dict[sp.Symbol, Any], shape: Shape, arith: Arith = FLOAT64
) -> tuple[np.ndarray, set[str]]:
    """Where a jump function in ``derivative`` sits exactly at its jump, and which note applies."""
    mask = np.zeros(shape, dtype=bool)
    notes: set[str] = set()
    for atom, at_jump in kink_sites(derivative, env, shape, arith):
        mask |= at_jump
        notes.add(KINKS[type(atom).__name__])
    return mask, notes


def kink_sites(
    derivative: sp.Expr,
    env: dict[sp.Symbol, Any],
    shape: Shape,
    arith: Arith = FLOAT64,
    ties: bool = False,
) -> list[tuple[sp.Expr, np.ndarray]]:
    """Each jump function in ``derivative`` that sits exactly at its jump somewhere, with
    the mask of those elements. ``ties``: the expression has max/min, whose tie of
    infinities (inf - inf, NaN, with no NaN among the inputs) is on neither side."""
    sites = []
    whole = None
    for atom in derivative.atoms(sp.Heaviside, sp.sign, sp.DiracDelta):  # order is immaterial
        argument = evaluate(atom.args[0], env, arith)
        at_jump = np.broadcast_to(np.asarray(argument == 0, dtype=bool), shape)
        undefined = arith.isnan(argument)
        if (
            ties
            and undefined.any()
            and not isinstance(atom, sp.DiracDelta)
            and not any(arith.isnan(v).any() for v in env.values())
        ):
            at_jump = at_jump | np.broadcast_to(undefined, shape)
        if isinstance(atom, sp.DiracDelta):  # only where it is not multiplied away
            if whole is None:
                whole = np.broadcast_to(arith.isfinite(evaluate(derivative, env, arith)), shape)
            at_jump = at_jump & ~whole
        elif at_jump.any():  # a jump that does not change the value (x*sign(x)) is no kink
            at_jump = at_jump & _jumps(derivative, atom, env, shape, arith)
        if at_jump.any():
            sites.append((atom, at_jump))
    return sites


def _jumps(
    derivative: sp.Expr, atom: sp.Expr, env: dict[sp.Symbol, Any], shape: Shape, arith: Arith
) -> np.ndarray:
    """Where ``derivative`` differs on the two sides of ``atom``'s jump."""
    low, high = (0, 1) if isinstance(atom, sp.Heaviside) else (-1, 1)
    left = np.broadcast_to(arith.floats(evaluate(derivative.subs(atom, low), env, arith)), shape)
    right = np.broadcast_to(arith.floats(evaluate(derivative.subs(atom, high), env, arith)), shape)
    return ~((left == right) & np.isfinite(left))


def expected_from(
    arith: Arith,
    output: Any,
    grads: dict[str, Any],
    kinks: dict[str, np.ndarray],
    notes: dict[str, set[str]],
) -> Expected:
    """An ``Expected`` of float64 arrays from numbers in ``arith`` (values past float64's
    range become ±inf and are marked ``huge``)."""

    out, out_huge = in_range(arith, output)
    ranged = {n: in_range(arith, g) for n, g in grads.items()}
    return Expected(
        output=out,
        grads={n: r[0] for n, r in ranged.items()},
        kinks=kinks,
        kink_notes=notes,
        output_huge=out_huge,
        huge={n: r[1] for n, r in ranged.items()},
        arithmetic=arith.name,
    )


def in_range(arith: Arith, values: Any) -> tuple[np.ndarray, np.ndarray]:
    """``values`` as float64, and where they are finite but past float64's range."""
    floats = np.array(arith.floats(values), dtype=np.float64)
    return floats, np.asarray(arith.isfinite(values) & ~np.isfinite(floats), dtype=bool)


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
