"""SymPy's side, shared by the element-wise and the component-wise models: terms built by
the one fold over the tree, derivatives, where a jump sits at its jump, and reduction of
broadcast results. Every derivative comes from ``sympy.diff``; nothing from PyTorch."""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy as sp

from autogradcli.errors import ComputationError
from autogradcli.lang.text import unparse
from autogradcli.lang.tree import Binary, Call, Fold, Num, Unary
from autogradcli.lang.vocabulary import FUNCTIONS, KINKS
from autogradcli.reference.evaluate import FLOAT64, Arith, evaluate
from autogradcli.reference.expected import Expected

Shape = tuple[int, ...]

SYMPY_BINARY = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "**": lambda a, b: a**b,
}


def number(node: Num) -> sp.Expr:
    """A literal as SymPy keeps it: an Integer, or the float's exact binary value."""
    return sp.Integer(node.value) if isinstance(node.value, int) else sp.Float(node.value)


class SympyTerms(Fold[sp.Expr]):
    """Each operation as one SymPy term (elementwise operations only); subclasses say what
    names are. ``apply`` on placeholders gives an operation's local form (--explain)."""

    def num(self, node: Num) -> sp.Expr:
        return number(node)

    def unary(self, node: Unary, operand: sp.Expr) -> sp.Expr:
        return -operand if node.op == "-" else operand

    def binary(self, node: Binary, left: sp.Expr, right: sp.Expr) -> sp.Expr:
        if node.op not in SYMPY_BINARY:
            raise ComputationError("not_elementwise", text=unparse(node))
        return SYMPY_BINARY[node.op](left, right)

    def call(self, node: Call, arg: sp.Expr, other: sp.Expr | None) -> sp.Expr:
        if node.func not in FUNCTIONS:
            raise ComputationError("not_elementwise", text=unparse(node))
        return FUNCTIONS[node.func].sympy(sp, arg)


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
