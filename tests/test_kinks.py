"""Kinks inside smooth functions: the verdict follows the function's one-sided derivatives,
not which operation sits at its kink (issue 23, section 1).

The truths here are independent of the tool: each composite is a sum of piecewise-linear
pieces whose one-sided slopes at the point are known by hand, and PyTorch's own value is
computed with torch in the test."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import autogradcli as ag
from autogradcli.reference.expected import Expected
from autogradcli.verify.judge import kink_cause
from autogradcli.verify.reconcile import kink_sides

# expression, values, PyTorch's .grad, the derivative (both one-sided derivatives agree)
SMOOTH = [
    ("relu(x) - relu(-x)", {"x": "0"}, [0.0], [1.0]),
    ("a = relu(x); b = relu(-x); out = a - b", {"x": "0"}, [0.0], [1.0]),
    ("sum(relu(x) - relu(-x))", {"x": "[0, 1, -2]"}, [0.0, 1.0, 1.0], [1.0, 1.0, 1.0]),
    ("clamp(x, min=0) - clamp(-x, min=0)", {"x": "0"}, [2.0], [1.0]),
    ("sum(max(x, 0) + min(x, 0))", {"x": "[2., 2.]"}, [2.0, 0.0], [1.0, 1.0]),
    ("abs(x) - 2*relu(x)", {"x": "0"}, [0.0], [-1.0]),
    ("hardtanh(x) + hardtanh(x - 2)", {"x": "1"}, [0.0], [1.0]),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("expr", "values", "grad", "derivative"), SMOOTH)
def test_a_kink_inside_a_smooth_function_is_judged_against_the_derivative(
    expr, values, grad, derivative, dtype
):
    r = ag.grad(expr, values, dtype=dtype)
    x = r.variables["x"]
    assert np.ravel(x.grad).tolist() == grad
    assert np.ravel(x.expected).tolist() == derivative
    assert r.verdict == "disagree" and x.verdict == "disagree"
    assert x.cause is not None and x.cause.code == "nonsmooth_chain_rule"
    assert [n.code for n in x.notes] == ["kink_smooth"]


def test_the_cause_names_the_rule_that_missed_and_the_derivative():
    x = ag.grad("relu(x) - relu(-x)", x=0).variables["x"]
    assert str(x.cause) == (
        "the chain rule through a kink missed: PyTorch takes relu'(0) = 0, and autograd "
        "multiplies that into its product, but the function itself is differentiable there "
        "(its one-sided derivatives are both 1); .grad is 0"
    )
    t = ag.grad("sum(relu(x) - relu(-x))", x="[1, 0, -2]").variables["x"]
    assert str(t.cause).endswith(".grad is 0 at element [1] (1 element(s) in all)")
    assert str(t.notes[0]) == (
        "relu'(0) is undefined (SymPy's Heaviside(0) is 1/2), but the function is "
        "differentiable there at 1 element(s): its one-sided derivatives agree (1), so that "
        "is the number .grad is checked against"
    )


def test_in_a_cell_too():
    cell = (
        "import torch\n"
        "x = torch.tensor(0.0, requires_grad=True)\n"
        "y = torch.relu(x) - torch.relu(-x)\n"
        "y.backward()\n"
    )
    r = ag.grad(cell)
    assert r.verdict == "disagree"


def test_the_cli_exits_1_with_the_cause():
    from tests.conftest import cli

    run = cli("grad", "relu(x) - relu(-x)", "--x", "0")
    assert run.exit_code == 1
    flat = " ".join(run.stdout.split())
    assert "✗ x: the chain rule through a kink missed: PyTorch takes relu'(0) = 0" in flat


# A real kink: PyTorch's value must lie between the one-sided derivatives.
REAL = [
    ("relu(x)", {"x": "0"}, [0.0, 1.0]),
    ("abs(x)", {"x": "0"}, [-1.0, 1.0]),
    ("max(x)", {"x": "[3.0, 3.0, 1.0]"}, [0.0, 1.0]),
    ("norm(x)", {"x": "[0.0, 0.0]"}, [-1.0, 1.0]),
    ("relu(x) - relu(-x)/2", {"x": "0"}, [0.5, 1.0]),
]


@pytest.mark.parametrize(("expr", "values", "sides"), REAL)
def test_a_real_kink_accepts_a_value_between_the_sides(expr, values, sides):
    r = ag.grad(expr, values)
    x = r.variables["x"]
    notes = [n for n in x.notes if n.code == "kink_between"]
    assert notes and notes[0].data["sides"][0] == sides
    inside = all(sides[0] <= g <= sides[1] for g in np.ravel(x.grad))
    assert (r.verdict == "agree") is inside


def test_a_value_outside_a_real_kink_is_a_disagreement_with_its_own_cause():
    # relu(x) - 2*relu(-x) is x on the right and 2x on the left: the sides are 1 and 2,
    # and PyTorch's 0 (relu'(0) = 0 twice) lies outside them
    r = ag.grad("relu(x) - 2*relu(-x)", x=0)
    x = r.variables["x"]
    assert x.grad.tolist() == 0.0 and r.verdict == "disagree"
    assert x.cause is not None and x.cause.code == "kink_outside"
    assert str(x.cause) == (
        "at a kink (PyTorch takes relu'(0) = 0) .grad must lie between the one-sided "
        "derivatives 1 and 2; it is 0"
    )


def test_nan_at_a_real_kink_is_non_differentiable():
    e = Expected(
        output=np.zeros(2),
        grads={"x": np.array([0.5, 1.0])},
        kink_notes={"x": {"relu"}},
        bounds={"x": (np.array([0.0, np.nan]), np.array([1.0, np.nan]))},
        sides={"x": (np.array([0.0, np.nan]), np.array([1.0, np.nan]))},
    )
    cause = kink_cause(e, "x", np.array([np.nan, 1.0]), 1, {"relu"}, "float32")
    assert cause is not None and cause.code == "non_differentiable"
    assert kink_cause(e, "x", np.array([0.25, 7.0]), 1, {"relu"}, "float32") is None
    outside = kink_cause(e, "x", np.array([1.5, 1.0]), 2, {"relu"}, "float32")
    assert outside is None  # twice the passes: the interval is [0, 2]
    outside = kink_cause(e, "x", np.array([2.5, 1.0]), 2, {"relu"}, "float32")
    assert outside is not None and outside.code == "kink_outside" and outside.data["high"] == 2


def test_notes_name_only_the_kinks_on_that_inputs_path():
    r = ag.grad("relu(x) + clamp(y, min=0)", x=0, y=0)
    assert r.variables["x"].notes[0].data["codes"] == ["relu"]
    assert r.variables["y"].notes[0].data["codes"] == ["clamp"]
    p = ag.grad("a = relu(x); b = clamp(y, min=0); out = a + 2*b", x=0, y=0)
    assert p.variables["x"].notes[0].data["codes"] == ["relu"]
    assert p.variables["y"].notes[0].data["codes"] == ["clamp"]


def test_kink_sides_without_kinks_is_the_same_reference():
    e = Expected(output=np.zeros(()), grads={"x": np.ones(())}, kinks={"x": np.zeros((), bool)})
    assert kink_sides(object(), {"x": np.zeros(())}, None, e) is e  # type: ignore[arg-type]


# --- adversarial: composites of kinked pieces that cancel, kinks at random indices ----------

# piece -> (torch function, (left slope, right slope) at 0); away from 0 the slope is the
# left one for x < 0 and the right one for x > 0
PIECES = {
    "relu(x)": (torch.relu, (0.0, 1.0)),
    "relu(-x)": (lambda t: torch.relu(-t), (-1.0, 0.0)),
    "abs(x)": (torch.abs, (-1.0, 1.0)),
    "clamp(x, min=0)": (lambda t: torch.clamp(t, min=0), (0.0, 1.0)),
    "clamp(x, max=0)": (lambda t: torch.clamp(t, max=0), (1.0, 0.0)),
    "hardtanh(x - 1)": (lambda t: torch.nn.functional.hardtanh(t - 1), (0.0, 1.0)),
}


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    terms=st.lists(
        st.tuples(st.sampled_from(sorted(PIECES)), st.integers(-3, 3)), min_size=1, max_size=4
    ),
    signs=st.lists(st.sampled_from([-1.0, 0.0, 0.0, 1.0]), min_size=1, max_size=12),
    dtype=st.sampled_from(["float32", "float64"]),
)
def test_composites_of_cancelling_kinks_get_the_verdict_the_sides_allow(terms, signs, dtype):
    expr = "sum(" + " + ".join(f"({c})*{p}" for p, c in terms) + ")"
    values = np.array(signs) * 0.75  # zeros (the kinks) at the indices hypothesis picks
    left = sum(c * PIECES[p][1][0] for p, c in terms)
    right = sum(c * PIECES[p][1][1] for p, c in terms)
    # PyTorch's own .grad, computed here
    t = torch.tensor(values, dtype=getattr(torch, dtype), requires_grad=True)
    sum(c * PIECES[p][0](t) for p, c in terms).sum().backward()
    pytorch = t.grad.double().numpy()
    r = ag.grad(expr, x=values.tolist(), dtype=dtype)
    x = r.variables["x"]
    assert np.array_equal(x.grad, pytorch)
    at = values == 0
    slope = np.where(values < 0, left, right)
    assert np.array_equal(x.expected[~at], slope[~at])  # the derivative away from the kinks
    ok = np.isclose(pytorch[~at], slope[~at]).all()
    if left == right:  # differentiable at 0: .grad must be the derivative
        ok = ok and bool(np.all(pytorch[at] == left))
        if at.any() and not np.all(pytorch[at] == left):
            assert x.cause is not None and x.cause.code == "nonsmooth_chain_rule"
    else:  # a real kink: .grad must lie between the sides
        low, high = min(left, right), max(left, right)
        ok = ok and bool(np.all((pytorch[at] >= low) & (pytorch[at] <= high)))
        if at.any() and not ok:
            assert x.cause is not None and x.cause.code == "kink_outside"
    assert (r.verdict == "agree") is ok


def test_jacobian_entries_at_a_kink_follow_the_same_rule():
    smooth = ag.jacobian("relu(x) - relu(-x)", x="[0.0, 1.0]")
    block = smooth.blocks[0]
    assert block.autograd.tolist() == [[0.0, 0.0], [0.0, 1.0]]
    assert block.expected.tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert smooth.verdict == "disagree" and block.cause is not None
    assert block.cause.code == "nonsmooth_chain_rule" and block.cause.data["index"] == [0, 0]
    outside = ag.jacobian("relu(x) - 2*relu(-x)", x="[0.0]")
    assert outside.verdict == "disagree" and outside.blocks[0].cause.code == "kink_outside"
    between = ag.jacobian("relu(x)", x="[0.0, 1.0]")
    assert between.verdict == "agree" and [n.code for n in between.notes] == ["kink_between"]


@pytest.mark.parametrize("size", [300, 20_000])  # mpmath beside the point; the next float
def test_kinks_at_random_indices_of_a_large_tensor(size):
    rng = np.random.default_rng(size)
    x = rng.choice([-1.5, 0.0, 2.0], size)
    smooth = ag.grad("sum(relu(x) - relu(-x))", x=x, dtype="float64").variables["x"]
    assert np.array_equal(smooth.expected, np.ones(size))  # the derivative of x, everywhere
    assert np.array_equal(smooth.grad, np.where(x == 0, 0.0, 1.0))  # PyTorch's
    assert smooth.cause is not None and smooth.cause.code == "nonsmooth_chain_rule"
    assert smooth.cause.data["elements"] == int((x == 0).sum())
    real = ag.grad("sum(relu(x))", x=x, dtype="float64")
    assert real.verdict == "agree"
    assert real.variables["x"].notes[0].data["elements"] == int((x == 0).sum())


def test_ties_beyond_one_by_one_are_moved_one_at_a_time_up_to_the_cap():
    # relu(x - mean(x)) at 40 equal values: moved together they all stay at the kink, so
    # they are moved one at a time, up to ONE_BY_ONE (32) of them; the sides of each are
    # -39/40 and 39/40 (its own term on the right, the 39 others on the left); the other 8
    # stay left out at PyTorch's value
    from autogradcli.verify.reconcile import ONE_BY_ONE

    r = ag.grad("sum(relu(x - mean(x)))", x=[2.0] * 40, dtype="float64")
    x = r.variables["x"]
    assert r.verdict == "agree"
    notes = {n.code: n.data for n in x.notes}
    assert notes["kink_between"]["elements"] == ONE_BY_ONE == 32
    assert notes["kink_between"]["sides"] == [[-0.975, 0.975]]
    assert notes["kink"]["excluded"] == 40 - ONE_BY_ONE


@pytest.mark.parametrize(("scale", "code"), [(1e-13, "kink_smooth"), (1e-11, "kink_between")])
def test_sides_this_close_are_one_number(scale, code):
    # relu(x)*(1 + s) - relu(-x) at 0: the sides are 1 + s and 1; within 2**-40 relative
    # they are one number (the function is differentiable there), past it a real kink
    r = ag.grad(f"relu(x)*(1 + {scale}) - relu(-x)", x=0.0, dtype="float64")
    assert [n.code for n in r.variables["x"].notes] == [code]
