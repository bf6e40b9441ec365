"""Stage 7: results, immutable values free of torch, a module per command. ``to_dict()`` is
the CLI's ``--json`` document (``schema/`` has its JSON Schema); ``__rich__`` renders the same
report as the CLI (``rich.print(result)``), importing Rich only then."""

from __future__ import annotations

from autogradcli.results.base import (
    SCHEMA_VERSION,
    Frozen,
    Judged,
    Rendered,
    cause_dict,
    note_codes,
    note_texts,
    plain,
    strict,
)
from autogradcli.results.cell import CellEvent, CellResult, LeafGrad, Shown
from autogradcli.results.derivatives import Block, DerivativeResult, JacobianRow
from autogradcli.results.grad import (
    Expectation,
    Explanation,
    Flow,
    GradResult,
    HookResult,
    NodeStep,
    PassResult,
    Suggestion,
    TensorResult,
    VariableResult,
    VjpCheck,
)
from autogradcli.results.graph import Freed, Graph, GraphNode, Saved
from autogradcli.results.plot import PlotResult

__all__ = [
    "SCHEMA_VERSION",
    "Block",
    "CellEvent",
    "CellResult",
    "DerivativeResult",
    "Expectation",
    "Explanation",
    "Flow",
    "Freed",
    "Frozen",
    "GradResult",
    "Graph",
    "GraphNode",
    "HookResult",
    "JacobianRow",
    "Judged",
    "LeafGrad",
    "NodeStep",
    "PassResult",
    "PlotResult",
    "Rendered",
    "Saved",
    "Shown",
    "Suggestion",
    "TensorResult",
    "VariableResult",
    "VjpCheck",
    "cause_dict",
    "note_codes",
    "note_texts",
    "plain",
    "strict",
]
