"""Programs with named steps, the chain rule in terms of the steps, and `inspect` /
`retain_grad`: each named tensor as PyTorch holds it, checked against SymPy.

The numbers go through the Python API (``ag.grad``); the CLI's tests cover its error lines
and tables."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import autogradcli as ag
from autogradcli.messages import CLI, PYTHON
from autogradcli.results import GradResult, TensorResult
from tests.conftest import cli
from tests.schemas import validate

SEED000 = "y = x + 2; z = y*y*3; out = mean(z)"
LEAF_ONLY = "PyTorch fills .grad only for leaf tensors"


def api(expression: str, **options: Any) -> GradResult:
    """``ag.grad(expression, **options)``; its ``to_dict()`` (the CLI's --json document) is
    validated against the published schema, as ``conftest.cli`` validates every --json run."""
    result = ag.grad(expression, **options)
    validate(result.to_dict())
    return result


def tensors_of(result: GradResult) -> dict[str, TensorResult]:
    """``result.tensors`` by name, in the program's order."""
    assert result.tensors is not None
    return {t.name: t for t in result.tensors}


def plain(array: Any) -> Any:
    """An array as a float or nested lists (None stays None), to compare with numbers."""
    return None if array is None else array.tolist()


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
    result = api(program, x="ones(2,2)")
    assert plain(result.output) == 27.0 and plain(result.output_expected) == 27.0
    assert plain(result.variables["x"].grad) == [[4.5, 4.5], [4.5, 4.5]]
    assert result.variables["x"].derivative == "3*x/2 + 3"  # SymPy, steps substituted
    assert result.output_name == "out" and result.agree is True


def test_chain_rule_in_terms_of_the_steps_and_expanded():
    chain = api(SEED000, x="ones(2,2)").variables["x"].chain
    assert chain == "∂out/∂x = ∂out/∂z·∂z/∂y·∂y/∂x = (1/4)·(6*y)·(1)"
    run = cli("grad", SEED000, "--x", "ones(2,2)")  # how the CLI's report prints it
    assert (
        "chain rule: ∂out/∂x = ∂out/∂z·∂z/∂y·∂y/∂x = (1/4)·(6*y)·(1), expanded: 3*x/2 + 3"
        in run.stdout.splitlines()
    )
    assert api("x**2", x="3").variables["x"].chain is None


def test_chain_rule_with_two_paths_and_two_inputs():
    result = api("a = x*y; b = a + x; out = b*a", x="2", y="3")
    x, y = 2.0, 3.0  # out = (xy + x) * xy: d/dx = 2xy^2 + 2xy, d/dy = 2x^2 y + x^2
    assert plain(result.variables["x"].grad) == 2 * x * y**2 + 2 * x * y
    assert plain(result.variables["y"].grad) == 2 * x**2 * y + x**2
    assert str(result.variables["x"].chain).startswith("∂out/∂x = ")
    assert result.agree is True


def test_last_assignment_names_the_output():
    result = api("h = x*3; loss = h**2", x="1")
    assert result.output_name == "loss" and plain(result.output) == 9.0
    assert plain(result.variables["x"].grad) == 18.0


@pytest.mark.parametrize(
    ("program", "message", "code"),
    [
        (
            "z = y*2; y = x + 1; z",
            "Error: step 'y' is never used; use it in a later step or remove it\n",
            "step_unused",
        ),
        (
            "import os; x",
            "Error: 'import os' is not allowed: a cell may import torch, torch.nn.functional as "
            "F, torch.nn as nn, numpy as np and math (nothing is imported)\n",
            "import_not_allowed",
        ),
        (
            "y = x; y.__class__",
            "Error: 'y.__class__' cannot be used: .__class__ is not an attribute the language "
            "knows; use .T, .data, .grad in print(...), or a method such as x.sum()\n",
            "attribute_not_allowed",
        ),
        (
            "y = x.exp_(); y",
            "Error: 'x.exp_()' changes a tensor in place inside an expression; write the in-place "
            "call as a line of its own (y.exp_()), or compute a new tensor (z = y.exp())\n",
            "in_place",
        ),
        (
            "y = x * 1; y.fill_(2); y",
            "Error: 'y.fill_(2)': .fill_() is not an in-place operation autograd-cli follows; it "
            "follows the elementwise ones (y.add_(1), y.mul_(2), y.exp_(), y.clamp_(min=0), ...) "
            "and y += ..., y -= ..., y *= ..., y /= ...; compute a new tensor instead\n",
            "in_place_unknown",
        ),
        (
            "print(x)",
            "Error: the program computes nothing to differentiate; end it with an expression or "
            "a step, e.g. out = (x**2).sum()\n",
            "nothing_computed",
        ),
    ],
)
def test_program_errors_are_one_line_with_exit_2(program, message, code):
    run = cli("grad", program, "--x", "1")
    assert run.exit_code == 2 and run.stdout == ""
    assert run.stderr.startswith(message) and run.stderr.count("\n") == 1
    with pytest.raises(ag.AutogradCliError) as raised:
        ag.grad(program, x="1")
    assert raised.value.code == code
    assert str(raised.value).startswith(message.removeprefix("Error: ").rstrip("\n"))


def test_inspect_matches_the_tensors_pytorch_holds():
    held = seed000_in_python()
    tensors = tensors_of(api(SEED000, x="ones(2,2)", inspect=True))
    assert list(tensors) == ["x", "y", "z", "out"]
    assert [t.kind for t in tensors.values()] == ["input", "step", "step", "output"]
    for name, t in held.items():
        row = tensors[name]
        assert plain(row.value) == t.detach().tolist()
        assert list(row.value.shape) == list(t.shape)
        assert row.requires_grad is t.requires_grad
        assert row.is_leaf is t.is_leaf
        assert row.grad_fn == (None if t.grad_fn is None else t.grad_fn.name())
    assert [tensors[n].grad_fn for n in ("y", "z", "out")] == [
        "AddBackward0",
        "MulBackward0",
        "MeanBackward0",
    ]
    assert plain(tensors["x"].grad) == [[4.5, 4.5], [4.5, 4.5]]
    assert plain(tensors["x"].grad_expected) == [[4.5, 4.5], [4.5, 4.5]]
    for name in ("y", "z", "out"):
        row = tensors[name]
        assert row.grad is None and row.grad_note_code == "non_leaf_grad"
        for style in (CLI, PYTHON):  # the --json document's words and the API's
            assert str(row.grad_note_text(style)).startswith(LEAF_ONLY)
        assert plain(row.value_expected) == plain(row.value)  # SymPy's value
        assert row.agree is True


def test_retain_grad_all_gives_each_step_its_gradient_checked_by_sympy():
    held = seed000_in_python()
    tensors = tensors_of(api(SEED000, x="ones(2,2)", retain_grad=["all"]))
    # by hand: d out/d out = 1, d out/d z = 1/4, d out/d y = 6y/4 = 4.5 at y = 3
    hand = {"out": 1.0, "z": [[0.25, 0.25], [0.25, 0.25]], "y": [[4.5, 4.5], [4.5, 4.5]]}
    for name, value in hand.items():
        assert plain(tensors[name].grad) == value == held[name].grad.tolist()
        assert plain(tensors[name].grad_expected) == value and tensors[name].grad_note_code is None
        assert tensors[name].agree is True


def test_retain_grad_one_name_leaves_the_others_none():
    tensors = tensors_of(api(SEED000, x="ones(2,2)", retain_grad=["z"]))
    assert plain(tensors["z"].grad) == [[0.25, 0.25], [0.25, 0.25]]
    assert tensors["y"].grad is None and tensors["out"].grad is None


def test_retain_grad_with_repeat_accumulates_like_a_leaf():
    held = tensors_of(api("y = x*x; y*3", x="2", retain_grad=["y"], repeat=2))
    assert plain(held["y"].grad) == 3.0  # a new graph each pass: a new y, grad 3 once
    result = api(
        "y = x*x; y*3", x="2", retain_grad=["y"], repeat=2, same_graph=True, retain_graph=True
    )
    same = tensors_of(result)
    assert plain(same["y"].grad) == 6.0  # the same y twice: 3 + 3
    assert plain(same["y"].grad_expected) == 6.0 and result.agree is True


def test_inspect_rich_table_and_one_reason_line():
    run = cli("grad", SEED000, "--x", "ones(2,2)", "--inspect")
    lines = [" ".join(line.split()) for line in run.stdout.splitlines()]
    assert "┃ tensor ┃ data ┃ requires_grad ┃ is_leaf ┃ grad_fn ┃ grad ┃ check ┃" in lines
    assert "│ y │ [[3, 3], │ True │ False │ AddBackward0 │ None │ ✓ │" in lines
    assert "│ x │ [[1, 1], │ True │ True │ None │ [[4.5, 4.5], │ ✓ │" in lines
    text = " ".join(lines)
    assert text.count("is None") == 0 and text.count("are None") == 1
    assert (
        "y.grad, z.grad, out.grad are None: PyTorch fills .grad only for leaf tensors that "
        "require grad (made with requires_grad=True, not by an operation autograd recorded)" in text
    )


def test_inspect_a_constant_input():
    tensors = tensors_of(api("x*y", x="1", y="2", const=["y"], inspect=True))
    assert tensors["y"].requires_grad is False and tensors["y"].is_leaf is True
    assert tensors["y"].grad is None and tensors["y"].grad_note_code == "untracked"
    for style in (CLI, PYTHON):  # the --json document's words and the API's
        assert tensors["y"].grad_note_text(style) == (
            "autograd does not track a tensor with requires_grad=False"
        )


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (
            ["--retain-grad", "x"],
            "Error: 'x' is an input (a leaf tensor): its .grad is kept anyway; --retain-grad is "
            "for steps and the output: y, out\n",
            "retain_grad_input",
        ),
        (
            ["--retain-grad", "q"],
            "Error: --retain-grad q: no step or output named 'q' (choose from y, out, or all)\n",
            "retain_grad_unknown",
        ),
    ],
)
def test_retain_grad_errors(args, message, code):
    run = cli("grad", "y = x*2; y + 1", "--x", "1", *args)
    assert (run.exit_code, run.stdout, run.stderr) == (2, "", message)
    with pytest.raises(ag.AutogradCliError) as raised:
        ag.grad("y = x*2; y + 1", x="1", retain_grad=[args[1]])
    assert raised.value.code == code and raised.value.data["name"] == args[1]


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
    refused = [("y = x*2; y + 1", {"x": "1", "y": "3"}, "y"), ("x = 2; x*3", {"x": "1"}, "x")]
    for program, values, step in refused:
        with pytest.raises(ag.AutogradCliError) as raised:
            ag.grad(program, values)
        assert (raised.value.code, raised.value.data["name"]) == ("value_for_step", step)


def test_no_tensors_object_without_inspect():
    result = api("x*2", x="1")
    assert result.tensors is None and result.to_dict()["tensors"] is None


# --- values defined in the program, as PyTorch writes them ---------------------------------


def test_a_tensor_with_requires_grad_is_a_leaf_and_without_it_a_constant():
    r = api("x = torch.tensor([1., 2.]); w = torch.ones(2, requires_grad=True); (w*x).sum()")
    assert r.variables["x"].requires_grad is False and r.variables["x"].grad is None
    assert plain(r.variables["w"].grad) == [1.0, 2.0]


@pytest.mark.parametrize(
    "program",
    [
        "x = torch.ones(2); x.requires_grad_(); y = (x*2).sum(); y",
        "x = torch.ones(2); x.requires_grad = True; (x*2).sum()",
        "x = torch.ones(2, requires_grad=True); (x*2).sum()",
        "x = torch.tensor([1., 1.], requires_grad=True); (x*2).sum()",
        "x = torch.ones((2,), requires_grad=True); (x*2).sum()",
        "x = torch.full((2,), 1.0, requires_grad=True); torch.sum(x*2)",
    ],
)
def test_ways_to_make_a_leaf(program):
    assert plain(api(program).variables["x"].grad) == [2.0, 2.0]


def test_requires_grad_after_use_is_refused_as_pytorch_would_fail():
    with pytest.raises(ag.AutogradCliError) as raised:
        ag.grad("x = torch.ones(2); y = (x*2).sum(); x.requires_grad_(); y")
    assert str(raised.value) == (
        "'x.requires_grad_()': x is already used above; call requires_grad_ right after making "
        "it (or pass requires_grad=True)"
    )


@pytest.mark.parametrize(
    ("program", "values"),
    [
        ("x = torch.arange(4.0, requires_grad=True); (x*x).sum()", [0.0, 1.0, 2.0, 3.0]),
        ("x = torch.eye(2, 3, requires_grad=True); x.sum()", [[1, 0, 0], [0, 1, 0]]),
        ("x = torch.ones(2, 2, requires_grad=True); x.sum()", [[1, 1], [1, 1]]),
        ("x = torch.zeros((2, 2), requires_grad=True); x.sum()", [[0, 0], [0, 0]]),
    ],
)
def test_constructors_as_pytorch_spells_them(program, values):
    assert plain(api(program).variables["x"].value) == values


def test_randn_is_seeded_by_manual_seed_and_gives_pytorchs_numbers():
    import torch

    r = api("torch.manual_seed(3); x = torch.randn(5, 3, requires_grad=True); (x*x).sum()")
    torch.manual_seed(3)
    assert r.seed == 3
    np.testing.assert_array_equal(r.variables["x"].value, torch.randn(5, 3).double().numpy())
    with pytest.raises(ag.AutogradCliError) as raised:
        ag.grad("torch.manual_seed(1); x = torch.randn(2, requires_grad=True); x.sum()", seed=2)
    assert str(raised.value) == (
        "the program calls torch.manual_seed(1) and seed=2 is given; keep one"
    )


def test_dtype_in_the_program_sets_the_run_with_a_note():
    r = api("x = torch.tensor([1., 2.], dtype=torch.float64, requires_grad=True); (x**2).sum()")
    assert r.dtype == "float64"
    assert [n.code for n in r.notes] == ["program_dtype"]
    with pytest.raises(ag.AutogradCliError) as raised:
        ag.grad(
            "x = torch.tensor([1.], dtype=torch.float64); "
            "w = torch.ones(1, dtype=torch.float32, requires_grad=True); (w*x).sum()"
        )
    assert raised.value.code == "mixed_dtypes"


def test_an_integer_leaf_that_requires_grad_is_refused():
    with pytest.raises(ag.AutogradCliError) as raised:
        ag.grad("x = torch.tensor([1, 2], requires_grad=True); x.sum()")
    assert str(raised.value) == (
        "'torch.tensor([1, 2], requires_grad=True)' is an integer tensor, and only floating "
        "point tensors can require gradients; write the numbers with a decimal point ([1., 2.]) "
        "or add dtype=torch.float32"
    )


@pytest.mark.parametrize(
    ("program", "values"), [("pi = x*2; pi + 1", {"x": 1.0}), ("e*2", {"e": 3})]
)
def test_e_and_pi_may_be_shadowed_with_a_note(program, values):
    r = api(program, **values)
    assert [n.code for n in r.notes] == ["constant_shadowed"]
    name = "pi" if "pi" in program else "e"
    run = cli("grad", program, *[a for k, v in values.items() for a in (f"--{k}", str(v))])
    note = f"note: '{name}' here is a variable (given a value or assigned), not the constant {name}"
    assert note in run.stdout


def test_reassignment_and_augmented_assignment_make_new_tensors():
    r = api("y = x + 1; y = y*2; y += x; y.sum()", x="[1., 2.]")
    assert plain(r.output) == 3 * 1 + 2 + 3 * 2 + 2  # sum of 2(x+1) + x
    assert plain(r.variables["x"].grad) == [3.0, 3.0]


def test_no_grad_block_detaches():
    r = api(
        "x = torch.tensor(2.0, requires_grad=True)\n"
        "with torch.no_grad():\n"
        "    c = x*3\n"
        "out = c*x\n"
        "out"
    )
    assert plain(r.variables["x"].grad) == 6.0  # c is the constant 6
