"""Render a backward ``Graph`` as a Rich tree, from the output's grad_fn to the leaves."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from rich.tree import Tree

from autogradcli.results import Graph, GraphNode

NONE_LABEL = "None  (no gradient flows here: a constant or a tensor with requires_grad=False)"


def _label(node: GraphNode) -> Text:
    text = Text(node.grad_fn, style="bold")
    if node.leaf is not None:
        text.append(f"  {node.leaf} {node.shape}  → {node.leaf}.grad", style="cyan")
    else:
        text.append(f"  {node.label}")
    return text


def render_graph(graph: Graph) -> Group:
    """The tree in the order it prints; a node reached again (``y*y`` reaches ``y`` twice)
    is expanded the first time only."""
    nodes = {n.id: n for n in graph.nodes}
    root = graph.nodes[0]
    tree = Tree(_label(root))
    expanded: set[int] = set()
    stack = [(root, tree)]
    while stack:  # pre-order, so "above" is where it was expanded
        node, branch = stack.pop()
        if node.id in expanded:
            assert isinstance(branch.label, Text)
            branch.label.append("  (same node as above)", style="dim")
            continue
        expanded.add(node.id)
        children = []
        for target in node.next:
            if target is None:
                branch.add(Text(NONE_LABEL, style="dim"))
            else:
                children.append((nodes[target], branch.add(_label(nodes[target]))))
        stack.extend(reversed(children))
    count = f"{len(graph.nodes)} node" + ("" if len(graph.nodes) == 1 else "s")
    seed = "" if graph.seed is None else f" (seed {graph.seed})"
    title = Text(
        f"backward graph of {graph.output}: {count}, walked from the top by backward(){seed}",
        style="bold",
    )
    return Group(title, tree)
