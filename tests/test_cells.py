"""Notebook cells: the tutorials' worked examples give their printed numbers, every line
is checked, and what stops a real cell stops ours with the same explanation."""

from __future__ import annotations

import numpy as np
import pytest

import autogradcli as ag
from autogradcli.verify.cell import Ledger
from tests.conftest import RUNNER, cli

GENTLE = """\
import torch

a = torch.tensor([2., 3.], requires_grad=True)
b = torch.tensor([6., 4.], requires_grad=True)
Q = 3*a**3 - b**2
external_grad = torch.tensor([1., 1.])
Q.backward(gradient=external_grad)
print(9*a**2 == a.grad)
print(-2*b == b.grad)
"""

GENTLE_FLAGS = """\
x = torch.rand(5, 5)
y = torch.rand(5, 5)
z = torch.rand((5, 5), requires_grad=True)

a = x + y
print(a.requires_grad)
b = x + z
print(b.requires_grad)
"""

AUTODIFF_BCE = """\
import torch

torch.manual_seed(0)
x = torch.ones(5)  # input tensor
y = torch.zeros(3)  # expected output
w = torch.randn(5, 3, requires_grad=True)
b = torch.randn(3, requires_grad=True)
z = torch.matmul(x, w)+b
loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
print(z.grad_fn)
print(loss.grad_fn)
loss.backward()
print(w.grad)
print(b.grad)
z = torch.matmul(x, w)+b
print(z.requires_grad)

with torch.no_grad():
    z = torch.matmul(x, w)+b
print(z.requires_grad)
z = torch.matmul(x, w)+b
z_det = z.detach()
print(z_det.requires_grad)
"""

AUTODIFF_EYE = """\
inp = torch.eye(4, 5, requires_grad=True)
out = (inp+1).pow(2).t()
out.backward(torch.ones_like(out), retain_graph=True)
print(inp.grad)
out.backward(torch.ones_like(out), retain_graph=True)
print(inp.grad)
inp.grad.zero_()
out.backward(torch.ones_like(out), retain_graph=True)
print(inp.grad)
"""

D2L = """\
import torch

x = torch.arange(4.0)
x.requires_grad_(True)
x.grad
y = 2 * torch.dot(x, x)
y.backward()
x.grad
x.grad == 4 * x
x.grad.zero_()
y = x.sum()
y.backward()
x.grad
x.grad.zero_()
y = x * x
y.backward(gradient=torch.ones(len(y)))  # Faster: y.sum().backward()
x.grad
x.grad.zero_()
y = x * x
u = y.detach()
z = u * x

z.sum().backward()
x.grad == u
x.grad.zero_()
y.sum().backward()
x.grad == 2 * x
"""


def shown(result) -> list:
    """Every printed value, in order (arrays as lists)."""
    values = []
    for event in result.events:
        for item in event.shown:
            v = item.value
            values.append(v.tolist() if isinstance(v, np.ndarray) else v)
    return values


def test_gentle_introduction():
    r = ag.grad(GENTLE)
    assert isinstance(r, ag.CellResult) and r.verdict == "agree" and r.error is None
    backward = r.events[0]
    assert (
        backward.kind == "backward" and backward.statement == "Q.backward(gradient=external_grad)"
    )
    grads = {g.name: g.grad.tolist() for g in backward.grads}
    assert grads == {"a": [36.0, 81.0], "b": [-12.0, -8.0]}
    assert {g.name: g.derivative for g in backward.grads} == {"a": "9*a**2", "b": "-2*b"}
    assert shown(r) == [[True, True], [True, True]]
    assert all(s.verdict == "agree" for e in r.events for s in e.shown)


def test_gentle_introduction_requires_grad_flags():
    r = ag.grad(GENTLE_FLAGS, seed=0)
    assert shown(r) == [False, True]
    assert [s.expected for e in r.events for s in e.shown] == [False, True]
    assert r.verdict == "agree"


def test_autodiff_tutorial_bce_with_logits_matches_pytorch_run_itself():
    r = ag.grad(AUTODIFF_BCE)
    assert r.seed == 0 and r.verdict == "agree"
    namespace: dict = {}
    exec(compile(AUTODIFF_BCE, "cell", "exec"), namespace)  # our own test text, in PyTorch
    values = shown(r)
    assert values[:2] == ["AddBackward0", "BinaryCrossEntropyWithLogitsBackward0"]
    np.testing.assert_allclose(values[2], namespace["w"].grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(values[3], namespace["b"].grad.numpy(), rtol=1e-6)
    assert values[4:] == [True, False, False]
    # the closed form: d loss / d z = (sigmoid(z) - y) / 3, w.grad = x ⊗ that
    z = namespace["z"].detach().numpy()
    np.testing.assert_allclose(values[3], (1 / (1 + np.exp(-z))) / 3, rtol=1e-6)


def test_autodiff_tutorial_backward_twice_then_zero():
    r = ag.grad(AUTODIFF_EYE)
    once = np.full((4, 5), 2.0)
    np.fill_diagonal(once, 4.0)
    assert [e.kind for e in r.events] == ["backward", "print"] * 2 + ["reset", "backward", "print"]
    printed = shown(r)
    assert printed == [once.tolist(), (2 * once).tolist(), once.tolist()]
    assert r.events[4].grads[0].grad.tolist() == np.zeros((4, 5)).tolist()
    assert r.verdict == "agree"


def test_d2l_automatic_differentiation():
    r = ag.grad(D2L)
    assert r.verdict == "agree", [(e.statement, e.verdict) for e in r.events]
    assert shown(r) == [
        None,
        [0.0, 4.0, 8.0, 12.0],
        [True] * 4,
        [1.0, 1.0, 1.0, 1.0],
        [0.0, 2.0, 4.0, 6.0],
        [True] * 4,  # x.grad == u: the detached y is a constant
        [True] * 4,
    ]


def test_each_line_is_checked_against_the_sum_since_the_last_reset():
    cell = (
        "x = torch.tensor([1., 2.], requires_grad=True)\n"
        "(x**2).sum().backward()\n"
        "(x**3).sum().backward()\n"
        "x.grad = None\n"
        "x.sum().backward()\n"
    )
    r = ag.grad(cell, dtype="float64")
    expected = [[2 + 3, 4 + 12], [2 + 3, 4 + 12], None, [1, 1]]
    first = [2.0, 4.0]
    got = [None if e.grads[0].expected is None else e.grads[0].expected.tolist() for e in r.events]
    assert got == [first, *expected[1:]]
    assert [e.grads[0].derivative for e in r.events] == ["2*x", "3*x**2", None, "1"]
    assert [e.verdict for e in r.events] == ["agree", "agree", None, "agree"]


def test_a_wrong_backward_is_caught_in_a_cell(wrong_sin):
    r = ag.grad("x = torch.tensor(1.0, requires_grad=True); y = torch.sin(x); y.backward()")
    assert r.verdict == "disagree" and not r.agree
    assert r.events[0].grads[0].grad == pytest.approx(2 * np.cos(1.0), rel=1e-6)
    assert r.events[0].grads[0].expected == pytest.approx(np.cos(1.0))


def test_the_sum_check_fails_when_grad_is_not_the_sum():
    check = ag.grad("sum(x**2)", x="[1., 2.]", dtype="float64")
    ledger = Ledger(1e-7, 1e-7, 1e-15)
    ledger.add(check)
    ledger.add(check)
    assert ledger.leaf("x", np.array([4.0, 8.0]), False).verdict == "agree"
    wrong = ledger.leaf("x", np.array([2.0, 4.0]), False)  # one pass lost
    assert wrong.verdict == "disagree" and wrong.cause.code == "accumulation"
    assert str(wrong.cause) == (
        ".grad is not the sum of the 2 backward() call(s) since its last reset (max abs error 4)"
    )
    assert ledger.leaf("x", None, False).cause.code == "grad_presence"


def test_backward_from_one_element_is_one_row_of_the_jacobian():
    r = ag.grad("x = torch.tensor([1., 2., 3.], requires_grad=True); a = x*x; a[2].backward()")
    assert r.grads["x"].tolist() == [0.0, 0.0, 6.0] and r.verdict == "agree"


SECOND = "x = torch.tensor(2.0, requires_grad=True); y = x*x; y.backward(); y.backward()"
SECOND_ERROR = (
    "Error: 'y.backward()': PyTorch: Trying to backward through the graph a second time (or "
    "directly access saved tensors after they have already been freed). Saved intermediate "
    "values of the graph are freed when you call .backward() or autograd.grad(). Specify "
    "retain_graph=True if you need to backward through the graph a second time or if you need "
    "to access saved tensors after calling backward. Why: the first backward() freed the values "
    "the graph saved for it (such as the factors of a multiplication; autograd-cli graph --saved "
    "lists them), so the same graph cannot be walked again. Fix: write "
    "backward(retain_graph=True) on the earlier call, or compute the output again before the "
    "second backward().\n"
)


def test_pytorch_error_stops_the_cell_after_showing_what_ran():
    r = ag.grad(SECOND)
    assert len(r.events) == 1 and r.events[0].grads[0].grad == 4.0
    assert r.error.code == "pytorch" and r.error.data["entry"] == "freed_graph"
    assert not r.agree
    run = cli("grad", SECOND)
    assert run.exit_code == 2 and run.stderr == SECOND_ERROR
    assert "[1] y.backward()" in run.stdout
    assert "the cell stopped here, as Python would:" in run.stdout
    document = cli("grad", SECOND, "--json").json()
    assert document["stopped"]["code"] == "pytorch" and len(document["events"]) == 1


def test_retain_graph_lets_the_second_backward_run():
    cell = SECOND.replace("y.backward();", "y.backward(retain_graph=True);")
    r = ag.grad(cell)
    assert r.error is None and [e.grads[0].grad for e in r.events] == [4.0, 8.0]


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        (
            "x = torch.tensor([1., 2.], requires_grad=True); y = x*x; y.backward()",
            "'y.backward()': the output has shape [2]: PyTorch: grad can be implicitly created "
            "only for scalar outputs.",
        ),
        (
            "x = torch.tensor(2.0, requires_grad=True); x.grad.zero_(); (x*x).backward()",
            "'x.grad.zero_()': the .grad is None here (no backward() has filled it yet), so "
            "Python raises AttributeError (None has no zero_()); call backward() first, or write "
            "x.grad = None",
        ),
        (
            "x = torch.tensor(3.0, requires_grad=True); print(x.grad + 1); (x*x).backward()",
            "x.grad is None here (no backward() has filled it yet); print it after a backward() "
            "that reaches x",
        ),
    ],
)
def test_what_stops_a_real_cell_stops_ours(cell, message):
    r = ag.grad(cell)
    assert r.error is not None and str(r.error).startswith(message)
    run = cli("grad", cell)
    assert run.exit_code == 2 and run.stderr.startswith("Error: " + message)
    assert run.stderr.count("\n") == 1


def test_non_scalar_fix_is_written_as_cell_lines():
    r = ag.grad("x = torch.tensor([1., 2.], requires_grad=True); y = x*x; y.backward()")
    assert str(r.error).endswith(
        "Fix: write y.backward(torch.ones_like(y)) for a tensor y, or y.sum().backward()."
    )


@pytest.mark.parametrize(
    ("option", "value", "flag"),
    [("weights", "ones", "--weights"), ("repeat", 2, "--repeat"), ("explain", True, "--explain")],
)
def test_grad_options_that_a_cell_writes_itself_are_refused(option, value, flag):
    with pytest.raises(ag.AutogradCliError) as raised:
        ag.grad(SECOND, **{option: value})
    assert raised.value.code == "cell_option"
    assert str(raised.value).startswith(option)
    assert "does not apply to a cell that calls backward() or print(...) itself" in str(
        raised.value
    )
    args = [flag] if value is True else [flag, str(value)]
    run = cli("grad", SECOND, *args)
    assert run.exit_code == 2
    assert run.stderr.startswith(f"Error: {flag} does not apply to a cell that calls backward()")
    assert run.stderr.count("\n") == 1


def test_the_cell_reads_from_a_file_and_from_standard_input(tmp_path):
    path = tmp_path / "cell.py"
    path.write_text(GENTLE)
    from_file = cli("grad", f"@{path}")
    assert from_file.exit_code == 0 and "✓ every line agrees with SymPy" in from_file.stdout
    from autogradcli.cli.app import app

    piped = RUNNER.invoke(app, ["grad", "-"], input=GENTLE, prog_name="autograd-cli")
    assert piped.exit_code == 0 and piped.stdout == from_file.stdout


def test_an_unreadable_program_file_is_one_line():
    run = cli("grad", "@/nonexistent/cell.py")
    assert run.exit_code == 2
    assert run.stderr == (
        "Error: cannot read the program from '/nonexistent/cell.py': No such file or directory; "
        "give a readable text file (@cell.py), - for standard input, or the program in quotes\n"
    )


def test_the_cell_report():
    run = cli("grad", GENTLE)
    assert run.exit_code == 0
    assert "\n".join(line.rstrip() for line in run.stdout.split("\n")) == (
        "cell   device cpu · dtype float32 · rtol 1.3e-06, atol 1e-05\n"
        "[1] Q.backward(gradient=external_grad)  ✓\n"
        "      .grad (torch)  expected (SymPy)  derivative (SymPy)  max abs error  check\n"
        "   a  [36, 81]       [36, 81]          9*a**2              0              ✓\n"
        "   b  [-12, -8]      [-12, -8]         -2*b                0              ✓\n"
        "[2] print(9*a**2 == a.grad)  ✓\n"
        "   9*a**2 == a.grad = [True, True]   ✓\n"
        "[3] print(-2*b == b.grad)  ✓\n"
        "   -2*b == b.grad = [True, True]   ✓\n"
        "✓ every line agrees with SymPy\n"
    )


def test_cell_json_document():
    document = cli("grad", GENTLE, "--json").json()
    assert document["command"] == "cell" and document["verdict"] == "agree"
    first = document["events"][0]
    assert first["grads"]["a"]["grad"] == [36.0, 81.0]
    assert first["check"]["command"] == "grad" and first["check"]["verdict"] == "agree"
    assert document["events"][1]["shown"][0]["value"] == [True, True]


def test_a_program_with_only_steps_is_still_one_grad():
    r = ag.grad("y = x + 1; y = y*2; y.sum()", x="[1., 2.]")
    assert isinstance(r, ag.GradResult) and r.grads["x"].tolist() == [2.0, 2.0]


def test_a_leaf_the_backward_did_not_reach_shows_no_derivative():
    r = ag.grad(
        "x = torch.tensor([1., 2.], requires_grad=True)\n"
        "y = torch.tensor([3., 4.], requires_grad=True)\n"
        "(x*y).sum().backward()\n"
        "y.dot(y).backward()\n"
    )
    second = {g.name: g for g in r.events[1].grads}
    assert second["x"].derivative is None and second["x"].grad.tolist() == [3.0, 4.0]
    assert second["y"].derivative is not None and second["y"].grad.tolist() == [7.0, 10.0]


def test_in_place_on_a_leaf_that_requires_grad_is_refused_by_pytorch_itself():
    r = ag.grad("x = torch.tensor(1.0, requires_grad=True); x += 1; x.backward()")
    assert r.events == () and r.error is not None and r.error.code == "pytorch"
    assert str(r.error) == (
        "'x += 1': PyTorch: a leaf Variable that requires grad is being used in an in-place "
        "operation. Which tensor: x, at version 0 before and after 'x += 1' (PyTorch refused "
        "before changing it). Why: a leaf with requires_grad=True is what .grad is computed "
        "for; changing it in place would lose the value the graph starts from, so PyTorch "
        "refuses outside torch.no_grad() (an optimizer's update runs under no_grad). Fix: "
        "compute a new tensor (y = x + 1) and use it, or give the leaf its new value where it "
        "is made (x = torch.tensor(...))."
    )


def test_a_shown_tensor_is_not_a_use():
    r = ag.grad("x = torch.arange(4.0); x; x.requires_grad_(True); (x*x).sum().backward()")
    assert r.grads["x"].tolist() == [0.0, 2.0, 4.0, 6.0]
