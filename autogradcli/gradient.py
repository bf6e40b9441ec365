"""The Python API: parse, run autograd, differentiate with SymPy, compare, return a result.

>>> from autogradcli.gradient import compute_gradient
>>> r = compute_gradient("2*x**4 + x**3 + 3*x**2 + 5*x + 1", {"x": 2})
>>> float(r.output), float(r.variables["x"].grad), r.agree
(63.0, 93.0, True)
>>> r = compute_gradient("y = x + 2; z = y*y*3; out = mean(z)", {"x": "ones(2,2)"})
>>> r.variables["x"].chain
'∂out/∂x = ∂out/∂z·∂z/∂y·∂y/∂x = (1/4)·(6*y)·(1)'
"""

from __future__ import annotations

import math
import secrets
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from autogradcli.compare import TOLERANCES, compare
from autogradcli.devices import check_dtype
from autogradcli.errors import UnknownVariableError, VariableError
from autogradcli.expression import (
    Call,
    Expression,
    Limits,
    Node,
    Shape,
    cut,
    infer_shape,
    is_elementwise,
    parse_expression,
    program_shapes,
    walk,
)
from autogradcli.glossary import lookup
from autogradcli.numeric import DEFAULT as NUMERIC
from autogradcli.result import GradResult, PassResult, TensorResult, VariableResult
from autogradcli.values import RandomSource, read_value
from autogradcli.vocabulary import KINKED

T = TypeVar("T")

if TYPE_CHECKING:
    import torch

    from autogradcli.computation import Trace
    from autogradcli.expected import Expected
    from autogradcli.symbolic import SymbolicModel


def check_names(
    expression: Expression, values: Mapping[str, Any], const: Iterable[str] = ()
) -> None:
    """Every variable has a value; every value and ``const`` names a variable."""
    variables = list(expression.variables)
    for name in [*values, *const]:
        step = expression.step(name)
        if step is not None:
            wanted = (
                f"give values for {', '.join(variables)} only"
                if variables
                else "this program has no inputs, so drop the value (or rename the step)"
            )
            raise VariableError(
                f"'{name}' is a step of the program, computed in it, so it takes no value; "
                + wanted
            )
        if name not in variables:
            raise UnknownVariableError(name, variables)
    for name in variables:
        if values.get(name) is None:
            raise VariableError(
                f"variable '{name}' needs a value, e.g. --{name} 2 (or --var {name}=2)"
            )


@dataclass
class Setup:
    """Checked input: the parsed program, the input arrays and the shapes, before torch loads."""

    expression: Expression
    arrays: dict[str, np.ndarray]
    shapes: dict[str, Shape]  # inputs and steps
    out_shape: Shape
    weights: np.ndarray | None
    differentiate: frozenset[str]
    dtype: str
    device: str
    rtol: float
    atol: float
    limits: Limits
    random: RandomSource


def prepare(
    expression: str,
    values: Mapping[str, Any],
    *,
    weights: Any = None,
    const: Iterable[str] = (),
    device: str = "auto",
    dtype: str = "float32",
    rtol: float | None = None,
    atol: float | None = None,
    seed: int | None = None,
    limits: Limits | None = None,
) -> Setup:
    """Parse and read everything, check names, shapes and sizes; nothing heavy is imported."""
    limits = limits or Limits()
    const = list(dict.fromkeys(const))
    parsed = parse_expression(expression, limits, given=frozenset(values))
    check_names(parsed, values, const)
    check_dtype(dtype)
    default_rtol, default_atol = TOLERANCES[dtype]
    random = RandomSource(secrets.randbelow(2**31) if seed is None else seed, dtype)
    arrays = {name: read_value(values[name], limits, random) for name in parsed.variables}
    shapes = program_shapes(parsed, {n: a.shape for n, a in arrays.items()}, limits)
    out_shape = infer_shape(parsed.root, shapes, limits)
    return Setup(
        expression=parsed,
        arrays=arrays,
        shapes=shapes,
        out_shape=out_shape,
        weights=_weights(weights, arrays, out_shape, limits, random),
        differentiate=frozenset(n for n in parsed.variables if n not in const),
        dtype=dtype,
        device=device,
        rtol=default_rtol if rtol is None else rtol,
        atol=default_atol if atol is None else atol,
        limits=limits,
        random=random,
    )


@dataclass
class Run:
    """The torch objects of one run: leaves, the weights tensor, the inputs as autograd saw them."""

    setup: Setup
    leaves: dict[str, torch.Tensor]
    weight_tensor: torch.Tensor | None
    seen: dict[str, np.ndarray]  # inputs rounded to the dtype, widened to float64
    seen_weights: np.ndarray
    device: torch.device

    def forward(self) -> Trace:
        from autogradcli import computation
        from autogradcli.devices import resolve_dtype

        dtype = resolve_dtype(self.setup.dtype)
        return computation.forward(self.setup.expression, self.leaves, dtype, self.device)

    def weights(self) -> torch.Tensor | None:
        """A fresh copy each time: backward may hand the weights tensor itself to a leaf's
        .grad (sum of a 0-d input), and later passes would then accumulate into it."""
        return None if self.weight_tensor is None else self.weight_tensor.clone()


def start(setup: Setup) -> Run:
    """Load torch, make the leaf tensors on the device."""
    from autogradcli import computation
    from autogradcli.devices import resolve_device, resolve_dtype

    torch_dtype = resolve_dtype(setup.dtype)
    torch_device = resolve_device(setup.device)
    leaves = {
        name: computation.make_leaf(
            setup.arrays[name], torch_dtype, torch_device, name in setup.differentiate
        )
        for name in setup.expression.variables
    }
    weight_tensor = (
        None
        if setup.weights is None
        else computation.make_leaf(setup.weights, torch_dtype, torch_device, False)
    )
    seen = {name: computation.to_numpy(leaf) for name, leaf in leaves.items()}
    seen_weights = (
        np.ones(setup.out_shape) if weight_tensor is None else computation.to_numpy(weight_tensor)
    )
    return Run(setup, leaves, weight_tensor, seen, seen_weights, torch_device)


def named_tensors(expression: Expression) -> list[tuple[str, str, Node | None]]:
    """(name, kind, node) of every named tensor: inputs, steps, then the output."""
    named: list[tuple[str, str, Node | None]] = [(n, "input", None) for n in expression.variables]
    named += [
        (s.name, "output" if s.name == expression.output else "step", s.node)
        for s in expression.steps
    ]
    if expression.step(expression.output) is None:
        named.append((expression.output, "output", expression.root))
    return named


def compute_gradient(
    expression: str,
    values: Mapping[str, Any],
    *,
    weights: Any = None,
    repeat: int = 1,
    same_graph: bool = False,
    retain_graph: bool = False,
    zero_grad: bool = False,
    retain_grad: Iterable[str] = (),
    inspect: bool = False,
    explain: bool = False,
    numeric: bool = False,
    const: Iterable[str] = (),
    device: str = "auto",
    dtype: str = "float32",
    rtol: float | None = None,
    atol: float | None = None,
    seed: int | None = None,
    limits: Limits | None = None,
) -> GradResult:
    """Gradients of ``expression`` (or a program of steps) at ``values`` by autograd,
    checked against SymPy.

    ``values`` maps each variable to a value (text such as ``"ones(2,2)"``, a number, a
    list or an array); a ``None`` value counts as missing. ``weights`` is the external
    gradient for a non-scalar output: a value, ``"ones"``, or a variable's name.
    ``repeat`` passes rebuild the graph each time, or reuse one graph with
    ``same_graph`` (``retain_graph`` keeps it alive); ``zero_grad`` clears ``.grad``
    between passes. ``retain_grad`` names steps (or ``all``) whose ``.grad`` to keep;
    it and ``inspect`` fill ``result.tensors``. ``explain`` records the first backward
    pass node by node (``result.explanation``). ``numeric`` adds central finite
    differences in float64 as a third opinion; they are also the check when SymPy's
    exact check is too large or gives no number.
    """
    if repeat < 1:
        raise VariableError(f"--repeat must be at least 1, not {repeat}")
    for flag, given in (("--same-graph", same_graph), ("--zero-grad", zero_grad)):
        if given and repeat < 2:
            raise VariableError(
                f"{flag} only matters when backward runs more than once; add --repeat 2 (or more)"
            )
    if retain_graph and not same_graph:
        raise VariableError(
            "--retain-graph only matters when backward runs again on the same graph; "
            "add --same-graph (with --repeat 2 or more)"
        )
    setup = prepare(
        expression,
        values,
        weights=weights,
        const=const,
        device=device,
        dtype=dtype,
        rtol=rtol,
        atol=atol,
        seed=seed,
        limits=limits,
    )
    parsed = setup.expression
    retained = _retained(parsed, list(retain_grad))
    inspect = inspect or bool(retained)

    # Everything above is cheap validation; torch and sympy load only from here on.
    from autogradcli import computation
    from autogradcli.symbolic import SymbolicModel, chain_rule

    run = start(setup)
    differentiate = setup.differentiate
    ordered = [n for n in parsed.variables if n in differentiate]
    trace = first = recorder = None
    snapshots: list[dict[str, np.ndarray]] = []
    for index in range(1, repeat + 1):
        if trace is None or not same_graph:
            trace = run.forward()
            _retain(trace, retained, explicit=list(retain_grad) != ["all"])
        context = f"backward pass {index} on the same graph: " if index > 1 and same_graph else ""
        if index == 1 and explain:
            from autogradcli.explain import attach

            first, recorder = trace, attach(trace.out)
        try:
            computation.backward(trace.out, run.weights(), retain_graph, context)
        finally:
            if recorder is not None:
                recorder.remove()
        snapshots.append({n: computation.to_numpy(run.leaves[n].grad) for n in ordered})
        if zero_grad and index < repeat:
            for leaf in run.leaves.values():
                leaf.grad = None  # what optimizer.zero_grad() does (set_to_none=True)
            for name in retained:
                _tensor(trace, name).grad = None
    assert trace is not None
    notes: list[str] = []
    model, expected = symbolic_check(run, notes)
    numbers = None
    if numeric or expected is None:
        numbers = numeric_check(run)
    if expected is None:
        assert numbers is not None
        expected = numbers
    rtol, atol = setup.rtol, setup.atol
    if model is None:  # the numeric check is the reference: its own (looser) tolerance
        rtol, atol = max(rtol, NUMERIC.rtol), max(atol, NUMERIC.atol)
    if explain and model is None:
        raise VariableError(
            "--explain needs SymPy's exact check, which is not available here; "
            "see the graph with autograd-cli graph"
        )

    output = computation.to_numpy(trace.out)
    if model is not None:
        _domain_edges(run, output, expected, snapshots[0], notes)
    output_check = compare(output, expected.output, rtol, atol, expected.output_excluded)

    def times(index: int, kept_across_passes: bool) -> int:
        return 1 if zero_grad or not kept_across_passes else index

    passes = []
    for index, grads in enumerate(snapshots, start=1):
        want = {n: times(index, True) * expected.grads[n] for n in ordered}
        agree = all(
            compare(
                grads[n],
                want[n],
                rtol,
                atol,
                expected.kinks[n],
                _bounds(expected, n, times(index, True)),
            ).agree
            for n in ordered
        )
        passes.append(PassResult(index, grads, want, agree))

    variables = {}
    for name in parsed.variables:
        result = VariableResult(name, run.seen[name], requires_grad=name in differentiate)
        if name in differentiate:
            final, want = snapshots[-1][name], passes[-1].expected[name]
            bounds = _bounds(expected, name, times(repeat, True))
            check = compare(final, want, rtol, atol, expected.kinks[name], bounds)
            result.grad, result.expected = final, want
            if isinstance(model, SymbolicModel):
                result.derivative = model.derivative_text(name)
                result.chain = chain_rule(parsed, setup.shapes, name, setup.limits)
            elif model is not None:
                ones = run.seen_weights.size == 1 or bool(np.all(run.seen_weights == 1))
                result.derivative = model.derivative_text(name, ones)
            result.max_abs_error, result.agree = check.max_abs_error, check.agree
            result.notes = _notes(
                expected.kink_notes[name], check.excluded, want, expected.kinks[name]
            )
            if check.bracketed:
                result.notes.append(_bracket_note(check.bracketed))
            with np.errstate(invalid="ignore"):
                lost = np.isnan(final) & np.isfinite(want) & ~expected.kinks[name]
            if lost.any() and np.all(np.isfinite(run.seen[name])):
                result.notes.append(
                    f"autograd is NaN at {int(lost.sum())} element(s) where the derivative is "
                    "finite: in the backward pass a zero gradient met an infinite local "
                    "derivative (0*inf or 0/0, e.g. log'(0) behind a max or a relu); PyTorch does "
                    "not special-case it, so this .grad is NaN in real use too"
                )
            if numbers is not None and model is not None:
                scale = times(repeat, True)
                result.numeric = scale * numbers.grads[name]
                numeric_check_ = compare(
                    final,
                    result.numeric,
                    max(rtol, NUMERIC.rtol),
                    max(atol, NUMERIC.atol),
                    expected.kinks[name] | numbers.kinks[name],
                    _bounds(numbers, name, scale),
                )
                result.numeric_max_abs_error = numeric_check_.max_abs_error
                result.numeric_agree = numeric_check_.agree
                off = int((numbers.kinks[name] & ~expected.kinks[name]).sum())
                if off:
                    result.notes.append(f"numeric check: {OFF_DOMAIN}; {off} element(s) left out")
                if numeric_check_.bracketed:
                    result.notes.append("numeric check: " + _bracket_note(numeric_check_.bracketed))
        variables[name] = result

    if same_graph and not retain_graph and repeat > 1:
        notes.append(
            f"backward() ran {repeat} times on one graph without retain_graph=True and PyTorch "
            "did not raise: no node of this graph saved a tensor for backward, so nothing was "
            "freed (a product of two tensors such as x*x would fail)"
        )
    explanation = None
    if explain and first is not None and recorder is not None:
        from autogradcli.explain import explain as explain_pass

        explanation = explain_pass(run, first, recorder, model, expected, snapshots[0])
    tensors = None
    if inspect:
        scale = times(repeat, same_graph)
        tensors = _inspect(run, trace, model, variables, scale)

    result = GradResult(
        expression=expression,
        device=str(run.device),
        dtype=dtype,
        rtol=rtol,
        atol=atol,
        output=output,
        output_expected=expected.output,
        output_max_abs_error=output_check.max_abs_error,
        output_agree=output_check.agree,
        variables=variables,
        passes=passes,
        weights=None if run.weight_tensor is None else run.seen_weights,
        seed=setup.random.seed if setup.random.used else None,
        output_name=parsed.output,
        mode=_mode(repeat, same_graph, retain_graph, zero_grad),
        zero_grad=zero_grad,
        notes=notes,
        expected_by="SymPy" if model is not None else "numeric",
        tensors=tensors,
        explanation=explanation,
    )
    if not result.agree and dtype != "float64":
        _recheck_in_float64(run, expected, result, rtol, atol, numbers)
    return result


def _recheck_in_float64(
    run: Run,
    expected: Expected,
    result: GradResult,
    rtol: float,
    atol: float,
    numbers: Expected | None = None,
) -> None:
    """A low-precision disagreement may be rounding alone: run the same inputs (as the
    dtype rounded them) once in float64; where float64 agrees with the reference, the
    mismatch is named rounding and does not count as a disagreement. The same holds for
    the numeric column (``numbers``)."""
    import torch

    from autogradcli import computation

    setup = run.setup
    rtol64, atol64 = TOLERANCES["float64"]
    if result.expected_by == "numeric":
        rtol64, atol64 = max(rtol64, NUMERIC.rtol), max(atol64, NUMERIC.atol)
    leaves = {
        n: computation.make_leaf(run.seen[n], torch.float64, run.device, n in setup.differentiate)
        for n in setup.expression.variables
    }
    trace = computation.forward(setup.expression, leaves, torch.float64, run.device)
    weights = None
    if run.weight_tensor is not None:
        weights = torch.as_tensor(run.seen_weights, dtype=torch.float64, device=run.device)
    computation.backward(trace.out, weights)
    explained: set[str] = set()
    out64 = compare(computation.to_numpy(trace.out), expected.output, rtol64, atol64)
    if not result.output_agree and out64.agree:
        result.output_rounding = _rounding(
            setup.dtype, result.output, result.output_max_abs_error, out64
        )
        result.output_agree = True
    for name, v in result.variables.items():
        if v.agree is not False and v.numeric_agree is not False:
            continue
        grad = leaves[name].grad
        got = np.zeros(setup.shapes[name]) if grad is None else computation.to_numpy(grad)
        if v.numeric_agree is False and numbers is not None:
            check = compare(
                got,
                numbers.grads[name],
                max(rtol64, NUMERIC.rtol),
                max(atol64, NUMERIC.atol),
                expected.kinks[name] | numbers.kinks[name],
                _bounds(numbers, name),
            )
            if check.agree:
                v.numeric_agree = True
                v.rounding = v.rounding or _rounding(
                    setup.dtype, v.grad, v.numeric_max_abs_error, check
                )
        if v.agree is not False:
            continue
        check = compare(
            got, expected.grads[name], rtol64, atol64, expected.kinks[name], _bounds(expected, name)
        )
        if check.agree:
            v.rounding = _rounding(setup.dtype, v.grad, v.max_abs_error, check)
            v.agree = True
            explained.add(name)
        else:
            v.notes.append(
                f"float64 disagrees too (max abs error {check.max_abs_error:.3g}): "
                "a real mismatch, not rounding"
            )
    for p in result.passes:
        if not p.agree:
            p.agree = all(
                name in explained
                or compare(
                    p.grads[name],
                    p.expected[name],
                    rtol,
                    atol,
                    expected.kinks[name],
                    _bounds(expected, name, 1 if result.zero_grad else p.index),
                ).agree
                for name in p.grads
            )


def _bounds(expected: Expected, name: str, scale: int = 1) -> tuple[Any, Any] | None:
    """The numeric one-sided slopes for ``name`` (see numeric_check), times ``scale``
    backward passes, or None."""
    if name not in expected.bounds:
        return None
    low, high = expected.bounds[name]
    return scale * low, scale * high


def _bracket_note(count: int) -> str:
    return (
        f"the numeric step ({NUMERIC.eps:g}) crosses a kink at {count} element(s): central "
        "differences mean nothing there, so autograd is checked to lie between the one-sided "
        "slopes (PyTorch's choice at a kink is one of them or between them)"
    )


def _rounding(dtype: str, low: Any, error: float | None, check: Any) -> str:
    """Name the low-precision failure: overflow to inf/NaN, or rounding."""
    import torch

    if low is not None and not np.all(np.isfinite(low)):
        biggest = torch.finfo(getattr(torch, dtype)).max
        return (
            f"overflow: {dtype} holds numbers up to {biggest:.3g} and gave inf/NaN here; "
            f"float64 agrees (error {check.max_abs_error:.3g})"
        )
    return (
        f"rounding: {dtype} error of {error if error is not None else math.nan:.3g}, "
        f"float64 agrees (error {check.max_abs_error:.3g})"
    )


def _mode(repeat: int, same_graph: bool, retain_graph: bool, zero_grad: bool) -> str:
    if repeat == 1:
        return "one pass"
    how = (
        "backward() again on the same graph" + (" (retain_graph=True)" if retain_graph else "")
        if same_graph
        else "forward + backward each pass (a new graph)"
    )
    then = "; .grad zeroed between passes (zero_grad)" if zero_grad else "; .grad accumulates"
    return how + then


def _retained(expression: Expression, names: list[str]) -> list[str]:
    """The non-leaf names whose gradient to keep; ``all`` means every step and the output."""
    intermediate = [n for n, kind, _ in named_tensors(expression) if kind != "input"]
    if "all" in names:
        return intermediate
    for name in names:
        if name in expression.variables:
            raise VariableError(
                f"'{name}' is an input (a leaf tensor): its .grad is kept anyway; --retain-grad "
                f"is for steps and the output: {', '.join(intermediate)}"
            )
        if name not in intermediate:
            raise VariableError(
                f"--retain-grad {name}: no step or output named '{name}' (choose from "
                f"{', '.join(intermediate)}, or all)"
            )
    return list(dict.fromkeys(names))


def _tensor(trace: Trace, name: str) -> torch.Tensor:
    return trace.steps.get(name, trace.out)


def _domain_edges(
    run: Run,
    output: np.ndarray,
    expected: Expected,
    first: dict[str, np.ndarray],
    notes: list[str],
) -> None:
    """Points where SymPy's formula and PyTorch's IEEE arithmetic part ways without any
    gradient being wrong; each case is named in a note.

    - PyTorch's forward is NaN where SymPy's simplified expression is defined
      (``sqrt(x)**2`` at -1, ``x/x`` at 0, ``x*0`` at inf): those elements are left out.
    - SymPy's derivative is 0/0 or 0*inf at a domain edge (``x**y`` at x = 0) where autograd
      gives a number: the limit, by central differences, decides.
    """
    finite_inputs = all(np.all(np.isfinite(v)) for v in run.seen.values())
    with np.errstate(all="ignore"):
        torch_nan = np.isnan(output) & np.isfinite(expected.output)
        both_nan = np.isnan(output) & np.isnan(expected.output)
    if both_nan.any() and finite_inputs:
        notes.append(
            f"the output is NaN at {int(both_nan.sum())} element(s): the expression is outside "
            "its real domain there (e.g. log, sqrt or a fractional power of a negative "
            "number); PyTorch still applies each backward formula, as SymPy's derivative does"
        )
    if not finite_inputs:
        notes.append(
            "an input is NaN or infinite: IEEE arithmetic carries it through, so the check "
            "compares how PyTorch and SymPy's formula propagate it, not a derivative"
        )
    if torch_nan.any():
        expected.output_excluded = torch_nan
        count = int(torch_nan.sum())
        notes.append(
            f"PyTorch's forward is NaN at {count} output element(s) where SymPy's expression "
            "is defined (IEEE arithmetic outside the real domain, e.g. sqrt or a fractional "
            "power of a negative number, 0/0, inf*0, which SymPy simplified away); "
            "those elements and the gradients through them are left out of the check"
        )
        for name in [n for n in run.setup.expression.variables if n in expected.grads]:
            with np.errstate(all="ignore"):
                lost = np.isnan(first[name]) & ~np.isnan(expected.grads[name])
            expected.kinks[name] = expected.kinks[name] | lost
    undefined = {
        name: np.isnan(expected.grads[name]) & np.isfinite(first[name]) & ~expected.kinks[name]
        for name in run.setup.expression.variables  # in order: notes must not depend on hashing
        if name in expected.grads
    }
    if not any(mask.any() for mask in undefined.values()):
        return
    limits = numeric_check(run)
    for name, mask in undefined.items():
        if not mask.any():
            continue
        numeric = np.broadcast_to(limits.grads[name], mask.shape)
        expected.grads[name] = np.where(mask, numeric, expected.grads[name])
        off = mask & limits.kinks[name]
        if off.any():  # no limit from one side only: left out
            expected.kinks[name] = expected.kinks[name] | off
            expected.kink_notes[name] = expected.kink_notes[name] | limits.kink_notes[name]
        if name in limits.bounds:
            low, high = limits.bounds[name]
            expected.bounds[name] = (np.where(mask, low, np.nan), np.where(mask, high, np.nan))
        notes.append(
            f"SymPy's derivative for {name} is 0/0 or 0*inf at {int(mask.sum())} element(s) "
            "(a domain edge such as x**y at x = 0); there its limit, by central differences "
            "in float64, is the reference"
        )


def exact_or_none(run: Run, notes: list[str], work: Callable[[], T]) -> T | None:
    """``work()`` (SymPy's exact check) within --sympy-timeout, or None with a note saying
    why the numeric check stands in: too large, too slow, or no number from SymPy."""
    from autogradcli.components import TooLarge
    from autogradcli.evaluate import NoClosedForm
    from autogradcli.symbolic import SympyTimeout, time_limit

    try:
        with time_limit(run.setup.limits.sympy_seconds):
            return work()
    except TooLarge as exc:
        notes.append(f"{exc}; checked numerically instead (central differences, float64)")
    except SympyTimeout as exc:
        notes.append(f"{exc} (--sympy-timeout); checked numerically instead")
    except NoClosedForm as exc:
        notes.append(f"SymPy gives no number here ({exc}); checked numerically instead")
    return None


def symbolic_check(run: Run, notes: list[str]) -> tuple[Any, Expected | None]:
    """SymPy's model and its expected values, or (None, None) with a note saying why the
    exact check is not available."""
    from autogradcli.components import ComponentModel
    from autogradcli.symbolic import SymbolicModel

    setup = run.setup

    def work() -> tuple[Any, Expected]:
        if is_elementwise(setup.expression):
            model: Any = SymbolicModel(setup.expression, setup.shapes, setup.limits)
        else:
            model = ComponentModel(setup.expression, setup.shapes, setup.limits)
        return model, model.evaluate(run.seen, run.seen_weights, setup.differentiate)

    return exact_or_none(run, notes, work) or (None, None)


def numeric_check(run: Run) -> Expected:
    """Central finite differences of the same computation in float64 on the CPU.

    Where the function is NaN within the step (outside its domain) the element is left out
    (``kinks``, with a note); where it crosses a kink of abs, relu, max, min or norm (the
    one-sided slopes differ) ``bounds`` holds the two slopes."""
    from autogradcli.computation import forward_numpy
    from autogradcli.expected import Expected
    from autogradcli.numeric import numeric_slopes

    setup = run.setup

    def f(values: dict[str, np.ndarray]) -> np.ndarray:
        return forward_numpy(setup.expression, values)

    names = [n for n in setup.expression.variables if n in setup.differentiate]
    weights = None if run.weight_tensor is None else run.seen_weights
    slopes = numeric_slopes(f, run.seen, weights, names)
    kinked = has_kink(setup.expression)
    expected = Expected(output=f(run.seen), grads={n: slopes[n].central for n in names})
    for name in names:
        s = slopes[name]
        off = s.off_domain()
        expected.kinks[name] = off
        expected.kink_notes[name] = {OFF_DOMAIN} if off.any() else set()
        if kinked:
            across = s.across_kink() & ~off
            low, high = np.fmin(s.left, s.right), np.fmax(s.left, s.right)
            expected.bounds[name] = (np.where(across, low, np.nan), np.where(across, high, np.nan))
    return expected


OFF_DOMAIN = (
    f"the function is NaN within the numeric step ({NUMERIC.eps:g}) here (outside its real "
    "domain or at its edge), so central differences give no number"
)


def has_kink(expression: Expression) -> bool:
    """Whether the expression calls a function with a kink (vocabulary.KINKED)."""
    roots = [expression.root, *(s.node for s in expression.steps)]
    return any(isinstance(n, Call) and n.func in KINKED for r in roots for n in walk(r))


def _retain(trace: Trace, names: list[str], explicit: bool) -> None:
    """``retain_grad()`` on each named tensor that autograd tracks."""
    for name in names:
        tensor = _tensor(trace, name)
        if tensor.requires_grad:
            tensor.retain_grad()
        elif explicit:
            raise VariableError(
                f"--retain-grad {name}: '{name}' does not require grad (it depends on no input "
                "that does), so it has no gradient to keep"
            )


def _inspect(
    run: Run,
    trace: Trace,
    model: SymbolicModel,
    variables: dict[str, VariableResult],
    scale: int,
) -> list[TensorResult]:
    """Each named tensor as PyTorch has it after the last pass, checked against SymPy.

    A kept ``.grad`` is checked against SymPy's derivative of the output with respect to
    the operation that made the tensor (so ``z = y`` and ``z = +y``, which are ``y``
    itself in PyTorch, get ``y``'s whole gradient, as PyTorch gives it)."""
    from autogradcli.computation import to_numpy
    from autogradcli.graph import owners

    setup = run.setup
    rtol, atol = setup.rtol, setup.atol
    made_by = owners(setup.expression, trace)
    leaf_names = {id(t): n for n, t in run.leaves.items()}
    rows = []
    for name, kind, node in named_tensors(setup.expression):
        tensor = run.leaves[name] if kind == "input" else _tensor(trace, name)
        row = TensorResult(
            name=name,
            kind=kind,
            value=to_numpy(tensor),
            requires_grad=tensor.requires_grad,
            is_leaf=tensor.is_leaf,
            grad_fn=None if tensor.grad_fn is None else type(tensor.grad_fn).__name__,
        )
        if node is not None and model is not None:
            row.value_expected = model.value(node, run.seen)
            with np.errstate(invalid="ignore"):  # IEEE NaN where SymPy simplified (x/x at 0):
                lost = np.isnan(row.value) & np.isfinite(row.value_expected)  # see _domain_edges
            check = compare(row.value, row.value_expected, rtol, atol, lost)
            row.value_agree = check.agree
        leaf = leaf_names.get(id(tensor))
        grad, note = _read_grad(tensor)
        if leaf is not None and leaf in variables and variables[leaf].requires_grad:
            row.grad, row.grad_expected = variables[leaf].grad, variables[leaf].expected
            row.grad_agree = variables[leaf].agree
        elif grad is not None and tensor.grad_fn is not None and model is None:
            row.grad = grad  # no exact model to check it against (see the notes)
        elif grad is not None and tensor.grad_fn is not None:
            row.grad = grad
            origin = made_by[id(tensor.grad_fn)].node
            target = f"@{name}"
            shapes = {**setup.shapes, target: row.value.shape}
            sub = type(model)(cut(setup.expression, origin, target), shapes, setup.limits)
            value = model.value(origin, run.seen)
            expected = sub.evaluate(
                {**run.seen, target: value}, run.seen_weights, frozenset({target})
            )
            row.grad_expected = scale * expected.grads[target]
            check = compare(row.grad, row.grad_expected, rtol, atol, expected.kinks[target])
            row.grad_agree = check.agree
        else:
            row.grad_note = note
        rows.append(row)
    return rows


def _read_grad(tensor: torch.Tensor) -> tuple[np.ndarray | None, str]:
    """``.grad`` read as PyTorch does, and why it is None when it is."""
    from autogradcli.computation import to_numpy

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        grad = tensor.grad
    if grad is not None:
        return to_numpy(grad), ""
    if not tensor.requires_grad:
        return None, "autograd does not track a tensor with requires_grad=False"
    for warning in caught:
        entry = lookup(str(warning.message))
        if entry is not None:
            return None, f"{entry.why}; {entry.fix}"
    return None, "PyTorch keeps .grad only for leaf tensors"


def _weights(
    spec: Any,
    arrays: dict[str, np.ndarray],
    out_shape: tuple[int, ...],
    limits: Limits,
    random: RandomSource,
) -> np.ndarray | None:
    """The external gradient as an array (PyTorch checks its shape), or None for backward()."""
    if spec is None:
        return None
    if isinstance(spec, str) and spec.strip() == "ones":
        return np.ones(out_shape)
    if isinstance(spec, str) and spec.strip() in arrays:
        return arrays[spec.strip()]
    return read_value(spec, limits, random)


def _notes(
    kink_notes: set[str], excluded: int, expected: np.ndarray, kinks: np.ndarray | None = None
) -> list[str]:
    notes = []
    if excluded:
        for note in sorted(kink_notes):
            notes.append(f"{note}; {excluded} element(s) at that point are left out of the check")
    with np.errstate(all="ignore"):
        ordinary = expected if kinks is None else np.where(kinks, 0.0, expected)
        infinite, undefined = int(np.isinf(ordinary).sum()), int(np.isnan(ordinary).sum())
    if infinite:
        notes.append(f"the derivative is infinite at {infinite} element(s)")
    if undefined:
        notes.append(
            f"the derivative is undefined (NaN) at {undefined} element(s), "
            "outside the function's real domain"
        )
    return notes
