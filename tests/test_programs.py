"""Programs with named steps through the CLI, the chain rule in terms of the steps, and
`--inspect` / `--retain-grad`: each named tensor as PyTorch holds it, checked against SymPy."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import cli, grad_json

SEED000 = "y = x + 2; z = y*y*3; out = mean(z)"


def seed000_in_python() -> dict[str, torch.Tensor]:
    """Seed 000's cells, with retain_grad() on every step."""
    x = torch.ones(2, 2, requires_grad=True)
    y = x + 2
    z = y * y * 3
    out = z.mean()
    for t in (y, z, out):
        t.retain_grad()
    out.backward()
    return {"x": x, "y": y, "z": z, "out": out}


@pytest.mark.parametrize(
    "program",
    [
        SEED000,
        "y = x + 2\nz = y*y*3\nout = mean(z)",
        "y = x + 2;\n  z = y*y*3;  mean(z)",
        "mean((x+2)*(x+2)*3)",
    ],
)
def test_seed000_as_a_program_on_one_line_or_several(program):
    doc = grad_json(program, "--x", "ones(2,2)")
    assert doc["output"]["value"] == 27.0 and doc["output"]["expected"] == 27.0
    assert doc["variables"]["x"]["grad"] == [[4.5, 4.5], [4.5, 4.5]]
    assert doc["variables"]["x"]["derivative"] == "3*x/2 + 3"  # SymPy, steps substituted
    assert doc["output"]["name"] == "out" and doc["agree"] is True


def test_chain_rule_in_terms_of_the_steps_and_expanded():
    doc = grad_json(SEED000, "--x", "ones(2,2)")
    assert doc["variables"]["x"]["chain_rule"] == "∂out/∂x = ∂out/∂z·∂z/∂y·∂y/∂x = (1/4)·(6*y)·(1)"
    run = cli("grad", SEED000, "--x", "ones(2,2)")
    assert (
        "chain rule: ∂out/∂x = ∂out/∂z·∂z/∂y·∂y/∂x = (1/4)·(6*y)·(1), expanded: 3*x/2 + 3"
        in run.stdout.splitlines()
    )
    assert grad_json("x**2", "--x", "3")["variables"]["x"]["chain_rule"] is None


def test_chain_rule_with_two_paths_and_two_inputs():
    doc = grad_json("a = x*y; b = a + x; out = b*a", "--x", "2", "--y", "3")
    x, y = 2.0, 3.0  # out = (xy + x) * xy: d/dx = 2xy^2 + 2xy, d/dy = 2x^2 y + x^2
    assert doc["variables"]["x"]["grad"] == 2 * x * y**2 + 2 * x * y
    assert doc["variables"]["y"]["grad"] == 2 * x**2 * y + x**2
    assert doc["variables"]["x"]["chain_rule"].startswith("∂out/∂x = ")
    assert doc["agree"] is True


def test_last_assignment_names_the_output():
    doc = grad_json("h = x*3; loss = h**2", "--x", "1")
    assert doc["output"]["name"] == "loss" and doc["output"]["value"] == 9.0
    assert doc["variables"]["x"]["grad"] == 18.0


@pytest.mark.parametrize(
    ("program", "message"),
    [
        (
            "y = x + 1; y = y*2",
            "Error: 'y' is assigned twice; steps are not reassigned, so give the second one a "
            "new name (e.g. y2 = ...)\n",
        ),
        (
            "z = y*2; y = x + 1; z",
            "Error: 'y' is used in 'z = y*2' before it is assigned; put the steps in order (a "
            "name that is also an input needs a new name, e.g. y2)\n",
        ),
        ("import os; x", "Error: import statements cannot be used; a program is steps NAME = EXPR"),
        ("y = x; y.__class__", "Error: attribute access cannot be used in an expression"),
    ],
)
def test_program_errors_are_one_line_with_exit_2(program, message):
    run = cli("grad", program, "--x", "1")
    assert run.exit_code == 2 and run.stdout == ""
    assert run.stderr.startswith(message) and run.stderr.count("\n") == 1


def test_inspect_matches_the_tensors_pytorch_holds():
    held = seed000_in_python()
    doc = grad_json(SEED000, "--x", "ones(2,2)", "--inspect")
    tensors = doc["tensors"]
    assert list(tensors) == ["x", "y", "z", "out"]
    assert [t["kind"] for t in tensors.values()] == ["input", "step", "step", "output"]
    for name, t in held.items():
        row = tensors[name]
        assert row["value"] == t.detach().tolist()
        assert row["shape"] == list(t.shape)
        assert row["requires_grad"] is t.requires_grad
        assert row["is_leaf"] is t.is_leaf
        assert row["grad_fn"] == (None if t.grad_fn is None else t.grad_fn.name())
    assert [tensors[n]["grad_fn"] for n in ("y", "z", "out")] == [
        "AddBackward0",
        "MulBackward0",
        "MeanBackward0",
    ]
    assert tensors["x"]["grad"] == [[4.5, 4.5], [4.5, 4.5]]
    assert tensors["x"]["grad_expected"] == [[4.5, 4.5], [4.5, 4.5]]
    for name in ("y", "z", "out"):
        assert tensors[name]["grad"] is None and tensors[name]["grad_note"].startswith(
            "PyTorch fills .grad only for leaf tensors"
        )
        assert tensors[name]["value_expected"] == tensors[name]["value"]  # SymPy's value
        assert tensors[name]["agree"] is True


def test_retain_grad_all_gives_each_step_its_gradient_checked_by_sympy():
    held = seed000_in_python()
    doc = grad_json(SEED000, "--x", "ones(2,2)", "--retain-grad", "all")
    tensors = doc["tensors"]
    # by hand: d out/d out = 1, d out/d z = 1/4, d out/d y = 6y/4 = 4.5 at y = 3
    hand = {"out": 1.0, "z": [[0.25, 0.25], [0.25, 0.25]], "y": [[4.5, 4.5], [4.5, 4.5]]}
    for name, value in hand.items():
        assert tensors[name]["grad"] == value == held[name].grad.tolist()
        assert tensors[name]["grad_expected"] == value and tensors[name]["grad_note"] is None
        assert tensors[name]["agree"] is True


def test_retain_grad_one_name_leaves_the_others_none():
    tensors = grad_json(SEED000, "--x", "ones(2,2)", "--retain-grad", "z")["tensors"]
    assert tensors["z"]["grad"] == [[0.25, 0.25], [0.25, 0.25]]
    assert tensors["y"]["grad"] is None and tensors["out"]["grad"] is None


def test_retain_grad_with_repeat_accumulates_like_a_leaf():
    held = grad_json("y = x*x; y*3", "--x", "2", "--retain-grad", "y", "--repeat", "2")
    assert held["tensors"]["y"]["grad"] == 3.0  # a new graph each pass: a new y, grad 3 once
    same = grad_json(
        "y = x*x; y*3", "--x", "2", "--retain-grad", "y", "--repeat", "2", "--same-graph",
        "--retain-graph",
    )  # fmt: skip
    assert same["tensors"]["y"]["grad"] == 6.0  # the same y twice: 3 + 3
    assert same["tensors"]["y"]["grad_expected"] == 6.0 and same["agree"] is True


def test_inspect_rich_table_and_one_reason_line():
    run = cli("grad", SEED000, "--x", "ones(2,2)", "--inspect")
    lines = [" ".join(line.split()) for line in run.stdout.splitlines()]
    assert "┃ tensor ┃ data ┃ requires_grad ┃ is_leaf ┃ grad_fn ┃ grad ┃ check ┃" in lines
    assert "│ y │ [[3, 3], │ True │ False │ AddBackward0 │ None │ ✓ │" in lines
    assert "│ x │ [[1, 1], │ True │ True │ None │ [[4.5, 4.5], │ ✓ │" in lines
    text = " ".join(lines)
    assert text.count("is None") == 0 and text.count("are None") == 1
    assert (
        "y.grad, z.grad, out.grad are None: PyTorch fills .grad only for leaf "
        "tensors (created with requires_grad=True)" in text
    )


def test_inspect_a_constant_input():
    tensors = grad_json("x*y", "--x", "1", "--y", "2", "--const", "y", "--inspect")["tensors"]
    assert tensors["y"]["requires_grad"] is False and tensors["y"]["is_leaf"] is True
    assert tensors["y"]["grad"] is None
    assert tensors["y"]["grad_note"] == "autograd does not track a tensor with requires_grad=False"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--retain-grad", "x"],
            "Error: 'x' is an input (a leaf tensor): its .grad is kept anyway; --retain-grad is "
            "for steps and the output: y, out\n",
        ),
        (
            ["--retain-grad", "q"],
            "Error: --retain-grad q: no step or output named 'q' (choose from y, out, or all)\n",
        ),
    ],
)
def test_retain_grad_errors(args, message):
    run = cli("grad", "y = x*2; y + 1", "--x", "1", *args)
    assert (run.exit_code, run.stdout, run.stderr) == (2, "", message)


def test_a_value_for_a_step_is_refused():
    run = cli("grad", "y = x*2; y + 1", "--x", "1", "--y", "3")
    assert run.stderr == (
        "Error: 'y' is a step of the program, computed in it, so it takes no value; give values "
        "for x only\n"
    )
    none = cli("grad", "x = 2; x*3", "--x", "1")
    assert none.stderr == (
        "Error: 'x' is a step of the program, computed in it, so it takes no value; this program "
        "has no inputs, so drop the value (or rename the step)\n"
    )
    assert run.exit_code == none.exit_code == 2


def test_no_tensors_object_without_inspect():
    assert grad_json("x*2", "--x", "1")["tensors"] is None
