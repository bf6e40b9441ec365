"""Where the library's errors meet the command line: one ``Error: ...`` line, exit 2.

The library raises errors as codes with data; here their sentences are made with this
program's flags (``--repeat 2``), and an unknown variable that looks like a mistyped option
gets a hint.
"""

from __future__ import annotations

import difflib
import errno
import io
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from typing import Any, NoReturn

import typer

from autogradcli import BROKEN_PIPE
from autogradcli.errors import AutogradCliError, UnknownVariableError
from autogradcli.messages import CLI, error_text
from autogradcli.render import Output
from autogradcli.render.json import error_document

USAGE_EXIT = 2
# Errors of writing the output: a reader that left (``| head``), a full disk or quota.
OUTPUT_ERRNOS = frozenset({errno.EPIPE, errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class OutputError(Exception):
    """Standard output could not be written (``error``: the ``OSError``)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


@contextmanager
def rich_pipe() -> Iterator[None]:
    """Rich's answer to a closed pipe (``Console.on_broken_pipe``: standard output to the
    null device, then ``SystemExit(1)``, which reads as "disagree") as an ``OutputError``,
    which ends quietly with 141. Only around Rich's printing: nothing else there exits."""
    try:
        yield
    except SystemExit as exc:
        if exc.code != 1:
            raise
        raise OutputError(BrokenPipeError(errno.EPIPE, "Broken pipe")) from None


def output_failed(error: OSError) -> int:
    """The exit code for output that could not be written: a closed pipe ends quietly
    (141); a full disk is one ``Error:`` line (2). Standard output then goes to the null
    device, so nothing fails again when Python flushes it at exit."""
    import os
    import sys

    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass  # not a real file (a test's capture): nothing to flush at exit
    if error.errno == errno.EPIPE:
        return BROKEN_PIPE
    detail = str(error.strerror or error)
    _say(f"Error: {error_text(Coded('output_failed', detail=detail), CLI)}")
    return USAGE_EXIT


def report_internal(exc: BaseException, output: Output) -> None:
    """An unexpected exception (a bug) as one ``Error: internal error (...)`` line, and
    under ``AUTOGRAD_CLI_TRACEBACK=1`` its traceback before it."""
    import os
    import sys
    import traceback

    if os.environ.get("AUTOGRAD_CLI_TRACEBACK", "") not in ("", "0"):
        traceback.print_exception(exc, file=sys.stderr)
    report_error(internal_text(exc), "error", "internal_error", output)


def internal_text(exc: BaseException) -> str:
    """``internal error (KeyError: 'x'); this is a bug ...``."""
    lines = str(exc).strip().splitlines()
    detail = lines[0] if lines else "no message"
    return error_text(Coded("internal_error", error=type(exc).__name__, detail=detail), CLI)


def _say(line: str) -> None:
    """A line on standard error, unless standard error itself cannot be written."""
    with suppress(OSError):
        typer.echo(line, err=True)


def report_error(message: str, kind: str, code: str, output: Output, in_place: Any = None) -> None:
    """``Error: ...`` on stderr; with ``--json`` also ``{"error": ...}`` on stdout."""
    message = " ".join(message.split())
    if output is Output.JSON:
        with suppress(OSError):  # standard output gone: the line on stderr still says it
            typer.echo(error_document(kind, code, message, in_place))
    _say(f"Error: {message}")


def fail(message: str, kind: str, code: str, output: Output, in_place: Any = None) -> NoReturn:
    report_error(message, kind, code, output, in_place)
    raise typer.Exit(USAGE_EXIT)


@contextmanager
def errors(ctx: typer.Context | None, output: Output) -> Iterator[None]:
    """Every error of a command as one ``Error: ...`` line, exit 2."""
    try:
        yield
    except UnknownVariableError as exc:
        message = error_text(exc, CLI) + _suggest_option(exc.name, ctx)
        fail(message, exc.kind, exc.code, output)
    except AutogradCliError as exc:
        fail(error_text(exc, CLI), exc.kind, exc.code, output, exc.data.get("changes"))
    except (ArithmeticError, RecursionError, TypeError, ValueError) as exc:
        # A failure inside PyTorch, SymPy or NumPy on input the checks let through.
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        code = "library_failure"
        message = error_text(Coded(code, error=type(exc).__name__, detail=detail), CLI)
        fail(message, "computation", code, output)


class Coded:
    """A message code and its data, for ``messages.error_text``."""

    def __init__(self, code: str, **data: Any) -> None:
        self.code = code
        self.data = data


def _suggest_option(name: str, ctx: typer.Context | None) -> str:
    """``; did you mean --json?`` when an unknown variable looks like a mistyped option."""
    if ctx is None:
        return ""
    options = [
        o[2:]
        for p in ctx.command.params
        if p.param_type_name == "option"
        for o in p.opts
        if o.startswith("--")
    ]
    close = difflib.get_close_matches(name.replace("_", "-"), options, n=1, cutoff=0.6)
    return f"; did you mean --{close[0]}?" if close else ""


def program_text(expression: str, limit: int) -> str:
    """The expression argument, or the program in ``@FILE`` (a regular file) or on standard
    input (``-``); at most ``limit`` characters are read (the parser says if there are
    more)."""
    import sys

    from autogradcli.errors import ValueSpecError

    if expression == "-":
        path = "-"
        data = sys.stdin.buffer.read(4 * (limit + 1))
    elif not expression.startswith("@") or "\n" in expression:
        return expression
    else:
        path = expression[1:]
        data = _program_bytes(path, 4 * (limit + 1))
    if len(data) == 4 * (limit + 1):  # at least limit + 1 characters: say what was read
        _too_long_read(path, len(data), limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if len(data) == 4 * (limit + 1) and exc.start >= len(data) - 3:  # cut mid-character
            return data[: exc.start].decode("utf-8")
        reason = f"it is not UTF-8 (byte {exc.start + 1})"
        raise ValueSpecError("program_file", path=path, reason=reason) from None


def _too_long_read(path: str, read: int, limit: int) -> NoReturn:
    """The program read was cut at ``read`` bytes: more than ``limit`` characters (the
    file's size in bytes where it has one)."""
    import os

    from autogradcli.errors import LimitError

    size = ""
    if path != "-":
        with suppress(OSError):
            size = f"; the file has {os.stat(path).st_size:,} bytes"
    shown = "standard input" if path == "-" else f"@{path}"
    raise LimitError("expression_too_long_read", path=shown, read=read, size=size, limit=limit)


def _program_bytes(path: str, size: int) -> bytes:
    """At most ``size`` bytes of the regular file ``path``."""
    import sys

    from autogradcli.reads import open_regular

    with unreadable_as("program_file", path), open_regular(path, sys.maxsize, f"@{path}") as f:
        return f.read(size)


@contextmanager
def unreadable_as(code: str, path: str) -> Iterator[None]:
    """A file that cannot be opened or read is the error ``code`` (with its path and the
    system's reason); the reader's other errors (not regular, too large) pass as they are."""
    from autogradcli.errors import ValueSpecError

    try:
        yield
    except OSError as exc:
        raise ValueSpecError(code, path=path, reason=exc.strerror or exc) from None
    except ValueSpecError as exc:
        if exc.code != "file_unreadable":
            raise
        raise ValueSpecError(code, path=path, reason=exc.data["detail"]) from None


# A front end that shows the result object itself (the IPython magics, magics.py) sets a
# list here: ``finish`` hands the result to it instead of printing it.
CAPTURED: ContextVar[list[object] | None] = ContextVar("captured", default=None)


def finish(result: object, output: Output, after: Sequence[str] = ()) -> NoReturn:
    """Print the result (Rich or JSON) and exit with its verdict's code (a result without
    a verdict: 0); a cell that stopped on an error shows what it ran, then the error line
    (exit 2). ``after``: lines printed after a Rich report (``wrote FILE``)."""
    from autogradcli.render import show

    captured = CAPTURED.get()
    if captured is not None:
        captured.append(result)
        raise typer.Exit(0)

    with rich_pipe():
        show(result, output)
    if output is Output.RICH:
        for line in after:
            typer.echo(line)
    stopped = getattr(result, "error", None)
    if stopped is not None:
        typer.echo(f"Error: {' '.join(error_text(stopped, CLI).split())}", err=True)
        raise typer.Exit(USAGE_EXIT)
    raise typer.Exit(0 if getattr(result, "agree", True) else 1)


@contextmanager
def waiting(enabled: bool) -> Iterator[None]:
    """On a terminal, what the library is doing, on standard error, once the work has taken
    half a second (``progress.stage``); nothing in pipes, in --json or with --quiet."""
    import sys

    if not enabled or not sys.stderr.isatty():
        yield
        return
    import threading

    from rich.console import Console

    from autogradcli.progress import REPORT

    status = Console(stderr=True).status("working")
    state = {"text": "working", "shown": False}
    lock = threading.Lock()

    def show() -> None:
        with lock:
            state["shown"] = True
            status.update(str(state["text"]))
            status.start()

    def report(text: str, done: int = 0, total: int = 0) -> None:
        if total:  # a counted step: a bar
            filled = 24 * done // total
            text = f"{text} {'━' * filled}{'╺' * (24 - filled)} {done}/{total}"
        with lock:
            state["text"] = text
            if state["shown"]:
                status.update(text)

    timer = threading.Timer(0.5, show)
    timer.daemon = True
    token = REPORT.set(report)
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        REPORT.reset(token)
        with lock:
            if state["shown"]:
                status.stop()
