"""The command line's app: the Click group built from the command registry
(``autogradcli.COMMANDS``), its argument splitting, and usage errors as one line.

The commands themselves are in ``cli/commands.py``, named by the registry and imported by
name, so the app imports none of them (``check`` and ``shell`` run lines through this app).
torch and SymPy are imported only inside commands, so ``--help`` and ``--version`` answer at
once. Every domain error becomes one ``Error: ...`` line on stderr (exit 2), its sentence
spelled with this program's flags.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from autogradcli import (
    COMMANDS,
    EXIT_CODES,
    FAULT_EXITS,
    INTERNAL_ERROR,
    Command,
    __version__,
    resolve,
)
from autogradcli.cli.errors import (
    OUTPUT_ERRNOS,
    OutputError,
    output_failed,
    report_error,
    report_internal,
)
from autogradcli.cli.parsing import BOUND
from autogradcli.errors import AutogradCliError
from autogradcli.render import Output

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
                end = "" if message.endswith(("?", "!")) else "."
                message = f"{message.rstrip('.')}{end} See '{ctx.command_path} --help'."
            report_error(message, "usage", "usage", Output.of("--json" in argv))
            sys.exit(exc.exit_code)
        except typer.Abort:
            if not standalone_mode:
                raise
            if BOUND.get() is not None:  # in the shell: Ctrl-C cancels this line only
                raise KeyboardInterrupt from None
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        except OutputError as exc:
            if not standalone_mode:
                raise
            sys.exit(output_failed(exc.error))
        except Exception as exc:  # a bug: one line that says so, exit 3
            if not standalone_mode:
                raise
            if isinstance(exc, OSError) and exc.errno in OUTPUT_ERRNOS:  # --help > /dev/full
                sys.exit(output_failed(exc))
            report_internal(exc, Output.of("--json" in argv))
            sys.exit(INTERNAL_ERROR)
        if standalone_mode:
            sys.exit(rv if isinstance(rv, int) else 0)
        return rv

    def invoke(self, ctx: Any) -> Any:
        """The command; a failure to write its output (a closed pipe, a full disk) leaves
        Click's handling (which exits 1 on a closed pipe) as an ``OutputError``."""
        try:
            return super().invoke(ctx)
        except OSError as exc:
            if exc.errno in OUTPUT_ERRNOS:
                raise OutputError(exc) from None
            raise

    def list_commands(self, ctx: Any) -> list[str]:
        """The app's commands, and any the registry gained since the app was built."""
        built = super().list_commands(ctx)
        return [*built, *(n for n, c in COMMANDS.items() if c.cli != "" and n not in built)]

    def get_command(self, ctx: Any, name: str) -> Any:
        """A command of the app, or one registered since the app was built (made now)."""
        found = super().get_command(ctx, name)
        entry = COMMANDS.get(name)
        if found is None and entry is not None and entry.cli != "":
            found = typer.main.get_command(_single(entry))
        return found


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


def _function(entry: Command) -> Callable[..., Any]:
    """The Typer function of a registry entry: the one it names, else the generic one."""
    if entry.cli:
        return resolve(entry.cli)  # type: ignore[no-any-return]
    generic = resolve("autogradcli.cli.commands:generic")
    return generic(entry)  # type: ignore[no-any-return]


def _add(target: typer.Typer, entry: Command) -> None:
    """Register a registry entry's command on a Typer app."""
    takes_expression = entry.function is not None
    epilog = entry.epilog or (EXIT_CODES if takes_expression else "")
    target.command(
        entry.name,
        cls=GradCommand if takes_expression else None,
        epilog=f"{epilog} {FAULT_EXITS}".strip(),
        help=None if entry.cli else entry.summary,
    )(_function(entry))


def _single(entry: Command) -> typer.Typer:
    """A Typer app holding one command (a command registered after the app was built)."""
    one = typer.Typer(add_completion=False, rich_markup_mode=None)
    _add(one, entry)
    return one


for _entry in COMMANDS.values():
    if _entry.cli != "":
        _add(app, _entry)


def main() -> None:
    """Console-script entry point: the app, then standard output flushed (a full disk or a
    closed pipe is reported here too, never as a traceback at exit)."""
    try:
        app()
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    try:
        sys.stdout.flush()
    except OSError as exc:
        code = output_failed(exc)
    sys.exit(code)


__all__ = ["AutogradCliError", "app", "main"]
