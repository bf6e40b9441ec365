"""Users see only names they wrote (issue 28): a program keeps its own names for a value
bound again (``y_1``, ``x_2``), and every report shows the written name, with its line
where several values share it (``y (line 3)``)."""

from __future__ import annotations

from autogradcli.lang.parser import parse_expression
from autogradcli.results.grad import display_names, relabel
from tests.conftest import cli

REBOUND = """import torch
x = torch.tensor(2.0, requires_grad=True)
y = x*x
y = y + x
z = y*3
"""

REMADE = """import torch
x = torch.tensor(1., requires_grad=True)
y = x*x
y.backward()
x = torch.tensor(3., requires_grad=True)
z = x*x
z.backward()
print(x.grad)
"""


def _lines(stdout: str) -> list[str]:
    return [line.rstrip() for line in stdout.splitlines()]


def test_a_name_bound_twice_shows_its_line() -> None:
    program = parse_expression(REBOUND)
    assert dict(program.names)["y_1"] == "y"  # the program's own name stays as it is
    assert display_names(program) == {"x": "x", "y_1": "y (line 3)", "y": "y (line 4)", "z": "z"}


def test_an_input_bound_again_and_one_line_programs() -> None:
    program = parse_expression("x = x*2\ny = x*x", given=frozenset({"x"}))
    assert display_names(program) == {"x": "x (input)", "x_2": "x (line 1)", "y": "y"}
    program = parse_expression("y = x*x; y = y + x; z = y*3", given=frozenset({"x"}))
    assert display_names(program) == {
        "x": "x",
        "y_1": "y (assignment 1)",
        "y": "y (assignment 2)",
        "z": "z",
    }
    program = parse_expression("y = x*2\ny.add_(1)\nz = y*y", given=frozenset({"x"}))
    assert display_names(program)["y_1"] == "y (line 1)"
    assert display_names(program)["y"] == "y (line 2)"


def test_relabel_writes_a_shared_name_in_brackets() -> None:
    shown = {"x": "x (line 2)", "x_2": "x (line 5)", "y": "y", "xs": "xs"}
    assert relabel("2*x*x_2 + exp(xs) + sum(x_2)", shown) == (
        "2*[x (line 2)]*[x (line 5)] + exp(xs) + sum([x (line 5)])"
    )
    assert relabel("2*x", {"x": "x"}) == "2*x"
    assert relabel(None, shown) is None


def test_the_chain_rule_line_names_no_internal_step() -> None:
    run = cli("grad", REBOUND)
    assert run.exit_code == 0, run.stderr
    lines = _lines(run.stdout)
    start = next(k for k, line in enumerate(lines) if line.startswith("chain rule"))
    assert " ".join(lines[start:-1]) == (  # wrapped at 100 columns, at spaces
        "chain rule: ∂z/∂x = ∂z/∂[y (line 4)]·∂[y (line 4)]/∂[y (line 3)]·∂[y (line 3)]/∂x"
        " + ∂z/∂[y (line 4)]·∂[y (line 4)]/∂x = (3)·(1)·(2*x) + (3)·(1), expanded: 6*x + 3"
    )
    assert "y_1" not in run.stdout


def test_a_cell_that_makes_a_leaf_again_has_no_phantom_row() -> None:
    run = cli("grad", REMADE)
    assert run.exit_code == 0, run.stderr
    assert _lines(run.stdout) == [
        "cell   device cpu · dtype float32 · rtol 1.3e-06, atol 1e-05",
        "[1] y.backward()  ✓",
        "               .grad (torch)  expected (SymPy)  derivative (SymPy)  max abs error  check",
        "   x (line 2)  2              2                 2*[x (line 2)]      0              ✓",
        "[2] z.backward()  ✓",
        "               .grad (torch)  expected (SymPy)  derivative (SymPy)  max abs error  check",
        "   x (line 2)  2              2                 —                   0              ✓",
        "   x (line 5)  6              6                 2*[x (line 5)]      0              ✓",
        "[3] print(x.grad)  ✓",
        "   x.grad = 6   ✓",
        "✓ every line agrees with SymPy",
    ]


def test_the_gradients_table_shows_each_value_under_its_line() -> None:
    code = REMADE.replace("y.backward()\n", "").replace(
        "z = x*x\nz.backward()\nprint(x.grad)\n", "z = x*y\n"
    )
    run = cli("grad", code)
    assert run.exit_code == 0, run.stderr
    rows = [line for line in _lines(run.stdout) if line.startswith("│ x")]
    assert rows == [
        "│ x (line 2) │ 1     │ 6          │ 6        │ 2*[x (line 2)]*[x (line 4)] │ 0       │"
        " ✓     │",
        "│ x (line 4) │ 3     │ 1          │ 1        │ [x (line 2)]**2             │ 0       │"
        " ✓     │",
    ]
    assert "x_2" not in run.stdout


def test_an_input_bound_again_in_a_program() -> None:
    run = cli("grad", "x = x*2; y = x*x", "--x", "1")
    assert run.exit_code == 0, run.stderr
    assert "│ x (input) │ 1     │ 8          │ 8        │ 8*[x (input)] │" in run.stdout
    assert "x_2" not in run.stdout


def test_a_leaf_made_after_a_backward_has_no_row_before_it() -> None:
    code = """import torch
a = torch.tensor(1., requires_grad=True)
y = a*a
y.backward()
x = torch.tensor(3., requires_grad=True)
z = x*a
z.backward()
"""
    run = cli("grad", code)
    assert run.exit_code == 0, run.stderr
    rows = [line.rstrip() for line in run.stdout.splitlines() if line.startswith("   a")]
    rows += [line.rstrip() for line in run.stdout.splitlines() if line.startswith("   x")]
    assert rows == [
        "   a  2              2                 2*a                 0              ✓",
        "   a  5              5                 2 + x               0              ✓",
        "   x  1              1                 a                   0              ✓",
    ]
