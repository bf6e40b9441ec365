"""Edge cases of the anatomy views: aliases of one tensor, leaf outputs, constant steps,
infinite derivatives, non-finite numbers in tables, caps, and the graph command's files."""

from __future__ import annotations

import json
import math

import pytest
import torch

import autogradcli as ag
from tests.conftest import cli


def retained_in_python(build, **values):
    """Run ``build`` on leaves made from ``values``, retain_grad() on every non-leaf name."""
    leaves = {
        n: torch.tensor(float(v) if isinstance(v, int) else v, requires_grad=True)
        for n, v in values.items()
    }
    named = build(**leaves)
    for t in named.values():
        if not t.is_leaf:
            t.retain_grad()
    named["out"].sum().backward() if named["out"].dim() else named["out"].backward()
    return {
        n: (None if t.grad is None else t.grad.tolist()) for n, t in {**leaves, **named}.items()
    }


@pytest.mark.parametrize(
    ("program", "x", "build"),
    [
        ("x", "3", lambda x: {"out": x}),
        ("y = x; y*2", "3", lambda x: {"y": x, "out": x * 2}),
        ("y = x*2; out = y", "1", lambda x: {"y": (y := x * 2), "out": y}),
        (
            "y = x*2; z = y; out = sum(z*y)",
            "[1.0, 2.0]",
            lambda x: {"y": (y := x * 2), "z": y, "out": (y * y).sum()},
        ),
        (
            "y = x*2; z = +y; out = sum(z*y)",
            "[1.0, 2.0]",
            lambda x: {"y": (y := x * 2), "z": +y, "out": (+y * y).sum()},
        ),
    ],
)
def test_aliases_and_leaf_outputs_get_pytorchs_grads_checked(program, x, build):
    want = retained_in_python(build, x=json.loads(x))
    views = {"retain_grad": ["all"]} if ";" in program else {"inspect": True}
    result = ag.grad(program, x=x, **views)
    tensors = {t.name: t for t in result.tensors}
    for name, grad in want.items():
        assert (None if tensors[name].grad is None else tensors[name].grad.tolist()) == grad, name
        if grad is not None:
            assert tensors[name].grad_expected.tolist() == grad and tensors[name].agree is True
    assert result.agree is True


def test_retain_grad_of_a_constant_step():
    run = cli("grad", "y = 2*3; y*x", "--x", "1", "--retain-grad", "y")
    assert (run.exit_code, run.stderr) == (
        2,
        "Error: --retain-grad y: 'y' does not require grad (it depends on no input that does), "
        "so it has no gradient to keep\n",
    )
    with pytest.raises(ag.AutogradCliError) as raised:
        ag.grad("y = 2*3; y*x", x="1", retain_grad=["y"])
    assert (raised.value.code, raised.value.data) == ("retain_grad_no_grad", {"name": "y"})
    result = ag.grad(
        "y = c*3; z = y*x; sum(z)", x="[1.0, 2.0]", c="2", const=["c"], retain_grad=["all"]
    )
    tensors = {t.name: t for t in result.tensors}
    assert tensors["y"].grad is None and tensors["y"].requires_grad is False
    assert tensors["y"].grad_note_code == "untracked"
    untracked = "autograd does not track a tensor with requires_grad=False"
    assert tensors["y"].grad_note_text() == untracked
    assert result.to_dict()["tensors"]["y"]["grad_note"] == untracked  # --json's words
    assert tensors["z"].grad.tolist() == [1.0, 1.0]
    assert result.agree is True


def test_non_finite_numbers_show_in_tables():
    run = cli("grad", "y = log(x); out = sum(y)", "--x", "[[0.0, 1.0], [2.0, 3.0]]", "--inspect")
    assert "[[-inf, 0]," in run.stdout  # log(0) in the data column
    assert "[[inf, 1]," in run.stdout  # 1/x in the grad column


def test_infinite_derivative_in_the_jacobian_is_not_a_false_disagreement():
    result = ag.grad("sqrt(x)", x="[0.0, 1.0, 4.0]", weights="ones", explain=True)
    assert result.agree is True  # exit code 0
    (vjp,) = (v for v in result.explanation.vjp if v.name == "x")
    inf = math.inf
    assert vjp.jacobian.tolist() == [[inf, 0.0, 0.0], [0.0, 0.5, 0.0], [0.0, 0.0, 0.25]]
    assert vjp.jtw.tolist() == vjp.backward.tolist() == [inf, 0.5, 0.25]


def test_an_alias_step_shows_both_names_on_its_node():
    graph = ag.backward_graph("y = x*2; z = y; out = sum(z*y)", x="[1.0, 2.0]")
    labels = [n.label for n in graph.nodes]
    assert labels[:3] == ["out = sum(z*y)", "z*y", "y = x*2; z = y"]


def test_chain_rule_marks_the_sum_where_a_reduction_is_spread_back():
    result = ag.grad("y = x*2; m = mean(y); z = (y - m)**2; out = mean(z)", x="[1.0, 2.0, 4.0]")
    assert result.variables["x"].chain == (
        "∂out/∂x = ∂out/∂z·∂z/∂y·∂y/∂x + Σ[∂out/∂z·∂z/∂m]·∂m/∂y·∂y/∂x = "
        "(1/3)·(-2*m + 2*y)·(2) + Σ[(1/3)·(2*m - 2*y)]·(1/3)·(2) "
        "(Σ[...]: summed over the elements a smaller tensor is spread to)"
    )
    # the derivative of the printed .grad, the mean's spread summed: 8*x_j/3 - 8*sum(x)/9
    assert result.variables["x"].derivative.startswith("-8*sum(x)/9 + 8*x/3")
    assert result.agree is True


def test_explain_cap_is_checked_before_the_work():
    run = cli("grad", "x" + "*x" * 140, "--x", "1.0", "--explain")
    assert run.exit_code == 2
    assert run.stderr == (
        "Error: --explain covers backward graphs of up to 128 nodes; this one has 141; explain "
        "a smaller expression (or see it with autograd-cli graph)\n"
    )


def test_dot_to_stdout_and_folder_errors(tmp_path):
    run = cli("graph", "x*2", "--x", "1", "--dot", "-")
    assert run.exit_code == 0
    assert run.stdout.startswith("digraph backward {\n") and run.stdout.endswith("}\n")
    both = cli("graph", "x*2", "--x", "1", "--dot", "-", "--json")
    assert (both.exit_code, both.stderr) == (
        2,
        "Error: --dot - prints the DOT text; use --dot FILE with --json\n",
    )
    folder = cli("graph", "x*2", "--x", "1", "--dot", str(tmp_path))
    assert (
        folder.stderr
        == f"Error: --dot {tmp_path}: that is a folder; give a file name, e.g. graph.dot\n"
    )
    image = cli("graph", "x*2", "--x", "1", "--png", str(tmp_path))
    assert (
        image.stderr
        == f"Error: --png {tmp_path}: that is a folder; give a file name, e.g. graph.png\n"
    )


def test_a_huge_derivative_is_shortened_in_the_table_not_in_json():
    # five steps: a derivative of about 2,000 characters (eight made 27,000, in 3 s)
    program = "y0 = sin(x)*x; " + "; ".join(f"y{i} = sin(y{i - 1})*y{i - 1}+x" for i in range(1, 5))
    program += "; out = mean(y4)"
    run = cli("grad", program, "--x", "0.5")
    assert run.exit_code == 0 and len(run.stdout.splitlines()) < 60
    assert "characters; all of it with --full or in --json)" in run.stdout.replace("\n", "")
    result = ag.grad(program, x="0.5")
    assert result.agree is True
    assert len(result.variables["x"].derivative) > 1000
    assert result.to_dict()["variables"]["x"]["derivative"] == result.variables["x"].derivative
