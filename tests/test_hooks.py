"""Gradient hooks (``y.register_hook(lambda g: ...)``): run as PyTorch runs them, each program
compared with the same lines run by real torch (our own test code) and with SymPy's reference,
which applies the hook's body to its own gradients."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import autogradcli as ag
from autogradcli.errors import ExpressionError, VariableError
from tests.conftest import cli


def real(code: str) -> dict[str, Any]:
    """The lines run by PyTorch itself (test code written here, not user input)."""
    names: dict[str, Any] = {"torch": torch}
    exec(code, names)
    return names


X = "x = torch.tensor([0.5, -1.5, 2.0], requires_grad=True)\n"
CELLS = {
    "scale a step": "y = x**2\ny.register_hook(lambda g: g * 2)\nz = y.sin()\nz.sum().backward()",
    "scale a leaf": "x.register_hook(lambda g: g * 0.5)\n(x * x).sum().backward()",
    "a step used twice": "y = x * 2\ny.register_hook(lambda g: g + 1)\nz = y * y + y.exp()\n"
    "z.sum().backward()",
    "two hooks in order": "y = x * 2\ny.register_hook(lambda g: g * 2)\n"
    "y.register_hook(lambda g: g + 1)\n(y * y).sum().backward()",
    "hooks on two steps": "y = x * 2\ny.register_hook(lambda g: g * 3)\nz = y.sin()\n"
    "z.register_hook(lambda g: g - 1)\nout = (z * y).sum()\nout.backward()",
    "clip": "y = x**3\ny.register_hook(lambda g: g.clamp(-1, 1))\n(y * y).sum().backward()",
    "removed": "y = x * 2\nh = y.register_hook(lambda g: g * 10)\nh.remove()\n"
    "(y * y).sum().backward()",
    "twice with retain_graph": "y = x * 2\ny.register_hook(lambda g: g * 10)\nz = (y * y).sum()\n"
    "z.backward(retain_graph=True)\nz.backward()",
    "a torch function, weighted": "y = x.exp()\ny.register_hook(lambda g: torch.tanh(g))\n"
    "w = torch.tensor([1.0, 2.0, 3.0])\n(y * w).sum().backward()",
    "print": "y = x * 3\ny.register_hook(lambda g: print(g))\n(y**2).sum().backward()",
}


@pytest.mark.parametrize("body", CELLS.values(), ids=CELLS.keys())
def test_hooked_cells_give_pytorchs_gradient_and_sympy_agrees(body):
    code = X + body
    torch_names = real(code)
    r = ag.grad(code)
    assert r.error is None and r.agree
    last = r.events[-1]
    assert last.grads[0].grad.tolist() == pytest.approx(torch_names["x"].grad.tolist(), rel=1e-6)
    assert last.grads[0].expected.tolist() == pytest.approx(
        torch_names["x"].grad.tolist(), rel=1e-5
    )
    assert last.check is not None
    assert all(h.agree for h in last.check.hooks)


def test_the_reference_applies_the_hook_to_sympys_gradient_not_autograds():
    """x.grad = 2x * 10 * cos(x**2), written here in NumPy float64."""
    r = ag.grad("y = x**2; y.register_hook(lambda g: g * 10); out = sum(sin(y))", x="[1, 2]")
    x = np.array([1.0, 2.0])
    assert r.variables["x"].expected == pytest.approx(20 * x * np.cos(x**2), rel=1e-12)
    (hook,) = r.hooks
    assert (hook.tensor, hook.hook) == ("y", "lambda g: g * 10")
    assert hook.received_expected == pytest.approx(np.cos(x**2), rel=1e-12)
    assert hook.returned_expected == pytest.approx(10 * np.cos(x**2), rel=1e-12)
    assert hook.received.tolist() == pytest.approx(np.cos(x**2).tolist(), rel=1e-6)
    assert r.variables["x"].derivative == "2*x*cos(x**2)"  # the expression's, hooks aside
    assert [n.code for n in r.notes] == ["hooks"]


def test_a_wrong_hook_in_torch_is_caught(monkeypatch):
    """If torch's side ran the hook wrongly, the gradients and the hook row disagree."""
    from autogradcli.torchside import hooks

    right = hooks.evaluate
    monkeypatch.setattr(hooks, "evaluate", lambda *a, **k: right(*a, **k) * 1.5)
    r = ag.grad("y = x*2; y.register_hook(lambda g: g * 2); sum(y*y)", x="[1, 2]")
    assert not r.agree and r.hooks[0].agree is False
    assert r.variables["x"].verdict == "disagree"
    run = cli("grad", "y = x*2; y.register_hook(lambda g: g * 2); sum(y*y)", "--x", "[1, 2]")
    assert run.exit_code == 1
    assert run.stdout.endswith("✗ autograd and SymPy disagree: x, hook on y\n")


def test_the_check_would_catch_a_missing_hook(monkeypatch):
    """Registering nothing in torch (the hook ignored) is a disagreement, not a pass."""
    from autogradcli.torchside import run as torch_run

    monkeypatch.setattr(torch_run, "_hook", lambda *a, **k: None)
    r = ag.grad("y = x*2; y.register_hook(lambda g: g * 2); sum(y*y)", x="[1, 2]")
    assert not r.agree and r.hooks[0].received is None and r.hooks[0].agree is False


NAMED = {
    "a named lambda": "double = lambda g: g * 2\ny = x * 2\ny.register_hook(double)\n",
    "a def": "def double(grad):\n    return grad * 2\n\ny = x * 2\ny.register_hook(double)\n",
    "a typed def with a docstring, printing": "def show(g: torch.Tensor) -> torch.Tensor:\n"
    '    """Look at it."""\n    print("grad:", g)\n    return g\n\ny = x * 2\n'
    "h = y.register_hook(show)\n",
}


@pytest.mark.parametrize("lines", NAMED.values(), ids=NAMED.keys())
def test_hooks_defined_by_name_run_as_in_pytorch(lines):
    code = X + lines + "(y * y).sum().backward()"
    torch_names = real(code)
    r = ag.grad(code)
    assert r.error is None and r.agree
    assert r.events[0].grads[0].grad.tolist() == torch_names["x"].grad.tolist()
    (hook,) = r.events[0].check.hooks
    assert hook.agree and (hook.returned is None) == ("print" in lines)


def test_the_register_hook_docstring_example():
    """torch.Tensor.register_hook's own example: a hook on a leaf doubles v.grad."""
    code = (
        "v = torch.tensor([0., 0., 0.], requires_grad=True)\n"
        "h = v.register_hook(lambda grad: grad * 2)  # double the gradient\n"
        "v.backward(torch.tensor([1., 2., 3.]))\nprint(v.grad)\nh.remove()  # removes the hook\n"
    )
    assert real(code)["v"].grad.tolist() == [2.0, 4.0, 6.0]
    r = ag.grad(code)
    assert r.agree and r.events[1].shown[0].value.tolist() == [2.0, 4.0, 6.0]


def test_a_printing_hook_shows_what_pytorch_passed_it():
    code = X + CELLS["print"]
    r = ag.grad(code)
    (hook,) = r.events[0].check.hooks
    x = np.array([0.5, -1.5, 2.0])
    assert hook.returned is None and hook.returned_expected is None
    assert hook.received.tolist() == pytest.approx((2 * 3 * x).tolist())  # d(y**2)/dy = 2y
    assert r.notes == ()  # a hook that only looks changes nothing


def test_hooks_with_repeat_and_functional_match_a_torch_loop():
    program = "y = x*2; y.register_hook(lambda g: g*2); x.register_hook(lambda g: g + 1); sum(y*y)"
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: g + 1)  # on the leaf once; on y each pass (a new tensor)
    for _ in range(2):
        y = x * 2
        y.register_hook(lambda g: g * 2)
        (y * y).sum().backward()
    r = ag.grad(program, x="[1, 2]", repeat=2)
    assert r.agree and r.grads["x"].tolist() == x.grad.tolist() == [34.0, 66.0]
    y = x * 2
    y.register_hook(lambda g: g * 2)
    (returned,) = torch.autograd.grad((y * y).sum(), x)
    f = ag.grad(program, x="[1, 2]", functional=True)
    assert f.agree and f.grads["x"].tolist() == returned.tolist() == [17.0, 33.0]


def test_weights_reach_the_hook():
    r = ag.grad("y = x*2; y.register_hook(lambda g: g*2); y", x="[1, 2]", weights="[1, 3]")
    assert r.agree and r.hooks[0].received.tolist() == [1.0, 3.0]
    assert r.grads["x"].tolist() == [4.0, 12.0]


def test_explain_shows_the_changed_gradient_below_the_hooked_step():
    r = ag.grad(
        "y = x**2; y.register_hook(lambda g: g * 10); out = sum(sin(y))", x="[1, 2]", explain=True
    )
    assert r.agree and r.explanation is not None
    pow_node = next(s for s in r.explanation.steps if "PowBackward0" in s.grad_fns)
    assert pow_node.label == "y = x**2 · hook lambda g: g * 10 runs first"
    assert pow_node.arriving.tolist() == pytest.approx((10 * np.cos([1.0, 4.0])).tolist())
    run = cli(
        "grad", "y = x**2; y.register_hook(lambda g: g * 10); sum(sin(y))", "--x", "1", "--explain"
    )
    assert run.exit_code == 0
    assert "gradient in = ∂out/∂node as the program's hooks changed it" in " ".join(
        run.stdout.split()
    )


def test_json_lists_each_hook_with_its_check():
    run = cli(
        "grad", "y = x*2; y.register_hook(lambda g: print(g)); sum(y*y)", "--x", "[1, 2]", "--json"
    )
    assert run.exit_code == 0
    assert run.json()["hooks"] == [
        {
            "tensor": "y",
            "hook": "lambda g: print(g)",
            "received": [4.0, 8.0],
            "received_expected": [4.0, 8.0],
            "returned": None,
            "returned_expected": None,
            "agree": True,
        }
    ]
    cell = cli("grad", X + CELLS["scale a leaf"], "--json")
    assert cell.exit_code == 0
    (hook,) = cell.json()["events"][0]["check"]["hooks"]
    assert hook["tensor"] == "x" and hook["returned"] == [0.5, -1.5, 2.0]


def test_a_cell_shows_each_hook_under_its_backward():
    code = "x = torch.tensor([1.0, 2.0], requires_grad=True)\ny = x * 2\n"
    code += "y.register_hook(lambda g: g * 2)\ny.sum().backward()"
    run = cli("grad", code)
    assert run.exit_code == 0
    lines = run.stdout.splitlines()
    assert "   hook on y, lambda g: g * 2: received [1, 1], sent on [2, 2]  ✓" in lines
    assert lines[-1] == "✓ every line agrees with SymPy"


def test_the_graph_names_the_hook_on_its_step():
    run = cli("graph", "y = x*2; y.register_hook(lambda g: g*2); sum(y)", "--x", "[1, 2]")
    assert run.exit_code == 0
    assert "MulBackward0  y = x*2 · hook lambda g: g * 2 runs first" in run.stdout


FORM = (
    "a hook here is a function of one argument on a named tensor, written as a lambda or a def "
    "that returns an expression in it or prints it, e.g. y.register_hook(lambda g: g * 2) or "
    "y.register_hook(lambda g: print(g))"
)
NOT_HOOK = (
    "'f' is a function the program defines, which autograd-cli follows only as a gradient hook "
    "(y.register_hook(f)); write its expression inline instead"
)
BAD = [
    (
        "y = x*2; y.register_hook(lambda g, h: g); sum(y)",
        "'y.register_hook(lambda g, h: g)': " + FORM,
    ),
    (
        "y = x*2; y.register_hook(print); sum(y)",
        "'y.register_hook(print)': " + FORM,
    ),
    (
        "y = x*2; y.register_hook(lambda g: g*x); sum(y)",
        "'y.register_hook(lambda g: g*x)': the hook's body may use its argument g, numbers and "
        "the language's functions, not x; e.g. lambda g: g.clamp(-1, 1)",
    ),
    (
        "y = x*2; y.register_hook(lambda g: print(x)); sum(y)",
        "'y.register_hook(lambda g: print(x))': a printing hook prints its argument (and "
        "text), e.g. lambda g: print(g)",
    ),
    (
        "y = x*2; y.register_hook(lambda g: g*2); y.add_(1); sum(y)",
        "'y.add_(1)' changes y in place after a hook was registered on it, which autograd-cli "
        "does not follow; register the hook after the change, or compute a new tensor",
    ),
    ("f = lambda g: g * 2; y = x*2; sum(y)", NOT_HOOK),
    ("def f(g):\n    return g * 2\ny = f(x)\nsum(y)", NOT_HOOK),
]


@pytest.mark.parametrize(("program", "message"), BAD)
def test_hooks_it_cannot_follow_get_one_line(program, message):
    run = cli("grad", program, "--x", "[1, 2]")
    assert (run.exit_code, run.stdout, run.stderr) == (2, "", f"Error: {message}\n")
    with pytest.raises(ExpressionError):
        ag.grad(program, x="[1, 2]")


@pytest.mark.parametrize(
    ("command", "name"),
    [
        (["jacobian"], "jacobian"),
        (["hessian"], "hessian"),
        (["jvp"], "jvp"),
        (["grad", "--order", "2"], "grad --order"),
    ],
)
def test_commands_that_do_not_run_backward_refuse_hooks(command, name):
    program = "y = x*2; y.register_hook(lambda g: g*2); out = sum(y*y)"
    if name == "grad --order":
        program = "y = x*2; y.register_hook(lambda g: g*2); out = y*y"
    run = cli(*command, program, "--x", "[1, 2]" if name != "grad --order" else "1")
    assert run.exit_code == 2 and run.stdout == ""
    assert run.stderr == (
        "Error: the program registers a gradient hook, which changes what backward() sends; "
        f"{name} does not run the program's backward(), so hooks are for grad: autograd-cli "
        "grad\n"
    )
    with pytest.raises(VariableError):
        ag.jacobian(program, x="[1, 2]")


def test_a_hook_on_a_constant_stops_the_cell_with_pytorchs_error():
    code = "x = torch.tensor([1.0, 2.0], requires_grad=True)\nc = torch.ones(2)\n"
    code += "c.register_hook(lambda g: g * 2)\n(x * c).sum().backward()"
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't"):
        real(code)
    r = ag.grad(code)
    assert r.events == () and r.error is not None and r.error.code == "pytorch"
    assert str(r.error).startswith(
        "'c.register_hook(lambda g: g * 2)': PyTorch: cannot register a hook on a tensor "
        "that doesn't require gradient. Why: "
    )


@settings(max_examples=15, deadline=None, derandomize=True)
@given(
    scale=st.floats(-4, 4, allow_nan=False).filter(lambda s: abs(s) > 1e-3),
    shift=st.floats(-2, 2, allow_nan=False),
    values=st.lists(st.floats(-2, 2, allow_nan=False), min_size=1, max_size=4),
)
def test_property_an_affine_hook_matches_torch_and_the_closed_form(scale, shift, values):
    program = f"y = x*x; y.register_hook(lambda g: g * {scale!r} + {shift!r}); out = sum(sin(y))"
    r = ag.grad(program, x=str(values), dtype="float64")
    x = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    y = x * x
    y.register_hook(lambda g: g * scale + shift)
    torch.sin(y).sum().backward()
    v = np.array(values)
    closed = 2 * v * (np.cos(v * v) * scale + shift)
    assert r.agree
    assert r.grads["x"].tolist() == pytest.approx(x.grad.tolist(), rel=1e-12, abs=1e-12)
    assert r.variables["x"].expected.tolist() == pytest.approx(closed.tolist(), rel=1e-9, abs=1e-12)
