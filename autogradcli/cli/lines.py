"""One command line run in this process: what `shell` and `check` do with each line.

A line is written exactly as on the command line, without the program name
(``grad "x**3" --x 2``); ``#`` starts a comment. It runs through the same Typer app as the
command line, so its options, errors and exit codes are the command line's.
"""

from __future__ import annotations

import contextlib
import functools
import io
import shlex
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from autogradcli import INTERNAL_ERROR, INTERRUPTED, line_commands
from autogradcli.cli.app import app
from autogradcli.cli.parsing import BOUND
from autogradcli.errors import ValueSpecError


@dataclass(frozen=True)
class Outcome:
    """A line's exit code (0 agree, 1 disagree, 2 bad input, 3 internal error), what it
    printed, its time."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0


def split(line: str) -> list[str]:
    """The line's words as a shell splits them; ``#`` comments dropped; an optional leading
    ``autograd-cli`` dropped (lines copied from a terminal)."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError as exc:
        raise ValueSpecError("line_syntax", reason=str(exc)) from None
    if words and words[0] == "autograd-cli":
        words = words[1:]
    if words and words[0] not in line_commands():
        raise ValueSpecError("line_command", word=words[0], commands=", ".join(line_commands()))
    return words


@functools.cache
def group() -> Any:
    """The Click group of the Typer app, built once (building it takes about 15 ms); a
    command registered later is found by the group itself."""
    from typer.main import get_command

    return get_command(app)


def run(words: list[str], capture: bool = False) -> Outcome:
    """Run one command's words in this process, as ``autograd-cli WORDS`` would."""
    start = time.perf_counter()
    out, err = io.StringIO(), io.StringIO()
    with _captured(out, err) if capture else contextlib.nullcontext():
        try:
            group().main(args=words, prog_name="autograd-cli", standalone_mode=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    if code == INTERRUPTED:  # the app's answer to Ctrl-C: the caller decides what stops
        raise KeyboardInterrupt
    return Outcome(code, out.getvalue(), err.getvalue(), time.perf_counter() - start)


@contextlib.contextmanager
def _captured(out: io.StringIO, err: io.StringIO) -> Iterator[None]:
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        yield


__all__ = ["BOUND", "Outcome", "group", "line_commands", "run", "split", "worst"]


def worst(codes: list[int]) -> int:
    """The exit code of many lines: 3 if any met an internal error, else 2 if any was bad
    input, else 1 if any disagreed, else 0."""
    return next((c for c in (INTERNAL_ERROR, 2, 1) if c in codes), 0)
