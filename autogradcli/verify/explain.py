"""``--explain``: the chain rule as PyTorch ran it, node by node, each number checked.

Hooks (``torchside.hooks``) record the gradient arriving at each node of the backward
graph and the gradient it sends to each input. For an operation ``f(a, b)`` the gradient
leaving to ``a`` is the arriving gradient times SymPy's local derivative ``∂f/∂a`` (summed
back to ``a``'s shape where ``a`` was broadcast). The arriving gradient is checked against
the reference's derivative of the whole output with respect to that intermediate tensor
(the tensor is cut out of the program and made an input of its own), so each number is
checked on its own, not only as part of a product.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp
import torch

from autogradcli.lang.analysis import is_full_reduction
from autogradcli.lang.shapes import infer_shape
from autogradcli.lang.text import unparse
from autogradcli.lang.tree import Binary, Call, Index, Name, Node, Num, Program, cut, operands
from autogradcli.lang.vocabulary import CONSTANTS, OPS
from autogradcli.policy.compare import Marks, compare
from autogradcli.reference import Model
from autogradcli.reference.bounds import precise_value
from autogradcli.reference.expected import Expected
from autogradcli.reference.terms import SympyTerms, diff, find_kinks, reduce_to_shape
from autogradcli.results import Explanation, Flow, NodeStep, VjpCheck
from autogradcli.torchside.build import Trace, to_numpy
from autogradcli.torchside.graph import Owner, label_of, owners
from autogradcli.torchside.hooks import Recorder
from autogradcli.torchside.run import Session

MAX_JACOBIAN_ROWS = 64
MAX_JACOBIAN_ENTRIES = 4096


def explain(
    session: Session,
    trace: Trace,
    recorder: Recorder,
    model: Model,
    expected: Expected,
    first_grads: dict[str, np.ndarray],
) -> Explanation:
    """Pair each recorded node with the operation that made it and check its numbers."""
    table = owners(session.bound.program, trace)
    leaf_of = {id(t): name for name, t in session.leaves.items()}
    tolerance = session.bound.settings.tolerance
    steps: list[NodeStep] = []
    for key in recorder.order:
        record = recorder.records[key]
        variable = getattr(record.fn, "variable", None)
        index = len(steps) + 1
        if variable is not None:
            name = leaf_of[id(variable)]
            arriving = record.arriving[0]
            assert arriving is not None
            check = compare(arriving, expected.grads[name], *tolerance, Marks(expected.kinks[name]))
            kind = type(record.fn).__name__
            label = name + "".join(
                f" · hook {h.text} runs first"
                for h in session.bound.program.hooks
                if h.target == name
            )
            steps.append(
                NodeStep(
                    index, (kind,), label, arriving, expected.grads[name], check.agree, (), name
                )
            )
        elif key in table:
            group = _group(record.fn, table, recorder)
            node = _Node(index, table[key], group, trace, session, model, recorder)
            steps.append(node.step())
    if session.weight_tensor is None:
        return Explanation(tuple(steps))
    vjp = _vjp_checks(session, model, first_grads)
    return Explanation(tuple(steps), session.seen_weights, tuple(vjp))


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


@dataclass
class _Node:
    """One operation's node (or group of nodes) of the backward pass, being checked."""

    index: int
    owner: Owner
    group: list[Any]
    trace: Trace
    session: Session
    model: Model
    recorder: Recorder

    def step(self) -> NodeStep:
        bound = self.session.bound
        arriving = self.recorder.records[id(self.group[0])].arriving[0]
        assert arriving is not None
        want, kinks = self.arriving_expected()
        check = compare(arriving, want, *bound.settings.tolerance, Marks(kinks))
        flows = tuple(self.flows(want, kinks))
        grad_fns = tuple(type(fn).__name__ for fn in self.group)
        return NodeStep(self.index, grad_fns, self.owner.label, arriving, want, check.agree, flows)

    def arriving_expected(self) -> tuple[np.ndarray, np.ndarray]:
        """The reference's derivative of the output with respect to this node's tensor."""
        node, session = self.owner.node, self.session
        bound, target = session.bound, f"@{self.index}"
        value = self.model.value(node, session.seen)
        shapes = {**bound.shapes, target: value.shape}
        sub = self.model.for_program(cut(bound.program, node, target), shapes)
        e = sub.evaluate({**session.seen, target: value}, session.seen_weights, frozenset({target}))
        return e.grads[target], e.kinks[target]

    def sent(self) -> list[tuple[Any, np.ndarray | None]]:
        """(graph node it leads to, gradient PyTorch sent along it), for edges leaving."""
        edges = []
        ids = {id(fn) for fn in self.group}
        for fn in self.group:
            record = self.recorder.records[id(fn)]
            for position, (nxt, _) in enumerate(fn.next_functions):
                if nxt is not None and id(nxt) not in ids:
                    edges.append((nxt, record.leaving[position]))
        return edges

    def flows(self, want: np.ndarray, kinks: np.ndarray) -> list[Flow]:
        node, bound = self.owner.node, self.session.bound
        inputs = operands(node)
        values = [self.trace.value_of(op) for op in inputs]
        tracked = [
            k for k, v in enumerate(values) if isinstance(v, torch.Tensor) and v.requires_grad
        ]
        same_tensor = len(tracked) == 2 and values[tracked[0]] is values[tracked[1]]
        edges = self.sent()
        expected = self.structural(inputs, values, want) if _is_structural(node) else None
        flows = []
        for rank, k in enumerate(tracked):
            if same_tensor and len(edges) == 2:
                sent = [edges[rank][1]]
            else:
                sent = [g for fn, g in edges if _targets(fn, values[k])]
            grads = [g for g in sent if g is not None]
            if not grads:
                continue
            grad = grads[0] if len(grads) == 1 else np.sum(grads, axis=0)
            if expected is not None:
                local_text, (want_k, excluded) = f"J{k + 1}ᵀ (component-wise)", expected[k]
            else:
                local_text, want_k, excluded = self.elementwise(inputs, values, k, want, kinks)
            check = compare(grad, want_k, *bound.settings.tolerance, Marks(excluded))
            label = label_of(inputs[k], bound.program)
            flows.append(Flow(label, local_text, grad, want_k, check.max_abs_error, check.agree))
        return flows

    def elementwise(
        self, inputs: list[Node], values: list[Any], k: int, want: np.ndarray, kinks: np.ndarray
    ) -> tuple[str, np.ndarray, np.ndarray]:
        """The local derivative's text, and the gradient it sends to input ``k``."""
        node, session = self.owner.node, self.session
        bound = session.bound
        derivative, display = _local_derivatives(node, inputs, values, bound)[k]
        env = {sym: self.model.value(op, session.seen) for sym, op in _symbols(derivative, inputs)}
        shape = tuple(values[k].shape)
        spread = shape if is_full_reduction(node) else infer_shape(node, bound.shapes, bound.limits)
        with np.errstate(all="ignore"):
            where = np.broadcast_shapes(*map(np.shape, env.values()))
            local = precise_value(derivative, env, where)
            product = np.broadcast_to(want * local, np.broadcast_shapes(spread, want.shape))
            expected = reduce_to_shape(product, shape)
        mask, _ = find_kinks(derivative, env, spread)
        mask = mask | np.broadcast_to(kinks, spread)
        return display, expected, reduce_to_shape(mask, shape, np.logical_or)

    def structural(
        self, inputs: list[Node], values: list[Any], want: np.ndarray
    ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """For an operation over whole tensors: SymPy's ``J_kᵀ g`` for each tensor input k,
        with ``g`` the gradient arriving at the node (component-wise, one symbol per element
        of the operation's own inputs)."""
        from autogradcli.reference.components import ComponentModel

        node, session = self.owner.node, self.session
        from autogradcli.reference import known

        names = [f"_{k}" for k in range(len(inputs))]
        swapped: list[Node] = [
            Name(n) if isinstance(v, torch.Tensor) else Num(v)
            for n, v in zip(names, values, strict=True)
        ]
        local: Node
        if isinstance(node, Binary):
            local = Binary(node.op, swapped[0], swapped[1])
        elif isinstance(node, Index):
            local = Index(swapped[0], node.items)
        else:
            assert isinstance(node, Call)
            local = Call(node.func, tuple(swapped), node.params)
        tensors = [k for k, v in enumerate(values) if isinstance(v, torch.Tensor)]
        shapes = {names[k]: tuple(values[k].shape) for k in tensors}
        numbers = {names[k]: self.model.value(inputs[k], session.seen) for k in tensors}
        piece = Program(unparse(local), local, tuple(names[k] for k in tensors))
        constants = known(piece, shapes, numbers)
        sub = ComponentModel(piece, shapes, session.bound.limits, constants=constants)
        e = sub.evaluate(numbers, want, frozenset(names[k] for k in tensors))
        return {k: (e.grads[names[k]], e.kinks[names[k]]) for k in tensors}


def _is_structural(node: Node) -> bool:
    """Matrix products and tensor functions other than a full sum/mean."""
    if isinstance(node, Binary):
        return node.op == "@"
    if isinstance(node, Index):
        return True
    if not isinstance(node, Call) or is_full_reduction(node):
        return False
    return OPS[node.func].kind not in ("elementwise", "constant", "detach")


def _symbols(derivative: sp.Expr, inputs: list[Node]) -> list[tuple[sp.Symbol, Node]]:
    """The placeholder symbols in ``derivative`` and the operands they stand for."""
    return [(s, inputs[int(s.name[1:])]) for s in derivative.free_symbols if s.name[0] == "_"]


_TERMS = SympyTerms()


def _local_derivatives(
    node: Node, inputs: list[Node], values: list[Any], bound: Any
) -> dict[int, tuple[sp.Expr, str]]:
    """For each tensor input k: SymPy's ``∂node/∂input_k`` (in placeholder symbols ``_k``)
    and its text in terms of the inputs' names."""
    placeholders = [
        sp.Symbol(f"_{k}", real=True) if isinstance(v, torch.Tensor) else _number(op, v)
        for k, (op, v) in enumerate(zip(inputs, values, strict=True))
    ]
    if is_full_reduction(node):
        assert isinstance(node, Call)
        count = math.prod(infer_shape(node.arg, bound.shapes, bound.limits))
        local = sp.Integer(1) if node.func == "sum" else sp.Rational(1, max(count, 1))
        return {0: (local, str(local))}
    expr = _TERMS.apply(node, placeholders)  # the one walk's own rule for this operation
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
    text = op.id if isinstance(op, Name) else unparse(op)
    return text if isinstance(op, (Name, Call, Num)) else f"({text})"


def _vjp_checks(
    session: Session, model: Model, first_grads: dict[str, np.ndarray]
) -> list[VjpCheck]:
    """``out.backward(w)`` is ``J^T w``: SymPy's Jacobian times w, and autograd's gradient of
    ``sum(out * w)``, beside the ``.grad`` backward(w) gave."""
    bound = session.bound
    names, weights = bound.names, session.seen_weights
    rows = int(np.prod(bound.out_shape))
    sizes = {n: int(np.prod(bound.shapes[n])) for n in names}
    show = rows <= MAX_JACOBIAN_ROWS and all(
        rows * size <= MAX_JACOBIAN_ENTRIES for size in sizes.values()
    )
    jacobians: dict[str, np.ndarray | None] = {n: None for n in names}
    if show:
        tables = {n: np.zeros((rows, sizes[n])) for n in names}
        for row in range(rows):
            one_hot = np.zeros(rows)
            one_hot[row] = 1.0
            e = model.evaluate(
                session.seen, one_hot.reshape(bound.out_shape), frozenset(names), exact_zeros=True
            )
            for n in names:
                tables[n][row] = e.grads[n].reshape(-1)
        jacobians = dict(tables)
    vjp = model.evaluate(session.seen, weights, frozenset(names))
    trace = session.forward()  # a fresh graph: autograd's gradient of the scalar sum(out * w)
    loss = torch.sum(trace.out * session.weights())
    grads = torch.autograd.grad(loss, [session.leaves[n] for n in names], allow_unused=True)
    checks = []
    for n, g in zip(names, grads, strict=True):
        sum_grad = np.zeros(bound.shapes[n]) if g is None else to_numpy(g)
        jac, shape = jacobians[n], bound.shapes[n]
        jtw = vjp.grads[n] if jac is None else (jac.T @ weights.reshape(-1)).reshape(shape)
        agree = all(
            compare(a, b, *bound.settings.tolerance, Marks(vjp.kinks[n])).agree
            for a, b in ((first_grads[n], jtw), (sum_grad, jtw), (vjp.grads[n], jtw))
        )
        checks.append(VjpCheck(n, jac, jtw, first_grads[n], sum_grad, agree))
    return checks
