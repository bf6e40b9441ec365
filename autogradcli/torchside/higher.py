"""Beyond one ``.grad``, on the PyTorch side: the Jacobian one backward pass per output
element (as seed 003 builds it), the Hessian through ``create_graph=True``, the K-th
derivative, and ``torch.autograd.functional``'s answers as a cross-check."""

from __future__ import annotations

import math

import numpy as np
import torch

from autogradcli.results import JacobianRow
from autogradcli.torchside.build import to_numpy
from autogradcli.torchside.run import Session


def jacobian_rows(session: Session) -> tuple[dict[str, np.ndarray], tuple[JacobianRow, ...]]:
    """``d out / d x`` per input, shaped ``out.shape + x.shape``: one
    ``backward(one_hot, retain_graph=True)`` per output element; the rows as they came."""
    bound = session.bound
    names, out_shape = bound.names, bound.out_shape
    out = session.forward().out
    count = math.prod(out_shape)
    tables = {n: np.zeros((count, math.prod(bound.shapes[n]))) for n in names}
    rows = []
    for i in range(count):
        one_hot = torch.zeros(count, dtype=out.dtype, device=out.device)
        one_hot[i] = 1
        for n in names:
            session.leaves[n].grad = None  # seed 003's x.grad.data.zero_() between rows
        out.backward(one_hot.reshape(out.shape), retain_graph=True)
        grads = {}
        for n in names:
            grad = session.leaves[n].grad
            grads[n] = np.zeros(bound.shapes[n]) if grad is None else to_numpy(grad)
            tables[n][i] = grads[n].reshape(-1)
        index = np.unravel_index(i, out_shape) if out_shape else ()
        shaped = to_numpy(one_hot).reshape(out_shape)
        rows.append(JacobianRow(tuple(int(k) for k in index), shaped, grads))
    jacobian = {n: t.reshape(out_shape + bound.shapes[n]) for n, t in tables.items()}
    return jacobian, tuple(rows)


def functional_jacobian(session: Session) -> dict[str, np.ndarray]:
    """``torch.autograd.functional.jacobian``'s answer, per input."""
    names = session.bound.names
    found = torch.autograd.functional.jacobian(
        session.function(names), tuple(session.leaves[n] for n in names)
    )
    return {n: to_numpy(j) for n, j in zip(names, found, strict=True)}


def hessian(session: Session) -> dict[tuple[str, str], np.ndarray]:
    """Second derivatives of a one-element output for every ordered pair of inputs, by
    differentiating ``grad(out, create_graph=True)`` again, element by element."""
    bound = session.bound
    names = bound.names
    out = session.forward().out.reshape(())
    leaves = [session.leaves[n] for n in names]
    first = torch.autograd.grad(out, leaves, create_graph=True, allow_unused=True)
    found: dict[tuple[str, str], np.ndarray] = {}
    for a, g in zip(names, first, strict=True):
        shape_a = bound.shapes[a]
        table = {b: np.zeros((math.prod(shape_a), math.prod(bound.shapes[b]))) for b in names}
        if g is not None and g.requires_grad:
            flat = g.reshape(-1)
            for i in range(flat.numel()):
                second = torch.autograd.grad(flat[i], leaves, retain_graph=True, allow_unused=True)
                for b, h in zip(names, second, strict=True):
                    if h is not None:
                        table[b][i] = to_numpy(h).reshape(-1)
        for b in names:
            found[(a, b)] = table[b].reshape(shape_a + bound.shapes[b])
    return found


def functional_hessian(session: Session) -> dict[tuple[str, str], np.ndarray]:
    """``torch.autograd.functional.hessian``'s answer, per ordered pair of inputs."""
    names = session.bound.names
    leaves = tuple(session.leaves[n] for n in names)
    found = torch.autograd.functional.hessian(session.function(names), leaves)
    return {(a, b): to_numpy(found[i][j]) for i, a in enumerate(names) for j, b in enumerate(names)}


def kth_derivative(session: Session, name: str, order: int) -> np.ndarray:
    """The ``order``-th derivative by differentiating ``order`` times with
    ``create_graph=True`` (``grad_outputs`` ones each time)."""
    g = session.forward().out
    leaf = session.leaves[name]
    for _ in range(order):
        if not g.requires_grad:
            return np.zeros(tuple(leaf.shape))
        (g,) = torch.autograd.grad(
            g, leaf, grad_outputs=torch.ones_like(g), create_graph=True, allow_unused=True
        )
        if g is None:
            return np.zeros(tuple(leaf.shape))
    return to_numpy(g)


def forward_jvp(session: Session, tangents: dict[str, np.ndarray]) -> np.ndarray:
    """``J·v`` in forward mode: ``torch.func.jvp`` pushes the tangents through the forward
    pass once (dual numbers), without a backward graph."""
    names = session.bound.names
    primals = tuple(session.leaves[n].detach() for n in names)
    vectors = tuple(_tangent(session, n, tangents[n]) for n in names)
    _, found = torch.func.jvp(session.function(names), primals, vectors)
    return to_numpy(found)


def functional_jvp(session: Session, tangents: dict[str, np.ndarray]) -> np.ndarray:
    """``torch.autograd.functional.jvp``'s answer: reverse mode twice (the double-backward
    trick), a second opinion computed another way."""
    names = session.bound.names
    primals = tuple(session.leaves[n] for n in names)
    vectors = tuple(_tangent(session, n, tangents[n]) for n in names)
    _, found = torch.autograd.functional.jvp(session.function(names), primals, vectors)
    return to_numpy(found)


def _tangent(session: Session, name: str, value: np.ndarray) -> torch.Tensor:
    leaf = session.leaves[name]
    return torch.as_tensor(value, dtype=leaf.dtype, device=leaf.device).reshape(leaf.shape)
