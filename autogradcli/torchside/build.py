"""Leaf tensors, the forward pass built from the tree (a fold), and backward.

The forward pass applies Python's own operators and the vocabulary's torch functions to
the tree as written, so it computes what the same line typed as Python computes:
``y*y*3`` is two multiplications, ``(x+y) - y`` keeps ``y`` in the graph.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from autogradcli.errors import ComputationError, ExpressionError, TorchError
from autogradcli.glossary import lookup
from autogradcli.lang.tree import (
    PY_BINARY,
    PY_UNARY,
    Binary,
    Call,
    Fold,
    Index,
    Name,
    Node,
    Num,
    Program,
    Step,
    Unary,
    operands,
    walk,
)
from autogradcli.lang.vocabulary import CONSTANTS, OPS, arguments


def make_leaf(
    data: np.ndarray, dtype: torch.dtype, device: torch.device, requires_grad: bool
) -> torch.Tensor:
    """A leaf tensor created on ``device`` (not moved there afterwards, which gives a non-leaf)."""
    return torch.tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)


@dataclass
class Change:
    """One in-place line as PyTorch ran it: the tensor's version counter before and after,
    and its grad_fn before and after (None for a leaf, or where PyTorch refused)."""

    name: str
    line: str
    before: int
    after: int
    made_by: str | None
    made_by_after: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "line": self.line,
            "version_before": self.before,
            "version_after": self.after,
            "made_by": self.made_by,
            "made_by_after": self.made_by_after,
        }


@dataclass
class Trace:
    """One forward pass: the output, each step's tensor, and every tree node's value."""

    out: torch.Tensor
    steps: dict[str, torch.Tensor]
    values: dict[int, Any] = field(default_factory=dict)  # id(node) -> tensor or number
    nodes: dict[int, Node] = field(default_factory=dict)  # id(node) -> node, in evaluation order
    changes: list[Change] = field(default_factory=list)  # the in-place lines, in order

    def value_of(self, node: Node) -> Any:
        return self.values[id(node)]


class _Forward(Fold[Any]):
    """PyTorch's value of each node, recorded in evaluation order."""

    def __init__(
        self,
        env: dict[str, torch.Tensor],
        dtype: torch.dtype,
        device: torch.device,
        pinned: dict[int, torch.Tensor] | None = None,
    ):
        super().__init__()
        self.env, self.dtype, self.device = env, dtype, device
        self.pinned = pinned or {}  # detach(...) values held fixed (central differences)
        self.steps: dict[str, torch.Tensor] = {}
        self.values: dict[int, Any] = {}
        self.nodes: dict[int, Node] = {}
        self.changes: list[Change] = []

    def tensor(self, value: Any) -> torch.Tensor:
        if isinstance(value, torch.Tensor):
            return value
        return torch.tensor(value, dtype=self.dtype, device=self.device)

    def leave(self, node: Node, result: Any) -> Any:
        self.values[id(node)] = result
        self.nodes[id(node)] = node
        return result

    def num(self, node: Num) -> Any:
        return node.value

    def name(self, node: Name) -> Any:
        if node.id in self.steps:
            return self.steps[node.id]
        return self.env[node.id] if node.id in self.env else CONSTANTS[node.id][0]

    def unary(self, node: Unary, operand: Any) -> Any:
        return PY_UNARY[node.op](operand)

    def binary(self, node: Binary, left: Any, right: Any) -> Any:
        return PY_BINARY[node.op](left, right)

    def call(self, node: Call, args: list[Any]) -> Any:
        if id(node) in self.pinned:
            return self.pinned[id(node)]
        op = OPS[node.func]
        tensors = [self.tensor(a) for a in args]
        positional, keywords = arguments(node, tensors)
        assert op.torch is not None, node.func
        try:
            return op.torch(torch, *positional, **keywords)
        except (TypeError, ValueError, IndexError) as exc:  # PyTorch's refusal of the arguments
            raise ComputationError("pytorch_forward", detail=_first_line(exc)) from None

    def index(self, node: Index, value: Any) -> Any:
        return self.tensor(value)[node.python()]

    def step(self, step: Step, expression: Program) -> torch.Tensor:
        """Compute one step; an in-place one changes its target's tensor, as PyTorch does."""
        if step.in_place is None:
            result = self.tensor(self(step.node))
        else:
            result = self.in_place(step, expression)
        self.steps[step.name] = result
        return result

    def in_place(self, step: Step, expression: Program) -> torch.Tensor:
        change = step.in_place
        assert change is not None
        node, mode = _unwrap(step.node)
        target = self.tensor(self.name(Name(change.target)))
        record = Change(
            expression.shown(change.target),
            change.text,
            target._version,
            target._version,
            None if target.grad_fn is None else type(target.grad_fn).__name__,
        )
        self.changes.append(record)
        args, keywords = self.operands(node, target)
        kept = target.detach().clone()  # the values before the change, for what shows them
        for key, value in list(self.values.items()):
            if value is target:
                self.values[key] = kept
        for operand in operands(node)[:1]:  # the changed tensor, as an operand of the line
            self.values[id(operand)], self.nodes[id(operand)] = kept, operand
        try:
            with MODES[mode](torch):
                getattr(target, change.method)(*args, **keywords)
        finally:
            record.after = target._version
            if record.after != record.before and target.grad_fn is not None:
                record.made_by_after = type(target.grad_fn).__name__
        for done in (node, step.node):
            self.values[id(done)], self.nodes[id(done)] = target, done
        for other in change.live:
            tensor = self.steps.get(other, self.env.get(other))
            if isinstance(tensor, torch.Tensor) and _shared(tensor, target):
                raise ExpressionError(
                    "in_place_alias",
                    text=change.text,
                    name=record.name,
                    other=expression.shown(other),
                )
        return target

    def operands(self, node: Node, target: torch.Tensor) -> tuple[list[Any], dict[str, Any]]:
        """The arguments of the in-place method: the out-of-place node's, less the target."""
        if isinstance(node, Binary):
            return [self(node.right)], {}
        if isinstance(node, Unary):
            return [], {}
        assert isinstance(node, Call), node
        tensors = [self.tensor(self(a)) for a in node.args]
        positional, keywords = arguments(node, tensors)
        assert positional[0] is target
        return positional[1:], keywords


def forward(
    expression: Program,
    env: dict[str, torch.Tensor],
    dtype: torch.dtype,
    device: torch.device,
    pinned: dict[int, torch.Tensor] | None = None,
) -> Trace:
    """Run the program's steps, then the output, exactly as Python would run the typed lines."""
    fold = _Forward(env, dtype, device, pinned)
    with refused(fold.changes):
        for step in expression.steps:
            fold.step(step, expression)
        out = fold.tensor(fold(expression.root))
    return Trace(out, fold.steps, fold.values, fold.nodes, fold.changes)


class Stepper:
    """A program's lines run one at a time (a cell: steps between its backward() calls)."""

    def __init__(
        self,
        expression: Program,
        env: dict[str, torch.Tensor],
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        self.expression = expression
        self.fold = _Forward(env, dtype, device)

    @property
    def steps(self) -> dict[str, torch.Tensor]:
        return self.fold.steps

    @property
    def changes(self) -> list[Change]:
        return self.fold.changes

    def step(self, step: Step) -> None:
        with refused(self.fold.changes):
            self.fold.step(step, self.expression)


@contextmanager
def refused(changes: list[Change]) -> Iterator[None]:
    """PyTorch's refusal of a forward line as an error: a known one explained, with the
    in-place lines run so far."""
    try:
        yield
    except (RuntimeError, OverflowError) as exc:
        if lookup(str(exc)) is not None:  # one the glossary explains (an inference tensor)
            raise with_changes(TorchError(str(exc)), changes) from None
        raise ComputationError("pytorch_forward", detail=_first_line(exc)) from None


def with_changes(error: TorchError, changes: list[Change]) -> TorchError:
    """``error`` with the in-place lines run before it (which tensor, which versions)."""
    if changes:
        error.data["changes"] = [c.to_dict() for c in changes]
    return error


def _unwrap(node: Node) -> tuple[Node, str]:
    """The operation of a line, and the block it was written in ("" for none)."""
    if isinstance(node, Call) and node.func in ("no_grad", "inference_mode"):
        return node.args[0], node.func
    return node, ""


MODES: dict[str, Callable[[Any], Any]] = {
    "": lambda torch: nullcontext(),
    "no_grad": lambda torch: torch.no_grad(),
    "inference_mode": lambda torch: torch.inference_mode(),
}


def _shared(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors are one or share memory (a view, a detach())."""
    if a is b:
        return True
    if a.numel() == 0 or b.numel() == 0 or a.device != b.device:
        return False
    return bool(a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())


def evaluate(
    node: Node,
    env: dict[str, torch.Tensor],
    steps: dict[str, torch.Tensor],
    dtype: torch.dtype,
    device: torch.device,
) -> torch.Tensor:
    """One more expression on a forward pass already run (a cell's ``backward()`` target,
    its gradient, or a printed expression): the steps' tensors are reused, not rebuilt."""
    fold = _Forward(env, dtype, device)
    fold.steps = dict(steps)
    try:
        return fold.tensor(fold(node))
    except (RuntimeError, OverflowError) as exc:
        raise ComputationError("pytorch_forward", detail=_first_line(exc)) from None


def forward_numpy(
    expression: Program,
    values: dict[str, np.ndarray],
    pinned: dict[int, torch.Tensor] | None = None,
) -> np.ndarray:
    """The same computation in float64 on the CPU, without autograd (for finite differences)."""
    env = {n: _tensor(v, expression) for n, v in values.items()}
    with torch.no_grad():
        return to_numpy(forward(expression, env, torch.float64, torch.device("cpu"), pinned).out)


def detached_values(expression: Program, values: dict[str, np.ndarray]) -> dict[int, torch.Tensor]:
    """The value of each ``detach(...)`` at ``values`` (by node): what central differences
    hold fixed, as PyTorch's graph does."""
    nodes = [n for root in expression.roots() for n in walk(root) if _detaches(n)]
    if not nodes:
        return {}
    env = {n: _tensor(v, expression) for n, v in values.items()}
    with torch.no_grad():
        trace = forward(expression, env, torch.float64, torch.device("cpu"))
    return {id(n): trace.values[id(n)] for n in nodes if id(n) in trace.values}


def changed_leaves(expression: Program) -> set[str]:
    """The inputs a line changes in place (a constant's ``c.add_(1)``)."""
    changed = {s.in_place.target for s in expression.steps if s.in_place is not None}
    return changed & set(expression.variables)


def _tensor(value: np.ndarray, expression: Program) -> torch.Tensor:
    """A float64 tensor of ``value``: its memory when no line changes a tensor in place,
    else a copy (the caller's array stays as it was)."""
    if any(s.in_place is not None for s in expression.steps) or not value.flags.writeable:
        return torch.tensor(value, dtype=torch.float64)  # torch warns on a read-only array
    return torch.as_tensor(value, dtype=torch.float64)


def _detaches(node: Node) -> bool:
    return isinstance(node, Call) and OPS[node.func].kind == "detach"


def backward(
    out: torch.Tensor,
    weights: torch.Tensor | None,
    retain_graph: bool = False,
    pass_index: int | None = None,
    in_cell: bool = False,
) -> None:
    """``out.backward(weights, retain_graph=...)``; PyTorch's errors come back explained
    (``pass_index``: the pass on the same graph this was, for the message)."""
    try:
        out.backward(weights, retain_graph=retain_graph)
    except RuntimeError as exc:
        shape = list(out.shape) if weights is None and out.numel() != 1 else None
        raise TorchError(str(exc), pass_index, shape, in_cell) from None


def functional_grad(
    out: torch.Tensor,
    inputs: list[torch.Tensor],
    weights: torch.Tensor | None,
    retain_graph: bool = False,
    pass_index: int | None = None,
) -> tuple[torch.Tensor, ...]:
    """``torch.autograd.grad(out, inputs, weights, retain_graph=...)``: the gradients,
    returned; no ``.grad`` is written."""
    try:
        return torch.autograd.grad(out, inputs, weights, retain_graph=retain_graph)
    except RuntimeError as exc:
        shape = list(out.shape) if weights is None and out.numel() != 1 else None
        raise TorchError(str(exc), pass_index, shape, False) from None


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A float64 NumPy copy (works for float16/bfloat16 and for CUDA tensors). Always a
    copy: a float64 CPU tensor would otherwise share its memory, and a later backward pass
    that accumulates into ``.grad`` would change a snapshot already taken."""
    return tensor.detach().to("cpu", torch.float64, copy=True).numpy()


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
