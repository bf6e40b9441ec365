"""grad --functional: torch.autograd.grad beside backward(): the gradients returned,
.grad untouched, nothing accumulated; checked against SymPy like backward()'s."""

from __future__ import annotations

import json

import torch

import autogradcli as ag
from tests.conftest import cli


def test_functional_returns_what_autograd_grad_returns_and_sympy_agrees():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    out = (x**3).sum()
    (returned,) = torch.autograd.grad(out, [x])
    assert x.grad is None  # PyTorch: nothing written into .grad
    result = ag.grad("sum(x**3)", {"x": [1.0, 2.0]}, functional=True)
    assert result.verdict == "agree"
    assert result.grads["x"].tolist() == returned.tolist() == [3.0, 12.0]
    assert result.variables["x"].expected.tolist() == [3.0, 12.0]  # SymPy: 3x²
    assert result.notes[0].code == "functional" and result.notes[0].data["grads"] == (
        "x.grad is None"
    )


def test_functional_passes_do_not_accumulate_where_backward_does():
    functional = ag.grad("x**2", {"x": 3.0}, repeat=3, functional=True)
    backward = ag.grad("x**2", {"x": 3.0}, repeat=3)
    assert [p.grads["x"] for p in functional.passes] == [6.0, 6.0, 6.0]
    assert [p.grads["x"] for p in backward.passes] == [6.0, 12.0, 18.0]
    assert functional.verdict == backward.verdict == "agree"


def test_functional_with_weights_is_grad_outputs():
    w = torch.tensor([1.0, -2.0])
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    (returned,) = torch.autograd.grad(x.sin(), [x], grad_outputs=w)
    result = ag.grad("sin(x)", {"x": [1.0, 2.0]}, weights=[1.0, -2.0], functional=True)
    assert result.verdict == "agree"
    assert result.grads["x"].tolist() == returned.tolist()


def test_functional_on_the_command_line_rich_and_json():
    run = cli('grad "x**3" --x 2 --functional')
    assert run.exit_code == 0
    text = " ".join(run.stdout.split())
    assert "computed with torch.autograd.grad(out, inputs, grad_outputs)" in text
    assert "(x.grad is None)" in text and "a reference cycle (PyTorch warns about it)" in text
    run = cli('grad "x**3" --x 2 --functional --json')
    document = json.loads(run.stdout)
    assert document["mode"] == "one pass, torch.autograd.grad (.grad untouched)"
    assert document["variables"]["x"]["grad"] == 12.0 and document["verdict"] == "agree"


def test_functional_refuses_what_needs_grad():
    for option in ("--zero-grad --repeat 2", "--retain-grad all"):
        run = cli(f'grad "sum(x**3)" --x "[1,2]" --functional {option}')
        assert run.exit_code == 2
        name = option.split()[0]
        assert run.stderr == (
            "Error: --functional computes with torch.autograd.grad, which returns the "
            f"gradients and fills no .grad; {name} works on .grad: leave one of them out\n"
        )


def test_inspect_shows_the_grad_pytorch_left_none():
    """--inspect lists .grad as PyTorch holds it: autograd.grad returned it, .grad stays None."""
    x = torch.tensor(3.0, requires_grad=True)
    (returned,) = torch.autograd.grad((x**2) * 3, [x])
    assert x.grad is None and returned.item() == 18.0
    r = ag.grad("y = x**2; out = y*3", x=3, functional=True, inspect=True)
    assert r.agree and r.grads["x"].item() == 18.0
    row = next(t for t in r.tensors if t.name == "x")
    assert row.grad is None and row.grad_note_code == "functional"
    run = cli("grad", "y=x**2; out=y*3", "--x", "3", "--functional", "--inspect")
    assert run.exit_code == 0
    assert (
        "x.grad is None: torch.autograd.grad returned the gradient (the gradients table shows "
        "it) and left .grad as it was" in " ".join(run.stdout.split())
    )
