"""Renderers: Rich views, JSON, DOT, built from results (``messages`` makes the sentences).

``renderable(result, style)`` gives the Rich renderable of any result; ``show`` prints it,
or its JSON document, to standard output.
"""

from __future__ import annotations

from typing import Any

from autogradcli.messages import CLI, Style


def renderable(result: Any, style: Style = CLI) -> Any:
    """The Rich renderable of a result (grad, derivative blocks, or a backward graph)."""
    from autogradcli.results import CellResult, DerivativeResult, GradResult

    if isinstance(result, CellResult):
        from autogradcli.render.cell import render_cell

        return render_cell(result, style)
    if isinstance(result, GradResult):
        from autogradcli.render.grad import render

        return render(result, style)
    if isinstance(result, DerivativeResult):
        from autogradcli.render.derivatives import render_derivatives

        return render_derivatives(result, style)
    from autogradcli.render.graph import render_graph

    return render_graph(result)


def show(result: Any, json_output: bool) -> None:
    """Print a result: its ``--json`` document, or the Rich report (the CLI's words)."""
    if json_output:
        import typer

        from autogradcli.render.json import dumps

        typer.echo(dumps(result.to_dict()))
        return
    from rich.console import Console

    Console(highlight=False).print(renderable(result, CLI))
