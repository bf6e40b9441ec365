"""Stage 3 for a notebook cell: its lines run in order on one set of leaves, as Python
would run them. Each step is computed at its line (an in-place one changes its tensor
there, and its version counter moves); each ``backward()`` accumulates into ``.grad``,
resets clear it, and each ``print(...)`` reads the values of that moment."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from autogradcli.bind import Bound
from autogradcli.errors import (
    AutogradCliError,
    ComputationError,
    ExpressionError,
    TorchError,
    VariableError,
)
from autogradcli.footprint import check_run
from autogradcli.lang.cellstatements import DeviceUse, Printed, Update
from autogradcli.lang.program import Guard
from autogradcli.lang.tree import (
    Backward,
    Hook,
    Name,
    Node,
    Reset,
    Show,
    Statement,
    Step,
    Unhook,
    walk_names,
)
from autogradcli.torchside import build
from autogradcli.torchside.build import to_numpy
from autogradcli.torchside.devices import resolve_dtype
from autogradcli.torchside.hooks import register
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
    current: dict[str, np.ndarray] = field(default_factory=dict)  # leaves updated in place
    printed: str | None = None  # what Python prints for a Printed line


@dataclass
class CellRun:
    """The events up to the end, or up to the line PyTorch refused (``error``)."""

    events: list[TorchEvent]
    device: str
    seen: dict[str, np.ndarray]  # the inputs as autograd saw them (rounded to the dtype)
    error: AutogradCliError | None = None


def run_cell(bound: Bound) -> CellRun:
    """Run the cell's steps, backward(), reset and print lines in order."""
    lines = [s for s in bound.program.statements if isinstance(s, (Backward, Reset, Show))]
    check_run(
        bound, f"the cell ({len(lines)} backward, reset and print lines)", passes=len(lines) + 1
    )
    session = start(bound)
    dtype = resolve_dtype(bound.settings.dtype)
    leaves = session.leaves
    stepper = build.Stepper(bound.program, leaves, dtype, session.device)

    def value(node: Node, extra: dict[str, Any] | None = None) -> Any:
        env = {**leaves, **(extra or {})}
        return build.evaluate(node, env, stepper.steps, dtype, session.device)

    events: list[TorchEvent] = []
    run = CellRun(events, str(session.device), session.seen)
    handles: dict[str, list[Any]] = {}
    updated: set[str] = set()

    def current() -> dict[str, np.ndarray]:
        return {n: to_numpy(leaves[n].detach()) for n in updated}

    for statement in bound.program.statements:
        try:
            if isinstance(statement, Update):
                _update(statement, leaves, value)
                updated.add(statement.name)
            elif isinstance(statement, DeviceUse):
                _device(statement, session.device)
            elif isinstance(statement, Step):
                stepper.step(statement)
            elif isinstance(statement, Hook):
                tensors = {**leaves, **stepper.steps}
                kept = register(statement, tensors, [])
                handles.setdefault(statement.handle, []).append(kept)
            elif isinstance(statement, Unhook):
                for handle in handles.pop(statement.handle, []):
                    handle.remove()
            elif isinstance(statement, Guard):
                _guard(statement, value)
            elif isinstance(statement, Backward):
                events.append(_backward(statement, value, bound, leaves, stepper.changes))
                events[-1].current = current()
            elif isinstance(statement, Reset):
                _reset(leaves[statement.name], statement)
                events.append(TorchEvent(statement, _grads(bound, leaves)))
            elif isinstance(statement, Printed):
                events.append(_printed(statement, bound, leaves, stepper.steps, value))
                events[-1].current = current()
            elif isinstance(statement, Show):
                shown = [_read(item, leaves, stepper.steps, value) for item in statement.items]
                events.append(TorchEvent(statement, _grads(bound, leaves), shown=shown))
                events[-1].current = current()
        except AutogradCliError as error:
            run.error = _at_line(error, statement)
            break
    return run


def _backward(
    statement: Backward,
    value: Any,
    bound: Bound,
    leaves: dict[str, torch.Tensor],
    changes: list[build.Change],
) -> TorchEvent:
    target = value(statement.target)
    gradient = None if statement.gradient is None else value(statement.gradient)
    try:
        build.backward(target, gradient, statement.retain_graph, in_cell=True)
    except TorchError as error:
        raise build.with_changes(error, changes) from None
    return TorchEvent(
        statement,
        _grads(bound, leaves),
        to_numpy(target),
        None if gradient is None else to_numpy(gradient),
    )


def _update(statement: Update, leaves: dict[str, torch.Tensor], value: Any) -> None:
    """``p -= lr * p.grad`` under no_grad: PyTorch's in-place method on the leaf itself."""
    extra = _grad_values(statement.operand, leaves)
    with torch.no_grad():
        operand = value(statement.operand, extra)
        try:
            getattr(leaves[statement.name], statement.method)(operand)
        except RuntimeError as exc:
            raise TorchError(str(exc), in_cell=True) from None


def _device(statement: DeviceUse, device: torch.device) -> None:
    """A constructor's ``device=`` must name the device this run uses."""
    try:
        named = torch.device(statement.device)
    except RuntimeError:
        raise ExpressionError("device_named", device=statement.device, run=str(device)) from None
    if named.type != device.type or (named.index is not None and named != device):
        raise ExpressionError("device_named", device=statement.device, run=str(device))


def _printed(
    statement: Printed,
    bound: Bound,
    leaves: dict[str, torch.Tensor],
    steps: dict[str, torch.Tensor],
    value: Any,
) -> TorchEvent:
    """A print Python formats: each item as Python formats it (``t.item()`` a float,
    ``t.tolist()`` a list, a tensor as PyTorch prints it), joined by ``sep``."""
    shown: list[Any] = []
    parts: list[str] = []
    for item, how in zip(statement.items, statement.formats, strict=True):
        if isinstance(item, str):
            shown.append(item)
            parts.append(item)
            continue
        tensor = value(item, _grad_values(item, leaves))
        if how == "item":
            if tensor.numel() != 1:
                raise TorchError(
                    f"a Tensor with {tensor.numel()} elements cannot be converted to Scalar",
                    in_cell=True,
                )
            number = tensor.item()
            shown.append(number)
            parts.append(str(number))
        elif how == "tolist":
            listed = tensor.tolist()
            shown.append(listed)
            parts.append(str(listed))
        else:
            shown.append(_read(item, leaves, steps, value))
            parts.append(str(tensor))
    printed = statement.sep.join(parts)
    return TorchEvent(statement, _grads(bound, leaves), shown=shown, printed=printed)


def _grad_values(node: Node, leaves: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``x.grad`` read in an expression: the leaf's gradient now (None is an error)."""
    extra: dict[str, torch.Tensor] = {}
    for name in walk_names(node):
        if ATTRIBUTE in name:
            owner = name.split(ATTRIBUTE)[0]
            grad = leaves[owner].grad if owner in leaves else None
            if grad is None:
                raise VariableError("grad_none_used", name=owner)
            extra[name] = grad
    return extra


def _guard(guard: Guard, value: Any) -> None:
    """Where Python raises in a cell line, raise as it does: PyTorch's own error for
    ``^`` on floating point tensors and for NumPy reading a tensor that requires grad,
    PyTorch's or ``math``'s for ``math.f`` of a tensor past one element or outside the
    function's domain. A bitwise xor that PyTorch computes (integer or bool tensors) is
    refused: it is not a power."""
    mode = build.MODES[guard.mode](torch)  # numpy() is allowed under no_grad
    with mode, warnings.catch_warnings():  # float() of a tensor that requires grad warns
        operands = [o if isinstance(o, int | float) else value(o) for o in guard.operands]
        warnings.simplefilter("ignore")
        try:
            if guard.kind == "xor":
                operands[0] ^ operands[1]
            elif guard.kind == "numpy":
                for operand in operands:
                    if isinstance(operand, torch.Tensor) and operand.requires_grad:
                        operand.numpy()  # what NumPy calls: PyTorch refuses it
            else:
                numbers = [float(o) for o in operands]
        except (RuntimeError, ValueError, TypeError) as exc:
            raise TorchError(str(exc), in_cell=True) from None
    if guard.kind == "xor":
        raise ExpressionError("xor_bitwise", text=guard.text)
    if guard.kind == "math":
        try:
            getattr(math, guard.func)(*numbers)
        except (ValueError, OverflowError, TypeError) as exc:
            raise ComputationError(
                "python_raised",
                line=guard.text,
                error=type(exc).__name__,
                detail=str(exc),
                call=f"math.{guard.func}",
            ) from None


def _at_line(error: AutogradCliError, statement: Statement) -> AutogradCliError:
    """PyTorch's refusal with its fix written as lines of a cell, and the line it was."""
    if isinstance(error, TorchError) and not error.data.get("in_cell"):
        changes = error.data.get("changes")
        error = TorchError(error.torch_message, in_cell=True)
        if changes:
            error.data["changes"] = changes
    if isinstance(error, TorchError | ComputationError):
        line = statement.in_place.text if isinstance(statement, Step) and statement.in_place else ""
        text = statement.line if isinstance(statement, Hook) else getattr(statement, "text", "")
        text = text or line
        if text:
            error.data.setdefault("line", text)
    return error


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
        if attr == "_version":
            return int(tensor._version)
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
