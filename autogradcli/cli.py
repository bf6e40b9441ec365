"""The command line: parse options, call the core, hand the result to a renderer.

torch and sympy are imported only inside commands, so ``--help`` and ``--version``
answer at once. Every domain error becomes one ``Error: ...`` line on stderr, exit 2.
"""

from __future__ import annotations

import difflib
import shutil
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from typer._click import exceptions as click_exceptions
from typer._click.core import Context
from typer.core import TyperCommand, TyperGroup, TyperOption

from autogradcli import __version__
from autogradcli.devices import DTYPES
from autogradcli.errors import (
    AutogradCliError,
    UnknownVariableError,
    ValueSpecError,
    VariableError,
)
from autogradcli.expression import Limits
from autogradcli.render_json import error_document
from autogradcli.vocabulary import FUNCTIONS

USAGE_EXIT = 2


def _one_line(message: str) -> str:
    return " ".join(message.split())


def report_error(message: str, kind: str, json_output: bool) -> None:
    """``Error: ...`` on stderr; with ``--json`` also ``{"error": ...}`` on stdout."""
    message = _one_line(message)
    if json_output:
        typer.echo(error_document(kind, message))
    typer.echo(f"Error: {message}", err=True)


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
        except click_exceptions.ClickException as exc:
            if not standalone_mode:
                raise
            message = exc.format_message()
            ctx = getattr(exc, "ctx", None)
            if isinstance(exc, click_exceptions.UsageError) and ctx is not None:
                message = f"{message.rstrip('.')}. See '{ctx.command_path} --help'."
            report_error(message, "usage", "--json" in argv)
            sys.exit(exc.exit_code)
        except typer.Abort:
            if not standalone_mode:
                raise
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        if standalone_mode:
            sys.exit(rv if isinstance(rv, int) else 0)
        return rv


class GradCommand(TyperCommand):
    """Accepts ``--NAME VALUE`` for any variable, options on either side of the expression,
    and an expression that starts with a minus. Known options pass through to Click;
    every other ``--NAME`` becomes ``--var NAME=VALUE``; the expression goes after ``--``."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        takes_value: dict[str, bool] = {}
        for param in self.get_params(ctx):
            if isinstance(param, TyperOption):
                for opt in (*param.opts, *param.secondary_opts):
                    takes_value[opt] = not (param.is_flag or param.count)
        known: list[str] = []
        positional: list[str] = []
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
        if len(positional) > 1:
            raise click_exceptions.UsageError(
                f"got more than one expression ({', '.join(map(repr, positional))}); quote the "
                "expression and give values as --NAME VALUE",
                ctx,
            )
        return super().parse_args(ctx, [*known, "--", *positional])


app = typer.Typer(
    cls=AutogradGroup,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
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


Dtype = Enum("Dtype", {name: name for name in DTYPES}, type=str)  # type: ignore[misc]


GRAD_EPILOG = (
    "Give each variable a value with --NAME VALUE, e.g. "
    'autograd-cli grad "2*x**4+x**3+3*x**2+5*x+1" --x 2, or '
    'autograd-cli grad "mean((x+2)*(x+2)*3)" --x "ones(2,2)" --repeat 2. '
    'Values: numbers, nested lists "[[1,2],[3,4]]", ones(2,2), zeros(3), full(2,3,0.5), '
    "arange(1,16), linspace(0,1,5), reshape(arange(1,16),5,3), rand(2,3), randn(2,3), "
    "or files @x.npy @x.pt @x.csv @x.json. "
    "Exit codes: 0 autograd and SymPy agree, 1 they disagree, 2 bad input."
)


ExpressionArg = Annotated[
    str,
    typer.Argument(
        help="Expression in Python syntax: + - * / ** (or ^) @, "
        + " ".join(FUNCTIONS)
        + ", sum mean prod max min (x or x, dim), softmax log_softmax logsumexp (x, dim), "
        "norm(x), dot(a, b), T(A) or A.T, constants pi e; or a program of steps separated "
        'by ; or newlines, e.g. "y = x + 2; z = y*y*3; out = mean(z)".',
        show_default=False,
    ),
]
VarOption = Annotated[
    list[str] | None,
    typer.Option(
        "--var",
        metavar="NAME=VALUE",
        help="A variable's value; same as --NAME VALUE, for names that clash with options.",
    ),
]
ConstOption = Annotated[
    list[str] | None,
    typer.Option(metavar="NAME", help="Make NAME a tensor with requires_grad=False."),
]
DeviceOption = Annotated[
    str, typer.Option(help="auto (CUDA if available, else CPU), cpu, cuda, cuda:N or mps.")
]
DtypeOption = Annotated[Dtype, typer.Option(help="Tensor dtype.")]
SeedOption = Annotated[
    int | None,
    typer.Option(
        min=0, max=2**63 - 1, help="Seed for rand()/randn() values (default: random, reported)."
    ),
]
MaxElementsOption = Annotated[
    int,
    typer.Option(
        min=1, help="Largest number of elements any tensor may have.", rich_help_panel="Limits"
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
MaxLengthOption = Annotated[
    int, typer.Option(min=1, help="Longest expression, in characters.", rich_help_panel="Limits")
]
MaxDepthOption = Annotated[
    int, typer.Option(min=1, help="Deepest nesting of the expression.", rich_help_panel="Limits")
]
MaxExponentOption = Annotated[
    int,
    typer.Option(
        min=1, help="Largest constant exponent of a variable (x**N).", rich_help_panel="Limits"
    ),
]
SympyTimeoutOption = Annotated[
    float,
    typer.Option(
        min=0.0,
        help="Seconds for SymPy's exact check; past them the numeric check stands in.",
        rich_help_panel="Limits",
    ),
]
NumericOption = Annotated[
    bool,
    typer.Option(
        help="Add central finite differences in float64 (gradcheck's method) as a third check."
    ),
]
MaxEntriesOption = Annotated[
    int,
    typer.Option(
        min=1, help="Largest number of derivative entries to compute.", rich_help_panel="Limits"
    ),
]
StrictOption = Annotated[
    bool,
    typer.Option(
        help="Count a ≈ verdict (within the dtype's rounding, float64 agrees) as a "
        "disagreement: exit 1."
    ),
]
RtolOption = Annotated[
    float | None,
    typer.Option(help="Relative tolerance (default: torch.testing's for the dtype)."),
]
AtolOption = Annotated[
    float | None,
    typer.Option(help="Absolute tolerance (default: torch.testing's for the dtype)."),
]


@app.command(cls=GradCommand, epilog=GRAD_EPILOG)
def grad(
    ctx: typer.Context,
    expression: ExpressionArg,
    var: VarOption = None,
    weights: Annotated[
        str | None,
        typer.Option(
            metavar="W",
            help="External gradient for a non-scalar output, out.backward(W): a value of the "
            "output's shape, 'ones', or a variable's name.",
        ),
    ] = None,
    repeat: Annotated[
        int,
        typer.Option(min=1, max=10_000, help="Passes of forward + backward; .grad accumulates."),
    ] = 1,
    same_graph: Annotated[
        bool,
        typer.Option(help="With --repeat: run backward() again on one graph instead."),
    ] = False,
    retain_graph: Annotated[
        bool,
        typer.Option(help="With --same-graph: backward(retain_graph=True), so it can run again."),
    ] = False,
    zero_grad: Annotated[
        bool, typer.Option(help="Set .grad to None between passes, as optimizer.zero_grad().")
    ] = False,
    inspect: Annotated[
        bool,
        typer.Option(
            help="Show every named tensor: data, requires_grad, is_leaf, grad_fn and .grad."
        ),
    ] = False,
    retain_grad: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME",
            help="Call retain_grad() on step NAME (or 'all'), so its .grad shows (implies "
            "--inspect).",
        ),
    ] = None,
    explain: Annotated[
        bool,
        typer.Option(
            help="Show the chain rule node by node as backward() ran it, checked by SymPy."
        ),
    ] = False,
    numeric: NumericOption = False,
    order: Annotated[
        int,
        typer.Option(
            min=1,
            max=8,
            help="The K-th derivative of an elementwise expression (create_graph=True, K times).",
        ),
    ] = 1,
    const: ConstOption = None,
    device: DeviceOption = "auto",
    dtype: DtypeOption = Dtype.float32,
    rtol: RtolOption = None,
    atol: AtolOption = None,
    seed: SeedOption = None,
    max_elements: MaxElementsOption = Limits.max_elements,
    max_length: MaxLengthOption = Limits.max_length,
    max_depth: MaxDepthOption = Limits.max_depth,
    max_exponent: MaxExponentOption = Limits.max_exponent,
    sympy_timeout: SympyTimeoutOption = Limits.sympy_seconds,
    strict: StrictOption = False,
    json_output: JsonOption = False,
) -> None:
    """Compute gradients with autograd's backward() and check them against SymPy."""
    if order > 1:
        others = {
            "--weights": weights is not None and weights.strip() != "ones",
            "--repeat": repeat > 1,
            "--same-graph": same_graph,
            "--retain-graph": retain_graph,
            "--zero-grad": zero_grad,
            "--inspect": inspect,
            "--retain-grad": bool(retain_grad),
            "--explain": explain,
        }
        clash = [name for name, given in others.items() if given]
        with _errors(ctx, json_output):
            if clash:
                raise VariableError(f"--order {order} cannot be combined with {clash[0]}")
            from autogradcli.derivatives import compute_order

            derived = compute_order(
                expression,
                _variables(var or []),
                order,
                const=const or [],
                numeric=numeric,
                strict=strict,
                device=device,
                dtype=dtype.value,
                rtol=rtol,
                atol=atol,
                seed=seed,
                limits=Limits(max_length, max_depth, max_exponent, max_elements, sympy_timeout),
            )
        _print_derivatives(derived, json_output)
    with _errors(ctx, json_output):
        values = _variables(var or [])
        from autogradcli.gradient import compute_gradient

        result = compute_gradient(
            expression,
            values,
            weights=weights,
            repeat=repeat,
            same_graph=same_graph,
            retain_graph=retain_graph,
            zero_grad=zero_grad,
            inspect=inspect,
            retain_grad=retain_grad or [],
            explain=explain,
            numeric=numeric,
            strict=strict,
            const=const or [],
            device=device,
            dtype=dtype.value,
            rtol=rtol,
            atol=atol,
            seed=seed,
            limits=Limits(max_length, max_depth, max_exponent, max_elements, sympy_timeout),
        )
    if json_output:
        from autogradcli.render_json import dumps

        typer.echo(dumps(result.to_dict()))
    else:
        from autogradcli.render_rich import print_result

        print_result(result)
    raise typer.Exit(0 if result.agree else 1)


def _print_derivatives(result: Any, json_output: bool) -> NoReturn:
    if json_output:
        from autogradcli.render_json import dumps

        typer.echo(dumps(result.to_dict()))
    else:
        from autogradcli.render_derivatives import print_derivatives

        print_derivatives(result)
    raise typer.Exit(0 if result.agree else 1)


JACOBIAN_EPILOG = (
    'Example: autograd-cli jacobian "x*sum(x)" --x "[1.0, 2.0]" --show-rows. '
    "Exit codes: 0 autograd and SymPy agree, 1 they disagree, 2 bad input."
)


@app.command(cls=GradCommand, epilog=JACOBIAN_EPILOG)
def jacobian(
    ctx: typer.Context,
    expression: ExpressionArg,
    var: VarOption = None,
    show_rows: Annotated[
        bool,
        typer.Option(help="Print each row with the one-hot external gradient that made it."),
    ] = False,
    numeric: NumericOption = False,
    const: ConstOption = None,
    device: DeviceOption = "auto",
    dtype: DtypeOption = Dtype.float32,
    rtol: RtolOption = None,
    atol: AtolOption = None,
    seed: SeedOption = None,
    max_elements: MaxElementsOption = Limits.max_elements,
    max_length: MaxLengthOption = Limits.max_length,
    max_depth: MaxDepthOption = Limits.max_depth,
    max_exponent: MaxExponentOption = Limits.max_exponent,
    sympy_timeout: SympyTimeoutOption = Limits.sympy_seconds,
    max_entries: MaxEntriesOption = 100_000,
    strict: StrictOption = False,
    json_output: JsonOption = False,
) -> None:
    """The full Jacobian: one backward() per output element with a one-hot gradient."""
    with _errors(ctx, json_output):
        from autogradcli.derivatives import compute_jacobian

        result = compute_jacobian(
            expression,
            _variables(var or []),
            const=const or [],
            numeric=numeric,
            max_entries=max_entries,
            strict=strict,
            device=device,
            dtype=dtype.value,
            rtol=rtol,
            atol=atol,
            seed=seed,
            limits=Limits(max_length, max_depth, max_exponent, max_elements, sympy_timeout),
        )
    if not show_rows:
        result.rows = []
    _print_derivatives(result, json_output)


HESSIAN_EPILOG = (
    'Example: autograd-cli hessian "x**2*y + y**3" --x 1 --y 2. '
    "Exit codes: 0 autograd and SymPy agree, 1 they disagree, 2 bad input."
)


@app.command(cls=GradCommand, epilog=HESSIAN_EPILOG)
def hessian(
    ctx: typer.Context,
    expression: ExpressionArg,
    var: VarOption = None,
    numeric: NumericOption = False,
    const: ConstOption = None,
    device: DeviceOption = "auto",
    dtype: DtypeOption = Dtype.float32,
    rtol: RtolOption = None,
    atol: AtolOption = None,
    seed: SeedOption = None,
    max_elements: MaxElementsOption = Limits.max_elements,
    max_length: MaxLengthOption = Limits.max_length,
    max_depth: MaxDepthOption = Limits.max_depth,
    max_exponent: MaxExponentOption = Limits.max_exponent,
    sympy_timeout: SympyTimeoutOption = Limits.sympy_seconds,
    max_entries: MaxEntriesOption = 100_000,
    strict: StrictOption = False,
    json_output: JsonOption = False,
) -> None:
    """Second derivatives of a one-element output, via create_graph=True, against SymPy."""
    with _errors(ctx, json_output):
        from autogradcli.derivatives import compute_hessian

        result = compute_hessian(
            expression,
            _variables(var or []),
            const=const or [],
            numeric=numeric,
            max_entries=max_entries,
            strict=strict,
            device=device,
            dtype=dtype.value,
            rtol=rtol,
            atol=atol,
            seed=seed,
            limits=Limits(max_length, max_depth, max_exponent, max_elements, sympy_timeout),
        )
    _print_derivatives(result, json_output)


GRAPH_EPILOG = (
    'Example: autograd-cli graph "y = x + 2; z = y*y*3; out = mean(z)" --x "ones(2,2)" '
    "--dot graph.dot. Values as for grad. Exit codes: 0 done, 2 bad input."
)


@app.command(cls=GradCommand, epilog=GRAPH_EPILOG)
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
    const: ConstOption = None,
    device: DeviceOption = "auto",
    dtype: DtypeOption = Dtype.float32,
    seed: SeedOption = None,
    max_elements: MaxElementsOption = Limits.max_elements,
    max_length: MaxLengthOption = Limits.max_length,
    max_depth: MaxDepthOption = Limits.max_depth,
    max_exponent: MaxExponentOption = Limits.max_exponent,
    sympy_timeout: SympyTimeoutOption = Limits.sympy_seconds,
    json_output: JsonOption = False,
) -> None:
    """Show the backward graph PyTorch records: grad_fn nodes down to the leaves."""
    with _errors(ctx, json_output):
        from autogradcli.gradient import prepare, start

        setup = prepare(
            expression,
            _variables(var or []),
            const=const or [],
            device=device,
            dtype=dtype.value,
            seed=seed,
            limits=Limits(max_length, max_depth, max_exponent, max_elements, sympy_timeout),
        )
        to_stdout = dot is not None and str(dot) == "-"
        if to_stdout and json_output:
            raise VariableError("--dot - prints the DOT text; use --dot FILE with --json")
        images = [(path, fmt) for path, fmt in ((svg, "svg"), (png, "png")) if path is not None]
        for path, fmt in images:
            _check_file(path, f"--{fmt}")
        from autogradcli import graph as graphs

        if images and shutil.which("dot") is None:
            graphs.render_image("", images[0][0], images[0][1])  # raises the clear error
        run = start(setup)
        seed = setup.random.seed if setup.random.used else None
        built = graphs.build_graph(setup.expression, run.forward(), run.leaves, seed)
        text = graphs.to_dot(built)
        written = []
        if dot is not None and not to_stdout:
            _write(dot, text, "--dot")
            written.append(str(dot))
        for path, fmt in images:
            graphs.render_image(text, path, fmt)
            written.append(str(path))
    if json_output:
        from autogradcli.render_json import dumps

        typer.echo(dumps({**built.to_dict(), "written": written}))
    elif to_stdout:
        typer.echo(text, nl=False)
    else:
        from autogradcli.render_graph import print_graph

        print_graph(built)
        for path in written:
            typer.echo(f"wrote {path}")
    raise typer.Exit(0)


def _check_file(path: Path, option: str) -> None:
    if path.is_dir():
        raise ValueSpecError(
            f"{option} {path}: that is a folder; give a file name, e.g. graph.{option[2:]}"
        )


def _write(path: Path, text: str, option: str) -> None:
    _check_file(path, option)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ValueSpecError(f"cannot write {path}: {exc.strerror or exc}") from None


@contextmanager
def _errors(ctx: typer.Context, json_output: bool) -> Iterator[None]:
    """Every error of a command as one ``Error: ...`` line, exit 2."""
    try:
        yield
    except UnknownVariableError as exc:
        _fail(str(exc) + _suggest_option(exc.name, ctx), exc.kind, json_output)
    except AutogradCliError as exc:
        _fail(str(exc), exc.kind, json_output)
    except (ArithmeticError, RecursionError, TypeError, ValueError) as exc:
        # A failure inside PyTorch, SymPy or NumPy on input the checks let through.
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        _fail(
            f"cannot compute this expression ({type(exc).__name__}: {message}); "
            "simplify it or check its values",
            "computation",
            json_output,
        )


def _variables(specs: list[str]) -> dict[str, str | None]:
    """``NAME=VALUE`` items as a dict (``NAME`` alone: no value); a name given twice is an error."""
    values: dict[str, str | None] = {}
    for spec in specs:
        name, has_value, value = spec.partition("=")
        name = name.strip()
        if not name.isidentifier():
            raise VariableError(f"'{spec}' is not NAME=VALUE; write e.g. --var x=2")
        if name in values:
            raise VariableError(
                f"variable '{name}' is given twice ({values[name]} and {value}); "
                "give each variable one value"
            )
        values[name] = value if has_value else None
    return values


def _suggest_option(name: str, ctx: typer.Context) -> str:
    """``; did you mean --json?`` when an unknown variable looks like a mistyped option."""
    options = [
        o[2:]
        for p in ctx.command.params
        if isinstance(p, TyperOption)
        for o in p.opts
        if o.startswith("--")
    ]
    close = difflib.get_close_matches(name.replace("_", "-"), options, n=1, cutoff=0.6)
    return f"; did you mean --{close[0]}?" if close else ""


def _fail(message: str, kind: str, json_output: bool) -> NoReturn:
    report_error(message, kind, json_output)
    raise typer.Exit(USAGE_EXIT)


def main() -> None:
    """Console-script entry point."""
    app()
