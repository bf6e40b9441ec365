"""The PyTorch side: leaf tensors, the forward pass built from the parse tree, backward.

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
from autogradcli.expression import (
    PY_BINARY,
    PY_UNARY,
    Binary,
    Call,
    Expression,
    Name,
    Node,
    Num,
    Unary,
)
from autogradcli.vocabulary import CONSTANTS, FUNCTIONS, TENSOR_FUNCTIONS


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


def forward(
    expression: Expression, env: dict[str, torch.Tensor], dtype: torch.dtype, device: torch.device
) -> Trace:
    """Run the program's steps, then the output, exactly as Python would run the typed lines."""
    values: dict[int, Any] = {}
    nodes: dict[int, Node] = {}
    steps: dict[str, torch.Tensor] = {}

    def as_tensor(value: Any) -> torch.Tensor:
        if isinstance(value, torch.Tensor):
            return value
        return torch.tensor(value, dtype=dtype, device=device)

    def value(node: Node) -> Any:
        if isinstance(node, Num):
            result: Any = node.value
        elif isinstance(node, Name):
            if node.id in steps:
                result = steps[node.id]
            else:
                result = env[node.id] if node.id in env else CONSTANTS[node.id][0]
        elif isinstance(node, Unary):
            result = PY_UNARY[node.op](value(node.operand))
        elif isinstance(node, Binary):
            result = PY_BINARY[node.op](value(node.left), value(node.right))
        elif isinstance(node, Call):
            arg = as_tensor(value(node.arg))
            if node.func in FUNCTIONS:
                result = FUNCTIONS[node.func].torch(torch, arg)
            else:
                other = None if node.other is None else as_tensor(value(node.other))
                result = TENSOR_FUNCTIONS[node.func].torch(torch, arg, other, node.dim)
        else:
            raise TypeError(f"unknown node {node!r}")
        values[id(node)] = result
        nodes[id(node)] = node
        return result

    try:
        for step in expression.steps:
            steps[step.name] = as_tensor(value(step.node))
        out = as_tensor(value(expression.root))
    except (RuntimeError, OverflowError) as exc:
        raise ComputationError(
            f"PyTorch could not compute the expression: {_first_line(exc)}"
        ) from None
    return Trace(out, steps, values, nodes)


def forward_numpy(expression: Expression, values: dict[str, np.ndarray]) -> np.ndarray:
    """The same computation in float64 on the CPU, without autograd (for finite differences)."""
    env = {n: torch.as_tensor(v, dtype=torch.float64) for n, v in values.items()}
    with torch.no_grad():
        return to_numpy(forward(expression, env, torch.float64, torch.device("cpu")).out)


def backward(
    out: torch.Tensor, weights: torch.Tensor | None, retain_graph: bool = False, context: str = ""
) -> None:
    """``out.backward(weights, retain_graph=...)``; PyTorch's errors come back explained."""
    try:
        out.backward(weights, retain_graph=retain_graph)
    except RuntimeError as exc:
        if weights is None and out.numel() != 1:
            context += f"the output has shape {list(out.shape)}: "
        raise TorchError(str(exc), context) from None


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A float64 NumPy copy (works for float16/bfloat16 and for CUDA tensors). Always a
    copy: a float64 CPU tensor would otherwise share its memory, and a later backward pass
    that accumulates into ``.grad`` would change a snapshot already taken."""
    return tensor.detach().to("cpu", torch.float64, copy=True).numpy()


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
