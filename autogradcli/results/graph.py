"""``graph``'s result: the backward graph's nodes, saved tensors and freed buffers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autogradcli.messages import CLI, Style
from autogradcli.results.base import SCHEMA_VERSION, Frozen, Rendered, strict


@dataclass(frozen=True)
class Saved(Frozen):
    """One value a node keeps for backward: ``grad_fn._saved_<name>``. A tensor is shown by
    its shape, dtype and first few numbers; anything else (an int, sizes, None) as it is."""

    name: str  # the attribute, e.g. "_saved_self"
    tensor: bool
    shape: list[int] | None = None
    dtype: str | None = None
    value: Any = None  # a tensor's first SAVED_SHOWN numbers (flattened), else the value

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "tensor": self.tensor,
            "shape": self.shape,
            "dtype": self.dtype,
            "value": self.value,
        }


@dataclass(frozen=True)
class Freed(Frozen):
    """What reading a saved tensor raised after one ``backward()`` without retain_graph."""

    node: int
    name: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "name": self.name, "message": self.message}


@dataclass(frozen=True)
class GraphNode(Frozen):
    """One autograd node: PyTorch's class name, a label, and the nodes it passes gradients to."""

    id: int
    grad_fn: str
    label: str
    leaf: str | None = None  # the leaf's name, for AccumulateGrad
    shape: list[int] | None = None
    next: tuple[int | None, ...] = ()  # None: an input without gradient
    saved: tuple[Saved, ...] | None = None  # with --saved: what it keeps for backward

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "grad_fn": self.grad_fn,
            "label": self.label,
            "leaf": self.leaf,
            "shape": self.shape,
            "next": list(self.next),
            "saved": None if self.saved is None else [v.to_dict() for v in self.saved],
        }


@dataclass(frozen=True)
class Graph(Rendered):
    """The whole backward graph; ``nodes[0]`` is the output's ``grad_fn``."""

    expression: str
    output: str
    nodes: tuple[GraphNode, ...]
    seed: int | None = None  # the seed of rand()/randn() values, when one was drawn
    freed: Freed | None = None  # with --saved: a saved tensor read after backward()
    written: tuple[str, ...] = ()  # files the CLI's --dot/--png/--svg wrote

    def to_dict(self, style: Style = CLI) -> dict[str, Any]:  # no sentences to spell
        return strict(
            {
                "schema_version": SCHEMA_VERSION,
                "command": "graph",
                "expression": self.expression,
                "output": self.output,
                "seed": self.seed,
                "root": self.nodes[0].id,
                "nodes": [n.to_dict() for n in self.nodes],
                "freed": None if self.freed is None else self.freed.to_dict(),
                "written": list(self.written),
            }
        )
