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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from autogradcli.compare import TOLERANCES, Comparison, compare
from autogradcli.devices import check_dtype
from autogradcli.diagnose import check_cause, forward_cause, rounding_cause
from autogradcli.errors import AutogradCliError, UnknownVariableError, VariableError
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
    rounding_steps,
    walk,
)
from autogradcli.glossary import lookup
from autogradcli.messages import POINTS, kink_note
from autogradcli.numeric import DEFAULT as NUMERIC
from autogradcli.result import (
    GradResult,
    PassResult,
    Suggestion,
    TensorResult,
    VariableResult,
)
from autogradcli.values import RandomSource, read_value
from autogradcli.verdict import (
    AGREE,
    DISAGREE,
    ROUNDING,
    Cause,
    rounding_relative,
    settle,
    worst,
)
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
    strict: bool = False,
    suggest: bool = True,
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
    exact check is too large or gives no number. ``strict`` makes a ≈ (within rounding)
    verdict fail ``result.agree``; ``suggest`` re-runs stable forms of expressions that
    overflow or lose precision (``result.suggestions``).
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
    if explain and model is None:
        raise VariableError(
            "--explain needs SymPy's exact check, which is not available here; "
            "see the graph with autograd-cli graph"
        )
    output = computation.to_numpy(trace.out)
    if model is not None:
        expected = _domain_edges(run, expected, snapshots[0], notes)
    steps = rounding_steps(parsed, setup.shapes, setup.limits) + repeat
    judge = Judge(run, trace, model, expected, numbers, snapshots, zero_grad, steps)
    variables = {}
    for name in parsed.variables:
        result = VariableResult(name, run.seen[name], requires_grad=name in differentiate)
        if name in differentiate:
            judge.fill(result)
            if isinstance(model, SymbolicModel):
                result.derivative = model.derivative_text(name)
                result.chain = chain_rule(parsed, setup.shapes, name, setup.limits)
            elif model is not None:
                ones = run.seen_weights.size == 1 or bool(np.all(run.seen_weights == 1))
                result.derivative = model.derivative_text(name, ones)
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
        tensors = _inspect(run, trace, model, variables, judge.times(repeat, same_graph))
    output_verdict, output_cause = judge.output(output)
    result = GradResult(
        expression=expression,
        device=str(run.device),
        dtype=dtype,
        rtol=judge.rtol,
        atol=judge.atol,
        output=output,
        output_expected=expected.output,
        output_max_abs_error=judge.output_check.max_abs_error,
        output_agree=output_verdict != DISAGREE,
        variables=variables,
        passes=judge.passes(),
        weights=None if run.weight_tensor is None else run.seen_weights,
        seed=setup.random.seed if setup.random.used else None,
        output_name=parsed.output,
        mode=_mode(repeat, same_graph, retain_graph, zero_grad),
        zero_grad=zero_grad,
        notes=notes,
        expected_by="SymPy" if model is not None else "numeric",
        tensors=tensors,
        explanation=explanation,
        output_verdict=output_verdict,
        output_cause=output_cause,
        rounding_bound=judge.relative,
        strict=strict,
    )
    if suggest and any(c.code in UNSTABLE for c in result.causes()):

        def rerun(text: str) -> GradResult:
            return compute_gradient(
                text,
                values,
                weights=weights,
                repeat=repeat,
                same_graph=same_graph,
                retain_graph=retain_graph,
                zero_grad=zero_grad,
                const=const,
                device=device,
                dtype=dtype,
                rtol=rtol,
                atol=atol,
                seed=setup.random.seed,
                limits=limits,
                suggest=False,
            )

        result.suggestions = _suggest(parsed, rerun)
    return result


def _suggest(parsed: Expression, rerun: Callable[[str], GradResult]) -> list[Suggestion]:
    """Stable forms of the patterns in ``parsed``, each re-run: a suggestion stands only
    if its run agrees (``confirmed``); otherwise it says what the re-run found."""
    from autogradcli.stable import rewrite

    text, replaced = rewrite(parsed)
    if not replaced:
        return []
    try:
        again = rerun(text)
    except AutogradCliError:
        return []
    grads = {n: v.grad for n, v in again.variables.items() if v.grad is not None}
    return [
        Suggestion(
            replaced=replaced,
            expression=text,
            verdict=again.verdict,
            confirmed=again.verdict == AGREE,
            output=again.output,
            grads=grads,
            cause=again.first_cause(),
        )
    ]


UNSTABLE = ("overflow", "precision_loss")


class Judge:
    """Comparisons of one run with the reference, turned into verdicts and causes by the
    policy of ``verdict.py`` (the float64 re-run, and the forward pass's diagnosis, are
    made only when a check needs them)."""

    def __init__(
        self,
        run: Run,
        trace: Trace,
        model: Any,
        expected: Expected,
        numbers: Expected | None,
        snapshots: list[dict[str, np.ndarray]],
        zero_grad: bool,
        steps: int,
    ) -> None:
        setup = run.setup
        self.run, self.trace, self.model = run, trace, model
        self.expected, self.numbers, self.snapshots = expected, numbers, snapshots
        self.zero_grad = zero_grad
        self.rtol, self.atol = setup.rtol, setup.atol
        if model is None:  # the numeric check is the reference: its own (looser) tolerance
            self.rtol, self.atol = max(self.rtol, NUMERIC.rtol), max(self.atol, NUMERIC.atol)
        from autogradcli.computation import to_numpy

        self.relative = rounding_relative(setup.dtype, steps)
        self.names = [n for n in setup.expression.variables if n in setup.differentiate]
        self.output_check = compare(
            to_numpy(trace.out),
            expected.output,
            self.rtol,
            self.atol,
            huge=expected.output_huge,
            relative=self.relative,
        )
        self._float64: Float64Checks | None = None
        self._forward: Cause | None = None
        self._diagnosed = False

    def times(self, index: int, kept_across_passes: bool = True) -> int:
        """What pass ``index`` multiplies a single gradient by (1 once zeroed or rebuilt)."""
        return 1 if self.zero_grad or not kept_across_passes else index

    def check(self, name: str, grads: np.ndarray, scale: int) -> Comparison:
        """``grads`` of ``name`` against ``scale`` times the reference's gradient."""
        e = self.expected
        bounds = _bounds(e, name, scale)
        return compare(
            grads,
            scale * e.grads[name],
            self.rtol,
            self.atol,
            e.kinks[name],
            bounds,
            e.huge.get(name),
            self.relative,
            e.unknown_of(name),
        )

    def numeric_check(self, name: str, grads: np.ndarray, scale: int) -> Comparison:
        assert self.numbers is not None
        return compare(
            grads,
            scale * self.numbers.grads[name],
            max(self.rtol, NUMERIC.rtol),
            max(self.atol, NUMERIC.atol),
            self.expected.kinks[name],
            _bounds(self.numbers, name, scale),
            relative=self.relative,
            unknown=self.numbers.unknown_of(name),
        )

    def float64(self) -> Float64Checks | None:
        """The same inputs once more in float64 (lazily; None when the dtype is float64)."""
        if self.run.setup.dtype == "float64":
            return None
        if self._float64 is None:
            self._float64 = float64_checks(self.run, self.expected, self.numbers)
        return self._float64

    def settle(self, check: Comparison, pick: Callable[[Float64Checks], Comparison]) -> str:
        if check.agree:
            return AGREE
        f64 = self.float64()
        return settle(check, None if f64 is None else pick(f64))

    def cause(
        self,
        verdict: str,
        check: Comparison,
        pick: Callable[[Float64Checks], Comparison],
        actual: np.ndarray,
        want: np.ndarray,
        huge: np.ndarray | None,
        kinks: set[str],
    ) -> Cause | None:
        dtype = self.run.setup.dtype
        f64 = self.float64()
        f64_check = None if f64 is None else pick(f64)
        if verdict == AGREE:
            return None
        if verdict == ROUNDING:
            assert f64_check is not None
            return rounding_cause(check, f64_check, dtype, self.relative)
        return check_cause(
            check,
            actual,
            want,
            huge,
            dtype=dtype,
            forward=self.forward(),
            float64=f64_check,
            inputs_finite=all(bool(np.all(np.isfinite(v))) for v in self.run.seen.values()),
            kinks=kinks,
        )

    def forward(self) -> Cause | None:
        """Where the forward pass went wrong, if it did (computed once)."""
        if not self._diagnosed and self.model is not None:
            run = self.run
            expression = run.setup.expression
            self._forward = forward_cause(
                expression, self.trace, self.model, run.seen, run.setup.dtype
            )
        self._diagnosed = True
        return self._forward

    def output(self, output: np.ndarray) -> tuple[str, Cause | None]:
        check = self.output_check
        verdict = self.settle(check, lambda f: f.output)
        huge = self.expected.output_huge
        cause = self.cause(
            verdict, check, lambda f: f.output, output, self.expected.output, huge, set()
        )
        return verdict, cause

    def fill(self, v: VariableResult) -> None:
        """Gradient, reference, verdict, cause and notes of one differentiated variable."""
        name, e = v.name, self.expected
        scale = self.times(len(self.snapshots))
        v.grad, v.expected = self.snapshots[-1][name], scale * e.grads[name]
        check = self.check(name, v.grad, scale)
        v.max_abs_error = check.max_abs_error
        v.verdict = self.settle(check, lambda f: f.grads[name])
        v.cause = self.cause(
            v.verdict,
            check,
            lambda f: f.grads[name],
            v.grad,
            v.expected,
            e.huge.get(name),
            e.kink_notes[name],
        )
        v.agree = v.verdict != DISAGREE
        unknown = e.unknown_of(name)
        marked = e.kinks[name] if unknown is None else e.kinks[name] | unknown
        v.notes = _notes(e.kink_notes[name], check, v.expected, marked)
        if check.bracketed:
            v.notes.append(_bracket_note(check.bracketed))
        if self.numbers is not None and self.model is not None:
            v.numeric = scale * self.numbers.grads[name]
            numeric = self.numeric_check(name, v.grad, scale)
            v.numeric_max_abs_error = numeric.max_abs_error
            v.numeric_verdict = self.settle(numeric, lambda f: f.numeric[name])
            v.numeric_agree = v.numeric_verdict != DISAGREE
            off = int(self.numbers.unknown[name].sum())
            if off:
                v.notes.append(f"numeric check: {POINTS['off_domain']}; {off} element(s) left out")
            if numeric.bracketed:
                v.notes.append("numeric check: " + _bracket_note(numeric.bracketed))

    def passes(self) -> list[PassResult]:
        """``.grad`` after each pass against its multiple of the reference."""
        results = []
        for index, grads in enumerate(self.snapshots, start=1):
            scale = self.times(index)
            want = {n: scale * self.expected.grads[n] for n in self.names}
            verdicts = [
                self.settle(self.check(n, grads[n], scale), lambda f, n=n: f.grads[n])
                for n in self.names
            ]
            results.append(PassResult(index, grads, want, worst(verdicts)))
        return results


@dataclass(frozen=True)
class Float64Checks:
    """The float64 re-run's output and gradients, compared with the reference."""

    output: Comparison
    grads: dict[str, Comparison]
    numeric: dict[str, Comparison]


def float64_checks(run: Run, expected: Expected, numbers: Expected | None) -> Float64Checks:
    """Run the same inputs (as the dtype rounded them) once in float64 and compare with the
    reference at float64's tolerance: the evidence a ≈ verdict needs."""
    import torch

    from autogradcli import computation

    setup = run.setup
    rtol, atol = TOLERANCES["float64"]
    if numbers is expected:  # the numeric check is the reference
        rtol, atol = max(rtol, NUMERIC.rtol), max(atol, NUMERIC.atol)
    leaves = {
        n: computation.make_leaf(run.seen[n], torch.float64, run.device, n in setup.differentiate)
        for n in setup.expression.variables
    }
    trace = computation.forward(setup.expression, leaves, torch.float64, run.device)
    weights = None
    if run.weight_tensor is not None:
        weights = torch.as_tensor(run.seen_weights, dtype=torch.float64, device=run.device)
    computation.backward(trace.out, weights)
    output = compare(
        computation.to_numpy(trace.out), expected.output, rtol, atol, huge=expected.output_huge
    )
    grads, numeric = {}, {}
    for name in [n for n in setup.expression.variables if n in setup.differentiate]:
        grad = leaves[name].grad
        got = np.zeros(setup.shapes[name]) if grad is None else computation.to_numpy(grad)
        grads[name] = compare(
            got,
            expected.grads[name],
            rtol,
            atol,
            expected.kinks[name],
            _bounds(expected, name),
            expected.huge.get(name),
            unknown=expected.unknown_of(name),
        )
        if numbers is not None:
            numeric[name] = compare(
                got,
                numbers.grads[name],
                max(rtol, NUMERIC.rtol),
                max(atol, NUMERIC.atol),
                expected.kinks[name],
                _bounds(numbers, name),
                unknown=numbers.unknown_of(name),
            )
    return Float64Checks(output, grads, numeric)


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
    run: Run, expected: Expected, first: dict[str, np.ndarray], notes: list[str]
) -> Expected:
    """Points where SymPy's formula needs help or a word; returns the reference to use.

    - The output is NaN in both (outside the real domain), or an input is not finite: said.
    - SymPy's derivative is 0/0 or 0*inf where the function is defined (``x**y`` at x = 0,
      ``(x**2)**0.5`` at 0): the one-sided slopes decide. Where they agree their limit, by
      central differences in float64, is the reference; where they differ the point is a
      kink (left out of the check while autograd is finite there).
    """
    finite_inputs = all(np.all(np.isfinite(v)) for v in run.seen.values())
    defined = bool(np.all(np.isfinite(expected.output)))
    output = expected.output
    if np.isnan(output).any() and finite_inputs:
        notes.append(
            f"the output is NaN at {int(np.isnan(output).sum())} element(s): the expression is "
            "outside its real domain there (e.g. log, sqrt or a fractional power of a negative "
            "number); PyTorch still applies each backward formula, as SymPy's derivative does"
        )
    if not finite_inputs:
        notes.append(
            "an input is NaN or infinite: IEEE arithmetic carries it through, so the check "
            "compares how PyTorch and SymPy's formula propagate it, not a derivative"
        )
    names = [n for n in run.setup.expression.variables if n in expected.grads]  # fixed order
    undefined = {n: np.isnan(expected.grads[n]) & ~expected.kinks[n] for n in names}
    if not (defined and finite_inputs) or not any(m.any() for m in undefined.values()):
        return expected
    limits = numeric_check(run, bounds=True)
    grads, kinks, unknown = dict(expected.grads), dict(expected.kinks), dict(expected.unknown)
    kink_notes, bounds = dict(expected.kink_notes), dict(expected.bounds)
    for name, mask in undefined.items():
        if not mask.any():
            continue
        low, _ = limits.bounds[name]
        across = mask & ~np.isnan(low)
        grads[name] = np.where(mask, np.broadcast_to(limits.grads[name], mask.shape), grads[name])
        off = mask & limits.unknown[name]  # no limit from one side only: left out
        kinks[name] = kinks[name] | across
        unknown[name] = unknown.get(name, np.zeros(mask.shape, bool)) | off
        kink_notes[name] = kink_notes[name] | ({"off_domain"} if off.any() else set())
        kink_notes[name] = kink_notes[name] | ({"one_sided"} if across.any() else set())
        notes.append(
            f"SymPy's derivative for {name} is 0/0 or 0*inf at {int(mask.sum())} element(s) "
            "(a domain edge such as x**y at x = 0); there its limit, by central differences "
            "in float64, is the reference"
        )
    return replace(
        expected,
        grads=grads,
        kinks=kinks,
        kink_notes=kink_notes,
        bounds=bounds,
        unknown=unknown,
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


def numeric_check(run: Run, bounds: bool = False) -> Expected:
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
    kinked = bounds or has_kink(setup.expression)
    expected = Expected(output=f(run.seen), grads={n: slopes[n].central for n in names})
    for name in names:
        s = slopes[name]
        off = s.off_domain()
        expected.kinks[name] = np.zeros(off.shape, dtype=bool)
        expected.unknown[name] = off
        expected.kink_notes[name] = {"off_domain"} if off.any() else set()
        if kinked:
            across = s.across_kink() & ~off
            low, high = np.fmin(s.left, s.right), np.fmax(s.left, s.right)
            expected.bounds[name] = (np.where(across, low, np.nan), np.where(across, high, np.nan))
    return expected


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
    codes: set[str], check: Comparison, expected: np.ndarray, kinks: np.ndarray
) -> list[str]:
    """Notes on one variable: elements left out at kinks (with PyTorch's values there, as
    printed), infinite and undefined derivatives."""
    notes = []
    if check.excluded:
        notes.append(kink_note(codes, check.excluded, check.excluded_values))
    with np.errstate(all="ignore"):
        ordinary = np.where(kinks, 0.0, expected)
        infinite, undefined = int(np.isinf(ordinary).sum()), int(np.isnan(ordinary).sum())
    if infinite:
        notes.append(f"the derivative is infinite at {infinite} element(s)")
    if undefined:
        notes.append(
            f"the derivative is undefined (NaN) at {undefined} element(s), "
            "outside the function's real domain"
        )
    return notes
