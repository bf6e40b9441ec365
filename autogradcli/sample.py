"""``plot``'s data: an elementwise expression sampled over a range of one variable.

The variable becomes a vector of the sample points, so autograd's derivative at every point
comes from one backward pass (``backward(ones)`` of an elementwise output gives each point's
own derivative), and SymPy's derivative is evaluated at each point independently; the
K-th derivative goes through ``derivative`` the same way. Nothing here draws.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import sympy as sp

from autogradcli.errors import OptionError, VariableError
from autogradcli.lang.tree import Program
from autogradcli.results import PlotResult
from autogradcli.settings import Limits, Settings, number, parse_number


def parse_range(text: str) -> tuple[float, float]:
    """``"-3:3"`` as (-3.0, 3.0)."""
    low, sep, high = text.partition(":")
    try:
        lo, hi = float(low), float(high)
    except ValueError:
        lo = hi = float("nan")
    if not sep or not (np.isfinite(lo) and np.isfinite(hi)) or lo >= hi:
        raise OptionError("plot_range", text=text)
    return lo, hi


def plot(
    expression: str,
    values: Mapping[str, Any] | None = None,
    *,
    wrt: str | None = None,
    span: tuple[float, float] | str | None = None,
    points: int | str = 200,
    order: int | str = 1,
    settings: Settings | None = None,
    **keywords: Any,
) -> PlotResult:
    """f, autograd's ``order``-th derivative and SymPy's over a range of one variable: the
    one given as ``"LOW:HIGH"`` (``ag.plot("x*abs(x)", x="-3:3")``), or ``wrt`` over
    ``span`` (default -3 to 3); the other variables are fixed at their values.

    Examples:
        >>> import autogradcli as ag
        >>> r = ag.plot("x**2", x="-1:1", points=3)
        >>> r.autograd.tolist(), r.verdict
        ([-2.0, 0.0, 2.0], 'agree')
    """
    from autogradcli.api import split

    chosen, given = split(settings, values, keywords)
    ranges = {n: v for n, v in given.items() if isinstance(v, str) and ":" in v}
    name = wrt or (next(iter(ranges)) if len(ranges) == 1 else None)
    if span is None:
        span = parse_range(ranges.pop(name)) if name in ranges else (-3.0, 3.0)
    fixed = {k: v for k, v in given.items() if k != name}
    return sample(
        expression, fixed, wrt=name, span=span, points=points, order=order, settings=chosen
    )


def sample(
    expression: str,
    values: Mapping[str, Any] | None = None,
    *,
    wrt: str | None = None,
    span: tuple[float, float] | str = (-3.0, 3.0),
    points: int | str = 200,
    order: int | str = 1,
    settings: Settings | None = None,
    **keywords: Any,
) -> PlotResult:
    """f, autograd's K-th derivative and SymPy's over ``points`` points of ``span`` in
    ``wrt`` (the other variables fixed at ``values``)."""
    from autogradcli.api import split
    from autogradcli.lang.parser import parse_expression

    chosen, given = split(settings, values, keywords)
    points, order = int(_count("points", points)), int(_count("order", order))
    lo, hi = parse_range(span) if isinstance(span, str) else (float(span[0]), float(span[1]))
    program = parse_expression(expression, chosen.limits)
    free = [n for n in program.variables if n not in given]
    name = wrt or (free[0] if len(free) == 1 else None)
    if name is None or name not in program.variables:
        raise VariableError("plot_wrt", variables=list(program.variables))
    switches_at, kinks_at = kink_points(program, name, (lo, hi), given, chosen.limits, order)
    xs = np.union1d(np.linspace(lo, hi, points), switches_at)
    inputs = {**given, name: xs}
    const = [n for n in program.variables if n != name]
    f, f_expected, computed, expected, verdict, (rtol, atol) = _derivatives(
        expression, inputs, chosen, const, name, order
    )
    with np.errstate(all="ignore"):
        close = np.isclose(computed, expected, rtol=rtol, atol=atol, equal_nan=True)
        undefined = ~np.isfinite(expected)
    off = ~close & ~undefined  # a finite reference the autograd value misses
    none = np.zeros(xs.size, dtype=bool)
    accepted = verdict != "disagree"  # then the misses are kinks the check left out
    at_kink = np.isin(xs, kinks_at)
    return PlotResult(
        expression=expression,
        wrt=name,
        order=order,
        x=xs,
        f=np.asarray(f, dtype=np.float64),
        f_expected=np.asarray(f_expected, dtype=np.float64),
        autograd=np.asarray(computed, dtype=np.float64),
        expected=np.asarray(expected, dtype=np.float64),
        disagree=none if accepted else off,
        kinks=(off if accepted else none) | (at_kink & ~off),
        undefined=undefined,
        fixed={k: str(v) for k, v in given.items()},
        verdict=verdict,
        strict=chosen.strict,
    )


# At most this many kinks are added to a plot's points, and SymPy gets at most this long
# to find them: a kink it cannot solve for within that is drawn only if a point meets it.
MAX_KINKS = 64
KINK_SECONDS = 2.0
SIDE_STEP = 1e-7  # relative: the two sides of a kink, where the derivative is compared


def kink_points(
    program: Program,
    name: str,
    span: tuple[float, float],
    fixed: Mapping[str, Any],
    limits: Limits,
    order: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """The points of ``span`` where an operation switches (each switch of a jump in SymPy's
    ``order``-th derivative along ``name``: ``Heaviside``, ``sign``, ``Piecewise``, solved for
    ``name`` with the other inputs at their scalar values), and those of them where the
    derivative jumps (its two sides differ): the kinks. Autograd's rule at a switch may
    be wrong even where there is no kink, so the plot samples both. Empty when the program
    is not elementwise or SymPy cannot say in time."""
    from autogradcli.lang.analysis import is_elementwise
    from autogradcli.reference.elementwise import SymbolicModel
    from autogradcli.reference.evaluate import evaluate_float
    from autogradcli.reference.terms import JUMPS, diff, switches
    from autogradcli.reference.timeout import SympyTimeout, within

    scalars = {n: v for n, v in fixed.items() if np.ndim(v) == 0}
    none = (np.empty(0), np.empty(0))
    others = set(program.variables) - {name}
    if not is_elementwise(program) or not others <= scalars.keys():
        return none

    def solve() -> tuple[np.ndarray, np.ndarray]:
        model = SymbolicModel(program, {n: () for n in program.variables}, limits)
        x = model.symbols[name]
        values = {model.symbols[n]: sp.Float(float(v)) for n, v in scalars.items()}
        derivative = diff(model.output.expr.subs(values), x, order)
        found: set[float] = set()
        for atom in derivative.atoms(*JUMPS):
            for switch in switches(atom):
                if switch.free_symbols != {x}:
                    continue
                roots = sp.solveset(switch, x, sp.Interval(*span))
                if isinstance(roots, sp.FiniteSet) and len(roots) <= MAX_KINKS:
                    found |= {float(r) for r in roots if r.is_real}
        points = np.array(sorted(found)[:MAX_KINKS], dtype=np.float64)
        step = SIDE_STEP * np.maximum(np.abs(points), 1.0)
        left, right = (evaluate_float(derivative, {x: points + s}) for s in (-step, step))
        with np.errstate(all="ignore"):
            jumps = ~np.isclose(left, right, rtol=1e-6, atol=1e-9) | (
                np.isfinite(left) != np.isfinite(right)
            )
        return points, points[jumps]

    try:
        return within(min(KINK_SECONDS, limits.sympy_seconds), solve)
    except (SympyTimeout, TypeError, ValueError, NotImplementedError):
        return none


def _count(name: str, value: Any) -> int | float:
    """A number option, given as a number (the API) or as text (the command line)."""
    return parse_number(name, value) if isinstance(value, str) else number(name, value)


def _derivatives(
    expression: str,
    inputs: dict[str, Any],
    settings: Settings,
    const: list[str],
    name: str,
    order: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str, tuple[float, float]]:
    """f and the K-th derivative along ``name``, by autograd and by SymPy, the verdict and
    the tolerance: ``grad`` with ``backward(ones)`` for K = 1, ``derivative`` beyond."""
    from autogradcli.api import derivative, grad

    first = grad(expression, inputs, settings=settings, weights="ones", const=const)
    if first.output.shape != inputs[name].shape:
        raise VariableError("plot_not_elementwise", name=name)
    if order == 1:
        variable = first.variables[name]
        computed, expected, verdict = variable.grad, variable.expected, first.verdict
        tolerance = first.rtol, first.atol
    else:
        result = derivative(expression, inputs, settings=settings, order=order, const=const)
        block = next(b for b in result.blocks if b.key == name)
        computed, expected, verdict = block.autograd, block.expected, result.verdict
        tolerance = result.rtol, result.atol
    return first.output, first.output_expected, computed, expected, verdict, tolerance
