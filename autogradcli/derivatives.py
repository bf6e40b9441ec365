"""Beyond one ``.grad``: the full Jacobian (one backward pass per output element, as seed
003 builds it), the Hessian (``create_graph=True``), and the K-th derivative of an
elementwise expression, each checked against SymPy, with finite differences as a third
opinion or as the check when SymPy's exact check is too large.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from autogradcli.compare import compare
from autogradcli.diagnose import check_cause, rounding_cause
from autogradcli.errors import LimitError, VariableError
from autogradcli.expression import Call, Limits, is_elementwise, rounding_steps, walk
from autogradcli.gradient import Run, exact_or_none, prepare, start
from autogradcli.messages import kink_note
from autogradcli.numeric import DEFAULT as NUMERIC
from autogradcli.result import Block, DerivativeResult, JacobianRow
from autogradcli.verdict import AGREE, DISAGREE, ROUNDING, rounding_relative, settle
from autogradcli.vocabulary import REDUCTIONS

if TYPE_CHECKING:
    import torch

MAX_ORDER = 8
MAX_JACOBIAN_ENTRIES = 100_000  # output elements x input elements, before any backward pass


def _setup(expression: str, values: Mapping[str, Any], const: Iterable[str], **options: Any) -> Run:
    setup = prepare(expression, values, const=const, **options)
    if not setup.differentiate:
        raise VariableError("every input is --const: there is nothing to differentiate")
    empty = [n for n in setup.differentiate if math.prod(setup.shapes[n]) == 0]
    if empty or math.prod(setup.out_shape) == 0:
        what = f"'{sorted(empty)[0]}'" if empty else "the output"
        raise VariableError(f"{what} has no elements, so there is nothing to differentiate")
    return start(setup)


def _forward_function(run: Run, names: list[str]) -> Any:
    """``f(*tensors)`` for torch.autograd.functional: the inputs in ``names`` replaced."""
    from autogradcli import computation
    from autogradcli.devices import resolve_dtype

    def f(*tensors: torch.Tensor) -> torch.Tensor:
        env = {**run.leaves, **dict(zip(names, tensors, strict=True))}
        dtype = resolve_dtype(run.setup.dtype)
        return computation.forward(run.setup.expression, env, dtype, run.device).out

    return f


def _numeric_forward(run: Run) -> Any:
    from autogradcli.computation import forward_numpy

    return lambda values: forward_numpy(run.setup.expression, values)


MAX_EXACT_HESSIAN_INPUTS = 64  # input elements; the Hessian is their square in sympy.diff calls


def _exact(run: Run, notes: list[str], max_inputs: int | None = None) -> Any:
    """SymPy's component-wise model, or None (with a note) when it is too large or slow."""
    from autogradcli.components import ComponentModel, TooLarge

    setup = run.setup
    inputs = sum(math.prod(setup.shapes[n]) for n in setup.expression.variables)

    def work() -> Any:
        if max_inputs is not None and inputs > max_inputs:
            raise TooLarge(
                f"the exact SymPy Hessian covers up to {max_inputs} input elements; "
                f"this one has {inputs}"
            )
        return ComponentModel(setup.expression, setup.shapes, setup.limits)

    return exact_or_none(run, notes, work)


def _timed(run: Run, notes: list[str], work: Any) -> Any:
    """``work()`` within --sympy-timeout; an empty dict (and a note) when it runs out."""
    return exact_or_none(run, notes, work) or {}


def _block(
    run: Run,
    key: str,
    autograd: np.ndarray,
    cross: np.ndarray | None,
    cross_name: str,
    expected: np.ndarray,
    kinks: np.ndarray | None,
    numeric: np.ndarray | None,
    exact: bool,
    numeric_rounding: np.ndarray | None = None,
    kink_codes: set[str] | None = None,
) -> Block:
    setup = run.setup
    rtol, atol = setup.rtol, setup.atol
    if not exact:
        rtol, atol = max(rtol, NUMERIC.rtol), max(atol, NUMERIC.atol)
    relative = _relative(run)
    check = compare(autograd, expected, rtol, atol, kinks, relative=relative)
    block = Block(key, autograd, cross, cross_name, expected, check.max_abs_error, check=check)
    block.kink_codes = set(kink_codes or ())
    block.verdict = AGREE if check.agree else DISAGREE
    if cross is not None:
        block.cross_agree = compare(autograd, cross, setup.rtol, setup.atol).agree
    block.excluded = check.excluded
    if numeric is not None:
        widen = 0.0 if numeric_rounding is None else numeric_rounding
        n = compare(
            autograd, numeric, max(rtol, NUMERIC.rtol), max(atol, NUMERIC.atol) + widen, kinks
        )
        block.numeric, block.numeric_agree = numeric, n.agree
    return block


def _relative(run: Run) -> float:
    """The relative rounding bound for this expression in this dtype (verdict.py)."""
    setup = run.setup
    steps = rounding_steps(setup.expression, setup.shapes, setup.limits)
    return rounding_relative(setup.dtype, 2 * steps)  # differentiated twice at most


def compute_jacobian(
    expression: str,
    values: Mapping[str, Any],
    *,
    const: Iterable[str] = (),
    numeric: bool = False,
    max_entries: int = MAX_JACOBIAN_ENTRIES,
    strict: bool = False,
    **options: Any,
) -> DerivativeResult:
    """The Jacobian ``d out / d x`` per input, shaped ``out.shape + x.shape``: one
    ``backward(one_hot, retain_graph=True)`` per output element (rows kept for display),
    cross-checked with ``torch.autograd.functional.jacobian`` and checked against SymPy."""
    import torch

    from autogradcli.computation import to_numpy
    from autogradcli.numeric import numeric_jacobian

    run = _setup(expression, values, const, **options)
    setup = run.setup
    names = [n for n in setup.expression.variables if n in setup.differentiate]
    rows_count = math.prod(setup.out_shape)
    entries = rows_count * sum(math.prod(setup.shapes[n]) for n in names)
    if entries > max_entries:
        raise LimitError(
            f"the Jacobian would have {entries} entries; the limit is {max_entries} "
            "(raise it with --max-entries)"
        )
    out = run.forward().out
    rows: list[JacobianRow] = []
    autograd = {n: np.zeros(setup.out_shape + setup.shapes[n]) for n in names}
    for i in range(rows_count):
        one_hot = torch.zeros(rows_count, dtype=out.dtype, device=out.device)
        one_hot[i] = 1
        for n in names:
            run.leaves[n].grad = None  # seed 003's x.grad.data.zero_() between rows
        out.backward(one_hot.reshape(out.shape), retain_graph=True)
        grads = {}
        for n in names:
            grad = run.leaves[n].grad
            grads[n] = np.zeros(setup.shapes[n]) if grad is None else to_numpy(grad)
            autograd[n].reshape(rows_count, -1)[i] = grads[n].reshape(-1)
        index = np.unravel_index(i, setup.out_shape) if setup.out_shape else ()
        shaped = to_numpy(one_hot).reshape(setup.out_shape)
        rows.append(JacobianRow(tuple(int(k) for k in index), shaped, grads))
    functional = torch.autograd.functional.jacobian(
        _forward_function(run, names), tuple(run.leaves[n] for n in names)
    )
    notes: list[str] = []
    model = _exact(run, notes)
    numbers = None
    if numeric or model is None:
        numbers = numeric_jacobian(_numeric_forward(run), run.seen, names)
    exact: dict[str, Any] = {}
    if model is not None:
        exact = _timed(run, notes, lambda: {n: model.jacobian_values(run.seen, n) for n in names})
        if not exact:
            model = None
            numbers = numeric_jacobian(_numeric_forward(run), run.seen, names)
    blocks = []
    for n, cross in zip(names, functional, strict=True):
        if model is not None:
            expected, kinks, codes = exact[n]
        else:
            assert numbers is not None
            expected, kinks, codes = numbers[n], None, set()
        blocks.append(
            _block(
                run,
                n,
                autograd[n],
                to_numpy(cross),
                "torch.autograd.functional.jacobian",
                expected,
                kinks,
                None if numbers is None or model is None else numbers[n],
                model is not None,
                kink_codes=codes,
            )
        )
    result = _result(run, "jacobian", blocks, notes, model is not None, strict, rows=rows)
    return _recheck_in_float64(
        result,
        _diagnosis(run, model),
        compute_jacobian,
        expression,
        run.seen,
        const=const,
        numeric=numeric,
        max_entries=max_entries,
        **options,
    )


def compute_hessian(
    expression: str,
    values: Mapping[str, Any],
    *,
    const: Iterable[str] = (),
    numeric: bool = False,
    max_entries: int = MAX_JACOBIAN_ENTRIES,
    strict: bool = False,
    **options: Any,
) -> DerivativeResult:
    """Second derivatives of a one-element output for every pair of inputs, by
    differentiating ``grad(out, create_graph=True)`` again, cross-checked with
    ``torch.autograd.functional.hessian`` and checked against SymPy's Hessian."""
    import torch

    from autogradcli.components import hessian_terms
    from autogradcli.computation import to_numpy
    from autogradcli.numeric import numeric_hessian

    run = _setup(expression, values, const, **options)
    setup = run.setup
    if math.prod(setup.out_shape) != 1:
        raise VariableError(
            f"the Hessian needs a one-element output; this one has shape {list(setup.out_shape)}; "
            "reduce it with sum(...) or mean(...), or use autograd-cli jacobian"
        )
    names = [n for n in setup.expression.variables if n in setup.differentiate]
    size = sum(math.prod(setup.shapes[n]) for n in names)
    if size * size > max_entries:
        raise LimitError(
            f"the Hessian would have {size * size} entries; the limit is {max_entries} "
            "(raise it with --max-entries)"
        )
    out = run.forward().out.reshape(())
    leaves = [run.leaves[n] for n in names]
    first = torch.autograd.grad(out, leaves, create_graph=True, allow_unused=True)
    autograd: dict[tuple[str, str], np.ndarray] = {}
    for a, g in zip(names, first, strict=True):
        shape_a = setup.shapes[a]
        table = {b: np.zeros((math.prod(shape_a), math.prod(setup.shapes[b]))) for b in names}
        if g is not None and g.requires_grad:
            flat = g.reshape(-1)
            for i in range(flat.numel()):
                second = torch.autograd.grad(flat[i], leaves, retain_graph=True, allow_unused=True)
                for b, h in zip(names, second, strict=True):
                    if h is not None:
                        table[b][i] = to_numpy(h).reshape(-1)
        for b in names:
            autograd[(a, b)] = table[b].reshape(shape_a + setup.shapes[b])
    functional = torch.autograd.functional.hessian(_forward_function(run, names), tuple(leaves))
    notes: list[str] = []
    model = _exact(run, notes, MAX_EXACT_HESSIAN_INPUTS)
    numbers = None
    if numeric or model is None:
        numbers = numeric_hessian(_numeric_forward(run), run.seen, names)
    exact: dict[Any, Any] = {}
    if model is not None:
        exact = _timed(
            run,
            notes,
            lambda: {
                (a, b): model.values_of(hessian_terms(model, a, b), run.seen)
                for a in names
                for b in names
            },
        )
        if not exact:
            model = None
            numbers = numeric_hessian(_numeric_forward(run), run.seen, names)
    blocks = []
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            cross = functional[i][j]  # a tuple of inputs gives a tuple of tuples
            if model is not None:
                expected, kinks, codes = exact[(a, b)]
            else:
                assert numbers is not None
                expected, kinks, codes = numbers[(a, b)], None, set()
            blocks.append(
                _block(
                    run,
                    f"{a},{b}",
                    autograd[(a, b)],
                    to_numpy(cross).reshape(autograd[(a, b)].shape),
                    "torch.autograd.functional.hessian",
                    expected,
                    kinks,
                    None if numbers is None or model is None else numbers[(a, b)],
                    model is not None,
                    kink_codes=codes,
                )
            )
    result = _result(run, "hessian", blocks, notes, model is not None, strict)
    return _recheck_in_float64(
        result,
        _diagnosis(run, model),
        compute_hessian,
        expression,
        run.seen,
        const=const,
        numeric=numeric,
        max_entries=max_entries,
        **options,
    )


def compute_order(
    expression: str,
    values: Mapping[str, Any],
    order: int,
    *,
    const: Iterable[str] = (),
    numeric: bool = False,
    strict: bool = False,
    **options: Any,
) -> DerivativeResult:
    """The K-th derivative of an elementwise expression per input, by differentiating
    ``K`` times with ``create_graph=True`` (``grad_outputs`` ones each time), against
    SymPy's ``diff(expr, x, K)``."""
    import torch

    from autogradcli.computation import to_numpy
    from autogradcli.evaluate import precise_value
    from autogradcli.numeric import numeric_derivative_with_error
    from autogradcli.symbolic import (
        SymbolicModel,
        diff,
        find_kinks,
        reduce_to_shape,
    )

    if not 1 <= order <= MAX_ORDER:
        raise VariableError(f"--order must be between 1 and {MAX_ORDER}, not {order}")
    run = _setup(expression, values, const, **options)
    setup = run.setup
    parsed = setup.expression
    nodes = [*(s.node for s in parsed.steps), parsed.root]
    reduced = any(isinstance(n, Call) and n.func in REDUCTIONS for r in nodes for n in walk(r))
    if not is_elementwise(parsed) or reduced:
        raise VariableError(
            "--order works on elementwise expressions (no sum, mean or matrix algebra); "
            "for second derivatives of any scalar output use autograd-cli hessian"
        )
    names = [n for n in parsed.variables if n in setup.differentiate]
    model = SymbolicModel(parsed, setup.shapes, setup.limits)
    env = {model.symbols[n]: v for n, v in run.seen.items()}
    blocks = []
    notes: list[str] = []
    derivatives: dict[str, str] = {}
    for n in names:
        g = run.forward().out
        leaf = run.leaves[n]
        for _ in range(order):
            if not g.requires_grad:
                g = torch.zeros_like(leaf)
                break
            (g,) = torch.autograd.grad(
                g, leaf, grad_outputs=torch.ones_like(g), create_graph=True, allow_unused=True
            )
            if g is None:
                g = torch.zeros_like(leaf)
                break
        autograd = to_numpy(g)
        derivative = diff(model.output.expr, model.symbols[n], order)
        derivatives[n] = str(derivative)
        with np.errstate(all="ignore"):
            full = precise_value(derivative, env, setup.out_shape)
            mask, codes = find_kinks(derivative, env, setup.out_shape)
        expected = reduce_to_shape(full, setup.shapes[n])
        kinks = reduce_to_shape(mask, setup.shapes[n], np.logical_or)
        numbers = rounding = None
        if numeric:
            f = _numeric_forward(run)

            def along(v: np.ndarray, name: str = n, f: Any = f) -> np.ndarray:
                return reduce_to_shape(
                    np.broadcast_to(f({**run.seen, name: v}), setup.out_shape), setup.shapes[name]
                )

            numbers, rounding = numeric_derivative_with_error(along, run.seen[n], order)
            if np.any(rounding > NUMERIC.atol):
                notes.append(
                    f"numeric check of {n}: differences of order {order} amplify float64 "
                    "rounding of the function's values; its tolerance is widened by up to "
                    f"{float(np.max(rounding)):.3g} (absolute)"
                )
        blocks.append(
            _block(run, n, autograd, None, "", expected, kinks, numbers, True, rounding, codes)
        )
    result = _result(run, f"order {order}", blocks, notes, True, strict)
    result.derivatives = derivatives
    return _recheck_in_float64(
        result,
        _diagnosis(run, model),
        compute_order,
        expression,
        run.seen,
        order,
        const=const,
        numeric=numeric,
        **options,
    )


def _diagnosis(run: Run, model: Any) -> Callable[[], Any]:
    """Where the forward pass went wrong (computed when a block needs a cause)."""
    from autogradcli.diagnose import forward_cause

    def diagnose() -> Any:
        if model is None:
            return None
        setup = run.setup
        return forward_cause(setup.expression, run.forward(), model, run.seen, setup.dtype)

    return diagnose


def _recheck_in_float64(
    result: DerivativeResult,
    diagnose: Callable[[], Any],
    compute: Callable[..., DerivativeResult],
    *args: Any,
    **options: Any,
) -> DerivativeResult:
    """The verdict of each block (verdict.py): where a low-precision block is outside its
    tolerance, the same inputs (as the dtype rounded them) run once more in float64
    (``compute(*args, **options)`` with float64 and its default tolerances); a block within
    the rounding bound whose float64 block agrees is ≈, any other is ✗ with its cause."""
    failing = [b for b in result.blocks if not b.check.agree]
    if not failing:
        return result
    high: dict[str, Block] = {}
    if result.dtype != "float64":
        options = {k: v for k, v in options.items() if k not in ("rtol", "atol", "strict")}
        high = {b.key: b for b in compute(*args, **{**options, "dtype": "float64"}).blocks}
    finite = all(bool(np.all(np.isfinite(v))) for v in result.values.values())
    forward = None
    if any(not b.check.within_bound or not high for b in failing):
        forward = diagnose()
    for block in failing:
        other = high.get(block.key)
        f64 = None if other is None or other.cross_agree is False else other.check
        block.verdict = settle(block.check, f64)
        if block.verdict == ROUNDING:
            assert f64 is not None
            block.cause = rounding_cause(block.check, f64, result.dtype, result.rounding_bound)
            block.cross_agree = None if block.cross_agree is None else True
            continue
        block.cause = check_cause(
            block.check,
            block.autograd,
            block.expected,
            None,
            dtype=result.dtype,
            forward=forward,
            float64=f64,
            inputs_finite=finite,
            kinks=block.kink_codes,
        )
    return result


def _result(
    run: Run,
    kind: str,
    blocks: list[Block],
    notes: list[str],
    exact: bool,
    strict: bool,
    rows: list[JacobianRow] | None = None,
) -> DerivativeResult:
    setup = run.setup
    for b in blocks:
        if b.check.excluded:
            where = f"{b.key}: " if len(blocks) > 1 else ""
            notes.append(where + kink_note(b.kink_codes, b.check.excluded, b.check.excluded_values))
    return DerivativeResult(
        kind=kind,
        expression=setup.expression.text,
        device=str(run.device),
        dtype=setup.dtype,
        rtol=setup.rtol if exact else max(setup.rtol, NUMERIC.rtol),
        atol=setup.atol if exact else max(setup.atol, NUMERIC.atol),
        output_shape=list(setup.out_shape),
        values=run.seen,
        rounding_bound=_relative(run),
        strict=strict,
        seed=setup.random.seed if setup.random.used else None,
        blocks=blocks,
        rows=rows or [],
        notes=list(dict.fromkeys(notes)),
        expected_by="SymPy" if exact else "numeric",
    )


__all__ = ["Limits", "compute_hessian", "compute_jacobian", "compute_order"]
