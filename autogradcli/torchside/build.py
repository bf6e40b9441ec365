"""Leaf tensors, the forward pass built from the tree (a fold), and backward.

The forward pass applies Python's own operators and the vocabulary's torch functions to
the tree as written, so it computes what the same line typed as Python computes:
``y*y*3`` is two multiplications, ``(x+y) - y`` keeps ``y`` in the graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from autogradcli.errors import ComputationError, TorchError
from autogradcli.glossary import lookup
from autogradcli.lang.tree import (
    PY_BINARY,
    PY_UNARY,
    Binary,
    Call,
    Expression,
    Fold,
    Index,
    Name,
    Node,
    Num,
    Unary,
    walk,
)
from autogradcli.lang.vocabulary import CONSTANTS, OPS, arguments


def make_leaf(
    data: np.ndarray, dtype: torch.dtype, device: torch.device, requires_grad: bool
) -> torch.Tensor:
    """A leaf tensor created on ``device`` (not moved there afterwards, which gives a non-leaf)."""
    return torch.tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)


@dataclass
class Trace:
    """One forward pass: the output, each step's tensor, and every tree node's value."""

    out: torch.Tensor
    steps: dict[str, torch.Tensor]
    values: dict[int, Any] = field(default_factory=dict)  # id(node) -> tensor or number
    nodes: dict[int, Node] = field(default_factory=dict)  # id(node) -> node, in evaluation order

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

    def tensor(self, value: Any) -> torch.Tensor:
        if isinstance(value, torch.Tensor):
            return value
        return torch.tensor(value, dtype=self.dtype, device=self.device)

    def visit(self, node: Node) -> Any:
        result = super().visit(node)
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
        return op.torch(torch, *positional, **keywords)

    def index(self, node: Index, value: Any) -> Any:
        return self.tensor(value)[node.python()]


def forward(
    expression: Expression,
    env: dict[str, torch.Tensor],
    dtype: torch.dtype,
    device: torch.device,
    pinned: dict[int, torch.Tensor] | None = None,
) -> Trace:
    """Run the program's steps, then the output, exactly as Python would run the typed lines."""
    fold = _Forward(env, dtype, device, pinned)
    try:
        for step in expression.steps:
            fold.steps[step.name] = fold.tensor(fold(step.node))
        out = fold.tensor(fold(expression.root))
    except (RuntimeError, OverflowError) as exc:
        if lookup(str(exc)) is not None:  # one the glossary explains (an inference tensor)
            raise TorchError(str(exc)) from None
        raise ComputationError("pytorch_forward", detail=_first_line(exc)) from None
    return Trace(out, fold.steps, fold.values, fold.nodes)


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
    expression: Expression,
    values: dict[str, np.ndarray],
    pinned: dict[int, torch.Tensor] | None = None,
) -> np.ndarray:
    """The same computation in float64 on the CPU, without autograd (for finite differences)."""
    env = {n: torch.as_tensor(v, dtype=torch.float64) for n, v in values.items()}
    with torch.no_grad():
        return to_numpy(forward(expression, env, torch.float64, torch.device("cpu"), pinned).out)


def detached_values(
    expression: Expression, values: dict[str, np.ndarray]
) -> dict[int, torch.Tensor]:
    """The value of each ``detach(...)`` at ``values`` (by node): what central differences
    hold fixed, as PyTorch's graph does."""
    nodes = [n for root in expression.roots() for n in walk(root) if _detaches(n)]
    if not nodes:
        return {}
    env = {n: torch.as_tensor(v, dtype=torch.float64) for n, v in values.items()}
    with torch.no_grad():
        trace = forward(expression, env, torch.float64, torch.device("cpu"))
    return {id(n): trace.values[id(n)] for n in nodes if id(n) in trace.values}


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
