"""The backward graph PyTorch recorded: walked from the output's ``grad_fn`` through
``next_functions`` down to the ``AccumulateGrad`` nodes of the leaves.

Nothing here is drawn from the expression: the nodes and edges are PyTorch's own
objects; the expression only supplies labels (which step or operation made a tensor).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch.autograd.graph import get_gradient_edge

from autogradcli.errors import ComputationError
from autogradcli.lang.text import unparse
from autogradcli.lang.tree import Call, Name, Node, Program, Rebuild, Step
from autogradcli.results import Freed, Graph, GraphNode, Saved
from autogradcli.torchside.build import Trace


def label_of(node: Node, expression: Program) -> str:
    """How a tree node is named: a step's or input's name as written, else its text (with
    the names as written: ``y`` for an earlier binding ``y_1`` of ``y``)."""
    return unparse(_Written(expression)(node))


class _Written(Rebuild):
    """A tree with each step's name as the program writes it."""

    def __init__(self, expression: Program) -> None:
        self.expression = expression

    def name(self, node: Name) -> Node:
        base, dot, attr = node.id.partition(".")
        shown = self.expression.shown(base)
        return node if shown == base else Name(shown + dot + attr)

    def call(self, node: Call, args: list[Node]) -> Node:
        """``A.t()`` as written (the tree holds it as ``T(A)``, which is ``A.T``: PyTorch
        records a TBackward0 for the one, a PermuteBackward0 for the other)."""
        if node.func == "T" and node.options.get("spelling") == "t":
            (inner,) = args
            text = unparse(inner)
            return Name(f"{text if isinstance(inner, Name | Call) else f'({text})'}.t()")
        return super().call(node, args)


def _line_of(step: Step, expression: Program) -> str:
    """A step as its line writes it: ``y += 1`` for one in place, else ``y = text``."""
    if step.in_place is not None:
        return step.in_place.text
    return f"{expression.shown(step.name)} = {label_of(step.node, expression)}"


@dataclass
class Owner:
    """The operation of the expression that made one autograd node, and its label."""

    node: Node
    label: str
    grad_fn: Any  # held so that id(grad_fn) stays unique while the table lives


def owners(expression: Program, trace: Trace) -> dict[int, Owner]:
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
    _changed_in_place(expression, trace, found)
    changed = {s.in_place.target for s in expression.steps if s.in_place is not None}
    named = [
        (trace.steps[s.name], _line_of(s, expression))
        for s in expression.steps
        if s.name not in changed  # its tensor's grad_fn now is a later line's
    ]
    if expression.step(expression.output) is None:
        label = f"{expression.output} = {label_of(expression.root, expression)}"
        named.append((trace.out, label))
    named_by: dict[int, list[str]] = {}
    for tensor, label in named:
        fn = tensor.grad_fn
        if fn is not None and id(fn) in found:  # z = y (or +y) is y itself: both names show
            named_by.setdefault(id(fn), []).append(label)
    for key, labels in named_by.items():
        found[key].label = "; ".join(labels)
    for hook in expression.hooks:  # a step's hooks run on the gradient before its node
        tensor = trace.steps.get(hook.target)
        fn = None if tensor is None else tensor.grad_fn
        if fn is not None and id(fn) in found:
            found[id(fn)].label += f" · hook {hook.text} runs first"
    return found


def _changed_in_place(expression: Program, trace: Trace, found: dict[int, Owner]) -> None:
    """Own the nodes of a tensor's earlier versions: ``y = x*2; y += 1`` leaves one tensor
    whose grad_fn is AddBackward0 (``y += 1``); its first input is the MulBackward0 that
    ``y = x*2`` made, labelled with that line (PyTorch's node, found through the graph)."""
    made: dict[str, Step] = {s.name: s for s in expression.steps}
    for step in expression.steps:
        if step.in_place is None or any(
            s.in_place is not None and s.in_place.target == step.name for s in expression.steps
        ):
            continue  # only the last line of each chain of changes: walk back from it
        fn = trace.steps[step.name].grad_fn
        current: Step | None = step
        while current is not None and fn is not None:
            owned = found.get(id(fn))
            if owned is None or owned.grad_fn is not fn:
                found[id(fn)] = Owner(current.node, _line_of(current, expression), fn)
            else:
                owned.node = current.node
            if current.in_place is None:
                break
            current = made.get(current.in_place.target)
            if current is None or not fn.next_functions:
                break
            fn = fn.next_functions[0][0]
            if fn is None or hasattr(fn, "variable"):
                break


def leaf_names(leaves: dict[str, torch.Tensor]) -> dict[int, str]:
    """``id(leaf tensor)`` -> its name."""
    return {id(t): name for name, t in leaves.items()}


@dataclass
class _Found:
    """A node while the walk finds it: its label and edges still being filled."""

    id: int
    grad_fn: str
    label: str = ""
    leaf: str | None = None
    shape: list[int] | None = None
    next: list[int | None] = field(default_factory=list)
    saved: tuple[Saved, ...] | None = None


SAVED_SHOWN = 6  # how many numbers of a saved tensor are shown
SAVED_PREFIX = "_saved_"


def _plain(value: Any) -> Any:
    """A saved non-tensor as JSON can hold it: numbers, None, lists; else its text."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple | list | torch.Size):
        return [_plain(v) for v in value]
    return str(value)


def saved_of(fn: Any) -> tuple[Saved, ...]:
    """What ``fn`` keeps for backward: its ``_saved_*`` attributes, read now."""
    found = []
    for name in sorted(a for a in dir(fn) if a.startswith(SAVED_PREFIX)):
        value = getattr(fn, name)
        if isinstance(value, torch.Tensor):
            numbers = value.detach().flatten()[:SAVED_SHOWN].cpu().tolist()
            dtype = str(value.dtype).removeprefix("torch.")
            found.append(Saved(name, True, list(value.shape), dtype, numbers))
        else:
            found.append(Saved(name, False, value=_plain(value)))
    return tuple(found)


def free_and_read(out: torch.Tensor, held: list[Any], nodes: list[Any]) -> Freed | None:
    """Run ``backward()`` once without retain_graph, then read a saved tensor again: the
    first node's that has one. What PyTorch raises then is the freed buffer's message."""
    out.backward(torch.ones_like(out))
    for fn, node in zip(held, nodes, strict=True):
        for saved in node.saved or ():
            if saved.tensor:
                try:
                    getattr(fn, saved.name)
                except RuntimeError as exc:
                    return Freed(node.id, saved.name, str(exc).split("\n")[0])
    return None


def build_graph(
    expression: Program,
    trace: Trace,
    leaves: dict[str, torch.Tensor],
    seed: int | None = None,
    saved: bool = False,
) -> Graph:
    """Walk PyTorch's graph from ``trace.out.grad_fn``, each node once, numbered as found;
    ``saved``: with what each node keeps for backward, and what reading it after one
    ``backward()`` raises."""
    out = trace.out
    # a leaf output (``x`` alone) has no grad_fn: backward() goes straight to its AccumulateGrad
    root = get_gradient_edge(out).node if out.requires_grad else None
    if root is None:
        raise ComputationError("no_graph")
    labels = owners(expression, trace)
    names = leaf_names(leaves)
    ids: dict[int, int] = {}
    held: list[Any] = []  # keeps every visited node alive, so no id() is reused
    nodes: list[_Found] = []

    def discover(fn: Any) -> _Found:
        held.append(fn)
        ids[id(fn)] = len(nodes)
        node = _Found(ids[id(fn)], type(fn).__name__)
        if saved:
            node.saved = saved_of(fn)
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
            nested = parent.label.startswith("(part of ")
            whole = parent.label.removeprefix("(part of ").removesuffix(")")
            node.label = f"(part of {whole if nested else parent.label})"
    frozen = tuple(
        GraphNode(n.id, n.grad_fn, n.label, n.leaf, n.shape, tuple(n.next), n.saved) for n in nodes
    )
    freed = free_and_read(out, held, nodes) if saved else None
    return Graph(expression.text, expression.output, frozen, seed, freed)
