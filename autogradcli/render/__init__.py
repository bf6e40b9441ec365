"""Renderers: Rich views, JSON, DOT, built from results (``messages`` makes the sentences).

``renderable(result, style)`` gives the Rich renderable of any result, through the
renderer the command registry names for its type; ``show`` prints it, or its JSON
document, to standard output.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from enum import Enum
from typing import TYPE_CHECKING

from autogradcli.messages import CLI, Style

if TYPE_CHECKING:
    from rich.console import RenderableType

    from autogradcli.results import Rendered

FULL: ContextVar[bool] = ContextVar("full", default=False)  # --full: derivatives in full
LATEX: ContextVar[bool] = ContextVar("latex", default=False)  # --latex: derivatives as LaTeX


def renderer(result: Rendered) -> Callable[[Rendered, Style], RenderableType]:
    """The renderer of a result's type, from the command registry
    (``autogradcli.renderers()``, keyed by result class); a type no command registered is
    an error, never another command's renderer."""
    from autogradcli import renderers, resolve

    for kind, where in renderers().items():
        if type(result) is resolve(kind):
            return resolve(where)  # type: ignore[no-any-return]
    raise TypeError(f"no renderer is registered for {type(result).__name__}")


def renderable(result: Rendered, style: Style = CLI) -> RenderableType:
    """The Rich renderable of a result, by its type's renderer (``renderer``)."""
    return renderer(result)(result, style)


def html(result: Rendered, width: int = 100) -> str:
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


class Output(str, Enum):
    """How a front end prints a result: Rich's report, or its JSON document (``to_dict``).
    Each has its printer in ``OUTPUTS``."""

    RICH = "rich"
    JSON = "json"

    @classmethod
    def of(cls, json: bool) -> Output:
        """The output a ``--json`` flag asks for."""
        return cls.JSON if json else cls.RICH


def _print_rich(result: Rendered) -> None:
    from rich.console import Console

    Console(highlight=False).print(renderable(result, CLI))


def _print_json(result: Rendered) -> None:
    import typer

    from autogradcli.render.json import dumps

    typer.echo(dumps(result.to_dict()))


OUTPUTS: dict[Output, Callable[[Rendered], None]] = {
    Output.RICH: _print_rich,
    Output.JSON: _print_json,
}


def show(result: Rendered, output: Output | bool = Output.RICH) -> None:
    """Print a result to standard output: its Rich report (the CLI's words) or its JSON
    document (``output`` True means JSON)."""
    chosen = Output.of(output) if isinstance(output, bool) else Output(output)
    OUTPUTS[chosen](result)
