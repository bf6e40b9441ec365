"""The backward graph PyTorch recorded: walked from the output's ``grad_fn`` through
``next_functions`` down to the ``AccumulateGrad`` nodes of the leaves.

Nothing here is drawn from the expression: the nodes and edges are PyTorch's own
objects; the expression only supplies labels (which step or operation made a tensor).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.autograd.graph import get_gradient_edge

from autogradcli.computation import Trace
from autogradcli.errors import ComputationError, DeviceError
from autogradcli.expression import Expression, Name, Node, unparse


@dataclass
class GraphNode:
    """One autograd node: PyTorch's class name, a label, and the nodes it passes gradients to."""

    id: int
    grad_fn: str
    label: str
    leaf: str | None = None  # the leaf's name, for AccumulateGrad
    shape: list[int] | None = None
    next: list[int | None] = field(default_factory=list)  # None: an input without gradient

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "grad_fn": self.grad_fn,
            "label": self.label,
            "leaf": self.leaf,
            "shape": self.shape,
            "next": self.next,
        }


@dataclass
class Graph:
    """The whole backward graph; ``nodes[0]`` is the output's ``grad_fn``."""

    expression: str
    output: str
    nodes: list[GraphNode]
    seed: int | None = None  # the seed of rand()/randn() values, when one was drawn

    def to_dict(self) -> dict[str, Any]:
        return {
            "expression": self.expression,
            "output": self.output,
            "seed": self.seed,
            "root": self.nodes[0].id,
            "nodes": [n.to_dict() for n in self.nodes],
        }


def label_of(node: Node, expression: Expression) -> str:
    """How a tree node is named: a step's or input's name, else its text."""
    return node.id if isinstance(node, Name) else unparse(node)


@dataclass
class Owner:
    """The operation of the expression that made one autograd node, and its label."""

    node: Node
    label: str
    grad_fn: Any  # held so that id(grad_fn) stays unique while the table lives


def owners(expression: Expression, trace: Trace) -> dict[int, Owner]:
    """``id(grad_fn)`` -> its ``Owner``, for every tensor of the run.

    The innermost operation wins (``+y`` is ``y`` itself); a step's tensor is labelled
    ``name = text``, and so is a bare output.
    """
    found: dict[int, Owner] = {}
    for node_id, node in trace.nodes.items():
        value = trace.values[node_id]
        if isinstance(value, torch.Tensor) and value.grad_fn is not None:
            fn = value.grad_fn
            found.setdefault(id(fn), Owner(node, label_of(node, expression), fn))
    named = [(s.name, trace.steps[s.name], s.node) for s in expression.steps]
    if expression.step(expression.output) is None:
        named.append((expression.output, trace.out, expression.root))
    named_by: dict[int, list[str]] = {}
    for name, tensor, node in named:
        fn = tensor.grad_fn
        if fn is not None and id(fn) in found:  # z = y (or +y) is y itself: both names show
            named_by.setdefault(id(fn), []).append(f"{name} = {unparse(node)}")
    for key, labels in named_by.items():
        found[key].label = "; ".join(labels)
    return found


def leaf_names(leaves: dict[str, torch.Tensor]) -> dict[int, str]:
    """``id(leaf tensor)`` -> its name."""
    return {id(t): name for name, t in leaves.items()}


def build_graph(
    expression: Expression,
    trace: Trace,
    leaves: dict[str, torch.Tensor],
    seed: int | None = None,
) -> Graph:
    """Walk PyTorch's graph from ``trace.out.grad_fn``, each node once, numbered as found."""
    out = trace.out
    # a leaf output (``x`` alone) has no grad_fn: backward() goes straight to its AccumulateGrad
    root = get_gradient_edge(out).node if out.requires_grad else None
    if root is None:
        raise ComputationError(
            "the output has no grad_fn: nothing it depends on requires grad, so PyTorch "
            "recorded no graph; drop --const for an input, or use a variable"
        )
    labels = owners(expression, trace)
    names = leaf_names(leaves)
    ids: dict[int, int] = {}
    held: list[Any] = []  # keeps every visited node alive, so no id() is reused
    nodes: list[GraphNode] = []

    def discover(fn: Any) -> GraphNode:
        held.append(fn)
        ids[id(fn)] = len(nodes)
        node = GraphNode(ids[id(fn)], type(fn).__name__, "")
        nodes.append(node)
        variable = getattr(fn, "variable", None)
        if variable is not None:
            node.leaf = names.get(id(variable), "?")
            node.label = node.leaf
            node.shape = list(variable.shape)
        elif id(fn) in labels:
            node.label = labels[id(fn)].label
        return node

    stack = [(root, discover(root))]
    while stack:  # iterative: a long program makes a deep graph
        fn, node = stack.pop()
        for nxt, _ in fn.next_functions:
            if nxt is None:
                node.next.append(None)
            elif id(nxt) in ids:
                node.next.append(ids[id(nxt)])
            else:
                child = discover(nxt)
                node.next.append(child.id)
                stack.append((nxt, child))
    for node in nodes:  # nodes PyTorch made inside one operation (2/x: Mul and Reciprocal)
        if not node.label:
            parent = next(n for n in nodes if node.id in n.next)
            whole = parent.label.removeprefix("(part of ").removesuffix(")")
            node.label = (
                f"(part of {whole})"
                if parent.label.startswith("(part of ")
                else (f"(part of {parent.label})")
            )
    return Graph(expression.text, expression.output, nodes, seed)


def to_dot(graph: Graph) -> str:
    """Graphviz DOT text: one box per node, an arrow for each ``next_functions`` entry."""
    lines = [
        "digraph backward {",
        '  graph [rankdir=TB, label="' + _escape(f"backward graph of {graph.expression}") + '"];',
        '  node [shape=box, style="rounded,filled", fillcolor="#f5f5f5", fontname="Helvetica"];',
    ]
    for node in graph.nodes:
        text = f"{node.grad_fn}\\n{_escape(node.label)}"
        if node.leaf is not None:
            text += f"\\nshape {node.shape}  → {_escape(node.leaf)}.grad"
            lines.append(f'  n{node.id} [label="{text}", fillcolor="#cfe8ff"];')
        else:
            lines.append(f'  n{node.id} [label="{text}"];')
    none_count = 0
    for node in graph.nodes:
        for position, target in enumerate(node.next):
            if target is None:
                none_count += 1
                lines.append(
                    f'  none{none_count} [label="None", shape=plaintext, style="", fontsize=10];'
                )
                edge = f'[label="{position}", style=dashed]'
                lines.append(f"  n{node.id} -> none{none_count} {edge};")
            else:
                lines.append(f'  n{node.id} -> n{target} [label="{position}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def render_image(dot_text: str, path: Path, fmt: str) -> None:
    """Render DOT to ``path`` with Graphviz's ``dot`` program (``fmt``: svg or png)."""
    program = shutil.which("dot")
    if program is None:
        raise DeviceError(
            f"--{fmt} needs Graphviz's 'dot' program, which is not installed; install Graphviz "
            "(e.g. apt install graphviz, brew install graphviz) or write the DOT text with "
            "--dot FILE and render it elsewhere"
        )
    try:
        subprocess.run(
            [program, f"-T{fmt}", "-o", str(path)],
            input=dot_text.encode(),
            check=True,
            capture_output=True,
            timeout=60,
        )
    except subprocess.CalledProcessError as exc:
        message = exc.stderr.decode(errors="replace").strip().splitlines()
        raise ComputationError(
            f"Graphviz could not write {path}: {message[0] if message else exc}"
        ) from None
    except subprocess.TimeoutExpired:
        raise ComputationError("Graphviz took more than 60 s; use --dot FILE instead") from None
