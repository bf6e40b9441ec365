"""Why a check failed, named from what the numbers show (``verdict.CAUSES``).

The forward pass is replayed node by node against SymPy's precise value of each node: the
first operation that went wrong while its operands were still right is where precision
was lost, a value overflowed, or PyTorch left the real domain. What the backward pass did
is read from the gradients themselves (NaN against a finite reference, and so on).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from autogradcli.errors import AutogradCliError
from autogradcli.lang.text import unparse
from autogradcli.lang.tree import Binary, Call, Name, Node, Num, Program, operands, walk
from autogradcli.policy.compare import Comparison
from autogradcli.policy.verdict import MAX_RELATIVE, UNIT_ROUNDOFF, Cause

# A node's value counts as wrong past this relative error (its operands being right).
LOSS_UNITS = 256
FEEDS = {"log": "log", "log2": "log", "log10": "log", "sqrt": "sqrt"}


def largest(dtype: str) -> float:
    """The dtype's largest finite number."""
    import torch

    return float(torch.finfo(getattr(torch, dtype)).max)


@dataclass(frozen=True, eq=False)
class Replay:
    """The forward pass being replayed: the program, its trace (node values), the model
    that gives each node's precise value, the inputs as the dtype rounded them, the dtype."""

    expression: Program
    trace: Any
    model: Any
    seen: dict[str, np.ndarray]
    dtype: str


class Problem(NamedTuple):
    """What is wrong with one node's value (``kind``) at its first such element (flat
    ``index``), with the node's values in the dtype and in exact arithmetic."""

    kind: str
    index: int
    node: Node
    actual: np.ndarray
    exact: np.ndarray
    huge: np.ndarray


def forward_cause(
    expression: Program, trace: Any, model: Any, seen: dict[str, np.ndarray], dtype: str
) -> Cause | None:
    """The first operation of the forward pass whose ``dtype`` value is wrong (overflow,
    precision loss, NaN where the math is defined) while its operands are right."""
    import torch

    from autogradcli.torchside.build import to_numpy

    replay = Replay(expression, trace, model, seen, dtype)
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
        origins.append(_cause(Problem(kind, index, node, actual, exact, huge), replay))
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


def _cause(problem: Problem, replay: Replay) -> Cause:
    """The cause a node's ``problem`` names, read from its operands and float64."""
    kind, index, node, actual, exact, huge = problem
    dtype = replay.dtype
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
    if not np.isfinite(value) and np.isfinite(truth):  # right operands, a result in range
        return Cause("overflow", {**data, "max": largest(dtype), "inside": True})
    data["kind"] = _loss_kind(node, value)
    rounded = _rounded_operand(node, replay, index)
    if rounded is not None:
        data.update(rounded)
    elif _is_function(node):
        wide = _float64_value(node, replay, index)
        if wide is not None and _off(wide, truth, "float64"):  # float64 is as far off
            return Cause(
                "mismatch",
                {**data, "float64_value": wide, "float64_error": abs(wide - truth)},
            )
    fed = _fed_to(node, replay.expression)
    if fed is not None:
        data["fed_to"] = fed
    return Cause("precision_loss", data)


def _is_function(node: Node) -> bool:
    """An elementwise function of the vocabulary (not an operator, not a reduction, which
    can cancel): its value is wrong with right operands only if its definition differs."""
    from autogradcli.lang.vocabulary import OPS

    return isinstance(node, Call) and node.func in OPS and OPS[node.func].elementwise


def _off(value: float, exact: float, dtype: str) -> bool:
    """Whether ``value`` is further from ``exact`` than ``LOSS_UNITS`` roundings."""
    limit = min(LOSS_UNITS * UNIT_ROUNDOFF[dtype], MAX_RELATIVE)
    return bool(not abs(value - exact) <= limit * abs(exact))


def _float64_value(node: Node, replay: Replay, index: int) -> float | None:
    """The node's value when the same inputs run in float64 (the trace itself in float64)."""
    import torch

    from autogradcli.torchside.build import forward, to_numpy

    trace = replay.trace
    if replay.dtype != "float64":
        env = {n: torch.tensor(v, dtype=torch.float64) for n, v in replay.seen.items()}
        try:
            with torch.no_grad():
                trace = forward(replay.expression, env, torch.float64, torch.device("cpu"))
        except (RuntimeError, ValueError, TypeError, AutogradCliError):
            return None  # no float64 evidence: the dtype's cause stands
    value = trace.values.get(id(node))
    if not isinstance(value, torch.Tensor):
        return None
    flat = to_numpy(value).reshape(-1)
    return float(flat[min(index, flat.size - 1)])


def _loss_kind(node: Node, value: float) -> str:
    if isinstance(node, Binary) and node.op in "+-":
        return "cancellation"
    if value == 0:
        return "rounded_to_zero"
    if not np.isfinite(value):
        return "infinite"
    return "inexact"


def _rounded_operand(node: Node, replay: Replay, index: int) -> dict[str, Any] | None:
    """An operand the dtype rounded to exactly 0 or ±1 while its exact value is not."""
    import torch

    from autogradcli.torchside.build import to_numpy

    trace, model, seen = replay.trace, replay.model, replay.seen
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


def _fed_to(node: Node, expression: Program) -> str | None:
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


@dataclass(frozen=True, eq=False)
class Compared:
    """A comparison and the numbers it compared (``huge``: a reference past float64's
    range; None: none)."""

    check: Comparison
    actual: np.ndarray
    expected: np.ndarray
    huge: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class Evidence:
    """What else a failed check's cause is read from: the dtype, the forward pass's cause
    (None: it went right), float64's comparison (None: the run is float64), whether every
    input was finite, the kinks on the path, and float64's own rounding ``noise`` (a
    float64 run only; ``float64_noise``)."""

    dtype: str
    forward: Cause | None = None
    float64: Comparison | None = None
    inputs_finite: bool = True
    kinks: AbstractSet[str] = frozenset()
    noise: np.ndarray | None = None


def check_cause(compared: Compared, evidence: Evidence) -> Cause:
    """The cause of a failed check, from what its numbers and the forward pass show.
    ``evidence.noise``: for a float64 run, the bound on its own rounding noise; an error
    within it is float64's cancellation (precision loss), not a mismatch."""
    check, huge = compared.check, compared.huge
    dtype, forward, float64 = evidence.dtype, evidence.forward, evidence.float64
    kinks, noise = evidence.kinks, evidence.noise
    if check.nonfinite_at_kink:
        return Cause(
            "non_differentiable",
            {"elements": check.nonfinite_at_kink, "points": sorted(kinks), "dtype": dtype},
        )
    if forward is not None:
        return forward
    if not evidence.inputs_finite:
        return Cause("nonfinite_input", {"dtype": dtype})
    actual, expected = np.broadcast_arrays(
        np.asarray(compared.actual), np.asarray(compared.expected)
    )
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
        if noise is not None and _within_noise(actual, expected, noise):
            return Cause(
                "precision_loss",
                {
                    "node": "backward",
                    "kind": "float64_noise",
                    "dtype": dtype,
                    "error": check.max_abs_error,
                    "relative": check.max_relative_error,
                    "noise": float(np.max(np.broadcast_to(noise, actual.shape))),
                },
            )
        data = {"float64_error": check.max_abs_error, "dtype": dtype}
        return Cause("mismatch", {**data, "stable": True} if noise is not None else data)
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


# Rounded operations allowed to each number autograd adds up in float64's backward pass.
NOISE_STEPS = 16


def float64_noise(session: Any) -> dict[str, np.ndarray]:
    """A bound on float64's rounding noise in each ``.grad`` (elementwise, one pass): the
    backward pass is run again in float64 with a hook on every node, and the magnitudes of
    the contributions autograd adds into each leaf (``Σ|gᵢ|``, which a cancellation makes
    far larger than ``|Σ gᵢ|``) are scaled by the largest such ratio at any tensor used
    more than once on the way, and by ``NOISE_STEPS`` unit roundoffs."""
    import torch

    from autogradcli.torchside import build

    bound = session.bound
    cpu = torch.device("cpu")
    leaves = {
        n: build.make_leaf(session.seen[n], torch.float64, cpu, n in bound.differentiate)
        for n in bound.program.variables
    }
    trace = build.forward(bound.program, leaves, torch.float64, cpu)
    weights = None
    if session.weight_tensor is not None:
        weights = torch.as_tensor(session.seen_weights, dtype=torch.float64)
    sums: dict[Any, list[Any]] = {}  # receiving node -> [Σ g, Σ |g|]

    def record(node: Any) -> Callable[..., None]:
        def hook(grad_inputs: Any, grad_outputs: Any) -> None:
            for (receiver, _), g in zip(node.next_functions, grad_inputs, strict=False):
                if receiver is None or g is None:
                    continue
                g = g.detach()
                if receiver in sums:
                    total, size = sums[receiver]
                    sums[receiver] = [total + g, size + g.abs()]
                else:
                    sums[receiver] = [g, g.abs()]

        return hook

    handles, stack, known = [], [trace.out.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or node in known:
            continue
        known.add(node)
        handles.append(node.register_hook(record(node)))
        stack.extend(f for f, _ in node.next_functions)
    try:
        build.backward(trace.out, weights)
    finally:
        for handle in handles:
            handle.remove()
    ratio = 1.0
    found: dict[str, np.ndarray] = {}
    for receiver, (total, size) in sums.items():
        leaf = getattr(receiver, "variable", None)
        if leaf is not None:
            name = next((n for n, t in leaves.items() if t is leaf), None)
            if name is not None:
                found[name] = build.to_numpy(size)
            continue
        with np.errstate(all="ignore"):
            amplified = build.to_numpy(size) / np.abs(build.to_numpy(total))
        amplified = amplified[np.isfinite(amplified)]
        if amplified.size:
            ratio = max(ratio, float(amplified.max()))
    unit = NOISE_STEPS * 2.0**-53 * ratio
    return {
        n: unit * np.broadcast_to(found.get(n, np.zeros(bound.shapes[n])), bound.shapes[n])
        for n in bound.names
    }


def _within_noise(actual: np.ndarray, expected: np.ndarray, noise: np.ndarray) -> bool:
    """Whether every error is within the noise there."""
    with np.errstate(all="ignore"):
        error = np.abs(actual - expected)
        noise = np.broadcast_to(noise, error.shape)
        if not (np.isfinite(error).all() and np.isfinite(noise).all()):
            return False
        return bool(np.all(error <= noise))
