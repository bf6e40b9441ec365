"""The backward graph as Graphviz DOT text, and pictures of it through Graphviz's ``dot``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from autogradcli.errors import ComputationError, DeviceError
from autogradcli.results import Graph


def need_graphviz(fmt: str) -> None:
    """Refuse a picture when Graphviz's ``dot`` program is not installed."""
    if shutil.which("dot") is None:
        raise DeviceError("graphviz_missing", format=fmt)


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
        raise DeviceError("graphviz_missing", format=fmt)
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
            "graphviz_failed", path=str(path), detail=message[0] if message else str(exc)
        ) from None
    except subprocess.TimeoutExpired:
        raise ComputationError("graphviz_timeout") from None
