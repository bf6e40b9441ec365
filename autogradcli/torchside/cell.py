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
from autogradcli.lang.cellstatements import Branch, DeviceUse, Printed, Update
from autogradcli.lang.program import Guard
from autogradcli.lang.tree import (
    Backward,
    Hook,
    Leaf,
    Name,
    Node,
    Num,
    Program,
    Reset,
    Show,
    Statement,
    Step,
    Unhook,
    walk_names,
)
from autogradcli.lang.values import RandomSource, read_constructor
from autogradcli.memory import Budget
from autogradcli.settings import Settings
from autogradcli.torchside import build
from autogradcli.torchside.build import to_numpy
from autogradcli.torchside.devices import resolve_device, resolve_dtype
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
    # each step's leaves updated in place so far, as they were when the step was computed
    made: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)


def run_cell(bound: Bound) -> CellRun:
    """Run the cell's steps, backward(), reset and print lines in order."""
    lines = [s for s in bound.program.statements if isinstance(s, (Backward, Reset, Show))]
    check_run(
        bound, f"the cell ({len(lines)} backward, reset and print lines)", passes=len(lines) + 1
    )
    session = start(bound)
    dtype = resolve_dtype(bound.settings.dtype)
    runner = _Lines(bound.program, session.leaves, dtype, session.device)
    run = CellRun(runner.events, str(session.device), session.seen, made=runner.made)
    for statement in bound.program.statements:
        try:
            runner.run(statement)
        except AutogradCliError as error:
            run.error = _at_line(error, statement)
            break
    return run


class _Lines:
    """A cell's lines run one at a time on its leaves, each event recorded (the run's),
    or only run (``record`` False: the lines so far, for a condition read at parse)."""

    def __init__(
        self,
        program: Program,
        leaves: dict[str, torch.Tensor],
        dtype: torch.dtype,
        device: torch.device,
        record: bool = True,
    ) -> None:
        self.program, self.leaves, self.record = program, leaves, record
        self.dtype, self.device = dtype, device
        self.stepper = build.Stepper(program, leaves, dtype, device)
        self.events: list[TorchEvent] = []
        self.handles: dict[str, list[Any]] = {}
        self.updated: set[str] = set()
        self.made: dict[str, dict[str, np.ndarray]] = {}  # step -> updated leaves then
        self.snapshot: dict[str, np.ndarray] | None = {}  # None: an update since the last

    def value(self, node: Node, extra: dict[str, Any] | None = None) -> Any:
        env = {**self.leaves, **(extra or {})}
        return build.evaluate(node, env, self.stepper.steps, self.dtype, self.device)

    def current(self) -> dict[str, np.ndarray]:
        return {n: to_numpy(self.leaves[n].detach()) for n in self.updated}

    def grads(self) -> Grads:
        variables = self.program.variables if self.record else ()
        return {
            n: None if self.leaves[n].grad is None else to_numpy(self.leaves[n].grad)  # type: ignore[misc]
            for n in variables
        }

    def run(self, statement: Statement) -> None:
        leaves, value = self.leaves, self.value
        event: TorchEvent | None = None
        if isinstance(statement, Update):
            _update(statement, leaves, value)
            self.updated.add(statement.name)
            self.snapshot = None
        elif isinstance(statement, DeviceUse):
            _device(statement, self.device)
        elif isinstance(statement, Step):
            self.stepper.step(statement)
            if self.record:
                if self.snapshot is None:  # one copy per update, shared by its steps
                    self.snapshot = self.current()
                self.made[statement.name] = self.snapshot
        elif isinstance(statement, Hook):
            tensors = {**leaves, **self.stepper.steps}
            kept = register(statement, tensors, [])
            self.handles.setdefault(statement.handle, []).append(kept)
        elif isinstance(statement, Unhook):
            for handle in self.handles.pop(statement.handle, []):
                handle.remove()
        elif isinstance(statement, Guard):
            _guard(statement, value)
        elif isinstance(statement, Branch):
            if self.record:  # read again: the path the cell was read with, or stop
                _branch(statement, value)
        elif isinstance(statement, Backward):
            event = _backward(statement, value, self.grads, leaves, self.stepper.changes)
        elif isinstance(statement, Reset):
            _reset(leaves[statement.name], statement)
            event = TorchEvent(statement, self.grads())
        elif isinstance(statement, Printed):
            event = _printed(statement, self.grads, leaves, self.stepper.steps, value)
        elif isinstance(statement, Show):
            shown = [_read(item, leaves, self.stepper.steps, value) for item in statement.items]
            event = TorchEvent(statement, self.grads(), shown=shown)
        if event is not None and self.record:
            if not isinstance(statement, Reset):
                event.current = self.current()
            self.events.append(event)


class PathOracle:
    """Reads a cell's tensor conditions while it is parsed again (``lang.loops``): the
    lines so far run once each, in order, on the values the run will have (the inputs
    given, the constructors drawn with the run's seed, in its dtype, on its device); a
    condition's truth is ``bool()`` of its tensor, as Python takes it (None: Python
    raises there, or the run stops before it)."""

    def __init__(
        self, given: dict[str, np.ndarray], requires: set[str], settings: Settings, seed: int
    ) -> None:
        self.limits = settings.limits
        self.random = RandomSource(seed, settings.dtype)
        self.budget = Budget(self.limits.memory)
        self.shapes: dict[str, tuple[int, ...]] = {n: a.shape for n, a in given.items()}
        dtype, device = resolve_dtype(settings.dtype), resolve_device(settings.device)
        leaves = {n: build.make_leaf(a, dtype, device, n in requires) for n, a in given.items()}
        self.lines = _Lines(Program("", Num(0.0)), leaves, dtype, device, record=False)
        self.done = 0
        self.stopped = False

    def decide(
        self, statements: list[Statement], leaves: dict[str, Leaf], condition: Node
    ) -> bool | None:
        if self.stopped:
            return None
        try:
            for statement in statements[self.done :]:
                self.lifted(_nodes(statement), leaves)
                if isinstance(statement, Leaf):
                    self.make(statement)
                else:
                    self.lines.run(statement)
            self.done = len(statements)
            self.lifted([condition], leaves)
            return bool(self.lines.value(condition))
        except Exception:  # the run reads each condition again: a wrong guess stops it
            self.stopped = True  # the run stops here, or at a line before
            return None

    def lifted(self, nodes: list[Any], leaves: dict[str, Leaf]) -> None:
        """Constructors inside an expression, made in the order binding reads them."""
        for node in nodes:
            for name in [] if node is None or isinstance(node, str) else walk_names(node):
                if name in leaves and name not in self.lines.leaves:
                    self.make(leaves[name])

    def make(self, leaf: Leaf) -> None:
        if leaf.name in self.lines.leaves:
            return
        made = read_constructor(leaf.source, self.limits, self.random, self.shapes, self.budget)
        self.shapes[leaf.name] = made.array.shape
        lines = self.lines
        lines.leaves[leaf.name] = build.make_leaf(
            made.array, lines.dtype, lines.device, leaf.requires_grad
        )


def _nodes(statement: Statement) -> list[Any]:
    """The expressions a line reads, in binding's order."""
    if isinstance(statement, Step):
        return [statement.node]
    if isinstance(statement, Backward):
        return [statement.target, statement.gradient]
    if isinstance(statement, Show):
        return list(statement.items)
    return []


def _branch(statement: Branch, value: Any) -> None:
    """A tensor condition read again by the run: PyTorch's error where ``bool()`` raises
    (a tensor of several elements), else the truth the cell was read with."""
    condition = value(statement.items[0])
    try:
        truth = bool(condition)
    except RuntimeError as exc:
        raise TorchError(str(exc), in_cell=True) from None
    if statement.open or statement.taken is None or truth != statement.taken:
        raise ComputationError("flow_changed", line=statement.text, now=truth, then=statement.taken)


def _backward(
    statement: Backward,
    value: Any,
    grads: Any,
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
        grads(),
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
    grads: Any,
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
    return TorchEvent(statement, grads(), shown=shown, printed=printed)


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
    result = value(item, _grad_values(item, leaves))
    return to_numpy(result) if result.dtype != torch.bool else result.cpu().numpy()
