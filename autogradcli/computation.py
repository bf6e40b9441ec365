"""The PyTorch side: leaf tensors, the forward pass built from the parse tree, backward.

The forward pass applies Python's own operators and the vocabulary's torch functions to
the tree as written, so it computes what the same line typed as Python computes:
``y*y*3`` is two multiplications, ``(x+y) - y`` keeps ``y`` in the graph.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from autogradcli.errors import ComputationError
from autogradcli.expression import PY_BINARY, PY_UNARY, Binary, Call, Name, Node, Num, Unary
from autogradcli.vocabulary import CONSTANTS, FUNCTIONS, REDUCTIONS


def make_leaf(
    data: np.ndarray, dtype: torch.dtype, device: torch.device, requires_grad: bool
) -> torch.Tensor:
    """A leaf tensor created on ``device`` (not moved there afterwards, which gives a non-leaf)."""
    return torch.tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)


def forward(
    root: Node, env: dict[str, torch.Tensor], dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """Evaluate the tree with torch, exactly as Python would evaluate the typed line."""

    def value(node: Node) -> Any:
        if isinstance(node, Num):
            return node.value
        if isinstance(node, Name):
            return env[node.id] if node.id in env else CONSTANTS[node.id][0]
        if isinstance(node, Unary):
            return PY_UNARY[node.op](value(node.operand))
        if isinstance(node, Binary):
            return PY_BINARY[node.op](value(node.left), value(node.right))
        if isinstance(node, Call):
            arg = value(node.arg)
            if not isinstance(arg, torch.Tensor):
                arg = torch.tensor(arg, dtype=dtype, device=device)
            if node.func in REDUCTIONS:
                return REDUCTIONS[node.func](torch, arg)
            return FUNCTIONS[node.func].torch(torch, arg)
        raise TypeError(f"unknown node {node!r}")

    try:
        out = value(root)
    except (RuntimeError, OverflowError) as exc:
        raise ComputationError(
            f"PyTorch could not compute the expression: {_first_line(exc)}"
        ) from None
    if not isinstance(out, torch.Tensor):
        out = torch.tensor(out, dtype=dtype, device=device)
    return out


def backward(out: torch.Tensor, weights: torch.Tensor | None) -> None:
    """``out.backward()`` for a one-element output, ``out.backward(weights)`` otherwise."""
    try:
        if weights is None:
            out.backward()
        else:
            out.backward(weights)
    except RuntimeError as exc:
        raise ComputationError(f"PyTorch's backward() failed: {_first_line(exc)}") from None


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A float64 NumPy copy (works for float16/bfloat16 and for CUDA tensors)."""
    return tensor.detach().to("cpu", torch.float64).numpy()


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
