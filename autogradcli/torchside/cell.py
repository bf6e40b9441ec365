"""Stage 3 for a notebook cell: its lines run in order on one set of leaves, as Python
would run them. The steps are computed once (nothing in a cell changes a tensor in place,
so computing them up front builds the same graph); each ``backward()`` accumulates into
``.grad``, resets clear it, and each ``print(...)`` reads the values of that moment."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from autogradcli.bind import Bound
from autogradcli.errors import AutogradCliError, ComputationError, TorchError, VariableError
from autogradcli.lang.tree import Backward, Name, Node, Reset, Show, walk_names
from autogradcli.torchside import build
from autogradcli.torchside.build import to_numpy
from autogradcli.torchside.devices import resolve_dtype
from autogradcli.torchside.run import start

Grads = dict[str, np.ndarray | None]


@dataclass
class TorchEvent:
    """One line's effect: the leaves' ``.grad`` after it; for ``backward()`` the target's
    value and the gradient it was given; for ``print(...)`` what each item read."""

    statement: Backward | Reset | Show
    grads: Grads
    target: np.ndarray | None = None
    gradient: np.ndarray | None = None
    shown: list[Any] = field(default_factory=list)


@dataclass
class CellRun:
    """The events up to the end, or up to the line PyTorch refused (``error``)."""

    events: list[TorchEvent]
    device: str
    seen: dict[str, np.ndarray]  # the inputs as autograd saw them (rounded to the dtype)
    error: AutogradCliError | None = None


def run_cell(bound: Bound) -> CellRun:
    """Run the cell's backward(), reset and print lines in order."""
    session = start(bound)
    dtype = resolve_dtype(bound.settings.dtype)
    leaves = session.leaves
    try:
        trace = build.forward(bound.program, leaves, dtype, session.device)
    except ComputationError as error:  # PyTorch refused a step (an inference tensor saved)
        if isinstance(error, TorchError):  # its fix written as lines of a cell
            error = TorchError(error.torch_message, in_cell=True)
        return CellRun([], str(session.device), session.seen, error)

    def value(node: Node, extra: dict[str, Any] | None = None) -> Any:
        return build.evaluate(node, {**leaves, **(extra or {})}, trace.steps, dtype, session.device)

    events: list[TorchEvent] = []
    run = CellRun(events, str(session.device), session.seen)
    for statement in bound.program.statements:
        try:
            if isinstance(statement, Backward):
                target = value(statement.target)
                gradient = None if statement.gradient is None else value(statement.gradient)
                build.backward(target, gradient, statement.retain_graph, in_cell=True)
                events.append(
                    TorchEvent(
                        statement,
                        _grads(bound, leaves),
                        to_numpy(target),
                        None if gradient is None else to_numpy(gradient),
                    )
                )
            elif isinstance(statement, Reset):
                _reset(leaves[statement.name], statement)
                events.append(TorchEvent(statement, _grads(bound, leaves)))
            elif isinstance(statement, Show):
                shown = [_read(item, bound, leaves, trace.steps, value) for item in statement.items]
                events.append(TorchEvent(statement, _grads(bound, leaves), shown=shown))
        except AutogradCliError as error:
            if isinstance(error, TorchError | ComputationError):
                error.data.setdefault("line", statement.text)
            run.error = error
            break
    return run


def _grads(bound: Bound, leaves: dict[str, torch.Tensor]) -> Grads:
    return {
        n: None if leaves[n].grad is None else to_numpy(leaves[n].grad)  # type: ignore[misc]
        for n in bound.program.variables
    }


def _reset(leaf: torch.Tensor, statement: Reset) -> None:
    if statement.to == "none":
        leaf.grad = None
    elif leaf.grad is None:
        raise VariableError("zero_none", text=statement.text)
    else:
        leaf.grad.zero_()


ATTRIBUTE = "."


def _read(
    item: Node | str,
    bound: Bound,
    leaves: dict[str, torch.Tensor],
    steps: dict[str, torch.Tensor],
    value: Any,
) -> Any:
    """What ``print(item)`` shows: text as is, an attribute as PyTorch gives it, or the
    value of an expression (which may read ``x.grad``)."""
    if isinstance(item, str):
        return item
    if isinstance(item, Name) and ATTRIBUTE in item.id:
        owner, attr = item.id.split(ATTRIBUTE)
        tensor = leaves.get(owner, steps.get(owner))
        if tensor is None:
            raise VariableError("show_unknown", name=owner)
        if attr == "grad":
            return None if tensor.grad is None else to_numpy(tensor.grad)
        if attr == "shape":
            return list(tensor.shape)
        if attr == "grad_fn":
            return None if tensor.grad_fn is None else type(tensor.grad_fn).__name__
        return bool(getattr(tensor, attr))
    extra = {}
    for name in walk_names(item):
        if ATTRIBUTE in name:
            owner = name.split(ATTRIBUTE)[0]
            grad = leaves[owner].grad if owner in leaves else None
            if grad is None:
                raise VariableError("grad_none_used", name=owner)
            extra[name] = grad
    result = value(item, extra)
    return to_numpy(result) if result.dtype != torch.bool else result.cpu().numpy()
