"""Why a check failed, named from what the numbers show (``verdict.CAUSES``).

The forward pass is replayed node by node against SymPy's precise value of each node: the
first operation that went wrong while its operands were still right is where precision
was lost, a value overflowed, or PyTorch left the real domain. What the backward pass did
is read from the gradients themselves (NaN against a finite reference, and so on).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autogradcli.lang.text import unparse
from autogradcli.lang.tree import Binary, Call, Expression, Name, Node, Num, operands, walk
from autogradcli.policy.compare import Comparison
from autogradcli.policy.verdict import MAX_RELATIVE, UNIT_ROUNDOFF, Cause

# A node's value counts as wrong past this relative error (its operands being right).
LOSS_UNITS = 256
FEEDS = {"log": "log", "log2": "log", "log10": "log", "sqrt": "sqrt"}


def largest(dtype: str) -> float:
    """The dtype's largest finite number."""
    import torch

    return float(torch.finfo(getattr(torch, dtype)).max)


def forward_cause(
    expression: Expression, trace: Any, model: Any, seen: dict[str, np.ndarray], dtype: str
) -> Cause | None:
    """The first operation of the forward pass whose ``dtype`` value is wrong (overflow,
    precision loss, NaN where the math is defined) while its operands are right."""
    import torch

    from autogradcli.torchside.build import to_numpy

    wrong: dict[int, bool] = {}
    steps = {s.name: s.node for s in expression.steps}
    origins: list[Cause] = []
    for key, node in trace.nodes.items():
        value = trace.values[key]
        if isinstance(node, Name):
            wrong[key] = node.id in steps and wrong.get(id(steps[node.id]), False)
            continue
        if not isinstance(value, torch.Tensor) or isinstance(node, Num):
            wrong[key] = False
            continue
        actual = to_numpy(value)
        exact, huge = model.value_range(node, seen)
        found = _problem(actual, exact, huge, dtype)
        wrong[key] = found is not None
        if found is None or any(wrong.get(id(op), False) for op in operands(node)):
            continue
        kind, index = found
        args = (kind, index, node, actual, exact, huge, expression, trace, model, seen, dtype)
        origins.append(_cause(*args))
    return max(origins, key=_harm, default=None)  # the first of the most harmful


def _harm(cause: Cause) -> int:
    """How surely an origin spoils the result: an overflow, or a value rounded to 0 (or an
    infinite one) that flows into log, sqrt or a division, beats a slightly wrong value."""
    data = cause.data
    if cause.code in ("overflow", "domain") or data.get("kind") == "infinite":
        return 2
    if "fed_to" not in data:
        return 0
    return 2 if data.get("value") == 0 else 1


def _problem(
    actual: np.ndarray, exact: np.ndarray, huge: np.ndarray, dtype: str
) -> tuple[str, int] | None:
    """What is wrong with a node's value (overflow, domain, loss) and its first element."""
    actual, exact = np.broadcast_arrays(actual, exact)
    huge = np.broadcast_to(huge, actual.shape)
    limit = min(LOSS_UNITS * UNIT_ROUNDOFF[dtype], MAX_RELATIVE)
    with np.errstate(all="ignore"):
        finite, defined = np.isfinite(actual), np.isfinite(exact)
        overflow = ~finite & ((defined & (np.abs(exact) > largest(dtype))) | huge)
        domain = np.isnan(actual) & defined
        off = np.abs(actual - exact) > limit * np.abs(exact)
        lost = defined & ~overflow & ~domain & (off | ~finite)
    for kind, mask in (("overflow", overflow), ("domain", domain), ("precision_loss", lost)):
        if mask.any():
            return kind, int(np.flatnonzero(mask.reshape(-1))[0])
    return None


def _cause(
    kind: str,
    index: int,
    node: Node,
    actual: np.ndarray,
    exact: np.ndarray,
    huge: np.ndarray,
    expression: Expression,
    trace: Any,
    model: Any,
    seen: dict[str, np.ndarray],
    dtype: str,
) -> Cause:
    actual, exact = np.broadcast_arrays(actual, exact)
    value, truth = float(actual.reshape(-1)[index]), float(exact.reshape(-1)[index])
    data: dict[str, Any] = {"node": unparse(node), "dtype": dtype, "value": value}
    data["exact"] = (
        "beyond float64" if np.broadcast_to(huge, actual.shape).reshape(-1)[index] else truth
    )
    if kind == "overflow":
        return Cause("overflow", {**data, "max": largest(dtype)})
    if kind == "domain":
        return Cause("domain", data)
    data["kind"] = _loss_kind(node, value)
    rounded = _rounded_operand(node, trace, model, seen, index)
    if rounded is not None:
        data.update(rounded)
    fed = _fed_to(node, expression)
    if fed is not None:
        data["fed_to"] = fed
    return Cause("precision_loss", data)


def _loss_kind(node: Node, value: float) -> str:
    if isinstance(node, Binary) and node.op in "+-":
        return "cancellation"
    if value == 0:
        return "rounded_to_zero"
    if not np.isfinite(value):
        return "infinite"
    return "inexact"


def _rounded_operand(
    node: Node, trace: Any, model: Any, seen: dict[str, np.ndarray], index: int
) -> dict[str, Any] | None:
    """An operand the dtype rounded to exactly 0 or ±1 while its exact value is not."""
    import torch

    from autogradcli.torchside.build import to_numpy

    for op in operands(node):
        value = trace.values.get(id(op))
        if not isinstance(value, torch.Tensor) or isinstance(op, Num):
            continue
        actual = to_numpy(value)
        exact = model.value(op, seen)
        actual, exact = np.broadcast_arrays(actual, exact)
        shape = np.broadcast_shapes(actual.shape, np.shape(trace.values[id(node)]))
        a = np.broadcast_to(actual, shape).reshape(-1)
        e = np.broadcast_to(exact, shape).reshape(-1)
        i = min(index, a.size - 1)
        if a[i] in (0.0, 1.0, -1.0) and e[i] != a[i]:
            return {
                "operand": unparse(op),
                "operand_value": float(a[i]),
                "operand_exact": float(e[i]),
            }
    return None


def _fed_to(node: Node, expression: Expression) -> str | None:
    """What the wrong value flows into next: log, sqrt or a division."""
    name = next((s.name for s in expression.steps if s.node is node), None)

    def refers(op: Node) -> bool:
        return op is node or (isinstance(op, Name) and op.id == name)

    for root in (*(s.node for s in expression.steps), expression.root):
        for parent in walk(root):
            for k, op in enumerate(operands(parent)):
                if not refers(op):
                    continue
                if isinstance(parent, Call) and parent.func in FEEDS:
                    return FEEDS[parent.func]
                if isinstance(parent, Binary) and parent.op == "/" and k == 1:
                    return "division"
                power = isinstance(parent, Binary) and parent.op == "**" and k == 0
                if power and isinstance(parent.right, Num) and parent.right.value < 0:
                    return "division"
    return None


def check_cause(
    check: Comparison,
    actual: np.ndarray,
    expected: np.ndarray,
    huge: np.ndarray | None,
    *,
    dtype: str,
    forward: Cause | None,
    float64: Comparison | None,
    inputs_finite: bool,
    kinks: set[str] = frozenset(),  # type: ignore[assignment]
) -> Cause:
    """The cause of a failed check, from what its numbers and the forward pass show."""
    if check.nonfinite_at_kink:
        return Cause(
            "non_differentiable",
            {"elements": check.nonfinite_at_kink, "points": sorted(kinks), "dtype": dtype},
        )
    if forward is not None:
        return forward
    if not inputs_finite:
        return Cause("nonfinite_input", {"dtype": dtype})
    actual, expected = np.broadcast_arrays(np.asarray(actual), np.asarray(expected))
    huge = np.zeros(actual.shape, bool) if huge is None else np.broadcast_to(huge, actual.shape)
    with np.errstate(all="ignore"):
        past = np.isfinite(expected) & (np.abs(expected) > largest(dtype))
        beyond = ~np.isfinite(actual) & (past | huge)
        nan = np.isnan(actual) & ~np.isnan(expected)
    if beyond.any():
        where = int(np.flatnonzero(beyond.reshape(-1))[0])
        exact = "beyond float64" if huge.reshape(-1)[where] else float(expected.reshape(-1)[where])
        return Cause(
            "overflow",
            {"node": "backward", "dtype": dtype, "exact": exact, "max": largest(dtype)},
        )
    if nan.any():
        return Cause("zero_times_inf", {"elements": int(nan.sum()), "dtype": dtype})
    if float64 is not None and not float64.agree:
        return Cause("mismatch", {"float64_error": float64.max_abs_error, "dtype": dtype})
    if float64 is None:
        return Cause("mismatch", {"float64_error": check.max_abs_error, "dtype": dtype})
    return Cause(
        "precision_loss",
        {
            "node": "backward",
            "kind": "beyond_bound",
            "dtype": dtype,
            "error": check.max_abs_error,
            "relative": check.max_relative_error,
            "float64_error": float64.max_abs_error,
        },
    )


def rounding_cause(check: Comparison, float64: Comparison, dtype: str, bound: float) -> Cause:
    """What a ≈ verdict rests on: the error, the bound, and float64's error."""
    return Cause(
        "rounding",
        {
            "dtype": dtype,
            "error": check.max_abs_error,
            "relative": check.max_relative_error,
            "bound": bound,
            "float64_error": float64.max_abs_error,
        },
    )
