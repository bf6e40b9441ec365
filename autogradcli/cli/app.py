"""The command line: each command parses its options, calls the Python API, and hands the
result to a renderer.

torch and SymPy are imported only inside commands, so ``--help`` and ``--version`` answer at
once. Every domain error becomes one ``Error: ...`` line on stderr (exit 2), its sentence
spelled with this program's flags.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperCommand, TyperGroup

from autogradcli import __version__
from autogradcli.cli.edge import errors, finish, program_text, report_error, unreadable_as
from autogradcli.cli.lines import BOUND
from autogradcli.cli.options import (
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
from autogradcli.errors import AutogradCliError, ValueSpecError, VariableError
from autogradcli.lang.vocabulary import elementwise_names, function_names
from autogradcli.settings import Settings, parse_number

DEFAULT = Settings()  # replaced by @with_settings with the one built from the options

# Click's exception classes, reached through Typer's public BadParameter (they are Click's
# UsageError and ClickException, whichever Click Typer uses).
USAGE_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
CLICK_EXCEPTION = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


class AutogradGroup(TyperGroup):
    """Turns Click's own usage errors into the same one-line ``Error: ...`` (exit 2)."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        try:
            rv = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except (CLICK_EXCEPTION, _Usage) as exc:
            if not standalone_mode:
                raise
            ctx = getattr(exc, "ctx", None)
            if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
                typer.echo(ctx.get_help())  # no arguments at all: the help, exit 0
                sys.exit(0)
            message = exc.format_message()
            ctx = getattr(exc, "ctx", None)
            if isinstance(exc, (USAGE_ERROR, _Usage)) and ctx is not None:
                message = f"{message.rstrip('.')}. See '{ctx.command_path} --help'."
            report_error(message, "usage", "usage", "--json" in argv)
            sys.exit(exc.exit_code)
        except typer.Abort:
            if not standalone_mode:
                raise
            if BOUND.get() is not None:  # in the shell: Ctrl-C cancels this line only
                raise KeyboardInterrupt from None
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        if standalone_mode:
            sys.exit(rv if isinstance(rv, int) else 0)
        return rv


class _Usage(Exception):
    """A usage error found while splitting the arguments (before Click parses them)."""

    exit_code = 2

    def __init__(self, message: str, ctx: typer.Context) -> None:
        super().__init__(message)
        self.ctx = ctx

    def format_message(self) -> str:
        return str(self)


class GradCommand(TyperCommand):
    """Accepts ``--NAME VALUE`` for any variable, options on either side of the expression,
    and an expression that starts with a minus. Known options pass through to Click;
    every other ``--NAME`` becomes ``--var NAME=VALUE``; the expression goes after ``--``."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        takes_value: dict[str, bool] = {}
        for param in self.get_params(ctx):
            if param.param_type_name == "option":  # Typer's options and Click's --help
                for opt in (*param.opts, *param.secondary_opts):
                    takes_value[opt] = not (param.is_flag or param.count)
        known: list[str] = []
        positional: list[str] = []
        after_flag: dict[str, str] = {}  # a word right after a flag: a value it does not take
        i = 0
        while i < len(args):
            token = args[i]
            name, has_eq, inline = token.partition("=")
            if token == "--":
                positional += args[i + 1 :]
                break
            if name in takes_value:
                step = 2 if takes_value[name] and not has_eq else 1
                known += args[i : i + step]
                i += step
                if not takes_value[name] and i < len(args) and not args[i].startswith("-"):
                    after_flag[args[i]] = name
                continue
            if token.startswith("--") and name[2:].isidentifier():
                value: str | None = inline if has_eq else None
                if not has_eq and i + 1 < len(args) and not args[i + 1].startswith("--"):
                    value = args[i + 1]
                    i += 1
                known += ["--var", name[2:] if value is None else f"{name[2:]}={value}"]
                i += 1
                continue
            positional.append(token)
            i += 1
        if (
            not positional
            and not set(args) & set(ctx.help_option_names)
            and not ctx.resilient_parsing
        ):
            raise _Usage(
                f'missing the expression; give it in quotes, e.g. {ctx.command_path} "x**2" --x 3',
                ctx,
            )
        if len(positional) > 1:
            flagged = next((w for w in positional[1:] if w in after_flag), None)
            if flagged is not None:
                flag = after_flag[flagged]
                raise _Usage(
                    f"{flag} is a flag and takes no value ('{flagged}'); write {flag}", ctx
                )
            raise _Usage(
                f"got more than one expression ({', '.join(map(repr, positional))}); quote the "
                "expression and give values as --NAME VALUE",
                ctx,
            )
        return super().parse_args(ctx, [*known, "--", *positional])


app = typer.Typer(
    cls=AutogradGroup,
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: fast to start, and wraps at word boundaries
    help="Gradients by PyTorch autograd, checked against SymPy's symbolic derivative.",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"autograd-cli {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
) -> None:
    """Gradients by PyTorch autograd, checked against SymPy's symbolic derivative."""


GRAD_EPILOG = (
    "Give each variable a value with --NAME VALUE, e.g. "
    'autograd-cli grad "2*x**4+x**3+3*x**2+5*x+1" --x 2, or '
    'autograd-cli grad "mean((x+2)*(x+2)*3)" --x "ones(2,2)" --repeat 2. '
    'Values: numbers, nested lists "[[1,2],[3,4]]", ones(2,2), zeros(3), full(2,3,0.5), '
    "arange(1,16), linspace(0,1,5), reshape(arange(1,16),5,3), rand(2,3), randn(2,3), "
    "or files @x.npy @x.pt @x.csv @x.json. "
    "Exit codes: 0 autograd and SymPy agree (or agree within rounding, without --strict), "
    "1 they disagree, 2 bad input."
)


def _complete_functions(incomplete: str) -> list[str]:
    """Shell completion of the expression: the function names, after what is typed."""
    import re

    head, word = re.match(r"(.*?)(\w*)$", incomplete, flags=re.S).groups()  # type: ignore[union-attr]
    return [head + name for name in function_names() if name.startswith(word)]


ExpressionArg = Annotated[
    str,
    typer.Argument(
        metavar="EXPRESSION",
        autocompletion=_complete_functions,
        help="Expression in Python syntax: + - * / ** (or ^) @, comparisons, x[i], "
        + " ".join(elementwise_names())
        + "; "
        + " ".join(n for n in function_names() if n not in elementwise_names())
        + " (as PyTorch spells them too: x.sum(0), torch.sin(x), F.relu(x)); constants pi "
        "e; or a program, a notebook cell: lines separated by ; or newlines, e.g. "
        '"y = x + 2; z = y*y*3; out = mean(z)", with torch.tensor(...) values, backward() '
        "calls and print(...). @FILE or - reads it from a file or standard input.",
        show_default=False,
    ),
]


def _variables(specs: list[str], expression: str = "") -> dict[str, str | None]:
    """``NAME=VALUE`` items as a dict (``NAME`` alone: no value); a name given twice is an
    error. In the shell, values bound earlier fill in the variables the expression needs."""
    values: dict[str, str | None] = {}
    for spec in specs:
        name, has_value, value = spec.partition("=")
        name = name.strip()
        if not name.isidentifier():
            raise VariableError("not_name_value", spec=spec)
        if name in values:
            raise VariableError("given_twice", name=name, first=values[name], second=value)
        values[name] = value if has_value else None
    return {**_bound(expression, values), **values}


def _bound(expression: str, given: dict[str, str | None]) -> dict[str, str]:
    """The shell's bound values of the expression's variables that were not given."""
    bound = BOUND.get()
    if not bound or not expression:
        return {}
    from autogradcli.lang.parser import parse_expression

    try:
        program = parse_expression(expression)
    except AutogradCliError:
        return {}  # the command itself reports it
    wanted = [n for n in program.variables if program.leaf(n) is None and n not in given]
    return {n: bound[n] for n in wanted if n in bound}


def _expectations(specs: list[str]) -> dict[str, str]:
    """``--expect NAME=VALUE`` items as a dict."""
    found: dict[str, str] = {}
    for spec in specs:
        name, has_value, value = spec.partition("=")
        if not has_value or not name.strip().isidentifier() or not value.strip():
            raise VariableError("expect_spec", spec=spec)
        found[name.strip()] = value
    return found


def _run(
    ctx: typer.Context,
    json_output: bool,
    var: list[str] | None,
    expression: str,
    call: Callable[[Any], Any],
) -> NoReturn:
    """Read the values, call the API (errors become one line), show the result, exit."""
    with errors(ctx, json_output):
        result = call(_variables(var or [], expression))
    _finish(result, json_output)


def _program(ctx: typer.Context, json_output: bool, expression: str, settings: Settings) -> str:
    """The expression, or the program read from ``@FILE`` or standard input (``-``)."""
    with errors(ctx, json_output):
        return program_text(expression, settings.limits.max_length)
    raise AssertionError  # errors() exits


def _finish(result: Any, json_output: bool) -> NoReturn:
    finish(result, json_output)


# Options of `grad` that --order cannot combine with, and how to tell they were given.
ORDER_CLASHES = ("weights", "repeat", "same_graph", "retain_graph", "zero_grad", "inspect")
ORDER_CLASHES += ("retain_grad", "explain", "expect", "functional")


@app.command(cls=GradCommand, epilog=GRAD_EPILOG)
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
    json_output: bool = False,
) -> None:
    """Compute gradients with autograd's backward() and check them against SymPy."""
    import autogradcli as ag

    expression = _program(ctx, json_output, expression, settings)
    with errors(ctx, json_output):
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
    with errors(ctx, json_output):
        values = _variables(var or [], expression)
        expected = _expectations(expect or [])
        if k > 1:
            clash = [option for option in ORDER_CLASHES if given[option]]
            if clash:
                raise VariableError("order_combination", order=k, option=clash[0])
            derived = ag.derivative(
                expression, values, order=k, settings=settings, const=const or []
            )
            _finish(derived, json_output)
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
    _finish(result, json_output)


JACOBIAN_EPILOG = (
    'Example: autograd-cli jacobian "x*sum(x)" --x "[1.0, 2.0]" --show-rows. '
    "Exit codes: 0 autograd and SymPy agree, 1 they disagree, 2 bad input."
)


@app.command(cls=GradCommand, epilog=JACOBIAN_EPILOG)
@with_settings()
def jacobian(
    ctx: typer.Context,
    expression: ExpressionArg,
    var: VarOption = None,
    show_rows: ShowRowsOption = False,
    const: ConstOption = None,
    settings: Settings = DEFAULT,
    json_output: bool = False,
) -> None:
    """The full Jacobian: one backward() per output element with a one-hot gradient."""
    import autogradcli as ag

    expression = _program(ctx, json_output, expression, settings)
    _run(ctx, json_output, var, expression, lambda values: ag.jacobian(
        expression, values, settings=settings, const=const or [], rows=show_rows
    ))  # fmt: skip


JVP_EPILOG = (
    'Example: autograd-cli jvp "x*y + sin(x)" --x "[1, 2]" --y "[3, 4]" --tangent x=[1,0] '
    "--tangent y=[0,1]. Values as for grad; an input without --tangent takes ones. "
    "Exit codes: 0 autograd and SymPy agree, 1 they disagree, 2 bad input."
)


@app.command(cls=GradCommand, epilog=JVP_EPILOG)
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
    json_output: bool = False,
) -> None:
    """Forward mode: J·v with torch.func.jvp, checked against SymPy's Jacobian times v."""
    import autogradcli as ag

    expression = _program(ctx, json_output, expression, settings)
    _run(ctx, json_output, var, expression, lambda values: ag.jvp(
        expression, values, tangents=_tangents(tangent or []), settings=settings,
        const=const or [],
    ))  # fmt: skip


def _tangents(given: list[str]) -> dict[str, str]:
    """``NAME=VALUE`` pairs as a dict (the values are read by the API, as inputs are)."""
    found = {}
    for text in given:
        name, sep, value = text.partition("=")
        if not sep or not name.strip().isidentifier() or not value.strip():
            raise VariableError("tangent_form", text=text)
        found[name.strip()] = value.strip()
    return found


HESSIAN_EPILOG = (
    'Example: autograd-cli hessian "x**2*y + y**3" --x 1 --y 2. '
    "Exit codes: 0 autograd and SymPy agree, 1 they disagree, 2 bad input."
)


@app.command(cls=GradCommand, epilog=HESSIAN_EPILOG)
@with_settings()
def hessian(
    ctx: typer.Context,
    expression: ExpressionArg,
    var: VarOption = None,
    const: ConstOption = None,
    settings: Settings = DEFAULT,
    json_output: bool = False,
) -> None:
    """Second derivatives of a one-element output, via create_graph=True, against SymPy."""
    import autogradcli as ag

    expression = _program(ctx, json_output, expression, settings)
    _run(ctx, json_output, var, expression, lambda values: ag.hessian(
        expression, values, settings=settings, const=const or []
    ))  # fmt: skip


GRAPH_EPILOG = (
    'Example: autograd-cli graph "y = x + 2; z = y*y*3; out = mean(z)" --x "ones(2,2)" '
    "--dot graph.dot. Values as for grad. Exit codes: 0 done, 2 bad input."
)


@app.command(cls=GradCommand, epilog=GRAPH_EPILOG)
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
    json_output: bool = False,
) -> None:
    """Show the backward graph PyTorch records: grad_fn nodes down to the leaves."""
    import autogradcli as ag
    from autogradcli.render import dot as dots

    expression = _program(ctx, json_output, expression, settings)
    with errors(ctx, json_output):
        to_stdout = dot is not None and str(dot) == "-"
        if to_stdout and json_output:
            raise VariableError("dot_stdout_json")
        images = [(path, fmt) for path, fmt in ((svg, "svg"), (png, "png")) if path is not None]
        for path, fmt in images:
            _check_file(path, fmt)
        if images:
            dots.need_graphviz(images[0][1])
        values = _variables(var or [], expression)
        built = ag.backward_graph(
            expression, values, settings=settings, const=const or [], saved=saved
        )
        text = dots.to_dot(built)
        written = []
        if dot is not None and not to_stdout:
            _write(dot, text, "dot")
            written.append(str(dot))
        for path, fmt in images:
            dots.render_image(text, path, fmt)
            written.append(str(path))
    _show_graph(built, text, written, to_stdout, json_output)


PLOT_EPILOG = (
    'Example: autograd-cli plot "x*abs(x)" --x -3:3. The variable given as LOW:HIGH is the '
    "axis; the others take values as in grad. Exit codes: 0 agree, 1 disagree, 2 bad input."
)


@app.command(cls=GradCommand, epilog=PLOT_EPILOG)
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
    output: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="Write a .png, .svg or .pdf (needs matplotlib)."),
    ] = None,
    settings: Settings = DEFAULT,
    json_output: bool = False,
) -> None:
    """Plot f, autograd's derivative and SymPy's over a range; mark where they disagree."""
    from autogradcli.render import plot as plots
    from autogradcli.sample import parse_range, sample

    expression = _program(ctx, json_output, expression, settings)
    with errors(ctx, json_output):
        values = _variables(var or [], expression)
        ranges = {n: v for n, v in values.items() if v is not None and ":" in v}
        name = wrt or (next(iter(ranges)) if len(ranges) == 1 else None)
        span = parse_range(ranges.pop(name)) if name in ranges else (-3.0, 3.0)
        if output is not None:
            _check_file(output, "output")
        result = sample(
            expression, values={k: v for k, v in values.items() if k != name}, wrt=name,
            span=span, points=parse_number("points", points), order=parse_number("order", order),
            settings=settings,
        )  # fmt: skip
        if output is not None:
            plots.to_file(result, output)
    if output is not None:
        from dataclasses import replace

        result = replace(result, written=(str(output),))
    if json_output:
        from autogradcli.render.json import dumps

        typer.echo(dumps(result.to_dict()))
    else:
        if output is None:
            typer.echo(plots.terminal(result))
        else:
            typer.echo(f"wrote {output}")
        typer.echo(_plot_verdict(result))
    raise typer.Exit(0 if result.agree else 1)


def _plot_verdict(result: Any) -> str:
    marks = {"agree": "✓", "rounding": "≈", "disagree": "✗"}
    n, wrong = result.x.size, int(result.disagree.sum())
    where = f"at {wrong} of {n} points" if wrong else f"at the {n} points"
    verb = {"agree": "agree", "rounding": "agree within rounding", "disagree": "disagree"}
    extra = f"; {int(result.kinks.sum())} at kinks" if result.kinks.any() else ""
    extra += f"; {int(result.undefined.sum())} undefined" if result.undefined.any() else ""
    return f"{marks[result.verdict]} autograd and SymPy {verb[result.verdict]} {where}{extra}"


CHECK_EPILOG = (
    "Each line of FILE is a command as on the command line, without the program name "
    '(grad "x**3" --x 2 --expect x=12), or a JSON object with the Python API\'s fields '
    '({"command": "grad", "expression": "x**3", "values": {"x": 2}}); # starts a comment. '
    "Exit codes: 0 every case agrees, 1 a case disagrees, 2 a case is bad input."
)


@app.command(epilog=CHECK_EPILOG)
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
) -> None:
    """Run many cases from a file in one process, with a summary (and JUnit XML)."""

    with errors(None, json_output):
        workers = parse_number("jobs", jobs)
        cases = _cases_text(file)
        if junit_xml is not None:
            _check_file(junit_xml, "junit-xml")
    from autogradcli.cli.checking import run_check

    raise typer.Exit(run_check(cases, file, json_output, junit_xml, workers, fail_fast))


@app.command()
def shell() -> None:
    """Ask many questions with one start-up: commands, bindings (x = [1., 2.]) and settings."""
    from autogradcli.cli import shell as shells

    if sys.stdin.isatty():
        raise typer.Exit(shells.interactive())
    raise typer.Exit(shells.run_stream(sys.stdin.buffer))


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


def _show_graph(
    built: Any, text: str, written: list[str], to_stdout: bool, json_output: bool
) -> NoReturn:
    if json_output:
        from autogradcli.render.json import dumps

        typer.echo(dumps({**built.to_dict(), "written": written}))
    elif to_stdout:
        typer.echo(text, nl=False)
    else:
        from autogradcli.render import show

        show(built, False)
        for path in written:
            typer.echo(f"wrote {path}")
    raise typer.Exit(0)


def _check_file(path: Path, option: str) -> None:
    if path.is_dir():
        raise ValueSpecError("path_is_folder", option=option, path=str(path))


def _write(path: Path, text: str, option: str) -> None:
    _check_file(path, option)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ValueSpecError(
            "cannot_write", path=str(path), detail=str(exc.strerror or exc)
        ) from None


def main() -> None:
    """Console-script entry point."""
    app()


__all__ = ["AutogradCliError", "app", "main"]
