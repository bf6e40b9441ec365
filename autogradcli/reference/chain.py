"""The chain rule over a program's steps, as text: one SymPy derivative per step."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

from autogradcli.lang.shapes import Shape, infer_shape, program_shapes
from autogradcli.lang.text import unparse
from autogradcli.lang.tree import Call, Name, Node, Program, direct_inputs, operands
from autogradcli.lang.vocabulary import OPS
from autogradcli.reference import Model
from autogradcli.reference.elementwise import SymbolicModel
from autogradcli.reference.hooked import HookedModel
from autogradcli.settings import Limits

MAX_CHAIN_PATHS = 6
MAX_CHAIN_STEPS = 32  # a longer program's chain rule is not written out, only said

# how a step that no gradient flows through was made, by its operation
_BLOCKED_BY = {
    "detach": "detach()",
    "no_grad": "torch.no_grad()",
    "inference_mode": "torch.inference_mode()",
}


def model_chain(model: Model, name: str, latex: bool = False) -> str | None:
    """The chain-rule line of SymPy's element-wise model (hooks change no factor), None
    for the component-wise and numeric models (their terms are not split at the steps)."""
    base = model.base if isinstance(model, HookedModel) else model
    if not isinstance(base, SymbolicModel):
        return None
    return chain_rule(base.expression, base.shapes, name, base.limits, latex)


def chain_rule(
    expression: Program,
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
    if len(expression.steps) > MAX_CHAIN_STEPS:
        return _too_long(expression, name, latex)
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
            step = Program(unparse(node), node, inputs)
            model = SymbolicModel(step, {n: all_shapes[n] for n in inputs}, limits)
            local[(unit, wrt)] = model.local_text(wrt, latex)
        return local[(unit, wrt)]

    paths: list[list[str]] = []
    # edges (step, input) no gradient flows along: the input is used only inside a
    # detach(), or the step was made under no_grad / inference_mode; each with its cause
    blocked: dict[tuple[str, str], str] = {}
    reaches: dict[str, bool] = {}

    def leads_to_input(unit: str, seen: frozenset[str] = frozenset()) -> bool:
        """Whether ``unit`` uses ``name`` at all, blocked or not."""
        if unit not in reaches:
            used = direct_inputs(units[unit])
            reaches[unit] = name in used or any(
                u in units and u not in seen and leads_to_input(u, seen | {unit}) for u in used
            )
        return reaches[unit]

    def walk_paths(unit: str, path: list[str]) -> None:
        live, detached = _flowing_inputs(units[unit])
        for used, cause in detached.items():
            if used == name or (used in units and leads_to_input(used)):
                blocked.setdefault((unit, used), cause)
        for used in live:
            if len(paths) > MAX_CHAIN_PATHS:
                return
            if used == name:
                paths.append([*path, unit, name])
            elif used in units:
                walk_paths(used, [*path, unit])

    walk_paths(expression.output, [])
    if len(paths) > MAX_CHAIN_PATHS:
        return f"more than {MAX_CHAIN_PATHS} paths from {expression.output} to {name}"
    if not blocked and all(len(p) == 2 for p in paths):  # no step between output and input
        return None
    notes = [(a, b, _BLOCKED_BY.get(cause, f"{cause}()")) for (a, b), cause in blocked.items()]
    if not paths:
        return _all_blocked(expression.output, name, notes, latex)
    line = _written(paths, all_shapes, factor, expression.output, name, latex)
    return line + _blocked_note(notes, latex) if notes else line


def _too_long(expression: Program, name: str, latex: bool) -> str:
    """The line for a program too long to write its chain rule out."""
    steps, output = len(expression.steps), expression.output
    said = f"the chain rule over {steps} steps (more than {MAX_CHAIN_STEPS} are not written out)"
    if latex:
        return f"\\frac{{\\partial {output}}}{{\\partial {name}}}\\text{{: {said}}}"
    return f"∂{output}/∂{name}: {said}"


def _flowing_inputs(node: Node) -> tuple[list[str], dict[str, str]]:
    """The names a step uses that a gradient flows back to (in order of appearance), and
    those it uses only inside a detach() or under no_grad / inference_mode: name -> the
    operation that stops it (the outermost one)."""
    live: dict[str, None] = {}
    detached: dict[str, str] = {}

    def visit(current: Node, stopped: str | None) -> None:
        if isinstance(current, Call) and stopped is None and OPS[current.func].kind == "detach":
            stopped = current.func
        if isinstance(current, Name):
            if stopped is None:
                live.setdefault(current.id)
            else:
                detached.setdefault(current.id, stopped)
        for child in operands(current):
            visit(child, stopped)

    visit(node, None)
    return list(live), {n: c for n, c in detached.items() if n not in live}


def _blocked_note(notes: list[tuple[str, str, str]], latex: bool) -> str:
    """The edges no gradient flows along (each a factor of 0), after the chain-rule line."""
    if latex:
        parts = ", ".join(
            f"\\frac{{\\partial {a}}}{{\\partial {b}}}\\text{{ ({_latex_text(c)})}}"
            for a, b, c in notes
        )
        return f"\\quad\\text{{[no gradient through }}{parts}\\text{{]}}"
    return "  [no gradient through " + ", ".join(f"∂{a}/∂{b} ({c})" for a, b, c in notes) + "]"


def _all_blocked(output: str, name: str, notes: list[tuple[str, str, str]], latex: bool) -> str:
    """The line when every path from the output to the input is cut: 0."""
    head = f"\\frac{{\\partial {output}}}{{\\partial {name}}}" if latex else f"∂{output}/∂{name}"
    return f"{head} = 0{_blocked_note(notes, latex)}"


def _latex_text(text: str) -> str:
    return text.replace("_", "\\_")


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
