"""The options every command shares, declared once, and the decorator that adds them.

``@with_settings`` appends the shared options to a command's signature (so Typer shows
them) and hands the command one ``Settings`` built from them, plus the ``output``
(``render.Output``: rich, or json with ``--json``).
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any

import typer

from autogradcli.cli.errors import errors, waiting
from autogradcli.memory import JSON_PER_ELEMENT, PRINTED
from autogradcli.render import FULL, LATEX, Output
from autogradcli.settings import DTYPES, NUMBERS, Limits, Settings, parse_number

LIMITS = "Limits"

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

# Options of grad.
WeightsOption = Annotated[
    str | None,
    typer.Option(
        metavar="W",
        help="External gradient for a non-scalar output, out.backward(W): a value of the "
        "output's shape, 'ones', or a variable's name.",
    ),
]
RepeatOption = Annotated[
    str,
    typer.Option(metavar="N", help="Passes of forward + backward; .grad accumulates (1 to 10000)."),
]
SameGraphOption = Annotated[
    bool,
    typer.Option("--same-graph", help="With --repeat: run backward() again on one graph instead."),
]
RetainGraphOption = Annotated[
    bool,
    typer.Option(
        "--retain-graph",
        help="With --same-graph: backward(retain_graph=True), so it can run again.",
    ),
]
ZeroGradOption = Annotated[
    bool,
    typer.Option("--zero-grad", help="Set .grad to None between passes, as optimizer.zero_grad()."),
]
FunctionalOption = Annotated[
    bool,
    typer.Option(
        "--functional",
        help="Compute with torch.autograd.grad instead of backward(): the gradients are "
        "returned, .grad stays untouched and nothing accumulates.",
    ),
]
InspectOption = Annotated[
    bool,
    typer.Option(
        "--inspect",
        help="Show every named tensor: data, requires_grad, is_leaf, grad_fn and .grad.",
    ),
]
RetainGradOption = Annotated[
    list[str] | None,
    typer.Option(
        metavar="NAME",
        help="Call retain_grad() on step NAME (or 'all'), so its .grad shows (implies --inspect).",
    ),
]
ExpectOption = Annotated[
    list[str] | None,
    typer.Option(
        metavar="NAME=VALUE",
        help="The gradient you expect for NAME (an answer to check); exit 1 when autograd or "
        "SymPy disagrees with it. May be repeated.",
    ),
]
ExplainOption = Annotated[
    bool,
    typer.Option(
        "--explain", help="Show the chain rule node by node as backward() ran it, checked by SymPy."
    ),
]
OrderOption = Annotated[
    str,
    typer.Option(
        metavar="K",
        help="The K-th derivative of an elementwise expression (create_graph=True, K times; "
        "1 to 8).",
    ),
]
# Options of check and shell.
AllowWritesOption = Annotated[
    bool,
    typer.Option(
        "--allow-writes",
        help="Let the lines read write the files they name (graph --dot/--svg/--png, plot "
        "--output); without it such a line is refused.",
    ),
]
ShowRowsOption = Annotated[
    bool,
    typer.Option(
        "--show-rows", help="Print each row with the one-hot external gradient that made it."
    ),
]

# The shared options: name, annotation, default. Settings and Limits take them by name.
SHARED: list[tuple[str, Any, Any]] = [
    (
        "device",
        Annotated[
            str,
            typer.Option(
                metavar="DEVICE",
                help="auto (CUDA if available, else CPU), cpu, cuda, cuda:N or mps.",
            ),
        ],
        "auto",
    ),
    (
        "dtype",
        Annotated[
            str,
            typer.Option(
                metavar="[" + "|".join(DTYPES) + "]",
                help="Tensor dtype (PyTorch's names too: double, float, half, torch.float64).",
                autocompletion=lambda: list(DTYPES),
            ),
        ],
        "float32",
    ),
    (
        "rtol",
        Annotated[
            str | None,
            typer.Option(
                metavar="RTOL",
                help="Relative tolerance, ≥ 0 (default: torch.testing's for the dtype).",
            ),
        ],
        None,
    ),
    (
        "atol",
        Annotated[
            str | None,
            typer.Option(
                metavar="ATOL",
                help="Absolute tolerance, ≥ 0 (default: torch.testing's for the dtype).",
            ),
        ],
        None,
    ),
    (
        "seed",
        Annotated[
            str | None,
            typer.Option(
                metavar="SEED",
                help="Seed for rand()/randn() values, 0 to 2**63-1 (default: random, reported).",
            ),
        ],
        None,
    ),
    (
        "numeric",
        Annotated[
            bool,
            typer.Option(
                "--numeric",
                help="Add central finite differences in float64 (gradcheck's method) as a "
                "third check.",
            ),
        ],
        False,
    ),
    (
        "strict",
        Annotated[
            bool,
            typer.Option(
                "--strict",
                help="Count a ≈ verdict (within the dtype's rounding, float64 agrees) as a "
                "disagreement: exit 1.",
            ),
        ],
        False,
    ),
    (
        "max_elements",
        Annotated[
            str,
            typer.Option(
                metavar="N",
                help="Largest number of elements any tensor may have.",
                rich_help_panel=LIMITS,
            ),
        ],
        str(Limits.max_elements),
    ),
    (
        "max_length",
        Annotated[
            str,
            typer.Option(
                metavar="N", help="Longest expression, in characters.", rich_help_panel=LIMITS
            ),
        ],
        str(Limits.max_length),
    ),
    (
        "max_depth",
        Annotated[
            str,
            typer.Option(
                metavar="N", help="Deepest nesting of the expression.", rich_help_panel=LIMITS
            ),
        ],
        str(Limits.max_depth),
    ),
    (
        "max_exponent",
        Annotated[
            str,
            typer.Option(
                metavar="N",
                help="Largest constant exponent of a variable (x**N).",
                rich_help_panel=LIMITS,
            ),
        ],
        str(Limits.max_exponent),
    ),
    (
        "sympy_seconds",
        Annotated[
            str,
            typer.Option(
                "--sympy-timeout",
                metavar="SECONDS",
                help="Seconds for SymPy's exact check; past them the numeric check stands in.",
                rich_help_panel=LIMITS,
            ),
        ],
        str(Limits.sympy_seconds),
    ),
    (
        "max_entries",
        Annotated[
            str,
            typer.Option(
                metavar="N",
                help="Largest number of derivative entries to compute.",
                rich_help_panel=LIMITS,
            ),
        ],
        str(Limits.max_entries),
    ),
    (
        "max_iterations",
        Annotated[
            str,
            typer.Option(
                metavar="N",
                help="Most passes of a cell's loops (for, while), all together.",
                rich_help_panel=LIMITS,
            ),
        ],
        str(Limits.max_iterations),
    ),
    (
        "max_lines",
        Annotated[
            str,
            typer.Option(
                metavar="N",
                help="Most lines a cell runs, its loops unrolled.",
                rich_help_panel=LIMITS,
            ),
        ],
        str(Limits.max_lines),
    ),
    (
        "max_file_bytes",
        Annotated[
            str | None,
            typer.Option(
                metavar="N",
                help="Most bytes read from a file (@FILE values, programs, check files); "
                "default 64 per element of --max-elements.",
                rich_help_panel=LIMITS,
            ),
        ],
        None,
    ),
    (
        "memory",
        Annotated[
            str,
            typer.Option(
                metavar="SIZE",
                help="Memory budget of the run: every input, pass and reference array "
                "together, estimated before it is allocated (512M, 4G; K, M, G, T are "
                "powers of 1024).",
                rich_help_panel=LIMITS,
            ),
        ],
        "4G",
    ),
    ("json_output", Annotated[bool, typer.Option("--json", help="Print one JSON object.")], False),
    (
        "latex",
        Annotated[
            bool,
            typer.Option("--latex", help="Also print SymPy's derivatives as LaTeX."),
        ],
        False,
    ),
    (
        "full",
        Annotated[
            bool,
            typer.Option(
                "--full", help="Show long derivatives in full (else cut at 300 characters)."
            ),
        ],
        False,
    ),
    (
        "quiet",
        Annotated[
            bool,
            typer.Option("--quiet", help="Show nothing on standard error while the work runs."),
        ],
        False,
    ),
]


def settings_from(values: dict[str, Any]) -> Settings:
    """One ``Settings`` from the shared options' values (numbers as the command line's text)."""
    numbers = {
        k: None if v is None else parse_number(k, str(v)) for k, v in values.items() if k in NUMBERS
    }
    limits = {k: numbers[k] for k in values if hasattr(Limits, k)}
    return Settings(
        device=values["device"],
        dtype=values["dtype"],
        rtol=numbers["rtol"],
        atol=numbers["atol"],
        seed=numbers["seed"],
        limits=Limits(**limits),
        numeric=values["numeric"],
        strict=values["strict"],
    )


def with_settings(
    skip: tuple[str, ...] = (),
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add the shared options (but ``skip``) to a command; it receives ``settings`` and
    ``output`` instead of them."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        hints = typing.get_type_hints(command, include_extras=True)
        own = [
            p.replace(annotation=hints.get(p.name, p.annotation))
            for p in inspect.signature(command).parameters.values()
            if p.name not in ("settings", "output")
        ]
        extra = [
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind
            )
            for name, kind, default in SHARED
            if name not in skip
        ]

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            shared = {name: kwargs.pop(name, default) for name, _, default in SHARED}
            output = Output.of(shared.pop("json_output"))
            quiet, full, latex = shared.pop("quiet"), shared.pop("full"), shared.pop("latex")
            with errors(None, output):
                settings = settings_from(shared)
            tokens = FULL.set(full), LATEX.set(latex)
            printed = PRINTED.set(JSON_PER_ELEMENT if output is Output.JSON else 0)  # the budget
            try:
                with waiting(not quiet and output is Output.RICH):
                    return command(*args, settings=settings, output=output, **kwargs)
            finally:
                FULL.reset(tokens[0])
                LATEX.reset(tokens[1])
                PRINTED.reset(printed)

        parameters = [*own, *extra]
        wrapper.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        return wrapper

    return decorate
