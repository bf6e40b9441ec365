"""`grad --explain`: the chain rule node by node, numbers from the real backward pass, each
checked against SymPy; and the external gradient as J^T w."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autogradcli as ag
from tests.conftest import cli, grad_json

SEED000 = "y = x + 2; z = y*y*3; out = mean(z)"


def nodes(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (n["grad_fn"], n["label"], n["arriving"], [(f["to"], f["local_derivative"], f["grad"])
                                                   for f in n["flows"]])
        for n in doc["explain"]["nodes"]
    ]  # fmt: skip


def test_seed000_one_quarter_times_six_y_times_one():
    doc = grad_json(SEED000, "--x", "ones(2,2)", "--explain")
    q, t, h, f = ([[v, v], [v, v]] for v in (0.25, 0.75, 2.25, 4.5))
    assert nodes(doc) == [
        (["MeanBackward0"], "out = mean(z)", 1.0, [("z", "1/4", q)]),
        (["MulBackward0"], "z = y*y*3", q, [("y*y", "3", t)]),
        (["MulBackward0"], "y*y", t, [("y", "y", h), ("y", "y", h)]),  # 0.75*3 twice: 6y/4
        (["AddBackward0"], "y = x + 2", f, [("x", "1", f)]),
        (["AccumulateGrad"], "x", f, []),
    ]
    for node in doc["explain"]["nodes"]:
        assert node["arriving_expected"] == node["arriving"] and node["agree"] is True
        for flow in node["flows"]:
            assert flow["expected"] == flow["grad"] and flow["agree"] is True
    assert doc["explain"]["weights"] is None and doc["explain"]["vjp"] == {}
    assert doc["explain"]["agree"] is True


def test_the_order_is_the_order_backward_ran_the_nodes():
    x = torch.tensor(1.0, requires_grad=True)
    y = torch.sin(x)
    out = y * x
    order: list[str] = []
    for fn in (out.grad_fn, y.grad_fn, out.grad_fn.next_functions[1][0]):
        fn.register_hook(lambda gi, go, fn=fn: order.append(type(fn).__name__))
    out.backward()
    doc = grad_json("y = sin(x); y*x", "--x", "1", "--explain")
    assert [n["grad_fn"][0] for n in doc["explain"]["nodes"]] == order
    assert order == ["MulBackward0", "SinBackward0", "AccumulateGrad"]
    mul, sin, leaf = doc["explain"]["nodes"]
    assert [(f["to"], f["local_derivative"]) for f in mul["flows"]] == [("y", "x"), ("x", "y")]
    assert sin["flows"][0]["local_derivative"] == "cos(x)"
    assert leaf["arriving"] == pytest.approx(np.sin(1) + np.cos(1), rel=1e-6)  # two paths summed


def test_one_operation_made_of_two_nodes():
    doc = grad_json("2/x", "--x", "2", "--explain")
    first = doc["explain"]["nodes"][0]
    assert first["grad_fn"] == ["MulBackward0", "ReciprocalBackward0"]
    assert first["flows"][0]["local_derivative"] == "-2/x**2"
    assert first["flows"][0]["grad"] == pytest.approx(-0.5)


def test_rich_table_of_seed000():
    run = cli("grad", SEED000, "--x", "ones(2,2)", "--explain")
    assert run.exit_code == 0
    lines = run.stdout.splitlines()
    rows = [" ".join(line.split()) for line in lines if re.match(r"│ \d ", line)]
    assert rows == [
        "│ 1 │ MeanBackward0 │ 1 │ z │ 1/4 │ [[0.25, 0.25], │ ✓ │",
        "│ 2 │ MulBackward0 │ [[0.25, 0.25], │ y*y │ 3 │ [[0.75, 0.75], │ ✓ │",
        "│ 3 │ MulBackward0 │ [[0.75, 0.75], │ y │ y │ [[2.25, 2.25], │ ✓ │",
        "│ 4 │ AddBackward0 │ [[4.5, 4.5], │ x │ 1 │ [[4.5, 4.5], │ ✓ │",
        "│ 5 │ AccumulateGrad │ [[4.5, 4.5], │ x.grad │ += (accumulate) │ │ ✓ │",
    ]
    assert (
        "chain rule: ∂out/∂x = ∂out/∂z·∂z/∂y·∂y/∂x = (1/4)·(6*y)·(1), expanded: 3*x/2 + 3" in lines
    )


def test_weights_show_the_jacobian_and_jtw_equal_to_grad_of_sum_out_times_w():
    doc = grad_json("x**2", "--x", "[1.0, 2.0]", "--weights", "[1.0, 3.0]", "--explain")
    assert doc["explain"]["weights"] == [1.0, 3.0]
    assert doc["explain"]["vjp"] == {
        "x": {
            "jacobian": [[2.0, 0.0], [0.0, 4.0]],  # diag(2x)
            "jtw": [2.0, 12.0],
            "backward": [2.0, 12.0],
            "grad_of_sum_out_times_w": [2.0, 12.0],
            "agree": True,
        }
    }


def test_seed003_jacobian_of_a_non_elementwise_output():
    # out_i = x_i * sum(x): J = diag(sum) + x 1^T, at x = [1, 2]: [[4, 1], [2, 5]]
    doc = grad_json("x*sum(x)", "--x", "[1.0, 2.0]", "--weights", "[1.0, 0.0]", "--explain")
    vjp = doc["explain"]["vjp"]["x"]
    assert vjp["jacobian"] == [[4.0, 1.0], [2.0, 5.0]]
    assert vjp["jtw"] == vjp["backward"] == vjp["grad_of_sum_out_times_w"] == [4.0, 1.0]


def test_rich_vjp_table():
    run = cli("grad", "x**2", "--x", "[1.0, 2.0]", "--weights", "[1.0, 3.0]", "--explain")
    lines = run.stdout.splitlines()
    assert "the external gradient: out.backward(w) computes Jᵀw, the gradient of sum(out * w)" in [
        line.rstrip() for line in lines
    ]
    assert (
        "│ x     │ [[2, 0],           │ [1, 3] │ [2, 12] │ [2, 12]     │ [2, 12]    │ ✓     │"
        in lines
    )


def test_a_wrong_backward_is_caught_at_its_node(wrong_sin):
    """The check can fail: a sin whose backward doubles cos(x) is flagged where it happens."""
    run = cli("grad", "y = sin(x); out = 3*y", "--x", "1", "--explain", "--json")
    assert run.exit_code == 1
    doc = run.json()
    assert doc["agree"] is False and doc["explain"]["agree"] is False
    mul, sin, leaf = doc["explain"]["nodes"]
    assert mul["agree"] is True  # 3 arrives at y, as SymPy says
    assert sin["grad_fn"] == ["WrongSinBackward"]
    assert sin["arriving_agree"] is True and sin["agree"] is False
    assert sin["flows"][0]["grad"] == pytest.approx(6 * np.cos(1), rel=1e-6)
    assert sin["flows"][0]["expected"] == pytest.approx(3 * np.cos(1), rel=1e-6)
    assert leaf["arriving_agree"] is False
    rich = cli("grad", "y = sin(x); out = 3*y", "--x", "1", "--explain")
    assert rich.exit_code == 1
    lines = rich.stdout.splitlines()
    assert (
        lines[-1]
        == "✗ autograd and SymPy disagree: x, backward node 2 (y = sin(x)), backward node 3 (x)"
    )
    assert any("SymPy: 1.62091" in line for line in lines)  # 3*cos(1), beside the ✗


def test_explain_works_with_repeat_and_records_the_first_pass():
    doc = grad_json("x*x", "--x", "3", "--repeat", "2", "--explain")
    assert doc["variables"]["x"]["grad"] == 12.0
    assert doc["explain"]["nodes"][-1]["arriving"] == 6.0


# Random programs: every number --explain prints agrees with SymPy at points inside the domain.
UNARY = ["sin", "cos", "tanh", "exp", "sigmoid"]
leaf_names = st.sampled_from(["x", "y"])


def _expr(depth: int) -> st.SearchStrategy[str]:
    if depth == 0:
        return st.one_of(leaf_names, st.sampled_from(["2", "0.5", "3"]))
    sub = _expr(depth - 1)
    return st.one_of(
        sub,
        st.builds(lambda f, a: f"{f}({a})", st.sampled_from(UNARY), sub),
        st.builds(lambda a, op, b: f"({a} {op} {b})", sub, st.sampled_from("+-*"), sub),
        st.builds(lambda a: f"mean({a})", sub),
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=_expr(2),
    second=_expr(2),
    x=st.lists(st.floats(-2, 2, allow_subnormal=False), min_size=2, max_size=2),
    y=st.floats(-2, 2, allow_subnormal=False),
)
def test_explain_agrees_on_random_programs(first, second, x, y):
    program = f"a = {first} + x; b = a*y + {second}; out = sum(b*a)"
    result = ag.grad(program, {"x": x, "y": y}, explain=True, dtype="float64")
    assert result.explanation is not None
    assert result.explanation.agree, [
        (s.label, s.arriving, s.arriving_expected) for s in result.explanation.steps
    ]
    assert result.agree


@pytest.mark.parametrize(
    ("args", "what"),
    [
        (["x**2", "--x", "2"], "∂out/∂node"),
        (["x**2", "--x", "[1.0, 2.0]", "--weights", "ones"], "∂(Σ outᵢ)/∂node"),
        (["x**2", "--x", "[1.0, 2.0]", "--weights", "[1, 3]"], "∂(Σ wᵢ·outᵢ)/∂node"),
    ],
)
def test_the_node_table_says_what_gradient_in_is(args, what):
    run = cli("grad", *args, "--explain")
    assert run.exit_code == 0
    assert f"gradient in = {what}, checked against SymPy)" in " ".join(run.stdout.split())
