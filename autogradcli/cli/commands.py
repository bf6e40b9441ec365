"""The command line's commands, thin: read the options, call the API, finish.

Each is a Typer function that the command registry (``autogradcli.COMMANDS``) names; the
app (``cli/app.py``) registers them. A command the registry lists without one gets
``generic``: an expression, ``--NAME VALUE`` values and the shared settings. torch and
SymPy load only inside a command, so ``--help`` answers at once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from autogradcli import Command, resolve
from autogradcli.cli.errors import errors, finish, program_text, unreadable_as
from autogradcli.cli.options import (
    AllowWritesOption,
    ConstOption,
    ExpectOption,
    ExplainOption,
    FunctionalOption,
    InspectOption,
    OrderOption,
    RepeatOption,
    RetainGradOption,
    RetainGraphOption,
    SameGraphOption,
    ShowRowsOption,
    VarOption,
    WeightsOption,
    ZeroGradOption,
    with_settings,
)
from autogradcli.cli.parsing import (
    ExpressionArg,
    check_file,
    expectations,
    may_write,
    read_files,
    tangents,
    variables,
    write,
)
from autogradcli.errors import VariableError
from autogradcli.render import Output
from autogradcli.settings import Settings, parse_number

DEFAULT = Settings()  # replaced by @with_settings with the one built from the options
RICH = Output.RICH  # replaced by @with_settings with the one --json asks for


def _run(
    ctx: typer.Context,
    output: Output,
    var: list[str] | None,
    expression: str,
    call: Callable[[Any], Any],
) -> NoReturn:
    """Read the values, call the API (errors become one line), show the result, exit."""
    with errors(ctx, output):
        result = call(variables(var or [], expression))
    finish(result, output)


def _program(ctx: typer.Context, output: Output, expression: str, settings: Settings) -> str:
    """The expression, or the program read from ``@FILE`` or standard input (``-``)."""
    with errors(ctx, output):
        return program_text(expression, settings.limits.max_length)
    raise AssertionError  # errors() exits


def generic(command: Command) -> Callable[..., Any]:
    """The command-line command of a registry entry that names no Typer function: the
    expression, its values, ``--const`` and the shared settings, handed to its API
    function."""

    @with_settings()
    def run(
        ctx: typer.Context,
        expression: ExpressionArg,
        var: VarOption = None,
        const: ConstOption = None,
        settings: Settings = DEFAULT,
        output: Output = RICH,
    ) -> None:
        function = resolve(command.function or "")
        expression = _program(ctx, output, expression, settings)
        _run(ctx, output, var, expression, lambda values: function(
            expression, values, settings=settings, const=const or []
        ))  # fmt: skip

    run.__doc__ = command.summary
    run.__name__ = command.name
    return run


# Options of `grad` that --order cannot combine with, and how to tell they were given.
ORDER_CLASHES = ("weights", "repeat", "same_graph", "retain_graph", "zero_grad", "inspect")
ORDER_CLASHES += ("retain_grad", "explain", "expect", "functional")


@with_settings(skip=("max_entries",))
def grad(
    ctx: typer.Context,
    expression: ExpressionArg,
    var: VarOption = None,
    weights: WeightsOption = None,
    repeat: RepeatOption = "1",
    same_graph: SameGraphOption = False,
    retain_graph: RetainGraphOption = False,
    zero_grad: ZeroGradOption = False,
    functional: FunctionalOption = False,
    inspect: InspectOption = False,
    retain_grad: RetainGradOption = None,
    explain: ExplainOption = False,
    expect: ExpectOption = None,
    order: OrderOption = "1",
    const: ConstOption = None,
    settings: Settings = DEFAULT,
    output: Output = RICH,
) -> None:
    """Compute gradients with autograd's backward() and check them against SymPy."""
    import autogradcli as ag

    expression = _program(ctx, output, expression, settings)
    with errors(ctx, output):
        passes, k = parse_number("repeat", repeat), parse_number("order", order)
    given = {
        "weights": weights is not None and weights.strip() != "ones",
        "repeat": passes > 1,
        "same_graph": same_graph,
        "retain_graph": retain_graph,
        "zero_grad": zero_grad,
        "functional": functional,
        "inspect": inspect,
        "retain_grad": bool(retain_grad),
        "explain": explain,
        "expect": bool(expect),
    }
    with errors(ctx, output):
        values = variables(var or [], expression)
        expected = expectations(expect or [])
        if k > 1:
            clash = [option for option in ORDER_CLASHES if given[option]]
            if clash:
                raise VariableError("order_combination", order=k, option=clash[0])
            derived = ag.derivative(
                expression, values, order=k, settings=settings, const=const or []
            )
            finish(derived, output)
        result = ag.grad(
            expression,
            values,
            settings=settings,
            weights=weights,
            repeat=passes,
            same_graph=same_graph,
            retain_graph=retain_graph,
            zero_grad=zero_grad,
            functional=functional,
            inspect=inspect,
            retain_grad=retain_grad or [],
            explain=explain,
            const=const or [],
            expect=expected,
        )
    finish(result, output)


@with_settings()
def jacobian(
    ctx: typer.Context,
    expression: ExpressionArg,
    var: VarOption = None,
    show_rows: ShowRowsOption = False,
    const: ConstOption = None,
    settings: Settings = DEFAULT,
    output: Output = RICH,
) -> None:
    """The full Jacobian: one backward() per output element with a one-hot gradient."""
    import autogradcli as ag

    expression = _program(ctx, output, expression, settings)
    _run(ctx, output, var, expression, lambda values: ag.jacobian(
        expression, values, settings=settings, const=const or [], rows=show_rows
    ))  # fmt: skip


@with_settings()
def jvp(
    ctx: typer.Context,
    expression: ExpressionArg,
    var: VarOption = None,
    tangent: Annotated[
        list[str] | None,
        typer.Option(
            "--tangent",
            metavar="NAME=VALUE",
            help="The direction v for input NAME (values as for inputs); repeat per input. "
            "Default: ones.",
        ),
    ] = None,
    const: ConstOption = None,
    settings: Settings = DEFAULT,
    output: Output = RICH,
) -> None:
    """Forward mode: J·v with torch.func.jvp, checked against SymPy's Jacobian times v."""
    import autogradcli as ag

    expression = _program(ctx, output, expression, settings)
    _run(ctx, output, var, expression, lambda values: ag.jvp(
        expression, values, tangents=tangents(tangent or []), settings=settings,
        const=const or [],
    ))  # fmt: skip


@with_settings()
def hessian(
    ctx: typer.Context,
    expression: ExpressionArg,
    var: VarOption = None,
    const: ConstOption = None,
    settings: Settings = DEFAULT,
    output: Output = RICH,
) -> None:
    """Second derivatives of a one-element output, via create_graph=True, against SymPy."""
    import autogradcli as ag

    expression = _program(ctx, output, expression, settings)
    _run(ctx, output, var, expression, lambda values: ag.hessian(
        expression, values, settings=settings, const=const or []
    ))  # fmt: skip


@with_settings(skip=("rtol", "atol", "numeric", "strict", "max_entries", "latex", "full"))
def graph(
    ctx: typer.Context,
    expression: ExpressionArg,
    var: VarOption = None,
    dot: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE", help="Write the graph as Graphviz DOT text to FILE ('-': print it)."
        ),
    ] = None,
    svg: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="Render the graph to FILE as SVG (needs Graphviz)."),
    ] = None,
    png: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="Render the graph to FILE as PNG (needs Graphviz)."),
    ] = None,
    saved: Annotated[
        bool,
        typer.Option(
            "--saved",
            help="Show what each node keeps for backward (grad_fn._saved_*: shapes, dtypes, "
            "first values), then run backward() once and show that reading them fails.",
        ),
    ] = False,
    const: ConstOption = None,
    settings: Settings = DEFAULT,
    output: Output = RICH,
) -> None:
    """Show the backward graph PyTorch records: grad_fn nodes down to the leaves."""
    from dataclasses import replace

    import autogradcli as ag
    from autogradcli.render import dot as dots

    read = read_files(expression, var or [])
    expression = _program(ctx, output, expression, settings)
    with errors(ctx, output):
        to_stdout = dot is not None and str(dot) == "-"
        if to_stdout and output is Output.JSON:
            raise VariableError("dot_stdout_json")
        images = [(path, fmt) for path, fmt in ((svg, "svg"), (png, "png")) if path is not None]
        if dot is not None and not to_stdout:
            may_write(dot, "dot", read)
        for path, fmt in images:
            check_file(path, fmt)
            may_write(path, fmt, read)
        if images:
            dots.need_graphviz(images[0][1])
        values = variables(var or [], expression)
        built = ag.backward_graph(
            expression, values, settings=settings, const=const or [], saved=saved
        )
        text = dots.to_dot(built)
        written = []
        if dot is not None and not to_stdout:
            write(dot, text, "dot")
            written.append(str(dot))
        for path, fmt in images:
            dots.render_image(text, path, fmt)
            written.append(str(path))
    if to_stdout:
        typer.echo(text, nl=False)
        raise typer.Exit(0)
    built = replace(built, written=tuple(written))
    finish(built, output, [f"wrote {path}" for path in written])


@with_settings(skip=("max_entries", "latex", "full"))
def plot(
    ctx: typer.Context,
    expression: ExpressionArg,
    var: VarOption = None,
    wrt: Annotated[
        str | None, typer.Option(metavar="NAME", help="The variable along the axis.")
    ] = None,
    points: Annotated[str, typer.Option(metavar="N", help="Sample points (2 to 100000).")] = "200",
    order: OrderOption = "1",
    output_file: Annotated[
        Path | None,
        typer.Option(
            "--output", metavar="FILE", help="Write a .png, .svg or .pdf (needs matplotlib)."
        ),
    ] = None,
    settings: Settings = DEFAULT,
    output: Output = RICH,
) -> None:
    """Plot f, autograd's derivative and SymPy's over a range; mark where they disagree."""
    from dataclasses import replace

    import autogradcli as ag
    from autogradcli.render import plot as plots

    read = read_files(expression, var or [])
    expression = _program(ctx, output, expression, settings)
    with errors(ctx, output):
        values = variables(var or [], expression)
        if output_file is not None:
            check_file(output_file, "output")
            may_write(output_file, "output", read)
        result = ag.plot(expression, values, wrt=wrt, points=points, order=order, settings=settings)
        if output_file is not None:
            plots.to_file(result, output_file)
    if output_file is None:
        finish(result, output)
    result = replace(result, written=(str(output_file),))
    if output is Output.JSON:
        finish(result, output)
    typer.echo(f"wrote {output_file}")
    if plots.left_out_line(result):
        typer.echo(plots.left_out_line(result))
    typer.echo(plots.verdict_line(result))
    raise typer.Exit(0 if result.agree else 1)


def check(
    file: Annotated[
        str, typer.Argument(metavar="FILE", help="The cases: a file, or - for standard input.")
    ],
    json_output: Annotated[
        bool, typer.Option("--json", help="JSON Lines: one object per case, then a summary.")
    ] = False,
    junit_xml: Annotated[
        Path | None, typer.Option(metavar="FILE", help="Write a JUnit XML report to FILE.")
    ] = None,
    jobs: Annotated[
        str, typer.Option(metavar="N", help="Run the cases in N processes.", show_default=False)
    ] = "1",
    fail_fast: Annotated[
        bool, typer.Option("--fail-fast", help="Stop at the first case that does not agree.")
    ] = False,
    allow_writes: AllowWritesOption = False,
) -> None:
    """Run many cases from a file in one process, with a summary (and JUnit XML)."""
    output = Output.of(json_output)
    with errors(None, output):
        workers = parse_number("jobs", jobs)
        if junit_xml is not None:
            check_file(junit_xml, "junit-xml")
            may_write(junit_xml, "junit-xml", [] if file == "-" else [(file, "check file")])
        cases = _cases_text(file)
    from autogradcli.cli.checking import run_check

    raise typer.Exit(run_check(cases, file, output, junit_xml, workers, fail_fast, allow_writes))


def shell(allow_writes: AllowWritesOption = False) -> None:
    """Ask many questions with one start-up: commands, bindings (x = [1., 2.]) and settings."""
    from autogradcli.cli import shell as shells

    if sys.stdin.isatty():
        raise typer.Exit(shells.interactive())
    raise typer.Exit(shells.run_stream(sys.stdin.buffer, shells.Shell(allow_writes=allow_writes)))


def _cases_text(file: str) -> list[Any]:
    """The cases of a check file (a regular file) or of standard input (``-``): at most
    ``Limits().file_bytes`` bytes and ``MAX_CASES`` cases; a line too long, with a NUL
    byte or not UTF-8 is a bad case of its own."""
    from autogradcli.cli.batch import read_cases
    from autogradcli.reads import open_regular
    from autogradcli.settings import Limits

    limits = Limits()
    if file == "-":
        return read_cases(sys.stdin.buffer, limits, "-")
    with unreadable_as("check_file", file), open_regular(file, limits.file_bytes) as handle:
        return read_cases(handle, limits, file)
