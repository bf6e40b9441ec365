"""The Python API. Every front end (the CLI, the shell, batch runs, notebooks) calls these.

Each command is a short composition of the pipeline's stages, each returning a new value:
parse and bind (``bind``), run autograd (``torchside``), the reference (``reference``),
reconcile and judge (``check``), the result (``results``).

Values are given as keywords (``grad("x**2", x=3)``) or as a mapping (``values={"x": 3}``,
for names that clash with an option). Settings (device, dtype, tolerances, seed, limits,
numeric, strict) come as one ``Settings`` object, or as keywords naming its fields.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import Any

import numpy as np

from autogradcli.bind import Bound, Passes, bind, retained_names
from autogradcli.errors import AutogradCliError, LimitError, VariableError
from autogradcli.footprint import (
    check_derivative,
    check_grad,
    check_hessian,
    check_jacobian,
    check_jvp,
)
from autogradcli.lang.analysis import calls, is_elementwise
from autogradcli.lang.cellstatements import stopped_at_condition
from autogradcli.lang.tree import Program
from autogradcli.lang.vocabulary import OPS
from autogradcli.notes import Note
from autogradcli.progress import loading, stage
from autogradcli.recursion import recursion_as_limit
from autogradcli.results import CellResult, DerivativeResult, GradResult, Graph, Suggestion
from autogradcli.settings import Limits, Settings, number

_SETTINGS = {f.name for f in fields(Settings)} | {f.name for f in fields(Limits)}


def split(
    settings: Settings | None, values: Mapping[str, Any] | None, keywords: dict[str, Any]
) -> tuple[Settings, dict[str, Any]]:
    """Settings (from ``settings`` and keywords naming its fields) and the values (the
    other keywords, and ``values``)."""
    options = {k: keywords.pop(k) for k in list(keywords) if k in _SETTINGS}
    chosen = (settings or Settings()).but(**options) if options else (settings or Settings())
    return chosen, {**(values or {}), **keywords}


@recursion_as_limit
def grad(
    expression: str,
    values: Mapping[str, Any] | None = None,
    *,
    settings: Settings | None = None,
    weights: Any = None,
    repeat: int = 1,
    same_graph: bool = False,
    retain_graph: bool = False,
    zero_grad: bool = False,
    functional: bool = False,
    retain_grad: Iterable[str] = (),
    inspect: bool = False,
    explain: bool = False,
    const: Iterable[str] = (),
    suggest: bool = True,
    expect: Mapping[str, Any] | None = None,
    **keywords: Any,
) -> GradResult | CellResult:
    """Gradients of ``expression`` (or a program of steps) by autograd's ``backward()``,
    checked against SymPy. A notebook cell that calls ``backward()`` or ``print(...)``
    itself runs line by line and gives a ``CellResult``: every event checked.

    ``weights``: the external gradient of a non-scalar output (a value, ``"ones"``, or an
    input's name). ``repeat`` passes rebuild the graph each time, or run backward again on
    one graph with ``same_graph`` (``retain_graph`` keeps it alive); ``zero_grad`` clears
    ``.grad`` between passes; ``functional`` computes each pass with ``torch.autograd.grad``
    instead (gradients returned, ``.grad`` untouched). ``retain_grad`` names steps (or
    ``"all"``) whose ``.grad`` to keep; it and ``inspect`` fill ``result.tensors``.
    ``explain`` records the first backward pass node by node. ``const`` names inputs with
    requires_grad=False. ``suggest`` re-runs stable forms of expressions that overflow or
    lose precision. ``expect`` maps an input's
    name to the gradient the author expects (a student's answer, an exercise key): the result
    disagrees when autograd or SymPy does not match it.

    Examples:
        >>> import autogradcli as ag
        >>> r = ag.grad("2*x**4 + x**3 + 3*x**2 + 5*x + 1", x=2)
        >>> float(r.output), float(r.grads["x"]), r.verdict
        (63.0, 93.0, 'agree')
    """
    chosen, given = split(settings, values, keywords)
    plan = Passes(repeat, same_graph, retain_graph, zero_grad, functional)
    if functional and retain_grad:
        raise VariableError("functional_combination", option="retain_grad")
    bound = bind(expression, given, chosen, weights=weights, const=const)
    if bound.program.is_cell:
        return _cell(  # type: ignore[return-value]
            bound,
            weights=weights is not None,
            repeat=repeat != 1,
            functional=functional,
            retain_grad=bool(retain_grad),
            inspect=inspect,
            explain=explain,
            expect=bool(expect),
        )
    names = [retain_grad] if isinstance(retain_grad, str) else list(retain_grad)
    retained = tuple(retained_names(bound, names))
    check_grad(bound, repeat, explain, inspect or bool(retained))  # before torch loads

    loading()
    from autogradcli.pipeline import GradRequest, run_grad  # torch and SymPy load from here

    stage("running autograd and checking it with SymPy")

    expected = {}
    if expect:
        from autogradcli.verify.expect import read_expectations

        expected = read_expectations(expect, bound.names, bound.limits)
    request = GradRequest(plan, retained, names != ["all"], inspect, explain)
    result = run_grad(bound, request)
    if suggest and any(c.code in ("overflow", "precision_loss") for c in result.causes()):
        result = _with_suggestions(result, bound, given, weights, const, request)
    if expected:
        from autogradcli.verify.expect import with_expectations

        result = with_expectations(result, expected)
    return result


def _cell(bound: Bound, **asked: bool) -> CellResult:
    """A notebook cell runs line by line; its own lines say what runs, so the options
    ``asked`` (True where given) do not apply to it."""
    for option, given in asked.items():
        if given:
            raise VariableError("cell_option", option=option)
    loading()
    from autogradcli.cellrun import run_cell

    stage("running the cell and checking each line with SymPy")
    return run_cell(bound)


def _with_suggestions(
    result: GradResult,
    bound: Bound,
    values: dict[str, Any],
    weights: Any,
    const: Iterable[str],
    request: Any,
) -> GradResult:
    """The result with the stable forms of its patterns, each re-run (a suggestion stands
    only if its run agrees; otherwise it says what the re-run found)."""
    from dataclasses import replace

    from autogradcli.pipeline import run_grad
    from autogradcli.verify.stable import rewrite

    text, replaced = rewrite(bound.program)
    if not replaced:
        return result
    try:
        settings = bound.settings.but(seed=result.seed)
        again = run_grad(bind(text, values, settings, weights=weights, const=const), request)
    except AutogradCliError:
        return result
    grads = {n: v.grad for n, v in again.variables.items() if v.grad is not None}
    suggestion = Suggestion(
        replaced=tuple(replaced),
        expression=text,
        verdict=again.verdict,
        confirmed=again.verdict == "agree",
        output=again.output,
        grads=grads,
        cause=again.first_cause(),
    )
    return replace(result, suggestions=(suggestion,))


@recursion_as_limit
def jacobian(
    expression: str,
    values: Mapping[str, Any] | None = None,
    *,
    settings: Settings | None = None,
    const: Iterable[str] = (),
    rows: bool = False,
    **keywords: Any,
) -> DerivativeResult:
    """The Jacobian ``d out / d x`` per input, shaped ``out.shape + x.shape``: one
    ``backward(one_hot, retain_graph=True)`` per output element (``rows`` keeps them),
    cross-checked with ``torch.autograd.functional.jacobian`` and checked against SymPy."""
    chosen, given = split(settings, values, keywords)
    bound = _differentiable(bind(expression, given, chosen, const=const))
    entries = math.prod(bound.out_shape) * sum(math.prod(bound.shapes[n]) for n in bound.names)
    if entries > chosen.limits.max_entries:
        raise LimitError("jacobian_too_large", entries=entries, limit=chosen.limits.max_entries)
    check_jacobian(bound, rows)  # before torch loads

    loading()
    from autogradcli.pipeline import run_jacobian

    stage("running autograd and checking it with SymPy")
    return run_jacobian(bound, rows)


@recursion_as_limit
def jvp(
    expression: str,
    values: Mapping[str, Any] | None = None,
    *,
    tangents: Mapping[str, Any] | None = None,
    settings: Settings | None = None,
    const: Iterable[str] = (),
    **keywords: Any,
) -> DerivativeResult:
    """The Jacobian-vector product ``J·v = Σ_x (d out / d x)·v_x`` in forward mode
    (``torch.func.jvp``), cross-checked with ``torch.autograd.functional.jvp`` and checked
    against SymPy's Jacobians times the tangents. A tangent is given per input (values as
    for inputs); an input without one takes ``ones``."""
    from autogradcli.lang.values import read_value

    chosen, given = split(settings, values, keywords)
    bound = _differentiable(bind(expression, given, chosen, const=const))
    entries = math.prod(bound.out_shape) * sum(math.prod(bound.shapes[n]) for n in bound.names)
    if entries > chosen.limits.max_entries:
        raise LimitError("jacobian_too_large", entries=entries, limit=chosen.limits.max_entries)
    check_jvp(bound)  # before torch loads

    loading()
    from autogradcli.pipeline import run_jvp

    stage("running forward-mode autograd and checking it with SymPy")
    vectors: dict[str, np.ndarray] = {}
    for name, spec in (tangents or {}).items():
        if name not in bound.names:
            raise VariableError("tangent_unknown", name=name, names=", ".join(bound.names))
        vector = np.asarray(read_value(spec, chosen.limits), dtype=np.float64)
        if list(vector.shape) != list(bound.shapes[name]):
            want = list(bound.shapes[name])
            raise VariableError("tangent_shape", name=name, shape=list(vector.shape), want=want)
        vectors[name] = vector
    for name in bound.names:
        vectors.setdefault(name, np.ones(bound.shapes[name]))
    return run_jvp(bound, {n: vectors[n] for n in bound.names})


@recursion_as_limit
def hessian(
    expression: str,
    values: Mapping[str, Any] | None = None,
    *,
    settings: Settings | None = None,
    const: Iterable[str] = (),
    **keywords: Any,
) -> DerivativeResult:
    """Second derivatives of a one-element output for every pair of inputs, by
    differentiating ``grad(out, create_graph=True)`` again, cross-checked with
    ``torch.autograd.functional.hessian`` and checked against SymPy's Hessian."""
    chosen, given = split(settings, values, keywords)
    bound = _differentiable(bind(expression, given, chosen, const=const))
    if math.prod(bound.out_shape) != 1:
        raise VariableError("hessian_not_scalar", shape=list(bound.out_shape))
    size = sum(math.prod(bound.shapes[n]) for n in bound.names)
    if size * size > chosen.limits.max_entries:
        raise LimitError("hessian_too_large", entries=size * size, limit=chosen.limits.max_entries)
    check_hessian(bound)  # before torch loads

    loading()
    from autogradcli.pipeline import run_hessian

    stage("running autograd and checking it with SymPy")
    return run_hessian(bound)


@recursion_as_limit
def derivative(
    expression: str,
    values: Mapping[str, Any] | None = None,
    *,
    order: int = 2,
    settings: Settings | None = None,
    const: Iterable[str] = (),
    **keywords: Any,
) -> DerivativeResult:
    """The ``order``-th derivative of an elementwise expression per input, by
    differentiating ``order`` times with ``create_graph=True``, against SymPy's
    ``diff(expr, x, order)``."""
    number("order", order)
    chosen, given = split(settings, values, keywords)
    bound = _differentiable(bind(expression, given, chosen, const=const))
    if not is_elementwise(bound.program) or not all(
        OPS[f].elementwise for f in calls(bound.program)
    ):
        raise VariableError("order_elementwise")
    check_derivative(bound, order)  # before torch loads

    loading()
    from autogradcli.pipeline import run_derivative

    stage("running autograd and checking it with SymPy")
    return run_derivative(bound, order)


@recursion_as_limit
def backward_graph(
    expression: str,
    values: Mapping[str, Any] | None = None,
    *,
    settings: Settings | None = None,
    const: Iterable[str] = (),
    saved: bool = False,
    **keywords: Any,
) -> Graph:
    """The backward graph PyTorch records: ``grad_fn`` nodes from the output down to the
    ``AccumulateGrad`` node of each leaf. ``saved``: each node also lists what it keeps for
    backward (``grad_fn._saved_*``), and ``freed`` says what reading one of those tensors
    raises after a ``backward()`` without ``retain_graph``."""
    from autogradcli.torchside.graph import build_graph
    from autogradcli.torchside.run import start

    chosen, given = split(settings, values, keywords)
    bound = _path_taken(bind(expression, given, chosen, const=const))
    session = start(bound)
    return build_graph(bound.program, session.forward(), session.leaves, bound.seed, saved)


def _path_taken(bound: Bound) -> Bound:
    """A cell parsed up to its first tensor condition (``while b.norm() < 1000``), read
    again along the path its values take; any other bound as it is."""
    if not stopped_at_condition(bound.program):
        return bound
    from autogradcli.cellrun import path_taken

    return path_taken(bound)


def _differentiable(bound: Bound) -> Bound:
    """Refuse what has nothing to differentiate (every input const, or no elements)."""
    bound = _path_taken(bound)
    if not bound.differentiate:
        raise VariableError("all_const")
    empty = [n for n in bound.names if math.prod(bound.shapes[n]) == 0]
    if empty or math.prod(bound.out_shape) == 0:
        raise VariableError("no_elements", what=f"'{sorted(empty)[0]}'" if empty else "the output")
    return bound


__all__ = [
    "Note",
    "Program",
    "backward_graph",
    "derivative",
    "grad",
    "hessian",
    "jacobian",
    "jvp",
    "split",
]
