"""The chain rule as PyTorch runs it: hooks on every node of the backward graph record
the gradient arriving at the node and the gradient it sends to each input; SymPy says
what each should be.

For an operation ``f(a, b)`` the gradient leaving to ``a`` is the gradient arriving at
``f`` times SymPy's local derivative ``∂f/∂a`` (summed back to ``a``'s shape where ``a``
was broadcast). The gradient arriving at ``f`` is checked against SymPy's derivative of
the whole output with respect to that intermediate tensor (the tensor is cut out of the
expression and made an input of its own), so each number is checked on its own, not
only as part of a product.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp
import torch
from torch.autograd.graph import get_gradient_edge

from autogradcli.compare import compare
from autogradcli.computation import Trace, to_numpy
from autogradcli.errors import LimitError
from autogradcli.evaluate import precise_value
from autogradcli.expression import (
    PY_BINARY,
    Binary,
    Call,
    Name,
    Node,
    Num,
    Unary,
    cut,
    infer_shape,
    is_full_reduction,
    operands,
    unparse,
)
from autogradcli.graph import Owner, label_of, owners
from autogradcli.result import Explanation, Flow, NodeStep, VjpCheck
from autogradcli.symbolic import (
    Expected,
    diff,
    find_kinks,
    reduce_to_shape,
)
from autogradcli.vocabulary import CONSTANTS, FUNCTIONS

MAX_NODES = 128  # nodes of the backward graph, checked before backward() runs
MAX_JACOBIAN_ROWS = 64
MAX_JACOBIAN_ENTRIES = 4096


@dataclass
class Record:
    """What one node's hook saw: the gradients it received and sent."""

    fn: Any
    arriving: list[np.ndarray | None]
    leaving: list[np.ndarray | None]


@dataclass
class Recorder:
    """Hooks on every node reachable from the output; ``order`` is the order they ran."""

    records: dict[int, Record] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)
    handles: list[Any] = field(default_factory=list)
    held: list[Any] = field(default_factory=list)

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()


def attach(out: torch.Tensor) -> Recorder:
    """Register a hook on each node of ``out``'s graph (call before ``backward``)."""
    recorder = Recorder()
    if not out.requires_grad:
        return recorder
    seen: set[int] = set()
    stack = [get_gradient_edge(out).node]  # grad_fn, or AccumulateGrad for a leaf output
    while stack:
        fn = stack.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        recorder.held.append(fn)
        recorder.handles.append(fn.register_hook(_hook(recorder, fn)))
        stack.extend(nxt for nxt, _ in fn.next_functions if nxt is not None)
    if len(seen) > MAX_NODES:
        recorder.remove()
        raise LimitError(
            f"--explain covers backward graphs of up to {MAX_NODES} nodes; this one has "
            f"{len(seen)}; explain a smaller expression (or see it with autograd-cli graph)"
        )
    return recorder


def _hook(recorder: Recorder, fn: Any) -> Any:
    def hook(grad_inputs: tuple[Any, ...], grad_outputs: tuple[Any, ...]) -> None:
        recorder.order.append(id(fn))
        recorder.records[id(fn)] = Record(
            fn,
            arriving=[None if g is None else to_numpy(g) for g in grad_outputs],
            leaving=[None if g is None else to_numpy(g) for g in grad_inputs],
        )

    return hook


def explain(
    run: Any,
    trace: Trace,
    recorder: Recorder,
    model: Any,
    expected: Expected,
    first_grads: dict[str, np.ndarray],
) -> Explanation:
    """Pair each recorded node with the operation that made it and check its numbers."""
    setup = run.setup
    table = owners(setup.expression, trace)
    leaf_of = {id(t): name for name, t in run.leaves.items()}
    steps: list[NodeStep] = []
    for key in recorder.order:
        record = recorder.records[key]
        variable = getattr(record.fn, "variable", None)
        if variable is not None:
            steps.append(_leaf_step(len(steps) + 1, record, leaf_of[id(variable)], expected, setup))
        elif key in table:
            group = _group(record.fn, table, recorder)
            steps.append(
                _operation_step(len(steps) + 1, table[key], group, trace, run, model, recorder)
            )
    explanation = Explanation(steps)
    if run.weight_tensor is not None:
        explanation.weights = run.seen_weights
        explanation.vjp = _vjp_checks(run, model, first_grads)
    return explanation


def _leaf_step(index: int, record: Record, name: str, expected: Expected, setup: Any) -> NodeStep:
    arriving = record.arriving[0]
    assert arriving is not None
    check = compare(arriving, expected.grads[name], setup.rtol, setup.atol, expected.kinks[name])
    return NodeStep(
        index,
        [type(record.fn).__name__],
        name,
        arriving,
        expected.grads[name],
        check.agree,
        leaf=name,
    )


def _group(top: Any, table: dict[int, Owner], recorder: Recorder) -> list[Any]:
    """``top`` and the nodes PyTorch made inside the same operation (2/x: Mul, Reciprocal)."""
    group, stack = [top], [top]
    while stack:
        for nxt, _ in stack.pop().next_functions:
            inside = nxt is not None and id(nxt) not in table and not hasattr(nxt, "variable")
            if inside and nxt not in group and id(nxt) in recorder.records:
                group.append(nxt)
                stack.append(nxt)
    return group


def _targets(fn: Any, tensor: torch.Tensor) -> bool:
    """Whether the graph edge to ``fn`` leads to ``tensor``."""
    if tensor.grad_fn is not None:
        return fn is tensor.grad_fn
    return getattr(fn, "variable", None) is tensor


def _operation_step(
    index: int,
    owner: Owner,
    group: list[Any],
    trace: Trace,
    run: Any,
    model: Any,
    recorder: Recorder,
) -> NodeStep:
    setup = run.setup
    node = owner.node
    top = recorder.records[id(group[0])]
    arriving = top.arriving[0]
    assert arriving is not None

    # SymPy: the output's derivative with respect to this intermediate tensor.
    target = f"@{index}"
    value = model.value(node, run.seen)
    sub = type(model)(cut(setup.expression, node, target), {**setup.shapes, target: value.shape})
    cut_expected = sub.evaluate({**run.seen, target: value}, run.seen_weights, frozenset({target}))
    want = cut_expected.grads[target]
    arriving_kinks = cut_expected.kinks[target]
    check = compare(arriving, want, setup.rtol, setup.atol, arriving_kinks)
    step = NodeStep(
        index,
        [type(fn).__name__ for fn in group],
        owner.label,
        arriving,
        want,
        check.agree,
    )

    edges = []  # (graph node it leads to, gradient PyTorch sent along it)
    ids = {id(fn) for fn in group}
    for fn in group:
        record = recorder.records[id(fn)]
        for position, (nxt, _) in enumerate(fn.next_functions):
            if nxt is not None and id(nxt) not in ids:
                edges.append((nxt, record.leaving[position]))

    inputs = operands(node)
    values = [trace.value_of(op) for op in inputs]
    tracked = [k for k, v in enumerate(values) if isinstance(v, torch.Tensor) and v.requires_grad]
    same_tensor = len(tracked) == 2 and values[tracked[0]] is values[tracked[1]]
    structural = _is_structural(node)
    if structural:
        sent_back = _structural_vjp(node, inputs, values, want, model, run)
    else:
        locals_ = _local_derivatives(node, inputs, values, setup.shapes, setup.limits)
        elementwise = infer_shape(node, setup.shapes, setup.limits)
    for rank, k in enumerate(tracked):
        if same_tensor and len(edges) == 2:
            sent = [edges[rank][1]]
        else:
            sent = [g for fn, g in edges if _targets(fn, values[k])]
        grads = [g for g in sent if g is not None]
        if not grads:
            continue
        grad = grads[0] if len(grads) == 1 else np.sum(grads, axis=0)
        if structural:
            expected_grad, excluded = sent_back[k]
            flow_check = compare(grad, expected_grad, setup.rtol, setup.atol, excluded)
            step.flows.append(
                Flow(
                    label_of(inputs[k], setup.expression),
                    f"J{k + 1}ᵀ (component-wise)",
                    grad,
                    expected_grad,
                    flow_check.max_abs_error,
                    flow_check.agree,
                )
            )
            continue
        derivative, display = locals_[k]
        env = {sym: model.value(op, run.seen) for sym, op in _symbols(derivative, inputs)}
        shape = tuple(values[k].shape)
        spread = shape if is_full_reduction(node) else elementwise
        with np.errstate(all="ignore"):
            local = precise_value(
                derivative, env, np.broadcast_shapes(*map(np.shape, env.values()))
            )
            product = np.broadcast_to(want * local, np.broadcast_shapes(spread, want.shape))
            expected_grad = reduce_to_shape(product, shape)
        mask, _ = find_kinks(derivative, env, spread)
        mask = mask | np.broadcast_to(arriving_kinks, spread)
        excluded = reduce_to_shape(mask, shape, np.logical_or)
        flow_check = compare(grad, expected_grad, setup.rtol, setup.atol, excluded)
        step.flows.append(
            Flow(
                label_of(inputs[k], setup.expression),
                display,
                grad,
                expected_grad,
                flow_check.max_abs_error,
                flow_check.agree,
            )
        )
    return step


def _is_structural(node: Node) -> bool:
    """Matrix products and tensor functions other than a full sum/mean."""
    if isinstance(node, Binary):
        return node.op == "@"
    return isinstance(node, Call) and node.func not in FUNCTIONS and not is_full_reduction(node)


def _structural_vjp(
    node: Node, inputs: list[Node], values: list[Any], want: np.ndarray, model: Any, run: Any
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """For an operation over whole tensors: SymPy's ``J_kᵀ g`` for each tensor input k,
    with ``g`` SymPy's gradient arriving at the node (component-wise, one symbol per
    element of the operation's own inputs)."""
    from autogradcli.components import ComponentModel
    from autogradcli.expression import Expression

    names = [f"_{k}" for k in range(len(inputs))]
    swapped = [Name(n) for n in names]
    if isinstance(node, Binary):
        local: Node = Binary(node.op, swapped[0], swapped[1])
    else:
        assert isinstance(node, Call)
        other = swapped[1] if node.other is not None else None
        local = Call(node.func, swapped[0], node.dim, other)
    tensors = [k for k, v in enumerate(values) if isinstance(v, torch.Tensor)]
    shapes = {names[k]: tuple(values[k].shape) for k in tensors}
    numbers = {names[k]: model.value(inputs[k], run.seen) for k in tensors}
    piece = Expression(unparse(local), local, tuple(names[k] for k in tensors))
    sub = ComponentModel(piece, shapes, run.setup.limits)
    e = sub.evaluate(numbers, want, frozenset(names[k] for k in tensors))
    return {k: (e.grads[names[k]], e.kinks[names[k]]) for k in tensors}


def _symbols(derivative: sp.Expr, inputs: list[Node]) -> list[tuple[sp.Symbol, Node]]:
    """The placeholder symbols in ``derivative`` and the operands they stand for."""
    return [(s, inputs[int(s.name[1:])]) for s in derivative.free_symbols if s.name[0] == "_"]


def _local_derivatives(
    node: Node, inputs: list[Node], values: list[Any], shapes: Any, limits: Any
) -> dict[int, tuple[sp.Expr, str]]:
    """For each tensor input k: SymPy's ``∂node/∂input_k`` (in placeholder symbols ``_k``)
    and its text in terms of the inputs' names."""
    placeholders = [
        sp.Symbol(f"_{k}", real=True) if isinstance(v, torch.Tensor) else _number(op, v)
        for k, (op, v) in enumerate(zip(inputs, values, strict=True))
    ]
    if is_full_reduction(node):
        count = math.prod(infer_shape(node.arg, shapes, limits))
        local = sp.Integer(1) if node.func == "sum" else sp.Rational(1, max(count, 1))
        return {0: (local, str(local))}
    if isinstance(node, Binary):
        left, right = placeholders
        expr = PY_BINARY[node.op](left, right)
    elif isinstance(node, Unary):
        expr = -placeholders[0] if node.op == "-" else placeholders[0]
    else:
        assert isinstance(node, Call)
        expr = FUNCTIONS[node.func].sympy(sp, placeholders[0])
    shown: dict[sp.Symbol, sp.Symbol] = {}
    compound: list[str] = []
    for k, (op, v) in enumerate(zip(inputs, values, strict=True)):
        if isinstance(v, torch.Tensor):
            twin = next(
                (shown[placeholders[j]] for j in range(k) if values[j] is v), None
            )  # the same tensor twice (y*y) shows one name
            shown[placeholders[k]] = twin or sp.Symbol(_display(op), real=True)
            if str(shown[placeholders[k]]).startswith("("):
                compound.append(str(shown[placeholders[k]]))
    result = {}
    for k, value in enumerate(values):
        if isinstance(value, torch.Tensor):
            derivative = diff(expr, placeholders[k])
            text = str(derivative.subs(shown, simultaneous=True))
            for name in compound:  # Heaviside((x - 1)) -> Heaviside(x - 1)
                text = text.replace(f"({name})", name)
            result[k] = (derivative, text)
    return result


def _number(op: Node, value: Any) -> sp.Expr:
    if isinstance(op, Name) and op.id in CONSTANTS:
        return getattr(sp, CONSTANTS[op.id][1])
    if isinstance(op, Num) and isinstance(op.value, int):
        return sp.Integer(op.value)
    return sp.Integer(value) if isinstance(value, int) else sp.Float(value)


def _display(op: Node) -> str:
    from autogradcli.expression import unparse

    text = op.id if isinstance(op, Name) else unparse(op)
    return text if isinstance(op, (Name, Call, Num)) else f"({text})"


def _vjp_checks(run: Any, model: Any, first_grads: dict[str, np.ndarray]) -> list[VjpCheck]:
    """``out.backward(w)`` is ``J^T w``: SymPy's Jacobian times w, and autograd's gradient of
    ``sum(out * w)``, beside the ``.grad`` backward(w) gave."""
    setup = run.setup
    names = [n for n in setup.expression.variables if n in setup.differentiate]
    weights = run.seen_weights
    rows = int(np.prod(setup.out_shape))
    sizes = {n: int(np.prod(setup.shapes[n])) for n in names}
    show = rows <= MAX_JACOBIAN_ROWS and all(
        rows * size <= MAX_JACOBIAN_ENTRIES for size in sizes.values()
    )
    jacobians: dict[str, np.ndarray | None] = {n: None for n in names}
    if show:
        for n in names:
            jacobians[n] = np.zeros((rows, sizes[n]))
        for row in range(rows):
            one_hot = np.zeros(rows)
            one_hot[row] = 1.0
            e = model.evaluate(
                run.seen, one_hot.reshape(setup.out_shape), frozenset(names), exact_zeros=True
            )
            for n in names:
                jacobians[n][row] = e.grads[n].reshape(-1)  # type: ignore[index]
    vjp = model.evaluate(run.seen, weights, frozenset(names))

    trace = run.forward()  # a fresh graph: autograd's gradient of the scalar sum(out * w)
    loss = torch.sum(trace.out * run.weights())
    grads = torch.autograd.grad(loss, [run.leaves[n] for n in names], allow_unused=True)
    checks = []
    for n, g in zip(names, grads, strict=True):
        sum_grad = np.zeros(setup.shapes[n]) if g is None else to_numpy(g)
        jac, shape = jacobians[n], setup.shapes[n]
        jtw = vjp.grads[n] if jac is None else (jac.T @ weights.reshape(-1)).reshape(shape)
        agree = all(
            compare(a, b, setup.rtol, setup.atol, vjp.kinks[n]).agree
            for a, b in ((first_grads[n], jtw), (sum_grad, jtw), (vjp.grads[n], jtw))
        )
        checks.append(VjpCheck(n, jac, jtw, first_grads[n], sum_grad, agree))
    return checks
