"""Where backward() sends no gradient though the output depends on an input (the order-0
norm), and rounded divisions at exact integer quotients (issue 23's long OpInfo profile)."""

from __future__ import annotations

import numpy as np
import pytest

import autogradcli as ag
from autogradcli.errors import VariableError
from autogradcli.messages import NOTES


@pytest.mark.parametrize(
    "text",
    ["torch.linalg.vector_norm(x, 0)", "torch.linalg.norm(x, 0)", "torch.norm(x, 0)"],
)
def test_an_order_0_norm_gets_zero_checked_and_a_note(text: str) -> None:
    result = ag.grad(text, {"x": np.array([1.0, -3.0, 2.0])}, dtype="float64")
    assert result.variables["x"].notes == ()
    assert result.verdict == "agree"
    assert result.output == 3.0
    assert result.variables["x"].grad.tolist() == [0.0, 0.0, 0.0]
    assert result.variables["x"].expected.tolist() == [0.0, 0.0, 0.0]
    [note] = [n for n in result.notes if n.code == "grad_unsent"]
    assert note.data["names"] == "x"
    assert note.data["inputs"] == ("x",)


def test_the_inspected_grad_of_an_unsent_input_is_none_as_in_pytorch() -> None:
    result = ag.grad("torch.norm(x, 0) * y + y", {"x": [1.0, 3.0], "y": 2.0}, inspect=True)
    held = {t.name: t for t in result.tensors}
    assert held["x"].grad is None
    assert held["x"].grad_note_code == "unsent"
    assert held["y"].grad == 3.0
    assert [n.data["names"] for n in result.notes if n.code == "grad_unsent"] == ["x"]


def test_an_input_only_under_detach_is_still_refused() -> None:
    with pytest.raises(VariableError) as caught:
        ag.grad("x.detach() * 2 + y", {"x": 1.0, "y": 2.0})
    assert caught.value.code == "grad_never_reached"


def test_a_cell_leaves_the_grad_none_and_says_why() -> None:
    cell = (
        "import torch\n"
        "x = torch.tensor([1.0, 0.0, 2.0], requires_grad=True)\n"
        "y = torch.linalg.vector_norm(x, 0)\n"
        "y.backward()\n"
        "print(x.grad)\n"
    )
    result = ag.grad(cell)
    assert result.verdict == "agree"
    [shown] = result.events[-1].shown
    assert shown.text == "x.grad" and shown.value is None
    assert "grad_unsent" in [n.code for n in result.notes]


def test_the_note_says_what_pytorch_does() -> None:
    text = NOTES["grad_unsent"].format(names="x")
    assert "leaves .grad as it was (None if nothing filled it)" in text


def rounded(mode: str, x: np.ndarray, y: np.ndarray) -> ag.GradResult:
    """``torch.div(x, y, rounding_mode=mode)`` in float64, every element's gradient."""
    text = f"torch.div(x, y, rounding_mode='{mode}')"
    return ag.grad(text, {"x": x, "y": y}, dtype="float64", weights="ones")


@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_a_rounded_division_at_exact_integer_quotients_settles(mode: str) -> None:
    """x/y of equal numbers is exactly ±1: divided, not multiplied by a rounded 1/y (which
    put floor's argument on either side of 1 as the precision rose, for ever)."""
    rng = np.random.default_rng(0)
    y = np.repeat([np.pi, -np.pi, 3.141582653589793, 1e-3], 16)
    x = y * rng.choice([1.0, -1.0, 2.0, -4.0], size=y.size)  # exact products
    result = rounded(mode, x, y)
    assert result.verdict == "agree"
    want = np.floor(x / y) if mode == "floor" else np.trunc(x / y)
    assert np.array_equal(result.output_expected, want)


@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_a_rounded_division_jumps_at_an_integer_quotient_and_says_so(mode: str) -> None:
    """At 6/3 the function jumps: no derivative, the element is left out and the note names
    the division; at 1.5/1 (no jump) PyTorch's 0 is checked. SymPy's derivative is
    DiracDelta(q - floor(q)) there, infinite at the point with 0 on both sides."""
    x, y = np.array([6.0, 1.5, -3.0]), np.array([3.0, 1.0, 2.0])
    result = rounded(mode, x, y)
    assert result.verdict == "agree"
    grad = result.variables["x"]
    assert grad.grad.tolist() == [0.0, 0.0, 0.0]
    assert np.isinf(grad.expected[0]) and grad.expected[1] == 0.0
    [note] = grad.notes
    assert note.code == "kink"
    assert note.data["codes"] == ["div_rounded"] and note.data["excluded"] == 1


def test_a_number_divides_a_rounded_division_exactly() -> None:
    """6 / 3.0 is 2: SymPy's 0.333333333333333*x would floor to 1."""
    result = ag.grad(
        "torch.div(x, 3.0, rounding_mode='floor')",
        {"x": [6.0, 7.5]},
        dtype="float64",
        weights="ones",
    )
    assert result.output_expected.tolist() == [2.0, 2.0]
    assert result.verdict == "agree"


@pytest.mark.parametrize(
    ("text", "code"),
    [("torch.linalg.vector_norm(x, 0)", "norm"), ("torch.linalg.norm(x, 0)", "linalg_norm")],
)
def test_an_order_0_norm_jumps_at_a_zero_element_and_says_so(text: str, code: str) -> None:
    """The count jumps where an element is 0: no derivative there, the element is left out
    and the norm named; SymPy's derivative is DiracDelta(x), infinite there, 0 elsewhere."""
    result = ag.grad(text, {"x": np.array([1.0, 0.0, -2.0])}, dtype="float64")
    assert result.verdict == "agree"
    grad = result.variables["x"]
    assert grad.expected[0] == 0.0 and np.isinf(grad.expected[1]) and grad.expected[2] == 0.0
    [note] = grad.notes
    assert (note.code, note.data["codes"], note.data["excluded"]) == ("kink", [code], 1)
    assert "DiracDelta(x[0])" in (grad.derivative or "")


def test_trunc_has_no_jump_at_0_but_at_every_other_integer() -> None:
    """trunc(q) is 0 on (-1, 1): at q = 0 PyTorch's 0 is the derivative (checked); at 2 and
    -2 it jumps (left out). floor jumps at 0 too."""
    x, y = np.array([0.0, 6.0, -6.0, 0.5]), np.array([2e-6, 3.0, 3.0, -1.0])
    trunc, floor = rounded("trunc", x, y), rounded("floor", x, y)
    assert trunc.variables["x"].expected.tolist() == [0.0, np.inf, np.inf, 0.0]
    assert trunc.variables["x"].notes[0].data["excluded"] == 2
    assert floor.variables["x"].notes[0].data["excluded"] == 3
    assert trunc.output_expected.tolist() == [0.0, 2.0, -2.0, 0.0]
    assert floor.output_expected.tolist() == [0.0, 2.0, -2.0, -1.0]


def test_a_jump_inside_a_where_is_found_by_its_switch() -> None:
    """softplus past its threshold is a Piecewise in the derivative: at the switch the sides
    are decided (the element moved along the switch's own expression)."""
    result = ag.grad(
        "softplus(x, beta=1, threshold=2)", {"x": [2.0, 1.0]}, dtype="float64", weights="ones"
    )
    [note] = result.variables["x"].notes
    assert note.code == "kink_between" and note.data["elements"] == 1


def test_a_jump_beside_a_kink_is_no_derivative_not_a_value_between_the_sides() -> None:
    """relu(x) + floor(x) at 0: the sides are 0 and 1, but the function jumps there (from -1
    to 0): PyTorch's 0 is left out with the jump named, never called a value between them."""
    result = ag.grad(
        "relu(x) + torch.div(x, 1.0, rounding_mode='floor')",
        {"x": [0.0, 0.5]},
        dtype="float64",
        weights="ones",
    )
    assert result.verdict == "agree"
    [note] = result.variables["x"].notes
    assert note.code == "kink" and note.data["excluded"] == 1
    assert set(note.data["codes"]) >= {"div_rounded"}
