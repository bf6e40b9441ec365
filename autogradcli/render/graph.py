"""Render a backward ``Graph`` as a Rich tree, from the output's grad_fn to the leaves."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from rich.tree import Tree

from autogradcli.messages import CLI, Style
from autogradcli.results import Graph, GraphNode, Saved

NONE_LABEL = "None  (no gradient flows here: a constant or a tensor with requires_grad=False)"


def _number(value: float | int | bool) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _saved_line(saved: Saved) -> str:
    """``_saved_self: tensor [2, 2] float32 = [3, 3, 3, 3]``, ``_saved_alpha = 1``."""
    if not saved.tensor:
        return f"{saved.name} = {saved.value}"
    total = 1
    for size in saved.shape or []:
        total *= size
    numbers = ", ".join(_number(v) for v in saved.value)
    more = ", …" if total > len(saved.value) else ""
    return f"{saved.name}: tensor {saved.shape} {saved.dtype} = [{numbers}{more}]"


def _label(node: GraphNode, saved: bool = True) -> Text:
    text = Text(node.grad_fn, style="bold")
    if node.leaf is not None:
        text.append(f"  {node.leaf} {node.shape}  → {node.leaf}.grad", style="cyan")
    else:
        text.append(f"  {node.label}")
    for kept in node.saved or () if saved else ():
        text.append(f"\n  saved {_saved_line(kept)}", style="magenta")
    return text


def _freed(graph: Graph) -> Text | None:
    """With --saved: what reading a saved tensor raised after backward() freed it."""
    if graph.freed is None:
        return None
    node = next(n for n in graph.nodes if n.id == graph.freed.node)
    return Text(
        f"after one backward() without retain_graph=True, reading {node.grad_fn}"
        f".{graph.freed.name} raises: {graph.freed.message}",
        style="yellow",
    )


def render_graph(graph: Graph, style: Style = CLI) -> Group:
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
            label = _label(node, saved=False)  # its saved values are shown above
            label.append("  (same node as above)", style="dim")
            branch.label = label
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
    saved = graph.nodes[0].saved is not None
    if not saved:
        return Group(title, tree)
    kept = any(v.tensor for n in graph.nodes for v in n.saved or ())
    summary = Text(
        "saved: what each node keeps for backward (grad_fn._saved_*); the tensors among "
        "them are the buffers the first backward() frees"
        if kept
        else "saved: no node keeps a tensor for backward, so backward() frees nothing and "
        "this graph can be walked again without retain_graph=True",
        style="dim",
    )
    return Group(title, tree, summary, *[t for t in [_freed(graph)] if t is not None])
