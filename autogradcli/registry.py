"""The command registry (``COMMANDS``): one entry per command, from which the API's exports,
the CLI's commands, the shell's and ``check``'s command words, the JSON Lines case kinds, the
schemas and the renderers of each result are derived (docs/architecture.md, "The
registries"). ``autogradcli`` exports these names; importing this module loads nothing
heavy, but the command-line client (``autogradcli.client``) never needs it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

# The names ``autogradcli`` exports from here as they are.
__all__ = [
    "COMMANDS",
    "EXIT_CODES",
    "Command",
    "case_commands",
    "line_commands",
    "register",
    "renderers",
    "resolve",
    "schemas",
    "unregister",
]

EXIT_CODES = "Exit codes: 0 autograd and SymPy agree, 1 they disagree, 2 bad input."


@dataclass(frozen=True)
class Command:
    """One command. Names are ``"module:attribute"`` strings, imported only when used.

    ``function``: the API function (``ag.<export>``; None: a front-end command such as
    ``check``). ``cli``: the Typer function of its command-line command (None: the
    registry's generic one, an expression, ``--NAME VALUE`` values and the shared settings;
    ``""``: no command-line command). ``documents``: each JSON document's ``command`` field
    and the schema (``schema/NAME.schema.json``) it follows. ``results``: each result class
    the function returns and its Rich renderer, ``renderer(result, style)``. ``lines``: it
    can be a line of the shell and of a ``check`` file; ``cases``: a JSON Lines case.
    """

    name: str
    function: str | None
    summary: str = ""
    export: str = ""
    cli: str | None = None
    epilog: str = ""
    documents: tuple[tuple[str, str], ...] = ()
    results: tuple[tuple[str, str], ...] = ()
    lines: bool = True
    cases: bool = True

    @property
    def api_name(self) -> str:
        """The name under which ``autogradcli`` exports the function."""
        return self.export or self.name

    def api(self) -> Any:
        """The API function (imported now)."""
        if self.function is None:
            raise LookupError(f"{self.name} has no API function")
        return resolve(self.function)


def resolve(where: str) -> Any:
    """The object a ``"module:attribute"`` name points to (importing the module)."""
    module, _, attribute = where.partition(":")
    return getattr(importlib.import_module(module), attribute)


_DERIVATIVE = (
    ("autogradcli.results:DerivativeResult", "autogradcli.render.derivatives:render_derivatives"),
)

COMMANDS: dict[str, Command] = {}


def register(command: Command) -> Command:
    """Add (or replace) a command in the registry; every front end sees it from now on."""
    COMMANDS[command.name] = command
    return command


def unregister(name: str) -> None:
    """Remove a command from the registry."""
    COMMANDS.pop(name, None)


for _command in (
    Command(
        "grad",
        "autogradcli.api:grad",
        "Compute gradients with autograd's backward() and check them against SymPy.",
        epilog=(
            "Give each variable a value with --NAME VALUE, e.g. autograd-cli grad "
            '"2*x**4+x**3+3*x**2+5*x+1" --x 2, or autograd-cli grad "mean((x+2)*(x+2)*3)" --x '
            '"ones(2,2)" --repeat 2. Values: numbers, nested lists "[[1,2],[3,4]]", '
            "ones(2,2), zeros(3), full(2,3,0.5), arange(1,16), linspace(0,1,5), "
            "reshape(arange(1,16),5,3), rand(2,3), randn(2,3), or files @x.npy @x.pt @x.csv "
            "@x.json. Exit codes: 0 autograd and SymPy agree (or agree within rounding, "
            "without --strict), 1 they disagree, 2 bad input."
        ),
        cli="autogradcli.cli.commands:grad",
        documents=(("grad", "grad"), ("cell", "cell")),
        results=(
            ("autogradcli.results:GradResult", "autogradcli.render.grad:render"),
            ("autogradcli.results:CellResult", "autogradcli.render.cell:render_cell"),
        ),
    ),
    Command(
        "jacobian",
        "autogradcli.api:jacobian",
        "The full Jacobian: one backward() per output element with a one-hot gradient.",
        epilog='Example: autograd-cli jacobian "x*sum(x)" --x "[1.0, 2.0]" --show-rows. '
        + EXIT_CODES,
        cli="autogradcli.cli.commands:jacobian",
        documents=(("jacobian", "derivative"),),
        results=_DERIVATIVE,
    ),
    Command(
        "jvp",
        "autogradcli.api:jvp",
        "Forward mode: J·v with torch.func.jvp, checked against SymPy's Jacobian times v.",
        epilog=(
            'Example: autograd-cli jvp "x*y + sin(x)" --x "[1, 2]" --y "[3, 4]" --tangent '
            "x=[1,0] --tangent y=[0,1]. Values as for grad; an input without --tangent takes "
            "ones. "
        )
        + EXIT_CODES,
        cli="autogradcli.cli.commands:jvp",
        documents=(("jvp", "derivative"),),
        results=_DERIVATIVE,
    ),
    Command(
        "hessian",
        "autogradcli.api:hessian",
        "Second derivatives of a one-element output, via create_graph=True, against SymPy.",
        epilog=('Example: autograd-cli hessian "x**2*y + y**3" --x 1 --y 2. ') + EXIT_CODES,
        cli="autogradcli.cli.commands:hessian",
        documents=(("hessian", "derivative"),),
        results=_DERIVATIVE,
    ),
    Command(
        "derivative",  # on the command line: grad --order K
        "autogradcli.api:derivative",
        "The K-th derivative of an elementwise expression per input.",
        cli="",
        documents=(("derivative", "derivative"),),
        results=_DERIVATIVE,
        lines=False,
    ),
    Command(
        "graph",
        "autogradcli.api:backward_graph",
        "Show the backward graph PyTorch records: grad_fn nodes down to the leaves.",
        epilog=(
            'Example: autograd-cli graph "y = x + 2; z = y*y*3; out = mean(z)" --x '
            '"ones(2,2)" --dot graph.dot. Values as for grad. Exit codes: 0 done, 2 bad '
            "input."
        ),
        export="backward_graph",
        cli="autogradcli.cli.commands:graph",
        documents=(("graph", "graph"),),
        results=(("autogradcli.results:Graph", "autogradcli.render.graph:render_graph"),),
    ),
    Command(
        "plot",
        "autogradcli.sample:plot",
        "Plot f, autograd's derivative and SymPy's over a range; mark where they disagree.",
        epilog=(
            'Example: autograd-cli plot "x*abs(x)" --x -3:3. The variable given as LOW:HIGH '
            "is the axis; the others take values as in grad. Exit codes: 0 agree, 1 disagree, "
            "2 bad input."
        ),
        cli="autogradcli.cli.commands:plot",
        documents=(("plot", "plot"),),
        results=(("autogradcli.results:PlotResult", "autogradcli.render.plot:render"),),
    ),
    Command(
        "check",
        None,
        "Run many cases from a file in one process, with a summary (and JUnit XML).",
        epilog=(
            "Each line of FILE is a command as on the command line, without the program name "
            '(grad "x**3" --x 2 --expect x=12), or a JSON object with the Python API\'s fields '
            '({"command": "grad", "expression": "x**3", "values": {"x": 2}}); # starts a '
            "comment. Exit codes: 0 every case agrees, 1 a case disagrees, 2 a case is bad "
            "input."
        ),
        cli="autogradcli.cli.commands:check",
        documents=(),
        lines=False,
        cases=False,
    ),
    Command(
        "shell",
        None,
        "Ask many questions with one start-up: commands, bindings (x = [1., 2.]) and settings.",
        cli="autogradcli.cli.commands:shell",
        lines=False,
        cases=False,
    ),
    Command(
        "worker",
        None,
        "Show or stop the background worker that answers commands without loading torch.",
        epilog=(
            "The first command that needs torch starts a worker for this user; later ones "
            "hand it their question (docs/worker.md). AUTOGRAD_CLI_NO_WORKER=1 runs every "
            "command in its own process. Exit code: 0."
        ),
        cli="autogradcli.cli.warm:worker",
        lines=False,
        cases=False,
    ),
):
    register(_command)
del _command


def line_commands() -> tuple[str, ...]:
    """The commands a line of the shell or of a ``check`` file may start with."""
    return tuple(c.name for c in COMMANDS.values() if c.lines and c.cli != "")


def case_commands() -> dict[str, Command]:
    """The commands a JSON Lines case may name (``"command"``), by name."""
    return {c.name: c for c in COMMANDS.values() if c.cases and c.function is not None}


def schemas() -> dict[str, str]:
    """Each JSON document's ``command`` field and the schema it follows."""
    return {kind: schema for c in COMMANDS.values() for kind, schema in c.documents}


def renderers() -> dict[str, str]:
    """Each result class (``"module:Class"``) and its renderer (``"module:function"``)."""
    return {result: renderer for c in COMMANDS.values() for result, renderer in c.results}


_TYPES = {
    "Settings": "autogradcli.settings",
    "Limits": "autogradcli.settings",
    "AutogradCliError": "autogradcli.errors",
    "TorchError": "autogradcli.errors",
    "GradResult": "autogradcli.results",
    "CellResult": "autogradcli.results",
    "DerivativeResult": "autogradcli.results",
    "Graph": "autogradcli.results",
    "PlotResult": "autogradcli.results",
}


def exports() -> dict[str, str]:
    """Every lazily loaded name and its ``"module:attribute"``: the commands' functions,
    then the types."""
    found = {c.api_name: c.function for c in COMMANDS.values() if c.function is not None}
    return {**found, **{name: f"{module}:{name}" for name, module in _TYPES.items()}}
