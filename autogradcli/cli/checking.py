"""The `check` command's front end: progress on a terminal, a line per case that did not
agree, the summary; JSON Lines and JUnit XML (the cases run in ``batch``).

A run stopped by Ctrl-C (exit 130) or SIGTERM (exit 143) still prints the summary of the
cases that finished, and writes the JUnit report of them. Ctrl-C stops the run whatever
SIGINT handler the process started with: a command started in a shell script's background
inherits SIGINT ignored, and Python then leaves it ignored (the warm worker's path always
answered it; the two paths now agree).
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from autogradcli import INTERRUPTED, TERMINATED
from autogradcli.cli.batch import Case, Done, exit_code, junit_xml, run_all, summary
from autogradcli.cli.errors import Coded, rich_pipe
from autogradcli.cli.parsing import write
from autogradcli.errors import AutogradCliError
from autogradcli.messages import CLI, error_text
from autogradcli.render import Output


class Terminated(BaseException):
    """SIGTERM arrived: raised in the main thread, so the run stops where it is."""


STOPS = {signal.SIGINT: ("Ctrl-C", INTERRUPTED), signal.SIGTERM: ("SIGTERM", TERMINATED)}


class _Stops:
    """The handler of SIGINT and SIGTERM while ``check`` runs. While the cases run
    (``armed``) each raises ``KeyboardInterrupt`` or ``Terminated`` in the main thread;
    before and after, it is noted (``caught``, the first), never raised where the report
    is being made. One that came before ``arm`` is raised by ``arm``."""

    def __init__(self) -> None:
        self.armed = False
        self.caught: int | None = None

    def __call__(self, number: int, frame: Any) -> None:
        if self.caught is None:
            self.caught = number
        if self.armed:
            raise _exception(number)

    def arm(self) -> None:
        self.armed = True
        if self.caught is not None and self.armed:  # it came while the run was starting
            self.armed = False
            raise _exception(self.caught)

    def disarm(self) -> None:
        self.armed = False


def _exception(number: int) -> BaseException:
    return KeyboardInterrupt() if number == signal.SIGINT else Terminated()


@contextmanager
def stops_installed() -> Iterator[_Stops]:
    """``_Stops`` as the handler of SIGINT and SIGTERM (main thread only; elsewhere the
    signals keep theirs, and the run still stops on a KeyboardInterrupt). Entered again
    inside itself it gives the same one: a command that enters it before it reads its
    cases keeps a Ctrl-C that comes meanwhile for the run, which then stops at once."""
    current = signal.getsignal(signal.SIGINT)
    if isinstance(current, _Stops):
        yield current
        return
    stops = _Stops()
    before: dict[int, Any] = {}
    try:
        for number in STOPS:
            before[number] = signal.signal(number, stops)
    except ValueError:  # not the main thread
        pass
    try:
        yield stops
    finally:
        for number, handler in before.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)


def run_check(
    cases: list[Case],
    name: str,
    output: Output,
    junit: Path | None,
    jobs: int,
    fail_fast: bool,
    allow_writes: bool = False,
) -> int:
    """Run the cases, print what the options ask for, and give the exit code."""
    with rich_pipe(), stops_installed() as stops:
        return _run_check(cases, name, output, junit, jobs, fail_fast, allow_writes, stops)


def _run_check(
    cases: list[Case],
    name: str,
    output: Output,
    junit: Path | None,
    jobs: int,
    fail_fast: bool,
    allow_writes: bool,
    stops: _Stops,
) -> int:
    """The run under ``stops``: a signal while the cases run stops them; one that comes
    after them, before the summary is made, still counts (the run reports it stopped).
    Every case that finished is printed once, wherever the signal landed."""
    from autogradcli.render.json import dumps

    start = time.perf_counter()
    done: list[Done] = []
    shown: list[Done] = []
    if output is Output.JSON:

        def show(d: Done) -> None:
            typer.echo(dumps(d.to_dict()))

    else:
        from rich.console import Console

        from autogradcli.render.check import case_line

        out = Console(highlight=False)

        def show(d: Done) -> None:
            if d.exit_code != 0:
                out.print(case_line(d))

    each = _held(stops, show, shown)
    stopped, code = None, None
    try:
        try:
            stops.arm()
            if output is Output.JSON:
                run_all(cases, jobs, fail_fast, each, done, allow_writes)
            else:
                _with_progress(cases, jobs, fail_fast, done, allow_writes, each)
        finally:
            stops.disarm()
    except KeyboardInterrupt:
        stops.disarm()
        stopped, code = STOPS[signal.SIGINT]
    except Terminated:
        stops.disarm()
        stopped, code = STOPS[signal.SIGTERM]
    for d in done[len(shown) :]:  # finished, and the signal came before it was printed
        show(d)
    seconds = time.perf_counter() - start
    failed = None
    if junit is not None:
        try:
            write(junit, junit_xml(done, Path(name).name, seconds), "junit-xml")
        except AutogradCliError as exc:  # a full disk, a folder that is not there
            failed = exc
    if stopped is None and stops.caught is not None:  # after the last case, before now
        stopped, code = STOPS[stops.caught]
    totals = summary(done, seconds, stopped, code)  # a signal from here on changes nothing
    if output is Output.JSON:
        typer.echo(dumps({"summary": totals}))
    else:
        from rich.console import Console

        from autogradcli.render.check import render_summary

        Console(highlight=False).print(render_summary(totals))
    if stopped is not None:
        sentence = Coded("check_stopped", signal=stopped, done=len(done), total=len(cases))
        typer.echo(error_text(sentence, CLI), err=True)
    if failed is not None:
        typer.echo(f"Error: {' '.join(error_text(failed, CLI).split())}", err=True)
    if code is not None:
        return code
    return 2 if failed is not None and exit_code(done) < 2 else exit_code(done)


def _held(stops: _Stops, show: Callable[[Done], None], shown: list[Done]) -> Callable[[Done], None]:
    """``show`` of each finished case with the signals held (noted, then raised): a case
    is printed and added to ``shown`` together, or neither."""

    def each(d: Done) -> None:
        stops.disarm()
        try:
            show(d)
            shown.append(d)
        finally:
            stops.arm()

    return each


def _with_progress(
    cases: list[Case],
    jobs: int,
    fail_fast: bool,
    done: list[Done],
    allow_writes: bool,
    each: Callable[[Done], None],
) -> list[Done]:
    """Rich's progress bar on standard error when it is a terminal; ``each`` case
    printed as it comes."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    err = Console(stderr=True)
    show = err.is_terminal and sys.stderr.isatty()
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not show,
    ) as progress:
        task = progress.add_task("checking", total=len(cases))

        def advanced(d: Done) -> None:
            progress.advance(task)
            each(d)

        return run_all(cases, jobs, fail_fast, advanced, done, allow_writes)
