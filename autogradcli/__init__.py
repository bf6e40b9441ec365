"""autograd-cli: PyTorch autograd gradients checked against SymPy derivatives.

The Python API (nothing heavy is imported until a function is called: ``import
autogradcli`` loads neither torch, SymPy, Typer nor Rich)::

    import autogradcli as ag
    r = ag.grad("2*x**4 + x**3 + 3*x**2 + 5*x + 1", x=2)
    r.agree, r.verdict, r.output, r.grads["x"], r.expected["x"], r.derivatives["x"]
    r.to_dict()  # the CLI's --json document

A notebook cell that calls ``backward()`` or ``print(...)`` itself gives a ``CellResult``:
each line's ``.grad`` and printed values, checked. ``jacobian``, ``jvp``, ``hessian``,
``derivative`` (``order=K``), ``plot`` and ``backward_graph`` work alike; ``Settings``
(device, dtype, tolerances, seed, limits) is shared by all of them. In Jupyter a result
shows its report.

The command registry (``COMMANDS``, ``Command``, ``register``: registry.py), from which
these exports are derived, is exported too. Importing this package imports nothing but
itself: the command-line client (``autogradcli.client``) starts from it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the client's start)

__version__ = "0.2.0"

# The exit codes of every command beyond its verdicts and bad input (each command's help
# ends with them; docs/trust.md, "Faults survived", lists them from here).
INTERNAL_ERROR = 3
INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a program stopped by Ctrl-C
BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a writer whose reader left
TERMINATED = 143  # 128 + SIGTERM, as a shell reports a program it stopped
FAULT_EXIT_CODES: dict[int, str] = {
    INTERNAL_ERROR: "internal error, a bug (AUTOGRAD_CLI_TRACEBACK=1 prints the traceback)",
    INTERRUPTED: "stopped by Ctrl-C",
    BROKEN_PIPE: "standard output closed early (a pipe into head)",
    TERMINATED: "stopped by SIGTERM",
}
FAULT_EXITS = "Also: " + ", ".join(f"{k} {v}" for k, v in FAULT_EXIT_CODES.items()) + "."


if TYPE_CHECKING:  # for type checkers and editors (``__all__`` is derived from the registry)
    # ruff: noqa: F401
    from typing import Any

    from autogradcli.api import backward_graph, derivative, grad, hessian, jacobian, jvp
    from autogradcli.errors import AutogradCliError, TorchError
    from autogradcli.registry import (
        COMMANDS,
        EXIT_CODES,
        Command,
        case_commands,
        line_commands,
        register,
        renderers,
        resolve,
        schemas,
        unregister,
    )
    from autogradcli.results import CellResult, DerivativeResult, GradResult, Graph, PlotResult
    from autogradcli.sample import plot
    from autogradcli.settings import Limits, Settings


def __getattr__(name: str) -> Any:
    """Import the API's names on first use (PEP 562); a command registered later is found
    too. ``__all__`` is the API's names, from the registry."""
    registry = _registry()
    if name in registry.__all__:  # the registry's own names
        return getattr(registry, name)
    if name == "__all__":
        return __dir__()
    where = registry.exports().get(name)
    if where is not None:
        return registry.resolve(where)
    raise AttributeError(f"module 'autogradcli' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*_registry().exports(), "__version__"])


def _registry() -> Any:
    """The registry module (imported now: a ``from`` import here would ask ``__getattr__``)."""
    import importlib

    return importlib.import_module("autogradcli.registry")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext autogradcli``: the ``%%autograd`` and ``%autograd`` magics (magics.py)."""
    from autogradcli.magics import load_ipython_extension as load

    load(ipython)
