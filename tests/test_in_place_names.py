"""Names in an expression program: the name the user wrote, on the tensor it holds after the
last line (as PyTorch holds it), for an in-place change and for a reassignment; each compared
with the same lines run by real torch (test code written here, not user input)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tests.conftest import cli, grad_json

IN_PLACE = "y = x*2; y += 1; out = sum(y*y)"
REASSIGNED = "y = x*2; y = y*2; out = sum(y*y)"


def real(code: str) -> dict[str, Any]:
    """The lines run by PyTorch itself, ``y.retain_grad()`` before backward()."""
    names: dict[str, Any] = {"torch": torch}
    exec(code, names)
    return names


def test_in_place_shows_y_as_pytorch_holds_it() -> None:
    torch_names = real(
        "x = torch.tensor([1.0, 2.0], requires_grad=True)\ny = x*2\ny += 1\n"
        "y.retain_grad()\nout = (y*y).sum()\nout.backward()"
    )
    y = torch_names["y"]
    doc = grad_json(IN_PLACE, "--x", "[1.0, 2.0]", "--retain-grad", "y")
    tensors = doc["tensors"]
    assert list(tensors) == ["x", "y", "out"]
    assert tensors["y"]["grad_fn"] == type(y.grad_fn).__name__ == "AddBackward0"
    assert np.allclose(tensors["y"]["value"], y.detach().numpy())
    assert np.allclose(tensors["y"]["grad"], y.grad.numpy())
    assert np.allclose(tensors["x"]["grad"], torch_names["x"].grad.numpy())
    assert y._version == 1


def test_in_place_inspect_table_lists_y_not_an_internal_name() -> None:
    run = cli("grad", IN_PLACE, "--x", "[1.0, 2.0]", "--inspect")
    assert run.exit_code == 0, run.stderr
    table = run.stdout[run.stdout.index("tensors after the last pass") :]
    assert "y_2" not in table and "y_1" not in table
    assert "│ y " in table


def test_retain_grad_takes_the_written_name() -> None:
    run = cli("grad", "y = x*2; y += 1; out = sum(y)", "--x", "[1.0]", "--retain-grad", "y")
    assert run.exit_code == 0, run.stderr
    doc = grad_json("y = x*2; y += 1; out = sum(y)", "--x", "[1.0]", "--retain-grad", "y")
    assert doc["tensors"]["y"]["grad"] == [1.0]


def test_explain_labels_each_line_as_written() -> None:
    torch_names = real(
        "x = torch.tensor([1.0, 2.0], requires_grad=True)\ny = x*2\nfirst = y.grad_fn\ny += 1\n"
        "out = (y*y).sum()"
    )
    doc = grad_json(IN_PLACE, "--x", "[1.0, 2.0]", "--explain")
    rows = [(n["grad_fn"], n["label"]) for n in doc["explain"]["nodes"]]
    add = torch_names["y"].grad_fn
    assert type(add.next_functions[0][0]).__name__ == type(torch_names["first"]).__name__
    assert rows == [
        (["SumBackward0"], "out = sum(y*y)"),
        (["MulBackward0"], "y*y"),
        ([type(add).__name__], "y += 1"),
        ([type(torch_names["first"]).__name__], "y = x*2"),
        (["AccumulateGrad"], "x"),
    ]
    assert doc["explain"]["agree"] is True
    assert "y_2" not in str(doc["explain"]) and "y_1" not in str(doc["explain"])


def test_reassignment_y_is_the_last_binding() -> None:
    torch_names = real(
        "x = torch.tensor([1.0, 2.0], requires_grad=True)\ny = x*2\ny.retain_grad()\n"
        "first = y\ny = y*2\ny.retain_grad()\nout = (y*y).sum()\nout.backward()"
    )
    doc = grad_json(REASSIGNED, "--x", "[1.0, 2.0]", "--retain-grad", "all")
    tensors = doc["tensors"]
    assert list(tensors) == ["x", "y (assignment 1)", "y (assignment 2)", "out"]  # one line
    first, last = "y (assignment 1)", "y (assignment 2)"
    for key, tensor in ((last, torch_names["y"]), (first, torch_names["first"])):
        assert np.allclose(tensors[key]["value"], tensor.detach().numpy())
        assert np.allclose(tensors[key]["grad"], tensor.grad.numpy())
        assert tensors[key]["grad_fn"] == type(tensor.grad_fn).__name__
    one = grad_json(REASSIGNED, "--x", "[1.0, 2.0]", "--retain-grad", "y")["tensors"]
    assert np.allclose(one[last]["grad"], torch_names["y"].grad.numpy())
    assert one[first]["grad"] is None


def test_reassignment_explain_labels() -> None:
    doc = grad_json(REASSIGNED, "--x", "[1.0, 2.0]", "--explain")
    labels = [n["label"] for n in doc["explain"]["nodes"]]
    assert labels == ["out = sum(y*y)", "y*y", "y = y*2", "y = x*2", "x"]
