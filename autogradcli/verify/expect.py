"""The author's expected gradients (``expect=``, ``--expect NAME=VALUE``): a student's
answer or an exercise key, checked against autograd's ``.grad`` and SymPy's gradient with the
run's tolerance. The case fails when either disagrees with it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from autogradcli.errors import VariableError
from autogradcli.lang.values import read_value
from autogradcli.results import Expectation, GradResult
from autogradcli.settings import Limits


def read_expectations(expect: Mapping[str, Any], names: list[str], limits: Limits) -> dict:
    """Each expected gradient as an array; a name must be a differentiated input."""
    found = {}
    for name, value in expect.items():
        if name not in names:
            raise VariableError("expect_unknown", name=name, names=names)
        found[name] = read_value(value, limits)
    return found


def with_expectations(result: GradResult, expected: Mapping[str, np.ndarray]) -> GradResult:
    """``result`` with each expectation compared to autograd's and SymPy's gradients."""
    checks = []
    for name, want in expected.items():
        variable = result.variables[name]
        grad, sympy = variable.grad, variable.expected
        value = _shaped(want, grad)
        if value is None:
            raise VariableError(
                "expect_shape", name=name, shape=list(np.shape(want)), grad=list(np.shape(grad))
            )
        checks.append(
            Expectation(
                name=name,
                value=value,
                autograd_agree=_close(grad, want, result),
                sympy_agree=sympy is not None and _close(sympy, want, result),
            )
        )
    return replace(result, expectations=tuple(checks))


def _shaped(want: np.ndarray, grad: np.ndarray | None) -> np.ndarray | None:
    """The expectation in the gradient's shape: the same number of elements, or one number."""
    if grad is None:
        return None
    if want.size == grad.size:
        return want.reshape(grad.shape).copy()
    if want.size == 1:
        return np.full(grad.shape, float(want.reshape(-1)[0]))
    return None


def _close(actual: np.ndarray, want: np.ndarray, result: GradResult) -> bool:
    with np.errstate(all="ignore"):
        return bool(np.all(np.isclose(actual, want, rtol=result.rtol, atol=result.atol)))
