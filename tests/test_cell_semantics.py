"""A cell means what PyTorch means: cells generated from the supported grammar run in real
Python (with torch) and through autograd-cli must print the same values, leave the same
``.grad``, and raise wherever Python raises (and nowhere else).

The cells are text this test generates itself (hypothesis, from a fixed grammar) and runs
with ``exec``: never user input. autograd-cli itself never runs a cell: it parses it.
``AUTOGRAD_CLI_LONG=1`` runs the long profile (many more cells).
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autogradcli as ag

LONG = os.environ.get("AUTOGRAD_CLI_LONG") == "1"
EXAMPLES = 1500 if LONG else 25
# the dtype's tolerance (torch.testing.assert_close's defaults)
TOLERANCE = {"float32": (1.3e-6, 1e-5), "float64": (1e-7, 1e-7)}

# --- the grammar -------------------------------------------------------------------------

NUMBERS = ["2", "3", "0.5", "1.5", "-1.25", "(-2)"]
FUNCTIONS = {  # name: the namespaces that spell it
    "exp": ("torch", "np", "math"),
    "sin": ("torch", "np", "math"),
    "cos": ("torch", "np", "math"),
    "tanh": ("torch", "np", "math"),
    "sqrt": ("torch", "np", "math"),
    "log": ("torch", "np", "math"),
    "abs": ("torch", "np"),
    "sigmoid": ("torch",),
}
METHODS = ["exp", "sin", "tanh", "sigmoid", "abs", "sum", "mean", "relu"]


@dataclass(frozen=True)
class Piece:
    """An expression's text, and whether Python gives a tensor (else a number)."""

    text: str
    tensor: bool


def _expressions(names: list[str]) -> st.SearchStrategy[Piece]:
    base = st.one_of(
        st.sampled_from(names).map(lambda n: Piece(n, True)),
        st.sampled_from(names).map(lambda n: Piece(f"{n}[0]", True)),  # one element
        st.sampled_from(NUMBERS).map(lambda n: Piece(n, False)),
    )

    def extend(inner: st.SearchStrategy[Piece]) -> st.SearchStrategy[Piece]:
        def binary(t: tuple[Piece, str, Piece]) -> Piece:
            return Piece(f"({t[0].text} {t[1]} {t[2].text})", t[0].tensor or t[2].tensor)

        def function(t: tuple[str, int, Piece]) -> Piece:
            name, k, arg = t
            space = FUNCTIONS[name][k % len(FUNCTIONS[name])]
            if space == "torch" and not arg.tensor:  # torch.exp(2.0) is a TypeError
                space = "math"
            if space == "math" and name == "abs":
                name = "fabs"
            tensor = space != "math" and (space == "torch" or arg.tensor)
            return Piece(f"{space}.{name}({arg.text})", tensor)

        tensors = inner.filter(lambda p: p.tensor)
        return st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-", "*"]), inner).map(binary),
            st.tuples(inner, st.sampled_from(["/ 2", "** 2", "** 3", "^ 2", "^ 3"])).map(
                lambda t: Piece(f"({t[0].text} {t[1]})", t[0].tensor)
            ),
            st.tuples(st.sampled_from(sorted(FUNCTIONS)), st.integers(0, 2), inner).map(function),
            st.tuples(tensors, st.sampled_from(METHODS)).map(
                lambda t: Piece(f"{t[0].text}.{t[1]}()", True)
            ),
        )

    return st.recursive(base, extend, max_leaves=5)


def _constructor(requires_grad: bool, dtype: str) -> st.SearchStrategy[str]:
    flag = ", requires_grad=True" if requires_grad else ""
    kind = "" if dtype == "float32" else ", dtype=torch.float64"
    values = st.lists(
        st.sampled_from([-2.5, -1.0, -0.3, 0.1, 0.7, 1.0, 2.0, 3.14159]), min_size=1, max_size=3
    )
    ends = st.sampled_from([-3.14159, -1.0, 0.0, 0.1, 1.0, 2.5, 3.14159])
    return st.one_of(
        values.map(lambda v: f"torch.tensor({v}{kind}{flag})"),
        st.tuples(ends, ends, st.sampled_from([1, 2, 3, 7])).map(
            lambda t: f"torch.linspace({t[0]}, {t[1]}, {t[2]}{kind}{flag})"
        ),
        st.tuples(st.sampled_from([0.0, -1.0, 0.5]), st.sampled_from([0.3, 0.7])).map(
            lambda t: f"torch.arange({t[0]}, {t[0] + 1.5}, {t[1]}{kind}{flag})"
        ),
        st.sampled_from(["rand", "randn", "ones"]).flatmap(
            lambda f: st.integers(1, 3).map(lambda n: f"torch.{f}({n}{kind}{flag})")
        ),
        st.integers(1, 3).map(lambda n: f"torch.full(({n},), 0.3{kind}{flag})"),
    )


@st.composite
def cells(draw: st.DrawFn) -> str:
    """A cell: a leaf, maybe a constant, a step, backward(), prints, maybe a reset and a
    second backward()."""
    dtype = draw(st.sampled_from(["float32", "float64"]))
    lines = ["import math", "import numpy as np", "import torch"]
    lines.append(f"torch.manual_seed({draw(st.integers(0, 3))})")
    lines.append(f"x = {draw(_constructor(True, dtype))}")
    names = ["x"]
    if draw(st.booleans()):
        lines.append(f"c = {draw(_constructor(False, dtype))}")
        names.append("c")
    step = draw(_expressions(names).filter(lambda p: p.tensor and "x" in p.text))
    lines.append(f"y = {step.text}")
    if draw(st.booleans()):
        lines.append("print(y)")
    lines.append("y.sum().backward()")
    lines.append("print(x.grad)")
    if draw(st.booleans()):
        lines.append(draw(st.sampled_from(["x.grad.zero_()", "x.grad = None", "pass"])))
        again = draw(_expressions(names).filter(lambda p: p.tensor and "x" in p.text))
        if draw(st.booleans()):  # a constant made under no_grad, used in the next step
            lines += ["with torch.no_grad():", f"    k = {again.text}"]
            again = Piece("(x * k)", True)
        lines.append(f"z = {again.text}")
        lines.append("z.sum().backward()")
        lines.append("print(x.grad)")
    return "\n".join(lines) + "\n"


# --- the two runs --------------------------------------------------------------------------


def _plain(item: Any) -> Any:
    if isinstance(item, torch.Tensor):
        item = item.detach().cpu().clone()  # .grad changes in place later
        return item.numpy() if item.dtype == torch.bool else item.to(torch.float64).numpy()
    if isinstance(item, str) or item is None:
        return item
    return np.asarray(item, dtype=np.float64)


def run_python(text: str) -> tuple[list[list[Any]], BaseException | None]:
    """What Python prints, and what it raised: the generated text run in real PyTorch."""
    printed: list[list[Any]] = []

    def capture(*items: Any, **_: Any) -> None:
        printed.append([_plain(i) for i in items])

    # the tool reads torch, np, math and F as imported (docs/pytorch.md); so does this run
    namespace: dict[str, Any] = {"print": capture, "torch": torch, "np": np, "math": math}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # test-generated text only (the grammar above), never user input
            exec(compile(text, "<generated cell>", "exec"), namespace)
    except Exception as exc:  # any exception Python raises is the point of comparison
        return printed, exc
    return printed, None


def run_tool(text: str) -> tuple[list[list[Any]], BaseException | None]:
    """What autograd-cli prints for the same cell, and the error it stopped at."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = ag.grad(text)
    except ag.AutogradCliError as exc:
        return [], exc
    assert isinstance(result, ag.CellResult), text
    printed = [[s.value for s in e.shown] for e in result.events if e.kind == "print"]
    return printed, result.error


def same(a: Any, b: Any, dtype: str) -> bool:
    """Equal values: the same None/text/bool, else numbers to the dtype's tolerance
    (non-finite values where the other has the same)."""
    if a is None or b is None or isinstance(a, str) or isinstance(b, str):
        return (a is None and b is None) or a == b
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype == bool or b.dtype == bool:
        return bool(np.array_equal(a, b))
    rtol, atol = TOLERANCE[dtype]
    return bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))


def differences(text: str) -> list[str]:
    """Every way the tool's run of ``text`` differs from Python's (empty: none)."""
    dtype = "float64" if "float64" in text else "float32"
    python, raised = run_python(text)
    tool, error = run_tool(text)
    found: list[str] = []
    if (raised is None) != (error is None):
        found.append(f"python raised {raised!r}, the tool stopped with {error}")
    if raised is None and error is None and len(python) != len(tool):
        found.append(f"{len(python)} prints in Python, {len(tool)} in the tool")
    for k, (want, got) in enumerate(zip(python, tool, strict=False)):
        if len(want) != len(got) or not all(
            same(w, g, dtype) for w, g in zip(want, got, strict=True)
        ):
            found.append(f"print {k + 1}: python {want}, tool {got}")
    return found


COUNTS = {"cells": 0, "raised": 0, "bitwise": 0}


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not LONG,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(cells())
def test_a_generated_cell_means_what_python_means(text: str) -> None:
    assert differences(text) == [], text
    COUNTS["cells"] += 1


# --- the examples of issue 23 §5, pinned ----------------------------------------------------


CELL = "x = torch.tensor([1., 2.], requires_grad=True)\ny = {}\ny.backward()\nprint(x.grad)\n"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("(x ^ 2).sum()", "PyTorch: \"bitwise_xor_cpu\" not implemented for 'Float'"),
        (
            "np.exp(x).sum()",
            "PyTorch: Can't call numpy() on Tensor that requires grad. Use "
            "tensor.detach().numpy() instead.",
        ),
        ("(x * math.exp(x)).sum()", "PyTorch: only one element tensors can be converted"),
        ("(x * math.log(-1.0)).sum()", "Python: math.log raises ValueError: math domain error"),
    ],
)
def test_a_cell_raises_where_python_raises(line: str, message: str) -> None:
    text = CELL.format(line)
    assert run_python(text)[1] is not None
    result = ag.grad(text)
    assert result.events == () and result.error is not None and not result.agree
    assert str(result.error).startswith(f"'y = {line}': {message}")


def test_xor_of_python_numbers_is_python_s() -> None:
    result = ag.grad(CELL.format("(x * (2 ^ 3)).sum()"))  # 2 ^ 3 == 1
    assert result.error is None and result.grads["x"].tolist() == [1.0, 1.0]
    with pytest.raises(ag.AutogradCliError) as raised:
        ag.grad(CELL.format("(x * (2.0 ^ 3)).sum()"))
    assert raised.value.code == "xor_numbers"
    assert "unsupported operand type(s) for ^: 'float' and 'int'" in str(raised.value)


def test_math_of_one_element_is_a_float_outside_the_graph() -> None:
    text = "x = torch.tensor([2.], requires_grad=True)\ny = (x * math.exp(x)).sum()\n"
    text += "y.backward()\nprint(x.grad)\n"
    result = ag.grad(text)
    assert result.error is None
    assert result.grads["x"].tolist() == pytest.approx([math.exp(2.0)], rel=1e-6)
    assert differences(text) == []


def test_numpy_of_a_tensor_without_grad_is_its_values() -> None:
    text = (
        "x = torch.tensor([1., 2.], requires_grad=True)\nwith torch.no_grad():\n"
        "    z = np.exp(x * 2)\ny = (x * z).sum()\ny.backward()\nprint(x.grad)\n"
    )
    assert differences(text) == []


def test_in_an_expression_caret_is_still_power() -> None:
    assert ag.grad("x^2*3", x=2).grads["x"].tolist() == 12.0
    assert ag.grad("np.exp(x) + math.log(x)", x=1.0).verdict == "agree"


@pytest.mark.parametrize(
    "source",
    [
        "torch.linspace(-3.14159, 3.14159, 2000)",
        "torch.linspace(0, 1, 7, dtype=torch.float64)",
        "torch.arange(0.1, 2.0, 0.1)",
        "torch.arange(-1.0, 1.0, 0.3, dtype=torch.float64)",
        "torch.arange(5)",
        "torch.tensor([0.1, 0.2, 3.14159])",
        "torch.full((3,), 0.1)",
        "torch.ones(2, 3)",
        "torch.zeros(2)",
        "torch.eye(3, 2)",
        "torch.rand(4)",
        "torch.randn(2, 2, dtype=torch.float64)",
    ],
)
def test_a_constructor_gives_pytorch_s_own_tensor(source: str) -> None:
    """Bitwise: the value the cell builds is the tensor PyTorch's constructor returns."""
    text = f"torch.manual_seed(7)\nv = {source}\nw = v * 1\nprint(w)\n"
    python, raised = run_python("import torch\n" + text)
    tool, error = run_tool(text)
    assert raised is None and error is None
    assert np.array_equal(python[0][0], tool[0][0]), source


def test_the_linspace_of_the_issue_is_exact() -> None:
    text = (
        "x = torch.linspace(-3.14159, 3.14159, 2000, requires_grad=True)\n"
        "y = (x * x).sum()\ny.backward()\nprint(x.grad)\n"
    )
    tool, error = run_tool(text)
    want = 2 * torch.linspace(-3.14159, 3.14159, 2000)
    assert error is None and np.array_equal(tool[0][0], want.to(torch.float64).numpy())


def test_caret_in_an_expression_is_power_with_a_note():
    r = ag.grad("x^2", x=3)
    assert float(r.variables["x"].grad) == 6.0 and r.verdict == "agree"
    assert [n.code for n in r.notes] == ["caret_power"]
    assert str(r.notes[0]) == (
        "^ is read as ** (power) in an expression; in Python and PyTorch it is bitwise xor, "
        "which a pasted cell gets"
    )
    assert [n.code for n in ag.grad("x**2", x=3).notes] == []
