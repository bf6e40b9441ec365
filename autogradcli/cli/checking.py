"""The `check` command's front end: progress on a terminal, a line per case that did not
agree, the summary; JSON Lines and JUnit XML (the cases run in ``batch``).

A run stopped by Ctrl-C (exit 130) or SIGTERM (exit 143) still prints the summary of the
cases that finished, and writes the JUnit report of them.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Iterator
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


@contextmanager
def _sigterm_stops() -> Iterator[None]:
    """SIGTERM raises ``Terminated`` while the cases run (main thread only)."""

    def stop(number: int, frame: Any) -> None:
        raise Terminated

    try:
        before = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: SIGTERM keeps its handler
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


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
    with rich_pipe():
        return _run_check(cases, name, output, junit, jobs, fail_fast, allow_writes)


def _run_check(
    cases: list[Case],
    name: str,
    output: Output,
    junit: Path | None,
    jobs: int,
    fail_fast: bool,
    allow_writes: bool,
) -> int:
    from autogradcli.render.json import dumps

    start = time.perf_counter()
    done: list[Done] = []
    stopped, code = None, None
    try:
        with _sigterm_stops():
            if output is Output.JSON:

                def each(d: Done) -> None:
                    typer.echo(dumps(d.to_dict()))

                run_all(cases, jobs, fail_fast, each, done, allow_writes)
            else:
                _with_progress(cases, jobs, fail_fast, done, allow_writes)
    except KeyboardInterrupt:
        stopped, code = "Ctrl-C", INTERRUPTED
    except Terminated:
        stopped, code = "SIGTERM", TERMINATED
    seconds = time.perf_counter() - start
    totals = summary(done, seconds, stopped, code)
    failed = None
    if junit is not None:
        try:
            write(junit, junit_xml(done, Path(name).name, seconds), "junit-xml")
        except AutogradCliError as exc:  # a full disk, a folder that is not there
            failed = exc
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


def _with_progress(
    cases: list[Case], jobs: int, fail_fast: bool, done: list[Done], allow_writes: bool
) -> list[Done]:
    """Rich's progress bar on standard error when it is a terminal; each case that did not
    agree printed as it comes."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from autogradcli.render.check import case_line

    out = Console(highlight=False)
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

        def each(done: Done) -> None:
            progress.advance(task)
            if done.exit_code != 0:
                out.print(case_line(done))

        return run_all(cases, jobs, fail_fast, each, done, allow_writes)
