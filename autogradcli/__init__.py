"""autograd-cli: PyTorch autograd gradients checked against SymPy derivatives.

The Python API (nothing heavy is imported until a function is called: ``import
autogradcli`` loads neither torch, SymPy, Typer nor Rich)::

    import autogradcli as ag
    r = ag.grad("2*x**4 + x**3 + 3*x**2 + 5*x + 1", x=2)
    r.agree, r.verdict, r.output, r.grads["x"], r.expected["x"], r.derivatives["x"]
    r.to_dict()  # the CLI's --json document

A notebook cell that calls ``backward()`` or ``print(...)`` itself gives a ``CellResult``:
each line's ``.grad`` and printed values, checked. ``jacobian``, ``hessian``,
``derivative`` (``order=K``) and ``backward_graph`` work alike; ``Settings`` (device, dtype,
tolerances, seed, limits) is shared by all of them. In Jupyter a result shows its report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

__all__ = [
    "AutogradCliError",
    "CellResult",
    "DerivativeResult",
    "GradResult",
    "Graph",
    "Limits",
    "Settings",
    "TorchError",
    "__version__",
    "backward_graph",
    "derivative",
    "grad",
    "hessian",
    "jacobian",
    "jvp",
]

_WHERE = {
    "grad": "autogradcli.api",
    "jacobian": "autogradcli.api",
    "jvp": "autogradcli.api",
    "hessian": "autogradcli.api",
    "derivative": "autogradcli.api",
    "backward_graph": "autogradcli.api",
    "Settings": "autogradcli.settings",
    "Limits": "autogradcli.settings",
    "AutogradCliError": "autogradcli.errors",
    "TorchError": "autogradcli.errors",
    "GradResult": "autogradcli.results",
    "CellResult": "autogradcli.results",
    "DerivativeResult": "autogradcli.results",
    "Graph": "autogradcli.results",
}

if TYPE_CHECKING:
    from autogradcli.api import backward_graph, derivative, grad, hessian, jacobian, jvp
    from autogradcli.errors import AutogradCliError, TorchError
    from autogradcli.results import CellResult, DerivativeResult, GradResult, Graph
    from autogradcli.settings import Limits, Settings


def __getattr__(name: str) -> Any:
    """Import the API's names on first use (PEP 562)."""
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'autogradcli' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
