"""`jvp`: forward mode (torch.func.jvp) against PyTorch run here by hand and against SymPy's
Jacobian times the tangent, computed here independently of the tool; exit codes; errors."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
import torch

import autogradcli as ag
from tests.conftest import cli

F64 = {"dtype": "float64"}


def sympy_jvp(text: str, values: dict[str, list[float]], tangents: dict[str, list[float]]):
    """Σ_x d out / d x · v_x elementwise (inputs of one shape), by SymPy's diff, here."""
    names = list(values)
    symbols = {n: sp.Symbol(n) for n in names}
    expr = sp.sympify(text, locals=symbols)
    out = []
    for i in range(len(values[names[0]])):
        point = {symbols[n]: values[n][i] for n in names}
        total = sum(sp.diff(expr, symbols[n]).subs(point) * tangents[n][i] for n in names)
        out.append(float(sp.N(total, 30)))
    return np.array(out)


CASES = [
    ("x*y + sin(x)", {"x": [1.0, 2.0], "y": [3.0, 4.0]}, {"x": [1.0, 0.0], "y": [0.0, 1.0]}),
    ("exp(x)*y**2", {"x": [0.5, -1.0], "y": [2.0, 3.0]}, {"x": [2.0, -1.0], "y": [0.5, 1.5]}),
    ("x/y - log(y)", {"x": [1.0, 2.0, 3.0], "y": [2.0, 4.0, 5.0]},
     {"x": [1.0, 1.0, 1.0], "y": [0.0, -2.0, 3.0]}),
]  # fmt: skip


@pytest.mark.parametrize(("text", "values", "tangents"), CASES, ids=[c[0] for c in CASES])
def test_jvp_is_pytorchs_forward_mode_and_sympys_j_times_v(text, values, tangents):
    r = ag.jvp(text, values, tangents=tangents, **F64)
    assert r.kind == "jvp" and r.agree is True and r.expected_by == "SymPy"
    (block,) = r.blocks
    # PyTorch, by hand: forward mode with dual numbers
    import torch.autograd.forward_ad as fwAD

    env = {"sin": torch.sin, "exp": torch.exp, "log": torch.log}
    with fwAD.dual_level():
        duals = {
            n: fwAD.make_dual(torch.tensor(v, dtype=torch.float64), torch.tensor(tangents[n]))
            for n, v in values.items()
        }
        by_hand = fwAD.unpack_dual(eval(text, env, duals)).tangent.numpy()
    np.testing.assert_allclose(block.autograd, by_hand, rtol=1e-12)
    np.testing.assert_allclose(block.cross, by_hand, rtol=1e-12)  # functional.jvp
    np.testing.assert_allclose(block.expected, sympy_jvp(text, values, tangents), rtol=1e-12)
    assert r.tangents["x"].tolist() == tangents["x"]


def test_jvp_is_the_jacobian_times_v_and_the_default_tangent_is_ones():
    # a matrix product: J·v with v = ones, against the Jacobian the tool's jacobian gives
    r = ag.jvp("A @ x", {"A": "[[1, 2], [3, 4]]", "x": "[5, 6]"}, const=["A"], **F64)
    (block,) = r.blocks
    assert block.autograd.tolist() == [3.0, 7.0] and r.tangents["x"].tolist() == [1.0, 1.0]
    jac = ag.jacobian("A @ x", {"A": "[[1, 2], [3, 4]]", "x": "[5, 6]"}, const=["A"], **F64)
    np.testing.assert_allclose(jac.blocks[0].autograd @ np.ones(2), block.autograd)


def test_jvp_cli_rich_json_and_exit_codes():
    args = ["jvp", "x*y + sin(x)", "--x", "[1, 2]", "--y", "[3, 4]"]
    args += ["--tangent", "x=[1,0]", "--tangent", "y=[0,1]"]
    run = cli(*args)
    assert run.exit_code == 0
    lines = [" ".join(line.split()) for line in run.stdout.splitlines()]
    assert "tangents v: x = [1, 0], y = [0, 1]" in lines
    assert any(line.startswith("│ J·v │ [3.5403, 2] │ [3.5403, 2] │ [3.5403, 2]") for line in lines)
    assert lines[-1] == "✓ autograd and SymPy agree"
    doc = cli(*args, "--json").json()
    assert doc["command"] == doc["kind"] == "jvp" and doc["verdict"] == "agree"
    assert doc["tangents"] == {"x": [1.0, 0.0], "y": [0.0, 1.0]}
    assert doc["blocks"]["J·v"]["cross_check"]["by"] == "torch.autograd.functional.jvp"
    bad = [
        ("--tangent", "z=1"),  # not an input
        ("--tangent", "x=1"),  # wrong shape
        ("--tangent", "x"),  # no '='
    ]
    for extra in bad:
        failed = cli("jvp", "x*y", "--x", "[1, 2]", "--y", "3", *extra)
        assert failed.exit_code == 2 and failed.stderr.startswith("Error: --tangent")


def test_jvp_disagreement_exits_1(monkeypatch):
    from autogradcli.torchside import higher

    real = higher.forward_jvp
    monkeypatch.setattr(higher, "forward_jvp", lambda s, t: real(s, t) + 1.0)
    run = cli("jvp", "x**2", "--x", "[1, 2]", "--json")
    assert run.exit_code == 1 and run.json()["agree"] is False
