"""IPython magics: ``%load_ext autogradcli``, then ``%%autograd`` heads a cell to check it
and ``%autograd`` checks one expression.

The words after the magic are the command line's (``%%autograd --dtype float64``,
``%autograd jacobian "x*y" --x 2 --y 3``): they run through the same Typer app, so options,
errors and verdicts are the command line's. The report shows as HTML in Jupyter and as
Rich text in a terminal IPython; the result object is kept in ``_autograd``.
"""

from __future__ import annotations

import io
import shlex
import sys
from typing import Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

RESULT_NAME = "_autograd"  # where the last result is kept in the user's namespace


def words_of(line: str, program: str | None = None) -> list[str]:
    """The command line of a magic: its words, ``grad`` first unless they name another
    command; a cell magic's program comes from standard input (``-``)."""
    from autogradcli import line_commands

    words = shlex.split(line, comments=True)
    if not words or words[0] not in line_commands():
        words = ["grad", *words]
    if program is not None:
        words.insert(1, "-")
    return words


def check(line: str, program: str | None = None) -> tuple[Any, int, str]:
    """Run the magic's command line: its result (None when it was refused), its exit code
    and what it wrote to standard error (the ``Error:`` line of a refusal)."""
    from autogradcli.cli.errors import CAPTURED
    from autogradcli.cli.lines import run

    try:
        words = words_of(line, program)
    except ValueError as exc:  # shlex: an unclosed quote
        return None, 2, f"Error: the magic's options cannot be read: {exc}\n"
    captured: list[object] = []
    token = CAPTURED.set(captured)
    stdin = sys.stdin
    if program is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(program.encode()), encoding="utf-8")
    try:
        outcome = run(words, capture=True)
    finally:
        sys.stdin = stdin
        CAPTURED.reset(token)
    result = captured[0] if captured else None
    code = outcome.exit_code
    if result is not None:
        stopped = getattr(result, "error", None)
        code = 2 if stopped is not None else 0 if getattr(result, "agree", True) else 1
    return result, code, outcome.stderr + _stopped_line(result)


def _stopped_line(result: Any) -> str:
    """The ``Error:`` line of a cell that stopped on an error, as the command line ends."""
    from autogradcli.messages import CLI, error_text

    stopped = getattr(result, "error", None)
    if stopped is None:
        return ""
    return f"Error: {' '.join(error_text(stopped, CLI).split())}\n"


def show(result: Any, shell: Any) -> None:
    """The report: HTML where the front end draws it (Jupyter), Rich text in a terminal."""
    if getattr(shell, "kernel", None) is not None:
        from IPython.display import publish_display_data

        from autogradcli.render import html

        summary = f"autograd-cli: {getattr(result, 'verdict', 'done')}"
        publish_display_data({"text/html": html(result), "text/plain": summary})
        return
    from rich.console import Console

    from autogradcli.messages import PYTHON
    from autogradcli.render import renderable

    Console().print(renderable(result, PYTHON))


@magics_class
class AutogradMagics(Magics):
    """``%%autograd [OPTIONS]`` and ``%autograd [COMMAND] EXPRESSION [OPTIONS]``."""

    def _answer(self, line: str, program: str | None) -> None:
        result, _, errors = check(line, program)
        if result is not None:
            self.shell.user_ns[RESULT_NAME] = result
            show(result, self.shell)
        if errors:
            sys.stderr.write(errors)

    @cell_magic
    def autograd(self, line: str, cell: str) -> None:
        """Check the cell below, as ``autograd-cli grad -`` with the options on this line."""
        self._answer(line, cell)

    @line_magic("autograd")
    def autograd_line(self, line: str) -> None:
        """Check one expression: ``%autograd "x**2" --x 3`` (a command may come first)."""
        self._answer(line, None)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext autogradcli``: register the magics."""
    ipython.register_magics(AutogradMagics)
