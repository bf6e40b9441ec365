"""Stage 3: the autograd run. Leaf tensors on the device, the backward passes as planned,
and the same inputs once more in float64 when the verdict needs it."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from autogradcli.bind import Bound, Passes
from autogradcli.errors import TorchError, VariableError
from autogradcli.glossary import lookup
from autogradcli.lang.display import display_names
from autogradcli.lang.tree import Program
from autogradcli.torchside import build
from autogradcli.torchside.build import Trace, to_numpy
from autogradcli.torchside.devices import resolve_device, resolve_dtype


@dataclass
class Session:
    """The torch objects of one run: leaves, the weights tensor, the inputs as autograd saw
    them (rounded to the dtype, widened to float64)."""

    bound: Bound
    leaves: dict[str, torch.Tensor]
    weight_tensor: torch.Tensor | None
    seen: dict[str, np.ndarray]
    seen_weights: np.ndarray
    device: torch.device

    def forward(self, env: dict[str, torch.Tensor] | None = None) -> Trace:
        """The forward pass (with some leaves replaced by ``env``). A leaf the program
        changes in place starts each pass afresh, as a cell run again makes it again."""
        dtype = resolve_dtype(self.bound.settings.dtype)
        program = self.bound.program
        fresh = {n: _again(self.leaves[n]) for n in build.changed_leaves(program)}
        return build.forward(program, {**self.leaves, **fresh, **(env or {})}, dtype, self.device)

    def weights(self) -> torch.Tensor | None:
        """A fresh copy each time: backward may hand the weights tensor itself to a leaf's
        .grad (sum of a 0-d input), and later passes would then accumulate into it."""
        return None if self.weight_tensor is None else self.weight_tensor.clone()

    def function(self, names: list[str]) -> Callable[..., torch.Tensor]:
        """``f(*tensors)`` for torch.autograd.functional: the inputs ``names`` replaced."""
        return lambda *tensors: self.forward(dict(zip(names, tensors, strict=True))).out


def _again(leaf: torch.Tensor) -> torch.Tensor:
    return leaf.detach().clone().requires_grad_(leaf.requires_grad)


def start(bound: Bound) -> Session:
    """Load torch, make the leaf tensors on the device."""
    dtype = resolve_dtype(bound.settings.dtype)
    device = resolve_device(bound.settings.device)
    leaves = {
        name: build.make_leaf(bound.arrays[name], dtype, device, name in bound.differentiate)
        for name in bound.program.variables
    }
    weight = None if bound.weights is None else build.make_leaf(bound.weights, dtype, device, False)
    seen = {name: as_seen(leaf, bound.arrays[name]) for name, leaf in leaves.items()}
    seen_weights = np.ones(bound.out_shape) if weight is None else to_numpy(weight)
    return Session(bound, leaves, weight, seen, seen_weights, device)


def as_seen(leaf: torch.Tensor, given: np.ndarray) -> np.ndarray:
    """The values ``leaf`` holds, as float64: the array it was made from when the dtype
    kept every value (a float32 file read as float64, say), so that the two are not held
    twice; otherwise a copy."""
    if given.dtype == np.float64 and leaf.dtype in (torch.float32, torch.float64):
        held = leaf.detach()
        if held.device.type != "cpu":
            held = held.cpu()
        with np.errstate(invalid="ignore"):  # NaN never compares equal: then a copy
            if given.shape == tuple(held.shape) and bool(np.equal(given, held.numpy()).all()):
                return given
    return to_numpy(leaf)


@dataclass
class Autograd:
    """What the passes left: ``.grad`` after each pass, the last trace, the first (with its
    hook recorder, for --explain), and the output."""

    snapshots: list[dict[str, np.ndarray]]
    trace: Trace
    first: Trace
    recorder: Any
    output: np.ndarray
    released: bool = False  # the forward values were let go (``release``)
    hook_calls: list[Any] = field(default_factory=list)  # the program's hooks, first pass
    untouched: dict[str, bool] = field(default_factory=dict)  # --functional: .grad is None
    # inputs the output reaches whose backward sent no gradient (PyTorch leaves .grad None;
    # autograd counts a gradient it never sent as zero): the order-0 norm
    unsent: tuple[str, ...] = ()

    def release(self) -> None:
        """Let the forward pass's values go (each operation's tensor: 40 MB apiece at 10^7
        float32 elements) when nothing will look at them but a diagnosis that may never be
        needed; ``forward_values`` runs the forward pass again for it. CPU only, where the
        same operations on the same leaves give the same bits."""
        if self.trace.out.device.type == "cpu" and self.recorder is None:
            empty = Trace(self.trace.out, {})
            self.trace = self.first = empty
            self.released = True

    def forward_values(self, session: Session) -> Trace:
        """The last forward pass's values (run again, without a graph, if released)."""
        if not self.released:
            return self.trace
        with torch.no_grad():
            return session.forward()


def run_passes(
    session: Session, plan: Passes, retained: list[str], explicit: bool, explain: bool
) -> Autograd:
    """Forward and backward as planned; ``retained`` steps keep their ``.grad``. What
    stays per pass is its ``.grad`` (``snapshot``); one forward graph is alive at a time
    (two with ``explain``, which keeps the first)."""
    names = session.bound.names
    trace: Trace | None = None
    first: Trace | None = None
    recorder = None
    snapshots: list[dict[str, np.ndarray]] = []
    program_hooks = session.bound.program.hooks
    calls: list[Any] = []
    first_calls: list[Any] = []
    unsent: set[str] = set()
    for index in range(1, plan.repeat + 1):
        if trace is None or not plan.same_graph:
            trace = None  # the last pass's graph goes before the next one is built
            trace = session.forward()
            retain(trace, retained, explicit, session.bound.program)
            if program_hooks:
                _hook(session, trace, calls, first=index == 1)
        if index == 1:
            first = trace if explain else None
            if explain:
                from autogradcli.torchside.hooks import attach

                recorder = attach(trace.out)
        again = index if index > 1 and plan.same_graph else None
        try:
            if plan.functional:
                leaves = [session.leaves[n] for n in names]
                got = build.functional_grad(
                    trace.out, leaves, session.weights(), plan.retain_graph, again
                )
                wide = index == plan.repeat or (explain and index == 1)
                snapshots.append({n: snapshot(g, wide) for n, g in zip(names, got, strict=True)})
            else:
                build.backward(trace.out, session.weights(), plan.retain_graph, again)
                unsent |= _reached(session, names, trace.out)
                wide = index == plan.repeat or (explain and index == 1)
                snapshots.append({n: _grad_snapshot(session, n, wide) for n in names})
        except TorchError as error:
            raise build.with_changes(error, trace.changes) from None
        finally:
            if recorder is not None:
                recorder.remove()
        if index == 1:
            first_calls = list(calls)
        if plan.zero_grad and index < plan.repeat:
            for leaf in session.leaves.values():
                leaf.grad = None  # what optimizer.zero_grad() does (set_to_none=True)
            for name in retained:
                tensor_of(trace, name).grad = None
    assert trace is not None
    first = trace if first is None else first
    untouched = {n: session.leaves[n].grad is None for n in names} if plan.functional else {}
    return Autograd(
        snapshots,
        trace,
        first,
        recorder,
        to_numpy(trace.out),
        untouched=untouched,
        unsent=tuple(n for n in names if n in unsent),
        hook_calls=first_calls,
    )


def snapshot(grad: torch.Tensor, wide: bool) -> np.ndarray:
    """A copy of ``.grad`` after a pass: float64 (``wide``: the last pass, the result's
    ``.grad``), else in the narrowest NumPy dtype that holds the dtype's values exactly
    (float16 as float16, float32 and bfloat16 as float32): an earlier pass keeps 4 bytes
    per element in float32, not 8."""
    if wide or grad.dtype == torch.float64:
        return to_numpy(grad)
    narrow = torch.float16 if grad.dtype == torch.float16 else torch.float32
    return grad.detach().to("cpu", narrow, copy=True).numpy()


def _hook(session: Session, trace: Trace, calls: list[Any], first: bool) -> None:
    """The program's hooks on this pass's tensors: on a step's each new pass (a new
    tensor), on a leaf once (the same tensor every pass)."""
    from autogradcli.torchside.hooks import register

    hooks = session.bound.program.hooks
    tensors = {**session.leaves, **trace.steps}
    for index, hook in enumerate(hooks):
        if first or hook.target in trace.steps:
            register(hook, tensors, calls, index)


def _reached(session: Session, names: list[str], out: torch.Tensor) -> set[str]:
    """The inputs asked about whose .grad backward() left None although the output's
    graph reaches them (a backward formula sent no gradient: the order-0 norm). One used
    only under detach() or no_grad is outside the graph: an error."""
    unsent = set()
    for name in names:
        leaf = session.leaves[name]
        if leaf.grad is None:
            if not _in_graph(out, leaf):
                raise VariableError("grad_never_reached", name=session.bound.program.shown(name))
            unsent.add(name)
    return unsent


def _in_graph(out: torch.Tensor, leaf: torch.Tensor) -> bool:
    """Whether ``leaf`` is one of the leaves ``out``'s graph accumulates into."""
    seen: set[int] = set()
    stack = [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if getattr(node, "variable", None) is leaf:
            return True
        stack.extend(following for following, _ in node.next_functions)
    return False


def _grad_snapshot(session: Session, name: str, wide: bool) -> np.ndarray:
    """``snapshot`` of the input's .grad; zeros where backward sent it none (``unsent``)."""
    leaf = session.leaves[name]
    return snapshot(torch.zeros_like(leaf) if leaf.grad is None else leaf.grad, wide)


def tensor_of(trace: Trace, name: str) -> torch.Tensor:
    """The tensor a step or the output named ``name`` holds."""
    return trace.steps.get(name, trace.out)


def retain(trace: Trace, names: list[str], explicit: bool, program: Program) -> None:
    """``retain_grad()`` on each named tensor that autograd tracks (an error names it as
    the user wrote it: ``y (line 2)``, never the program's ``y_1``)."""
    for name in names:
        tensor = tensor_of(trace, name)
        if tensor.requires_grad:
            tensor.retain_grad()
        elif explicit:
            shown = display_names(program).get(name, name)
            raise VariableError("retain_grad_no_grad", name=shown)


def read_grad(tensor: torch.Tensor) -> tuple[np.ndarray | None, str | None]:
    """``.grad`` read as PyTorch does, and (a glossary key, or a reason code) why it is
    None when it is."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        grad = tensor.grad
    if grad is not None:
        return to_numpy(grad), None
    if not tensor.requires_grad:
        return None, "untracked"
    for warning in caught:
        entry = lookup(str(warning.message))
        if entry is not None:
            return None, entry.key
    return None, "leaf_only"


@dataclass(frozen=True)
class Float64Run:
    """The same inputs (as the dtype rounded them) once in float64: output and gradients."""

    output: np.ndarray
    grads: dict[str, np.ndarray]


def float64_run(session: Session) -> Float64Run:
    """Forward and one backward in float64 on the CPU-rounded inputs the dtype gave."""
    bound = session.bound
    leaves = {
        n: build.make_leaf(session.seen[n], torch.float64, session.device, n in bound.differentiate)
        for n in bound.program.variables
    }
    trace = build.forward(bound.program, leaves, torch.float64, session.device)
    weights = None
    if session.weight_tensor is not None:
        weights = torch.as_tensor(session.seen_weights, dtype=torch.float64, device=session.device)
    build.backward(trace.out, weights)
    grads = {}
    for name in bound.names:
        grad = leaves[name].grad
        grads[name] = np.zeros(bound.shapes[name]) if grad is None else to_numpy(grad)
    return Float64Run(to_numpy(trace.out), grads)
