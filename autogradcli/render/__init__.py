"""Renderers: Rich views, JSON, DOT, built from results (``messages`` makes the sentences).

``renderable(result, style)`` gives the Rich renderable of any result; ``show`` prints it,
or its JSON document, to standard output.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from autogradcli.messages import CLI, Style

FULL: ContextVar[bool] = ContextVar("full", default=False)  # --full: derivatives in full
LATEX: ContextVar[bool] = ContextVar("latex", default=False)  # --latex: derivatives as LaTeX


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


def html(result: Any, width: int = 100) -> str:
    """The Rich report as HTML with inline styles (what a notebook shows)."""
    import io

    from rich.console import Console

    from autogradcli.messages import PYTHON

    console = Console(record=True, width=width, file=io.StringIO(), color_system="truecolor")
    console.print(renderable(result, PYTHON))
    return console.export_html(
        inline_styles=True,
        code_format='<pre style="font-family: Menlo, Consolas, monospace; line-height: 1.3">'
        "{code}</pre>",
    )


def show(result: Any, json_output: bool) -> None:
    """Print a result: its ``--json`` document, or the Rich report (the CLI's words)."""
    if json_output:
        import typer

        from autogradcli.render.json import dumps

        typer.echo(dumps(result.to_dict()))
        return
    from rich.console import Console

    Console(highlight=False).print(renderable(result, CLI))
