"""A cast written on a new value is read as PyTorch reads it (``torch.arange(3).float()``),
and the refusals of graph internals name the command that shows them (issue 28)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import autogradcli as ag
from tests.test_keywords import refused


@pytest.mark.parametrize(
    ("made", "pytorch"),
    [
        ("torch.arange(4).float()", torch.arange(4).float()),
        ("torch.tensor([1, 2, 3]).float()", torch.tensor([1, 2, 3]).float()),
        ("torch.tensor([0.5, 1.5]).to(torch.float32)", torch.tensor([0.5, 1.5]).to(torch.float32)),
        ("torch.ones(2, 2).to(dtype=torch.float)", torch.ones(2, 2).to(dtype=torch.float)),
        ("torch.linspace(-1, 1, 5).float()", torch.linspace(-1, 1, 5).float()),
    ],
)
def test_a_float_cast_of_a_new_value_is_the_float32_value_pytorch_makes(
    made: str, pytorch: torch.Tensor
) -> None:
    text = f"x = {made}\nx.requires_grad_()\ny = (x * x).sum()\ny.backward()\nprint(x.grad)\n"
    result = ag.grad(text)
    assert isinstance(result, ag.CellResult) and result.error is None
    assert result.verdict == "agree" and result.dtype == "float32"
    leaf = pytorch.clone().requires_grad_()
    (leaf * leaf).sum().backward()
    assert leaf.grad is not None
    np.testing.assert_array_equal(result.grads["x"], leaf.grad.numpy())


def test_a_cast_to_the_dtype_the_constructor_already_has_changes_nothing() -> None:
    result = ag.grad("sum(torch.ones(2, dtype=torch.float64).double() * x)", {"x": 2.0})
    assert isinstance(result, ag.GradResult)
    assert result.dtype == "float64" and result.verdict == "agree"
    assert float(result.grads["x"]) == 2.0


@pytest.mark.parametrize(
    ("text", "fixed"),
    [
        ("sum(torch.tensor([0.1]).double()*x)", "torch.tensor([0.1], dtype=torch.float64)"),
        ("sum(torch.arange(3).half()*x)", "torch.arange(3, dtype=torch.float16)"),
        (
            "sum(torch.ones(2, dtype=torch.float64).float()*x)",
            "torch.ones(2, dtype=torch.float32)",
        ),
    ],
)
def test_a_cast_that_would_round_again_names_the_constructor_with_its_dtype(
    text: str, fixed: str
) -> None:
    cast = text.split("*x")[0].removeprefix("sum(")
    assert refused(text, "--x", "2") == (
        f"Error: '{cast}' casts the new value; write the dtype in the constructor instead: {fixed}"
    )


def test_a_cast_of_an_input_is_still_a_dtype_question() -> None:
    assert refused("x.double()*2", "--x", "1") == (
        "Error: .double() is not part of the maths the tool checks; choose the dtype with "
        "--dtype float64 (dtype= in the API)"
    )


def test_a_saved_tensor_is_shown_by_graph_saved() -> None:
    assert refused("x._saved_self", "--x", "1") == (
        "Error: 'x._saved_self' reads what a node saved for backward; autograd-cli graph "
        "--saved shows every node's _saved_self (shapes, dtypes, first values) and what "
        "reading it after backward() does"
    )
    cell = "x = torch.tensor(2.0, requires_grad=True)\ny = x*x\nprint(y.grad_fn._raw_saved_self)"
    assert "autograd-cli graph --saved shows every node's _raw_saved_self" in refused(cell)


def test_next_functions_is_shown_by_graph() -> None:
    cell = "x = torch.tensor(2.0, requires_grad=True)\ny = x*x\nprint(y.grad_fn.next_functions)"
    assert refused(cell) == (
        "Error: 'y.grad_fn.next_functions' reads the graph itself; autograd-cli graph shows "
        "each node and its next_functions (graph --saved: what each node saved)"
    )


def test_a_cast_deep_inside_a_long_sum_is_read_without_recursion() -> None:
    terms = " + ".join(["x"] * 1500)  # 1,500 nested additions, within --max-length
    result = ag.grad(f"sum(torch.arange(2).float() * x) + {terms}", {"x": 1.0}, dtype="float64")
    assert isinstance(result, ag.GradResult) and result.verdict == "agree"
    assert float(result.grads["x"]) == 1 + 1500
