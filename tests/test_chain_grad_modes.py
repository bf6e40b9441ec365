"""The chain rule and the derivative text leave out what no gradient flows through: a step
made under ``torch.no_grad()`` or ``torch.inference_mode()``, or a ``detach()``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import autogradcli as ag
from autogradcli.lang.program import parse_program
from autogradcli.reference.chain import chain_rule
from autogradcli.settings import Limits
from tests.conftest import cli

EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "grad_modes.py"

CELL = """import torch
x = torch.tensor([1., 2.], requires_grad=True)
with torch.no_grad():
    a = x*2
y = (x*a).sum()
y.backward()
"""


def _chain(code: str, name: str = "x", latex: bool = False) -> str | None:
    expression = parse_program(code, Limits())
    shapes = {n: (2,) for n in expression.variables}
    return chain_rule(expression, shapes, name, latex=latex)


def test_example_chain_skips_no_grad_inference_mode_and_detach() -> None:
    result = ag.grad(EXAMPLE.read_text())
    x = result.variables["x"]
    assert x.chain == (
        "∂y/∂x = ∂y/∂x = (2*x)  [no gradient through ∂a/∂x (torch.no_grad()), "
        "∂b/∂x (torch.inference_mode()), ∂c/∂x (detach())]"
    )
    assert x.derivative == "2*x"  # no "[+ chain rule through detach(...)]"
    assert x.chain_latex is not None and "no\\_grad" in x.chain_latex


def test_cell_chain_skips_a_step_made_under_no_grad() -> None:
    result = ag.grad(CELL)
    checked = [e.check for e in result.events if getattr(e, "check", None) is not None]
    assert len(checked) == 1
    x = checked[0].variables["x"]
    assert x.chain == "∂y/∂x = ∂y/∂x = (a)  [no gradient through ∂a/∂x (torch.no_grad())]"
    assert x.derivative == "detach(2*x)"  # a, held constant: the gradient is 2x, not 4x


def test_detach_in_the_middle_of_a_path() -> None:
    code = """import torch
x = torch.tensor([1., 2.], requires_grad=True)
a = x*2
b = a.detach()
y = (a*b).sum()
"""
    x = ag.grad(code).variables["x"]
    assert x.chain == "∂y/∂x = ∂y/∂a·∂a/∂x = (b)·(2)  [no gradient through ∂b/∂a (detach())]"
    assert x.derivative == "2*detach(2*x)"


def test_a_name_used_both_detached_and_not_keeps_its_path() -> None:
    code = """import torch
x = torch.tensor([1., 2.], requires_grad=True)
a = x * x.detach()
y = a.sum()
"""
    x = ag.grad(code).variables["x"]
    assert x.chain == "∂y/∂x = ∂y/∂a·∂a/∂x = (1)·(detach(x))"
    assert x.derivative == "detach(x)"


def test_a_real_reduction_is_summed_into_the_derivative_and_a_detached_one_is_not() -> None:
    code = """import torch
x = torch.tensor([1., 2.], requires_grad=True)
m = x.mean()
c = x - m.detach()
y = (c**2 + m).sum()
"""
    x = ag.grad(code).variables["x"]
    assert x.chain == (
        "∂y/∂x = ∂y/∂c·∂c/∂x + ∂y/∂m·∂m/∂x = (2*c)·(1) + (2)·(1/2)"
        "  [no gradient through ∂c/∂m (detach())]"
    )  # ∂y/∂m: m is added to both elements of c**2 before the sum, 2 = 1 + 1
    assert x.derivative == "-2*detach(mean(x)) + 2*x + 1"  # .grad: [0, 2]


def test_every_path_cut_is_zero() -> None:
    code = """import torch
x = torch.tensor([1., 2.], requires_grad=True)
z = torch.tensor([1., 2.], requires_grad=True)
with torch.no_grad():
    a = x*2
y = (a*z).sum()
"""
    assert _chain(code) == "∂y/∂x = 0  [no gradient through ∂a/∂x (torch.no_grad())]"
    assert _chain(code, latex=True) == (
        "\\frac{\\partial y}{\\partial x} = 0\\quad\\text{[no gradient through }"
        "\\frac{\\partial a}{\\partial x}\\text{ (torch.no\\_grad())}\\text{]}"
    )
    assert _chain(code, "z") is None  # z is used directly by the output: no steps between


def test_without_grad_modes_the_chain_is_unchanged() -> None:
    code = """import torch
x = torch.tensor([1., 2.], requires_grad=True)
y = x * 3
z = y ** 2
out = z.mean()
"""
    assert _chain(code) == "∂out/∂x = ∂out/∂z·∂z/∂y·∂y/∂x = (1/2)·(2*y)·(3)"


@pytest.mark.parametrize(
    ("program", "dz"),
    [("x.detach()*z", 1.0), ("with torch.no_grad():\n    a = x*2\ny = (a*z).sum()", 2.0)],
)
def test_an_input_no_gradient_reaches_gets_one_line(program, dz):
    """PyTorch leaves x.grad None when x is used only outside the graph."""
    x = torch.tensor(1.0, requires_grad=True)
    z = torch.tensor(2.0, requires_grad=True)
    (x.detach() * z).backward()
    assert x.grad is None and z.grad.item() == 1.0
    run = cli("grad", program, "--x", "1", "--z", "2")
    assert (run.exit_code, run.stdout) == (2, "")
    assert run.stderr == (
        "Error: no gradient reached x: the output uses it only through detach(), "
        "torch.no_grad() or torch.inference_mode(), so backward() leaves x.grad None; write "
        "--const x to make it a constant, or use it outside those\n"
    )
    r = ag.grad(program, x=1, z=2, const=["x"])
    assert r.agree and r.grads["z"].item() == dz
