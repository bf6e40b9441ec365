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

from autogradcli.errors import OptionError, VariableError
from autogradcli.results import PlotResult
from autogradcli.settings import Settings, number, parse_number


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
    xs = np.linspace(lo, hi, points)
    inputs = {**given, name: xs}
    const = [n for n in program.variables if n != name]
    f, f_expected, computed, expected, verdict, (rtol, atol) = _derivatives(
        expression, inputs, chosen, const, name, order
    )
    with np.errstate(all="ignore"):
        close = np.isclose(computed, expected, rtol=rtol, atol=atol, equal_nan=True)
        undefined = ~np.isfinite(expected)
    off = ~close & ~undefined  # a finite reference the autograd value misses
    none = np.zeros(points, dtype=bool)
    accepted = verdict != "disagree"  # then the misses are kinks the check left out
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
        kinks=off if accepted else none,
        undefined=undefined,
        fixed={k: str(v) for k, v in given.items()},
        verdict=verdict,
        strict=chosen.strict,
    )


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
