"""The `check` command's front end: progress on a terminal, a line per case that did not
agree, the summary; JSON Lines and JUnit XML (the cases run in ``batch``)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import typer

from autogradcli.cli.batch import Case, Done, exit_code, junit_xml, run_all, summary
from autogradcli.cli.parsing import write
from autogradcli.render import Output


def run_check(
    cases: list[Case],
    name: str,
    output: Output,
    junit: Path | None,
    jobs: int,
    fail_fast: bool,
) -> int:
    """Run the cases, print what the options ask for, and give the exit code."""
    from autogradcli.render.json import dumps

    start = time.perf_counter()
    if output is Output.JSON:
        done = run_all(cases, jobs, fail_fast, lambda d: typer.echo(dumps(d.to_dict())))
    else:
        done = _with_progress(cases, jobs, fail_fast)
    seconds = time.perf_counter() - start
    totals = summary(done, seconds)
    if junit is not None:
        write(junit, junit_xml(done, Path(name).name, seconds), "junit-xml")
    if output is Output.JSON:
        typer.echo(dumps({"summary": totals}))
    else:
        from rich.console import Console

        from autogradcli.render.check import render_summary

        Console(highlight=False).print(render_summary(totals))
    return exit_code(done)


def _with_progress(cases: list[Case], jobs: int, fail_fast: bool) -> list[Done]:
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

        return run_all(cases, jobs, fail_fast, each)
