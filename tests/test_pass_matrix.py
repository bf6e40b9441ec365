"""Every dtype x every multi-pass mode: the numbers each pass shows are the numbers that
pass had (issue 10: float64 snapshots once aliased the live ``.grad``, so every pass showed
the last one and passes 1-3 were called wrong).

Each case is checked two ways, neither of them the tool's own snapshots: a plain PyTorch
loop written here (the same operations, so the same bits), and the closed form in float64
within the dtype's tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import autogradcli as ag
from autogradcli.settings import TOLERANCES

DTYPES = ["float32", "float64", "float16", "bfloat16"]
POINTS = {"scalar": 1.5, "tensor": [1.5, -0.5, 2.0]}
EXPR = "x**3 - 2*x"
PASSES = 3


def f(x: torch.Tensor) -> torch.Tensor:
    return x**3 - 2 * x


def closed(x: np.ndarray) -> np.ndarray:
    return 3 * x**2 - 2


def leaf(point: object, dtype: str) -> torch.Tensor:
    return torch.tensor(point, dtype=getattr(torch, dtype), requires_grad=True)


def seen(point: object, dtype: str) -> np.ndarray:
    """The input as the dtype rounds it, in float64."""
    return torch.tensor(point, dtype=getattr(torch, dtype)).double().numpy()


def torch_passes(point: object, dtype: str, mode: str) -> list[np.ndarray]:
    """``x.grad`` after each pass, by a plain PyTorch loop."""
    x = leaf(point, dtype)
    shown = []
    out = f(x)
    for _ in range(PASSES):
        if mode != "same_graph":
            out = f(x)
        out.backward(torch.ones_like(out), retain_graph=mode == "same_graph")
        shown.append(x.grad.double().numpy().copy())
        if mode == "zero_grad":
            x.grad = None
    return shown


def close_to(actual: np.ndarray, expected: np.ndarray, dtype: str, scale: int = 1) -> bool:
    rtol, atol = TOLERANCES[dtype]
    return bool(np.allclose(actual, expected, rtol=4 * scale * rtol, atol=scale * atol))


@pytest.mark.parametrize("shape", list(POINTS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["repeat", "same_graph", "zero_grad"])
def test_each_pass_shows_that_pass(mode, dtype, shape):
    point = POINTS[shape]
    options = {
        "repeat": {},
        "same_graph": {"same_graph": True, "retain_graph": True},
        "zero_grad": {"zero_grad": True},
    }[mode]
    weights = "ones" if shape == "tensor" else None
    r = ag.grad(
        EXPR, {"x": point}, repeat=PASSES, dtype=dtype, device="cpu", weights=weights, **options
    )
    independent = torch_passes(point, dtype, mode)
    single = closed(seen(point, dtype))
    for k, (p, mine) in enumerate(zip(r.passes, independent, strict=True), start=1):
        assert np.array_equal(p.grads["x"], mine), (k, p.grads["x"], mine)
        times = 1 if mode == "zero_grad" else k
        assert close_to(p.grads["x"], times * single, dtype, times), (k, p.grads["x"])
        assert p.verdict in ("agree", "rounding"), (k, p.verdict)
    assert r.verdict in ("agree", "rounding")


@pytest.mark.parametrize("dtype", DTYPES)
def test_each_jacobian_row_is_that_rows_one_hot_backward(dtype):
    point = POINTS["tensor"]
    r = ag.jacobian(EXPR, {"x": point}, dtype=dtype, device="cpu")
    x = leaf(point, dtype)
    out = f(x)
    diagonal = closed(seen(point, dtype))
    for i, row in enumerate(r.rows):
        x.grad = None
        one_hot = torch.zeros_like(out)
        one_hot[i] = 1
        out.backward(one_hot, retain_graph=True)
        assert np.array_equal(row.grads["x"], x.grad.double().numpy())
        want = np.where(np.arange(3) == i, diagonal[i], 0.0)
        assert close_to(row.grads["x"], want, dtype)
    assert r.verdict in ("agree", "rounding")


@pytest.mark.parametrize("shape", list(POINTS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_explains_hook_values_are_the_first_passs(dtype, shape):
    point = POINTS[shape]
    weights = "ones" if shape == "tensor" else None
    r = ag.grad(
        EXPR, {"x": point}, repeat=2, explain=True, dtype=dtype, device="cpu", weights=weights
    )
    assert r.explanation is not None
    arriving = {s.leaf: s.arriving for s in r.explanation.steps if s.leaf is not None}
    first = torch_passes(point, dtype, "repeat")[0]
    assert np.array_equal(arriving["x"], first)  # what AccumulateGrad received in pass 1
    assert np.array_equal(r.passes[1].grads["x"], torch_passes(point, dtype, "repeat")[1])
    assert close_to(arriving["x"], closed(seen(point, dtype)), dtype)


@pytest.mark.parametrize("shape", list(POINTS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", [2, 3])
def test_each_order_is_its_own_derivative(order, dtype, shape):
    point = POINTS[shape]
    r = ag.derivative(EXPR, {"x": point}, order=order, dtype=dtype, device="cpu")
    x = leaf(point, dtype)
    g = f(x)
    for _ in range(order):
        (g,) = torch.autograd.grad(g, x, torch.ones_like(g), create_graph=True)
    assert np.array_equal(r.blocks[0].autograd, g.detach().double().numpy())
    want = 6 * seen(point, dtype) if order == 2 else np.full(np.shape(point), 6.0)
    assert close_to(r.blocks[0].autograd, want, dtype)
    assert r.verdict in ("agree", "rounding")
