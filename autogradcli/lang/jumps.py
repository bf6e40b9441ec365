"""SymPy functions that jump, with derivatives that mark their jumps: 0 between them (where
PyTorch's gradient is 0 too) and a ``DiracDelta`` at each jump, which the reference
evaluates as infinite there and the check reads as a point with no derivative (a kink site
it leaves out, the operation named). Like the table, every form takes the module
(``sympy``) as an argument and imports none of it."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the module comes as an argument: it is not imported to run
    from types import ModuleType

    import sympy


@functools.cache
def nonzero(sp: ModuleType) -> type:
    """1 where x != 0, else 0 (the order-0 norm counts these): 0 between its jumps, where
    PyTorch sends no gradient, and ``DiracDelta(x)`` marking the jump at 0 (no derivative
    there: a kink site the check leaves out); the evaluator computes it by its name."""

    class nonzero(sp.Function):  # type: ignore[misc]
        is_real = True

        @classmethod
        def eval(cls, x: sympy.Expr) -> sympy.Expr | None:
            if x.is_zero:
                return sp.S.Zero
            return sp.S.One if x.is_zero is False else None

        def fdiff(self, argindex: int = 1) -> sympy.Expr:
            return sp.DiracDelta(self.args[0])

    return nonzero


@functools.cache
def flat_floor(sp: ModuleType) -> type:
    """SymPy's floor with the derivative of a rounded division: 0 between its jumps, where
    PyTorch's is 0 too, and ``DiracDelta(q - floor(q))`` marking each jump (q an
    integer: no derivative there, a kink site the check leaves out); named ``floor`` so
    the evaluator computes it as such."""

    class floor(sp.floor):  # type: ignore[name-defined,misc]
        def fdiff(self, argindex: int = 1) -> sympy.Expr:
            return sp.DiracDelta(self.args[0] - self)

    return floor


@functools.cache
def flat_trunc(sp: ModuleType) -> type:
    """a/b rounded toward 0 (``trunc``), the derivative as ``flat_floor``'s but for the jump
    at 0, which trunc does not have (it is 0 on (-1, 1)): ``DiracDelta(q - trunc(q))``
    times ``nonzero(q)``, which a DiracDelta that fires is multiplied away by at q = 0."""

    class trunc(sp.Function):  # type: ignore[misc]
        is_real = True

        @classmethod
        def eval(cls, q: sympy.Expr) -> sympy.Expr | None:
            return sp.Integer(int(q)) if q.is_Number and q.is_finite else None

        def fdiff(self, argindex: int = 1) -> sympy.Expr:
            q = self.args[0]
            return sp.DiracDelta(q - self) * nonzero(sp)(q)

    return trunc


def rounded_div(
    sp: ModuleType, a: sympy.Expr, b: sympy.Expr, rounding_mode: str = "floor"
) -> sympy.Expr:
    """``torch.div(a, b, rounding_mode=)``: a/b rounded down ('floor') or toward 0
    ('trunc'); piecewise constant, so its derivative is 0 between its jumps (PyTorch's
    too), and a DiracDelta marks each jump."""
    # a number divides exactly: SymPy would round 1/3.0 to 15 digits (6/3.0 floored to 1)
    q = a / (sp.Rational(b) if isinstance(b, sp.Float) else b)
    return (flat_floor(sp) if rounding_mode == "floor" else flat_trunc(sp))(q)
