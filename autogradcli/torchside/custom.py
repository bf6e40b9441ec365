"""A cell's custom autograd Function as a real ``torch.autograd.Function`` subclass: its
forward, setup_context, backward and jvp evaluate the parsed lines with the tool's own
torch evaluator, so autograd runs the user's backward exactly where PyTorch would."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from autogradcli.lang.custom import RUNNER, CustomFunction, Method, run
from autogradcli.lang.tree import Node
from autogradcli.torchside import build

_CLASSES: dict[str, type[torch.autograd.Function]] = {}


@dataclass
class TorchDomain:
    """Lines over tensors, with PyTorch's ``ctx`` (or a stand-in that records the same)."""

    ctx: Any
    dtype: torch.dtype
    device: torch.device

    def value(self, node: Node, env: dict[str, Any]) -> Any:
        tensors = {k: v for k, v in env.items() if isinstance(v, torch.Tensor)}
        return build.evaluate(node, tensors, {}, self.dtype, self.device)

    def save(self, values: list[Any]) -> None:
        self.ctx.save_for_backward(*values)

    def saved(self) -> tuple[Any, ...]:
        return tuple(self.ctx.saved_tensors)

    def needs(self, index: int) -> bool:
        return bool(self.ctx.needs_input_grad[index])


@dataclass
class Context:
    """A ``ctx`` for calling the methods directly (the checks): what was saved, which
    inputs need a gradient, and the plain attributes."""

    needs_input_grad: tuple[bool, ...]
    saved_tensors: tuple[Any, ...] = ()
    attributes: dict[str, Any] = field(default_factory=dict)

    def save_for_backward(self, *values: Any) -> None:
        self.saved_tensors = tuple(values)


def _kind(values: tuple[Any, ...]) -> tuple[torch.dtype, torch.device]:
    first = next(v for v in values if isinstance(v, torch.Tensor))
    return first.dtype, first.device


def _attributes(ctx: Any) -> dict[str, Any]:
    found = getattr(ctx, "attributes", None)
    if found is None:
        found = {}
        ctx.attributes = found
    return found


def run_forward(fn: CustomFunction, ctx: Any, args: tuple[Any, ...]) -> Any:
    """The forward (and setup_context) with ``ctx``: what it returns."""
    dtype, device = _kind(args)
    env = dict(zip(fn.forward.params, args, strict=True))
    domain = TorchDomain(ctx, dtype, device)
    output = run(fn.forward, env, domain)
    if fn.forward.has_ctx:
        _attributes(ctx).update({k: v for k, v in env.items() if k.startswith("ctx.")})
    elif fn.setup_context is not None:
        setup_context(fn, ctx, args, output)
    return output


def setup_context(fn: CustomFunction, ctx: Any, args: tuple[Any, ...], output: Any) -> None:
    method = fn.setup_context
    assert method is not None
    dtype, device = _kind(args)
    env = dict(zip(method.params, (tuple(args), output), strict=True))
    run(method, env, TorchDomain(ctx, dtype, device))
    _attributes(ctx).update({k: v for k, v in env.items() if k.startswith("ctx.")})


def run_method(method: Method, ctx: Any, grads: tuple[Any, ...]) -> Any:
    """backward (or jvp) with ``ctx`` on the gradients given."""
    dtype, device = _kind(grads)
    env = {**_attributes(ctx), **dict(zip(method.params, grads, strict=True))}
    try:
        return run(method, env, TorchDomain(ctx, dtype, device))
    finally:  # ctx.name = value in backward stays on ctx, as in Python
        _attributes(ctx).update({k: v for k, v in env.items() if k.startswith("ctx.")})


def function_class(fn: CustomFunction) -> type[torch.autograd.Function]:
    """The real subclass of ``torch.autograd.Function`` (one per class text)."""
    found = _CLASSES.get(fn.key)
    if found is not None:
        return found

    def backward(ctx: Any, *grads: Any) -> Any:
        return run_method(fn.backward, ctx, grads)

    if fn.backward.once_differentiable:
        backward = torch.autograd.function.once_differentiable(backward)
    body: dict[str, Any] = {"backward": staticmethod(backward)}
    if fn.setup_context is None:

        def forward(ctx: Any, *args: Any) -> Any:
            return run_forward(fn, ctx, args)

        body["forward"] = staticmethod(forward)
    else:

        def forward_only(*args: Any) -> Any:
            dtype, device = _kind(args)
            env = dict(zip(fn.forward.params, args, strict=True))
            return run(fn.forward, env, TorchDomain(None, dtype, device))

        def setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
            setup_context(fn, ctx, inputs, output)

        body["forward"] = staticmethod(forward_only)
        body["setup_context"] = staticmethod(setup)
    if fn.jvp is not None:
        jvp = fn.jvp

        def forward_mode(ctx: Any, *tangents: Any) -> Any:
            return run_method(jvp, ctx, tangents)

        body["jvp"] = staticmethod(forward_mode)
    cls = type(fn.name, (torch.autograd.Function,), body)
    _CLASSES[fn.key] = cls
    return cls


def apply(fn: CustomFunction, tensors: tuple[Any, ...], optional: dict[str, Any]) -> Any:
    """``NAME.apply(...)`` with the arguments in the forward's order (None where an
    optional one is not given)."""
    given = iter(tensors)
    args = [
        optional.get(p) if p in fn.forward.optional else next(given, None)
        for p in fn.forward.params
    ]
    last = _LAST.get(fn.key)  # the outputs of a Function that returns several: one call
    if (
        last is not None
        and len(last[0]) == len(args)
        and all(a is b for a, b in zip(last[0], args, strict=True))
    ):
        return last[1]
    found = function_class(fn).apply(*args)
    if isinstance(found, tuple):
        _LAST[fn.key] = (tuple(args), found)
    return found


# the last call of each Function with several outputs, by its arguments' identity:
# ``a, b = NAME.apply(x)`` reads both outputs of one call, as Python does
_LAST: dict[str, tuple[tuple[Any, ...], Any]] = {}


RUNNER["apply"] = apply
