"""The Python API: parse, run autograd, differentiate with SymPy, compare, return a result.

>>> from autogradcli.gradient import compute_gradient
>>> r = compute_gradient("2*x**4 + x**3 + 3*x**2 + 5*x + 1", {"x": 2})
>>> float(r.output), float(r.variables["x"].grad), r.agree
(63.0, 93.0, True)
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from autogradcli.compare import TOLERANCES, compare
from autogradcli.devices import check_dtype
from autogradcli.errors import ShapeError, UnknownVariableError, VariableError
from autogradcli.expression import Expression, Limits, infer_shape, parse_expression
from autogradcli.result import GradResult, PassResult, VariableResult
from autogradcli.values import RandomSource, read_value

NON_SCALAR = (
    "the output has shape {shape}, and PyTorch's backward() needs an external gradient for it "
    "(grad can be implicitly created only for scalar outputs); pass --weights ones (or weights "
    "of that shape), or wrap the expression in sum(...) or mean(...)"
)


def check_names(
    expression: Expression, values: Mapping[str, Any], const: Iterable[str] = ()
) -> None:
    """Every variable has a value; every value and ``const`` names a variable."""
    variables = list(expression.variables)
    for name in [*values, *const]:
        if name not in variables:
            raise UnknownVariableError(name, variables)
    for name in variables:
        if values.get(name) is None:
            raise VariableError(
                f"variable '{name}' needs a value, e.g. --{name} 2 (or --var {name}=2)"
            )


def compute_gradient(
    expression: str,
    values: Mapping[str, Any],
    *,
    weights: Any = None,
    repeat: int = 1,
    const: Iterable[str] = (),
    device: str = "auto",
    dtype: str = "float32",
    rtol: float | None = None,
    atol: float | None = None,
    seed: int | None = None,
    limits: Limits | None = None,
) -> GradResult:
    """Gradients of ``expression`` at ``values`` by autograd, checked against SymPy.

    ``values`` maps each variable to a value (text such as ``"ones(2,2)"``, a number, a
    list or an array); a ``None`` value counts as missing. ``weights`` is the external
    gradient for a non-scalar output: a value, ``"ones"``, or a variable's name.
    """
    limits = limits or Limits()
    const = list(dict.fromkeys(const))
    parsed = parse_expression(expression, limits, given=frozenset(values))
    check_names(parsed, values, const)
    if repeat < 1:
        raise VariableError(f"--repeat must be at least 1, not {repeat}")
    check_dtype(dtype)
    default_rtol, default_atol = TOLERANCES[dtype]
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    seed = secrets.randbelow(2**31) if seed is None else seed
    random = RandomSource(seed, dtype)

    arrays = {name: read_value(values[name], limits, random) for name in parsed.variables}
    shapes = {name: a.shape for name, a in arrays.items()}
    out_shape = infer_shape(parsed.root, shapes, limits)
    weight_array = _weights(weights, arrays, out_shape, limits, random)
    differentiate = frozenset(n for n in parsed.variables if n not in const)
    if not differentiate:
        raise VariableError(
            "nothing to differentiate: the expression has no variable that requires grad"
            + (" (all are --const)" if parsed.variables else "; add one, e.g. 2*x with --x 3")
        )

    # Everything above is cheap validation; torch and sympy load only from here on.
    from autogradcli import computation
    from autogradcli.devices import resolve_device, resolve_dtype
    from autogradcli.symbolic import SymbolicModel

    torch_dtype = resolve_dtype(dtype)
    torch_device = resolve_device(device)
    leaves = {
        name: computation.make_leaf(arrays[name], torch_dtype, torch_device, name in differentiate)
        for name in parsed.variables
    }
    weight_tensor = (
        None
        if weight_array is None
        else computation.make_leaf(weight_array, torch_dtype, torch_device, False)
    )
    # SymPy sees the inputs as autograd saw them: rounded to --dtype, then widened to float64.
    seen = {name: computation.to_numpy(leaf) for name, leaf in leaves.items()}
    seen_weights = (
        np.ones(out_shape) if weight_tensor is None else computation.to_numpy(weight_tensor)
    )
    out = None
    snapshots: list[dict[str, np.ndarray]] = []
    for _ in range(repeat):
        out = computation.forward(parsed.root, leaves, torch_dtype, torch_device)
        # A fresh copy each pass: backward may hand the weights tensor itself to a leaf's .grad
        # (sum of a 0-d input), and later passes would then accumulate into the weights.
        computation.backward(out, None if weight_tensor is None else weight_tensor.clone())
        snapshots.append({n: computation.to_numpy(leaves[n].grad) for n in differentiate})
    assert out is not None
    model = SymbolicModel(parsed, shapes, limits)
    expected = model.evaluate(seen, seen_weights, differentiate)

    output = computation.to_numpy(out)
    output_check = compare(output, expected.output, rtol, atol)
    passes = []
    for index, grads in enumerate(snapshots, start=1):
        want = {n: index * expected.grads[n] for n in differentiate}
        agree = all(
            compare(grads[n], want[n], rtol, atol, expected.kinks[n]).agree for n in differentiate
        )
        passes.append(PassResult(index, grads, want, agree))

    variables = {}
    for name in parsed.variables:
        result = VariableResult(name, seen[name], requires_grad=name in differentiate)
        if name in differentiate:
            final, want = snapshots[-1][name], passes[-1].expected[name]
            check = compare(final, want, rtol, atol, expected.kinks[name])
            result.grad, result.expected = final, want
            result.derivative = model.derivative_text(name)
            result.max_abs_error, result.agree = check.max_abs_error, check.agree
            result.notes = _notes(expected.kink_notes[name], check.excluded, want)
        variables[name] = result

    return GradResult(
        expression=expression,
        device=str(torch_device),
        dtype=dtype,
        rtol=rtol,
        atol=atol,
        output=output,
        output_expected=expected.output,
        output_max_abs_error=output_check.max_abs_error,
        output_agree=output_check.agree,
        variables=variables,
        passes=passes,
        weights=None if weight_tensor is None else seen_weights,
        seed=seed if random.used else None,
    )


def _weights(
    spec: Any,
    arrays: dict[str, np.ndarray],
    out_shape: tuple[int, ...],
    limits: Limits,
    random: RandomSource,
) -> np.ndarray | None:
    """The external gradient as an array of the output's shape, or None for backward()."""
    if spec is None:
        if int(np.prod(out_shape)) != 1:
            raise ShapeError(NON_SCALAR.format(shape=list(out_shape)))
        return None
    if isinstance(spec, str) and spec.strip() == "ones":
        return np.ones(out_shape)
    if isinstance(spec, str) and spec.strip() in arrays:
        weights = arrays[spec.strip()]
    else:
        weights = read_value(spec, limits, random)
    if weights.shape != out_shape:
        raise ShapeError(
            f"--weights has shape {list(weights.shape)} but the output has shape "
            f"{list(out_shape)}; they must be the same (or use --weights ones)"
        )
    return weights


def _notes(kink_notes: set[str], excluded: int, expected: np.ndarray) -> list[str]:
    notes = []
    if excluded:
        for note in sorted(kink_notes):
            notes.append(f"{note}; {excluded} element(s) at that point are left out of the check")
    with np.errstate(all="ignore"):
        infinite, undefined = int(np.isinf(expected).sum()), int(np.isnan(expected).sum())
    if infinite:
        notes.append(f"the derivative is infinite at {infinite} element(s)")
    if undefined:
        notes.append(
            f"the derivative is undefined (NaN) at {undefined} element(s), "
            "outside the function's real domain"
        )
    return notes
