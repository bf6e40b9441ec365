# ruff: noqa: E501  (tables of formulas read best one case per line)
"""Every function and loss the PyTorch spellings added, three ways: autograd-cli's output and
gradient against the real torch.nn.functional call run here, and against a closed form
written by hand in NumPy; and SymPy's verdict."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import autogradcli as ag

X = np.array([-1.5, -0.25, 0.4, 2.0])
T = np.array([0.0, 1.0, 1.0, 0.0])  # targets in [0, 1]
P = np.array([0.2, 0.7, 0.6, 0.1])  # probabilities
PHI = np.vectorize(lambda v: 0.5 * (1 + math.erf(v / math.sqrt(2))))
SIG = 1 / (1 + np.exp(-X))


def text(a: np.ndarray) -> str:
    return "[" + ", ".join(repr(float(v)) for v in np.ravel(a)) + "]"


def grad_of(fn: Callable[..., torch.Tensor], x: np.ndarray, *rest: np.ndarray):
    """The real PyTorch call: output and x.grad in float64."""
    leaf = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    out = fn(leaf, *(torch.tensor(r, dtype=torch.float64) for r in rest))
    out.sum().backward()
    return out.detach().numpy(), leaf.grad.numpy()


# (expression, torch call, closed-form output, closed-form d sum(out)/dx), all at X
ELEMENTWISE = [
    ("erf(x)", torch.erf, np.vectorize(math.erf), lambda x: 2 / math.sqrt(math.pi) * np.exp(-x * x)),
    ("torch.sigmoid(x)", torch.sigmoid, lambda x: SIG, lambda x: SIG * (1 - SIG)),
    ("F.relu(x)", F.relu, lambda x: np.maximum(x, 0), lambda x: (x > 0).astype(float)),
    ("(x + 2).log1p()", lambda x: torch.log1p(x + 2), lambda x: np.log1p(x + 2), lambda x: 1 / (3 + x)),
    ("torch.expm1(x)", torch.expm1, np.expm1, np.exp),
    ("F.softplus(x)", F.softplus, lambda x: np.log1p(np.exp(x)), lambda x: SIG),
    ("F.softplus(x, beta=2.0)", lambda x: F.softplus(x, beta=2.0),
     lambda x: np.log1p(np.exp(2 * x)) / 2, lambda x: 1 / (1 + np.exp(-2 * x))),
    ("F.logsigmoid(x)", F.logsigmoid, lambda x: np.log(SIG), lambda x: 1 - SIG),
    ("F.gelu(x)", F.gelu, lambda x: x * PHI(x),
     lambda x: PHI(x) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi)),
    ("F.silu(x)", F.silu, lambda x: x * SIG, lambda x: SIG * (1 + x * (1 - SIG))),
    ("F.elu(x)", F.elu, lambda x: np.where(x > 0, x, np.expm1(x)), lambda x: np.where(x > 0, 1.0, np.exp(x))),
    ("F.elu(x, alpha=0.5)", lambda x: F.elu(x, alpha=0.5),
     lambda x: np.where(x > 0, x, 0.5 * np.expm1(x)), lambda x: np.where(x > 0, 1.0, 0.5 * np.exp(x))),
    ("F.leaky_relu(x, negative_slope=0.1)", lambda x: F.leaky_relu(x, negative_slope=0.1),
     lambda x: np.where(x > 0, x, 0.1 * x), lambda x: np.where(x > 0, 1.0, 0.1)),
    ("F.hardtanh(x)", F.hardtanh, lambda x: np.clip(x, -1, 1), lambda x: (np.abs(x) < 1).astype(float)),
    ("F.hardtanh(x, min_val=-0.5, max_val=1.5)", lambda x: F.hardtanh(x, min_val=-0.5, max_val=1.5),
     lambda x: np.clip(x, -0.5, 1.5), lambda x: ((x > -0.5) & (x < 1.5)).astype(float)),
    ("x.tanh()", torch.tanh, np.tanh, lambda x: 1 - np.tanh(x) ** 2),
    ("torch.clamp(x, min=-1.0, max=1.0)", lambda x: torch.clamp(x, min=-1.0, max=1.0),
     lambda x: np.clip(x, -1, 1), lambda x: (np.abs(x) < 1).astype(float)),
    ("x.clip(0.0, 1.0)", lambda x: x.clip(0.0, 1.0), lambda x: np.clip(x, 0, 1),
     lambda x: ((x > 0) & (x < 1)).astype(float)),
    ("torch.maximum(x, x*x)", lambda x: torch.maximum(x, x * x), lambda x: np.maximum(x, x * x),
     lambda x: np.where(x > x * x, 1.0, 2 * x)),
    ("torch.minimum(x, 0.5*x + 0.1)", lambda x: torch.minimum(x, 0.5 * x + 0.1),
     lambda x: np.minimum(x, 0.5 * x + 0.1), lambda x: np.where(x < 0.5 * x + 0.1, 1.0, 0.5)),
    ("torch.where(x > 0, x**2, -x)", lambda x: torch.where(x > 0, x**2, -x),
     lambda x: np.where(x > 0, x**2, -x), lambda x: np.where(x > 0, 2 * x, -1.0)),
    ("x * torch.ones_like(x) + torch.zeros_like(x)", lambda x: x * torch.ones_like(x) + torch.zeros_like(x),
     lambda x: x, lambda x: np.ones_like(x)),
    ("x.clone() * x.detach()", lambda x: x.clone() * x.detach(), lambda x: x * x, lambda x: x),
]  # fmt: skip


@pytest.mark.parametrize(
    ("expression", "call", "value", "derivative"), ELEMENTWISE, ids=[e[0] for e in ELEMENTWISE]
)
def test_elementwise_function_against_torch_and_closed_form(expression, call, value, derivative):
    r = ag.grad(f"({expression}).sum()", x=text(X), dtype="float64")
    torch_out, torch_grad = grad_of(call, X)
    assert r.verdict == "agree"
    np.testing.assert_allclose(r.output, torch_out.sum(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(r.output, value(X).sum(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(r.grads["x"], torch_grad, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(r.grads["x"], derivative(X), rtol=1e-10, atol=1e-12)


M = np.array([[1.0, -2.0, 0.5], [0.25, 3.0, -1.0]])


def _soft(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _at(index: object, w: np.ndarray) -> np.ndarray:
    out = np.zeros_like(M)
    out[index] = w
    return out


def _onehot(axis: int, pick: Callable[..., np.ndarray]) -> np.ndarray:
    return (pick(M, axis=axis, keepdims=True) == M) * 1.0


# (expression, torch call, closed form of d sum(w * f(x)) / dx for weights w of f's shape)
TENSOR = [
    ("x.sum(dim=1, keepdim=True)", lambda x: x.sum(dim=1, keepdim=True), lambda w: np.broadcast_to(w, M.shape)),
    ("torch.mean(x, 0)", lambda x: torch.mean(x, 0), lambda w: np.broadcast_to(w / 2, M.shape)),
    ("x.prod(1)", lambda x: x.prod(1), lambda w: w[:, None] * M.prod(1, keepdims=True) / M),
    ("x.max(dim=1).values", lambda x: x.max(dim=1).values, lambda w: w[:, None] * _onehot(1, np.max)),
    ("torch.min(x, 0)[0]", lambda x: torch.min(x, 0)[0], lambda w: w[None, :] * _onehot(0, np.min)),
    ("x.softmax(dim=1)", lambda x: x.softmax(dim=1),
     lambda w: _soft(M) * (w - (_soft(M) * w).sum(1, keepdims=True))),
    ("F.log_softmax(x, dim=1)", lambda x: F.log_softmax(x, dim=1),
     lambda w: w - _soft(M) * w.sum(1, keepdims=True)),
    ("torch.logsumexp(x, 1)", lambda x: torch.logsumexp(x, 1), lambda w: w[:, None] * _soft(M)),
    ("x.norm()", lambda x: x.norm(), lambda w: w * M / np.linalg.norm(M)),
    ("x.t()", lambda x: x.t(), lambda w: w.T),
    ("x.T", lambda x: x.T, lambda w: w.T),
    ("x.transpose(0, 1)", lambda x: x.transpose(0, 1), lambda w: w.T),
    ("x.permute(1, 0)", lambda x: x.permute(1, 0), lambda w: w.T),
    ("x.reshape(3, 2)", lambda x: x.reshape(3, 2), lambda w: w.reshape(M.shape)),
    ("x.view(6)", lambda x: x.view(6), lambda w: w.reshape(M.shape)),
    ("x.flatten()", lambda x: x.flatten(), lambda w: w.reshape(M.shape)),
    ("x.unsqueeze(0).squeeze(0)", lambda x: x.unsqueeze(0).squeeze(0), lambda w: w),
    ("torch.cat([x, 2*x], dim=0)", lambda x: torch.cat([x, 2 * x], dim=0), lambda w: w[:2] + 2 * w[2:]),
    ("torch.stack([x, x*x])", lambda x: torch.stack([x, x * x]), lambda w: w[0] + 2 * M * w[1]),
    ("x[0]", lambda x: x[0], lambda w: _at(0, w)),
    ("x[:, 1]", lambda x: x[:, 1], lambda w: _at((slice(None), 1), w)),
    ("x[..., -1]", lambda x: x[..., -1], lambda w: _at((Ellipsis, -1), w)),
    ("x[1, 0:2]", lambda x: x[1, 0:2], lambda w: _at((1, slice(0, 2)), w)),
    ("x[-1]", lambda x: x[-1], lambda w: _at(-1, w)),
]  # fmt: skip


@pytest.mark.parametrize(("expression", "call", "closed"), TENSOR, ids=[t[0] for t in TENSOR])
def test_tensor_function_against_torch_and_closed_form(expression, call, closed):
    """sum(w * f(x)) for weights w of the output's shape, so every element counts apart."""
    out_shape = tuple(call(torch.tensor(M)).shape)
    weights = np.arange(1.0, 1 + math.prod(out_shape)).reshape(out_shape)
    r = ag.grad(f"(({expression})*w).sum()", x=str(M.tolist()), w=str(weights.tolist()),
                const=["w"], dtype="float64")  # fmt: skip
    leaf = torch.tensor(M, requires_grad=True)
    out = (call(leaf) * torch.tensor(weights)).sum()
    out.backward()
    assert r.verdict == "agree"
    np.testing.assert_allclose(r.output, out.item(), rtol=1e-12)
    np.testing.assert_allclose(r.grads["x"], leaf.grad.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(r.grads["x"], closed(weights), rtol=1e-10, atol=1e-14)


def test_closed_forms_of_the_reductions():
    s = ag.grad("x.softmax(dim=0)[0]", x="[1.0, 2.0, 3.0]", dtype="float64")
    e = np.exp([1.0, 2.0, 3.0])
    p = e / e.sum()
    np.testing.assert_allclose(s.grads["x"], p[0] * (np.eye(3)[0] - p), rtol=1e-12)
    lse = ag.grad("torch.logsumexp(x, 0)", x="[1.0, 2.0, 3.0]", dtype="float64")
    np.testing.assert_allclose(lse.grads["x"], p, rtol=1e-12)
    prod = ag.grad("x.prod()", x="[2.0, 3.0, 4.0]", dtype="float64")
    np.testing.assert_allclose(prod.grads["x"], [12.0, 8.0, 6.0], rtol=1e-12)
    norm = ag.grad("x.norm()", x="[3.0, 4.0]", dtype="float64")
    np.testing.assert_allclose(norm.grads["x"], [0.6, 0.8], rtol=1e-12)


# --- losses ------------------------------------------------------------------------------------

LOSSES = [
    ("F.mse_loss(x, t)", lambda x, t: F.mse_loss(x, t), lambda x, t: np.mean((x - t) ** 2),
     lambda x, t: 2 * (x - t) / x.size),
    ("F.mse_loss(x, t, reduction='sum')", lambda x, t: F.mse_loss(x, t, reduction="sum"),
     lambda x, t: np.sum((x - t) ** 2), lambda x, t: 2 * (x - t)),
    ("F.l1_loss(x, t)", lambda x, t: F.l1_loss(x, t), lambda x, t: np.mean(np.abs(x - t)),
     lambda x, t: np.sign(x - t) / x.size),
    ("F.smooth_l1_loss(x, t)", lambda x, t: F.smooth_l1_loss(x, t),
     lambda x, t: np.mean(np.where(np.abs(x - t) < 1, 0.5 * (x - t) ** 2, np.abs(x - t) - 0.5)),
     lambda x, t: np.where(np.abs(x - t) < 1, x - t, np.sign(x - t)) / x.size),
    ("F.smooth_l1_loss(x, t, beta=0.5)", lambda x, t: F.smooth_l1_loss(x, t, beta=0.5),
     lambda x, t: np.mean(np.where(np.abs(x - t) < 0.5, (x - t) ** 2, np.abs(x - t) - 0.25)),
     lambda x, t: np.where(np.abs(x - t) < 0.5, (x - t) / 0.5, np.sign(x - t)) / x.size),
    ("F.huber_loss(x, t, delta=0.5)", lambda x, t: F.huber_loss(x, t, delta=0.5),
     lambda x, t: np.mean(np.where(np.abs(x - t) < 0.5, 0.5 * (x - t) ** 2, 0.5 * (np.abs(x - t) - 0.25))),
     lambda x, t: np.where(np.abs(x - t) < 0.5, x - t, 0.5 * np.sign(x - t)) / x.size),
    ("F.binary_cross_entropy_with_logits(x, t)", lambda x, t: F.binary_cross_entropy_with_logits(x, t),
     lambda x, t: np.mean(-(t * np.log(SIG) + (1 - t) * np.log(1 - SIG))),
     lambda x, t: (SIG - t) / x.size),
    ("F.binary_cross_entropy_with_logits(x, t, pos_weight=2*t + 1, reduction='sum')",
     lambda x, t: F.binary_cross_entropy_with_logits(x, t, pos_weight=2 * t + 1, reduction="sum"),
     lambda x, t: np.sum(-((2 * t + 1) * t * np.log(SIG) + (1 - t) * np.log(1 - SIG))),
     lambda x, t: (2 * t + 1) * t * (SIG - 1) + (1 - t) * SIG),
]  # fmt: skip


@pytest.mark.parametrize(
    ("expression", "call", "value", "derivative"), LOSSES, ids=[e[0] for e in LOSSES]
)
def test_loss_against_torch_and_closed_form(expression, call, value, derivative):
    r = ag.grad(expression, x=text(X), t=text(T), const=["t"], dtype="float64")
    torch_out, torch_grad = grad_of(call, X, T)
    assert r.verdict == "agree"
    np.testing.assert_allclose(r.output, torch_out, rtol=1e-12)
    np.testing.assert_allclose(r.output, value(X, T), rtol=1e-12)
    np.testing.assert_allclose(r.grads["x"], torch_grad, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(r.grads["x"], derivative(X, T), rtol=1e-10, atol=1e-14)


def test_binary_cross_entropy_against_torch_and_closed_form():
    weight = np.array([1.0, 2.0, 0.5, 1.5])
    r = ag.grad("F.binary_cross_entropy(p, t, weight=w)", p=text(P), t=text(T), w=text(weight),
                const=["t", "w"], dtype="float64")  # fmt: skip
    leaf = torch.tensor(P, requires_grad=True)
    out = F.binary_cross_entropy(leaf, torch.tensor(T), weight=torch.tensor(weight))
    out.backward()
    closed = np.mean(-weight * (T * np.log(P) + (1 - T) * np.log(1 - P)))
    d = -weight * (T / P - (1 - T) / (1 - P)) / P.size
    assert r.verdict == "agree"
    np.testing.assert_allclose(r.output, [out.item(), closed][0], rtol=1e-12)
    np.testing.assert_allclose(r.output, closed, rtol=1e-12)
    np.testing.assert_allclose(r.grads["p"], leaf.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(r.grads["p"], d, rtol=1e-10)


Z = np.array([[1.0, 2.0, 0.5], [0.1, -1.0, 2.0]])
LABELS = np.array([1, 2])
SOFT = np.array([[0.2, 0.5, 0.3], [0.0, 0.1, 0.9]])


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_with_class_indices(smoothing):
    r = ag.grad(f"F.cross_entropy(z, y, label_smoothing={smoothing})", z=str(Z.tolist()),
                y=str(LABELS.tolist()), dtype="float64")  # fmt: skip
    leaf = torch.tensor(Z, requires_grad=True)
    out = F.cross_entropy(leaf, torch.tensor(LABELS), label_smoothing=smoothing)
    out.backward()
    target = np.eye(3)[LABELS] * (1 - smoothing) + smoothing / 3
    p = _softmax(Z)
    closed = np.mean(-(target * np.log(p)).sum(1))
    assert r.verdict == "agree"
    np.testing.assert_allclose(r.output, out.item(), rtol=1e-12)
    np.testing.assert_allclose(r.output, closed, rtol=1e-12)
    np.testing.assert_allclose(r.grads["z"], leaf.grad.numpy(), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(r.grads["z"], (p - target) / 2, rtol=1e-10, atol=1e-14)


def test_cross_entropy_with_class_probabilities():
    r = ag.grad("F.cross_entropy(z, q, reduction='sum')", z=str(Z.tolist()), q=str(SOFT.tolist()),
                const=["q"], dtype="float64")  # fmt: skip
    leaf = torch.tensor(Z, requires_grad=True)
    out = F.cross_entropy(leaf, torch.tensor(SOFT), reduction="sum")
    out.backward()
    p = _softmax(Z)
    assert r.verdict == "agree"
    np.testing.assert_allclose(r.output, out.item(), rtol=1e-12)
    np.testing.assert_allclose(r.output, -(SOFT * np.log(p)).sum(), rtol=1e-12)
    np.testing.assert_allclose(r.grads["z"], leaf.grad.numpy(), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(r.grads["z"], p - SOFT, rtol=1e-10, atol=1e-14)


def test_nll_loss_of_log_softmax():
    r = ag.grad("F.nll_loss(F.log_softmax(z, dim=1), y)", z=str(Z.tolist()),
                y=str(LABELS.tolist()), dtype="float64")  # fmt: skip
    leaf = torch.tensor(Z, requires_grad=True)
    out = F.nll_loss(F.log_softmax(leaf, dim=1), torch.tensor(LABELS))
    out.backward()
    p = _softmax(Z)
    assert r.verdict == "agree"
    np.testing.assert_allclose(r.output, out.item(), rtol=1e-12)
    np.testing.assert_allclose(r.output, -np.log(p[[0, 1], LABELS]).mean(), rtol=1e-12)
    np.testing.assert_allclose(r.grads["z"], leaf.grad.numpy(), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(r.grads["z"], (p - np.eye(3)[LABELS]) / 2, rtol=1e-10, atol=1e-14)
