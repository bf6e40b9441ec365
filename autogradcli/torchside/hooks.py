"""Hooks on every node of the backward graph (the gradients each received and sent, for
``--explain``), and the program's own tensor hooks (``y.register_hook(lambda g: g * 2)``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.autograd.graph import get_gradient_edge

from autogradcli.errors import LimitError, TorchError
from autogradcli.lang.tree import Hook
from autogradcli.torchside.build import evaluate, to_numpy

MAX_NODES = 128  # nodes of the backward graph, checked before backward() runs


@dataclass
class Record:
    """What one node's hook saw: the gradients it received and sent."""

    fn: Any
    arriving: list[np.ndarray | None]
    leaving: list[np.ndarray | None]


@dataclass
class Recorder:
    """Hooks on every node reachable from the output; ``order`` is the order they ran."""

    records: dict[int, Record] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)
    handles: list[Any] = field(default_factory=list)
    held: list[Any] = field(default_factory=list)

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()


def attach(out: torch.Tensor) -> Recorder:
    """Register a hook on each node of ``out``'s graph (call before ``backward``)."""
    recorder = Recorder()
    if not out.requires_grad:
        return recorder
    seen: set[int] = set()
    stack = [get_gradient_edge(out).node]  # grad_fn, or AccumulateGrad for a leaf output
    while stack:
        fn = stack.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        recorder.held.append(fn)
        recorder.handles.append(fn.register_hook(_hook(recorder, fn)))
        stack.extend(nxt for nxt, _ in fn.next_functions if nxt is not None)
    if len(seen) > MAX_NODES:
        recorder.remove()
        raise LimitError("explain_too_large", limit=MAX_NODES, nodes=len(seen))
    return recorder


def _hook(recorder: Recorder, fn: Any) -> Any:
    def hook(grad_inputs: tuple[Any, ...], grad_outputs: tuple[Any, ...]) -> None:
        recorder.order.append(id(fn))
        recorder.records[id(fn)] = Record(
            fn,
            arriving=[None if g is None else to_numpy(g) for g in grad_outputs],
            leaving=[None if g is None else to_numpy(g) for g in grad_inputs],
        )

    return hook


@dataclass(frozen=True)
class HookCall:
    """One run of a program's hook: the gradient it received, and what it returned (None:
    nothing, so the gradient went on unchanged). ``index`` is its place in ``hooks``."""

    index: int
    received: np.ndarray
    returned: np.ndarray | None


def register(
    hook: Hook, tensors: dict[str, torch.Tensor], calls: list[HookCall], index: int = 0
) -> Any:
    """``tensor.register_hook`` as the program wrote it (the ``index``-th hook); each run is
    logged in ``calls``. Returns the handle."""
    try:
        return tensors[hook.target].register_hook(_tensor_hook(index, hook, calls))
    except RuntimeError as exc:  # a tensor that does not require grad
        raise TorchError(str(exc)) from None


def _tensor_hook(index: int, hook: Hook, calls: list[HookCall]) -> Any:
    def run(grad: torch.Tensor) -> torch.Tensor | None:
        returned = None
        if hook.body is not None:
            returned = evaluate(hook.body, {hook.param: grad}, {}, grad.dtype, grad.device)
        calls.append(
            HookCall(index, to_numpy(grad), None if returned is None else to_numpy(returned))
        )
        return returned

    return run
