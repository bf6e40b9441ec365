"""The chain rule over a program's steps, as text: one SymPy derivative per step."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

from autogradcli.lang.shapes import Shape, infer_shape, program_shapes
from autogradcli.lang.text import unparse
from autogradcli.lang.tree import Expression, direct_inputs
from autogradcli.reference.elementwise import SymbolicModel
from autogradcli.settings import Limits

MAX_CHAIN_PATHS = 6


def chain_rule(
    expression: Expression,
    shapes: dict[str, Shape],
    name: str,
    limits: Limits | None = None,
    latex: bool = False,
) -> str | None:
    """The chain rule over a program's steps for input ``name``, e.g.
    ``∂out/∂z·∂z/∂y·∂y/∂x = (1/4)·(6*y)·(1)``; each factor is SymPy's derivative of one
    step with respect to one of its direct inputs (``latex``: the same line as LaTeX). None
    for a plain expression."""
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
            text = model.derivative_latex(wrt) if latex else model.derivative_text(wrt)
            local[(unit, wrt)] = str(text)
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

    return _written(paths, all_shapes, factor, expression.output, name, latex)


def _written(
    paths: list[list[str]],
    shapes: dict[str, Shape],
    factor: Callable[[str, str], str],
    output: str,
    name: str,
    latex: bool,
) -> str:
    """The chain-rule line: the factors' names, then their values (text or LaTeX)."""
    dot = " \\cdot " if latex else "·"
    opening, closing = ("\\sum\\left[", "\\right]") if latex else ("Σ[", "]")

    def term(path: list[str], show: Callable[[str, str], str]) -> str:
        pairs = list(itertools.pairwise(path))
        factors = [show(a, b) for a, b in pairs]
        # where a smaller tensor is spread over a larger one (m = mean(y) used in y - m),
        # the factors above it are summed over the larger one's elements
        spread = [k for k, (a, b) in enumerate(pairs) if _size(shapes[b]) < _size(shapes[a])]
        if not spread:
            return dot.join(factors)
        k = spread[-1] + 1
        return opening + dot.join(factors[:k]) + closing + "".join(dot + f for f in factors[k:])

    if latex:
        names = " + ".join(
            term(p, lambda a, b: f"\\frac{{\\partial {a}}}{{\\partial {b}}}") for p in paths
        )
        values = " + ".join(term(p, lambda a, b: f"\\left({factor(a, b)}\\right)") for p in paths)
        return f"\\frac{{\\partial {output}}}{{\\partial {name}}} = {names} = {values}"
    names = " + ".join(term(p, lambda a, b: f"∂{a}/∂{b}") for p in paths)
    values = " + ".join(term(p, lambda a, b: f"({factor(a, b)})") for p in paths)
    line = f"∂{output}/∂{name} = {names} = {values}"
    if "Σ[" in line:
        line += " (Σ[...]: summed over the elements a smaller tensor is spread to)"
    return line


def _size(shape: Shape) -> int:
    return math.prod(shape)
