"""In-place lines and version counters: run as PyTorch runs them, each compared with the same
lines run by real torch (our own test code) and with SymPy's reference."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import autogradcli as ag
from autogradcli.errors import ExpressionError
from tests.conftest import cli


def real(code: str) -> dict[str, Any]:
    """The lines run by PyTorch itself (test code written here, not user input)."""
    names: dict[str, Any] = {"torch": torch}
    exec(code, names)
    return names


WORKING = [
    "x = torch.tensor([1., 2.], requires_grad=True)\ny = x * 2\ny.add_(1)\ny *= 3\n"
    "y.sum().backward()",
    "x = torch.tensor([0.5, -1.5], requires_grad=True)\ny = x * x\ny.clamp_(min=1)\n"
    "y.sub_(x)\ny.sum().backward()",
    "x = torch.tensor([0.5, 2.0], requires_grad=True)\ny = x * 3\ny /= 2\ny.sigmoid_()\n"
    "y.sum().backward()",
    "x = torch.tensor([1., 2.], requires_grad=True)\nc = torch.ones(2)\nc.mul_(3)\ny = x * c\n"
    "y.sum().backward()",
    "x = torch.tensor(2.0, requires_grad=True)\ny = x + 1\ny **= 2\ny.backward()",
]


@pytest.mark.parametrize("code", WORKING)
def test_in_place_lines_give_pytorchs_gradient_and_sympy_agrees(code):
    torch_names = real(code)
    r = ag.grad(code)
    assert r.error is None and r.agree
    grads = r.events[-1].grads
    assert grads[0].grad.tolist() == pytest.approx(torch_names["x"].grad.tolist())
    assert grads[0].expected is not None
    assert grads[0].grad.tolist() == pytest.approx(grads[0].expected.tolist(), rel=1e-6)


def test_version_counters_printed_are_pytorchs():
    code = (
        "x = torch.tensor([1., 2.], requires_grad=True)\ny = x * 2\nprint(y._version)\n"
        "y.add_(1)\ny *= 3\nprint(y._version)\n"
    )
    torch_names = real(code.replace("print", "_ = "))
    r = ag.grad(code)
    shown = [e.shown[0].value for e in r.events]
    assert shown == [0, 2] == [0, torch_names["y"]._version]


def test_an_expression_program_with_in_place_lines_is_checked_by_sympy():
    r = ag.grad("y = x * x; y.add_(1); y.mul_(3); y.sum()", x="[1., 2.]")
    assert r.agree and r.grads["x"].tolist() == [6.0, 12.0]
    assert r.variables["x"].derivative == "6*x"


def test_a_tensor_saved_then_changed_stops_with_which_tensor_and_versions():
    code = (
        "x = torch.tensor([1., 2.], requires_grad=True)\ny = x.exp()\ny.add_(1)\ny.sum().backward()"
    )
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        real(code)
    r = ag.grad(code)
    assert r.events == () and r.error is not None and r.error.code == "pytorch"
    text = str(r.error)
    assert text.startswith(
        "'y.sum().backward()': PyTorch: one of the variables needed for gradient computation "
        "has been modified by an inplace operation"
    )
    assert (
        " Which tensor: y (the output of ExpBackward0), saved for backward at version 0; "
        "'y.add_(1)' changed it in place from version 0 to 1. Why: " in text
    )
    assert text.endswith(
        "Fix: write the change as a new tensor (y = y + 1 instead of y.add_(1) or y += 1), or "
        "change a copy (y = y.clone() on the line before)."
    )
    fixed = ag.grad(code.replace("y.add_(1)", "y = y + 1"))
    assert fixed.error is None and fixed.agree


def test_the_culprit_is_named_when_the_line_saved_the_tensor_itself():
    with pytest.raises(ag.AutogradCliError) as raised:
        ag.grad("y = x * x; y.add_(1); y.mul_(y); y.sum()", x="[1., 2.]")
    assert (
        "Which tensor: y (the output of AddBackward0), saved for backward at version 1; "
        "'y.mul_(y)' changed it in place from version 1 to 2." in str(raised.value)
    )


def test_a_changed_constant_saved_by_a_product_is_named_as_a_leaf():
    code = (
        "x = torch.tensor([1., 2.], requires_grad=True)\nc = torch.ones(2)\ny = x * c\n"
        "c.add_(1)\ny.sum().backward()"
    )
    with pytest.raises(RuntimeError, match="is at version 1; expected version 0"):
        real(code)
    r = ag.grad(code)
    assert "Which tensor: c (a leaf), saved for backward at version 0; 'c.add_(1)'" in str(r.error)


def test_in_place_on_a_leaf_is_pytorchs_refusal_at_that_line_through_the_cli():
    run = cli("grad", "y = x * 2; x.add_(1); y", "--x", "1", "--json")
    assert run.exit_code == 2
    error = run.json()["error"]
    assert error["type"] == "pytorch" and error["in_place"] == [
        {
            "name": "x",
            "line": "x.add_(1)",
            "version_before": 0,
            "version_after": 0,
            "made_by": None,
            "made_by_after": None,
        }
    ]
    assert run.stderr == (
        "Error: PyTorch: a leaf Variable that requires grad is being used in an in-place "
        "operation. Which tensor: x, at version 0 before and after 'x.add_(1)' (PyTorch refused "
        "before changing it). Why: a leaf with requires_grad=True is what .grad is computed for; "
        "changing it in place would lose the value the graph starts from, so PyTorch refuses "
        "outside torch.no_grad() (an optimizer's update runs under no_grad). Fix: compute a new "
        "tensor (y = x + 1) and use it, or give the leaf its new value when it is made.\n"
    )


def test_a_cell_stops_at_the_saved_tensor_error_with_the_in_place_list_in_json():
    code = (
        "x = torch.tensor([1., 2.], requires_grad=True)\ny = x.exp()\ny.add_(1)\ny.sum().backward()"
    )
    run = cli("grad", code, "--json")
    assert run.exit_code == 2
    stopped = run.json()["stopped"]
    assert stopped["in_place"][0]["version_after"] == 1
    assert stopped["in_place"][0]["made_by"] == "ExpBackward0"


@pytest.mark.parametrize(
    ("code", "other"),
    [
        ("y = x * 2; z = y; y.add_(1); z.sum()", "z"),
        ("y = x * 2; v = y[0]; y.add_(1); v", "v"),
        ("y = x.detach(); y.add_(1); (x*y).sum()", "x"),
    ],
)
def test_names_that_share_memory_are_refused_not_followed(code, other):
    real_names = real("x = torch.tensor([1., 2.], requires_grad=True)\n" + code.replace("; ", "\n"))
    assert real_names  # PyTorch runs it: the change shows through the other name
    with pytest.raises(ExpressionError) as raised:
        ag.grad(code, x="[1., 2.]")
    assert raised.value.code == "in_place_alias"
    assert str(raised.value) == (
        f"'y.add_(1)' changes y in place, and {other} shares its memory (the same tensor, a "
        f"view or a detach()), so PyTorch changes {other} too; autograd-cli follows each name "
        "as a value of its own; write y = y.clone() first, or compute a new tensor"
    )


def test_in_place_under_no_grad_is_refused_except_on_a_constant():
    with pytest.raises(ExpressionError) as raised:
        ag.grad("y = x * 2\nwith torch.no_grad():\n    y.add_(1)\ny.sum()", x="[1., 2.]")
    assert raised.value.code == "in_place_no_grad"
    r = ag.grad(
        "x = torch.tensor([1., 2.], requires_grad=True)\nc = torch.ones(2)\n"
        "with torch.no_grad():\n    c *= 2\n(x * c).sum().backward()"
    )
    assert r.agree and r.events[0].grads[0].grad.tolist() == [2.0, 2.0]


def test_repeated_passes_start_a_changed_constant_afresh():
    r = ag.grad("c = torch.ones(2); c.add_(1); (x * c).sum()", x="[1., 2.]", repeat=3)
    assert [p.grads["x"].tolist() for p in r.passes] == [[2.0, 2.0], [4.0, 4.0], [6.0, 6.0]]
    assert r.agree


def test_augmented_assignment_on_a_number_stays_a_new_value():
    r = ag.grad("s = 2; s += x; s * 1", x="3")
    assert r.agree and r.grads["x"].tolist() == 1.0
