"""CUDA paths: run only where a CUDA device exists; skipped cleanly elsewhere (CI has none)."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import cli, grad_json

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def test_auto_picks_cuda_and_grads_are_leaf_grads():
    doc = grad_json("mean((x+2)*(x+2)*3)", "--x", "ones(2,2)", "--device", "auto")
    assert doc["device"] == "cuda:0"
    assert doc["variables"]["x"]["grad"] == [[4.5, 4.5], [4.5, 4.5]]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_cuda_polynomial_each_dtype(dtype):
    doc = grad_json(
        "2*x**4 + x**3 + 3*x**2 + 5*x + 1", "--x", "2", "--device", "cuda", "--dtype", dtype
    )
    assert doc["device"] == "cuda:0"
    assert doc["variables"]["x"]["grad"] == 93.0
    assert doc["agree"] is True


def test_cuda_weights_and_repeat():
    doc = grad_json(
        "x**2 + z**3",
        "--x",
        "[2.0, 2.0]",
        "--z",
        "[4.0, 4.0]",
        "--weights",
        "ones",
        "--repeat",
        "3",
        "--device",
        "cuda:0",
    )
    assert [p["grads"]["z"] for p in doc["passes"]] == [[48.0, 48.0], [96.0, 96.0], [144.0, 144.0]]


def test_cuda_explain_inspect_and_same_graph():
    doc = grad_json(
        "y = x + 2; z = y*y*3; out = mean(z)",
        "--x",
        "ones(2,2)",
        "--device",
        "cuda",
        "--explain",
        "--retain-grad",
        "all",
        "--repeat",
        "2",
        "--same-graph",
        "--retain-graph",
    )
    assert doc["device"] == "cuda:0" and doc["agree"] is True
    assert doc["tensors"]["y"]["grad"] == [[9.0, 9.0], [9.0, 9.0]]
    assert [n["grad_fn"][0] for n in doc["explain"]["nodes"]] == [
        "MeanBackward0",
        "MulBackward0",
        "MulBackward0",
        "AddBackward0",
        "AccumulateGrad",
    ]


def test_cuda_graph():
    run = cli("graph", "y*y*3", "--y", "2", "--device", "cuda", "--json")
    assert run.exit_code == 0
    assert [n["grad_fn"] for n in run.json()["nodes"]] == [
        "MulBackward0",
        "MulBackward0",
        "AccumulateGrad",
    ]


def test_cuda_jacobian_hessian_and_matmul_loss():
    jac = cli("jacobian", "x*sum(x)", "--x", "[1.0, 2.0]", "--device", "cuda", "--json")
    assert jac.exit_code == 0
    assert jac.json()["blocks"]["x"]["autograd"] == [[4.0, 1.0], [2.0, 5.0]]
    hess = cli("hessian", "x**2*y + y**3", "--x", "1", "--y", "2", "--device", "cuda", "--json")
    assert hess.exit_code == 0 and hess.json()["blocks"]["y,y"]["autograd"] == 12.0
    doc = grad_json(
        "mean((W @ x + b - y)**2)",
        "--W",
        "[[1.,2],[3,4]]",
        "--x",
        "[1.,2]",
        "--b",
        "[0.,1]",
        "--y",
        "[1.,1]",
        "--device",
        "cuda",
        "--numeric",
    )
    assert doc["device"] == "cuda:0" and doc["agree"] is True
