"""Users see only names they wrote (issue 28): a program keeps its own names for a value
bound again (``y_1``, ``x_2``), and every report shows the written name, with its line
where several values share it (``y (line 3)``)."""

from __future__ import annotations

import json
import re

import pytest

from autogradcli.bind import bind, retained_names
from autogradcli.cli import app
from autogradcli.errors import VariableError
from autogradcli.lang.parser import parse_expression
from autogradcli.results.grad import display_names, displayed, relabel, relabel_latex
from autogradcli.settings import Settings
from tests.conftest import RUNNER, Run, cli
from tests.schemas import validate_text

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


TYPED = """x = torch.tensor(2.0, requires_grad=True)
y = x*x
y = y + x
z = y*2
"""


def _stdin(code: str, *args: str) -> Run:
    """``autograd-cli grad - ARGS`` with ``code`` on stdin (NO_COLOR, 100 columns); a JSON
    document is validated against the schema."""
    done = RUNNER.invoke(app, ["grad", "-", *args], input=code, prog_name="autograd-cli")
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        raise done.exception
    if "--json" in args and done.exit_code == 0:
        validate_text(done.stdout)
    return Run(done.exit_code, done.stdout, done.stderr)


def _tensor_rows(stdout: str) -> list[str]:
    """The first line of each row of the tensors table: name, data, grad_fn, grad, check."""
    rows = []
    lines = _lines(stdout)
    start = next(k for k, line in enumerate(lines) if line.startswith("tensors after"))
    for line in lines[start:]:
        cells = [c.strip() for c in line.strip("│").split("│")]
        if line.startswith("│") and len(cells) == 7 and cells[1]:  # not a row's 2nd line
            rows.append(" ".join(cells[i] for i in (0, 1, 4, 5, 6)))
    return rows


def test_retain_grad_takes_the_names_the_user_wrote() -> None:
    shown = {}
    for name in ("y", "y (line 2)", "all"):
        run = _stdin(TYPED, "--retain-grad", name)
        assert run.exit_code == 0, run.stderr
        shown[name] = _tensor_rows(run.stdout)
    assert shown["y"] == [  # y as it is after the last line, as y.retain_grad() there
        "x 2 None 10 ✓",
        "y (line 2) 4 MulBackward0 None ✓",
        "y (line 3) 6 AddBackward0 2 ✓",
        "z 12 MulBackward0 None ✓",
    ]
    assert shown["y (line 2)"][1:3] == [
        "y (line 2) 4 MulBackward0 2 ✓",
        "y (line 3) 6 AddBackward0 None ✓",
    ]
    assert shown["all"] == [
        "x 2 None 10 ✓",
        "y (line 2) 4 MulBackward0 2 ✓",
        "y (line 3) 6 AddBackward0 2 ✓",
        "z 12 MulBackward0 1 ✓",
    ]


def test_a_wrong_retain_grad_name_lists_only_written_names() -> None:
    for name, hint in (("w", ""), ("y_1", ""), ("yy", "; did you mean y?")):
        run = _stdin(TYPED, "--retain-grad", name)  # y_1: the program's own name, not written
        assert (run.exit_code, run.stdout) == (2, "")
        assert run.stderr == (
            f"Error: --retain-grad {name}: no step or output named '{name}'{hint} "
            "(choose from y, z, or all)\n"
        )
    run = _stdin(TYPED, "--retain-grad", "x")
    assert run.exit_code == 2
    assert run.stderr == (
        "Error: 'x' is an input (a leaf tensor): its .grad is kept anyway; --retain-grad is "
        "for steps and the output: y, z\n"
    )
    run = _stdin(TYPED + "z.backward()\n", "--retain-grad", "y")  # a cell: its own lines
    assert run.exit_code == 2
    assert run.stderr.startswith("Error: --retain-grad does not apply to a cell that calls")


def test_json_keys_and_texts_use_the_written_names() -> None:
    run = _stdin(TYPED, "--retain-grad", "all", "--json")
    assert run.exit_code == 0, run.stderr
    document = run.json()
    assert list(document["tensors"]) == ["x", "y (line 2)", "y (line 3)", "z"]
    assert [t["grad"] for t in document["tensors"].values()] == [10.0, 2.0, 2.0, 1.0]
    x = document["variables"]["x"]
    assert x["chain_rule"] == (
        "∂z/∂x = ∂z/∂[y (line 3)]·∂[y (line 3)]/∂[y (line 2)]·∂[y (line 2)]/∂x"
        " + ∂z/∂[y (line 3)]·∂[y (line 3)]/∂x = (2)·(1)·(2*x) + (2)·(1)"
    )
    y2, y3 = r"\left[y \text{ (line 2)}\right]", r"\left[y \text{ (line 3)}\right]"
    assert x["chain_rule_latex"] == (
        rf"\frac{{\partial z}}{{\partial x}} = \frac{{\partial z}}{{\partial {y3}}} \cdot "
        rf"\frac{{\partial {y3}}}{{\partial {y2}}} \cdot \frac{{\partial {y2}}}{{\partial x}}"
        rf" + \frac{{\partial z}}{{\partial {y3}}} \cdot \frac{{\partial {y3}}}{{\partial x}}"
        r" = \left(2\right) \cdot \left(1\right) \cdot \left(2 x\right) + \left(2\right)"
        r" \cdot \left(1\right)"
    )
    assert "y_1" not in json.dumps(document)


def test_json_of_an_input_bound_again_keeps_both() -> None:
    run = _stdin("x = x*2\ny = x*x\n", "--x", "3", "--retain-grad", "x", "--json")
    assert run.exit_code == 0, run.stderr
    document = run.json()
    assert list(document["variables"]) == ["x (input)"]
    x = document["variables"]["x (input)"]
    assert (x["grad"], x["derivative"], x["latex"]) == (
        24.0,
        "8*[x (input)]",
        r"8 \left[x \text{ (input)}\right]",
    )
    assert x["chain_rule"] == (
        "∂y/∂[x (input)] = ∂y/∂[x (line 1)]·∂[x (line 1)]/∂[x (input)] = (2*[x (line 1)])·(2)"
    )
    assert document["passes"][0]["grads"] == {"x (input)": 24.0}
    tensors = document["tensors"]  # --retain-grad x: x as it is after the last line
    assert {n: t["grad"] for n, t in tensors.items()} == {
        "x (input)": 24.0,
        "x (line 1)": 12.0,
        "y": None,
    }
    assert "x_2" not in json.dumps(document)


def test_the_latex_lines_name_no_internal_step() -> None:
    run = _stdin("x = x*2\ny = x*x\n", "--x", "3", "--latex")
    assert run.exit_code == 0, run.stderr
    lines = _lines(run.stdout)
    assert r"LaTeX ∂y/∂[x (input)]: 8 \left[x \text{ (input)}\right]" in lines
    assert "x_2" not in run.stdout and "x_{2}" not in run.stdout


def test_relabel_latex_takes_both_spellings_of_a_made_name() -> None:
    shown = {"x": "x (input)", "x_2": "x (line 1)", "alpha_1": "alpha (line 2)", "y": "y"}
    tex = r"\frac{\partial y}{\partial x_2} = 2 x_{2} + \alpha_{1} + \exp{\left(x \right)}"
    assert relabel_latex(tex, shown) == (
        r"\frac{\partial y}{\partial \left[x \text{ (line 1)}\right]} = "
        r"2 \left[x \text{ (line 1)}\right] + \left[\alpha \text{ (line 2)}\right]"
        r" + \exp{\left(\left[x \text{ (input)}\right] \right)}"
    )
    assert relabel_latex(tex, {"x": "x", "y": "y"}) == tex


def test_a_wrong_retain_grad_name_carries_the_nearest_written_one() -> None:
    """The error's data names the closest choice (``near``) for a "did you mean"."""
    bound = bind(TYPED, {}, Settings())
    assert retained_names(bound, ["y (line 2)", "y"]) == ["y_1", "y"]
    found = {}
    for name in ("yy", "y (line 22)", "q"):
        with pytest.raises(VariableError) as caught:
            retained_names(bound, [name])
        assert caught.value.code == "retain_grad_unknown"
        assert caught.value.data["intermediate"] == ["y", "z"]
        found[name] = caught.value.data["near"]
    assert found == {"yy": "y", "y (line 22)": "y (line 2)", "q": None}


def test_explain_rows_name_no_internal_step() -> None:
    args = ("--x", "[1,2]", "--weights", "ones", "--explain")
    run = _stdin("x = x*2\ny = x*x\n", *args)
    assert run.exit_code == 0, run.stderr
    lines = _lines(run.stdout)
    assert (
        "│ 1 │ MulBackward0   │ [1, 1]      │ x              │ [x (line 1)]    │ [2, 4]  │ ✓     │"
        in lines
    )
    assert (
        "│ 3 │ AccumulateGrad │ [8, 16]     │ x (input).grad │ += (accumulate) │         │ ✓     │"
        in lines
    )
    assert any(line.startswith("│ x (input) │ [[8, 0],") for line in lines)
    assert "x_2" not in run.stdout
    document = _stdin("x = x*2\ny = x*x\n", *args, "--json").json()
    nodes = document["explain"]["nodes"]
    assert [[f["local_derivative"] for f in n["flows"]] for n in nodes] == [
        ["[x (line 1)]", "[x (line 1)]"],
        ["2"],
        [],
    ]
    assert [n["leaf"] for n in nodes] == [None, None, "x (input)"]
    assert list(document["explain"]["vjp"]) == ["x (input)"]


def test_displayed_reads_the_text_again_only_where_a_name_needs_it() -> None:
    given = frozenset({"x"})
    assert displayed("x = x*2; y = x*x", given, ["x", "8*x", "y"]) == {}
    expected = {"x": "x (input)", "x_2": "x (line 1)", "y": "y"}
    assert displayed("x = x*2; y = x*x", given, ["x", "y", "2*x_2"]) == expected
    assert displayed("x = x*2; y = x*x", given, ["x"], force=True) == expected  # --inspect


def test_a_cells_json_uses_the_written_names() -> None:
    run = _stdin(TYPED + "z.backward()\nx = x * 3\nw = x * 2\nw.backward()\n", "--json")
    assert run.exit_code == 0, run.stderr
    assert not re.search(r"\b[xyz]_\d\b", run.stdout), run.stdout  # no name the program made
    backward = [e for e in run.json()["events"] if e["kind"] == "backward"]
    assert list(backward[0]["grads"]) == ["x (line 1)"]
    assert list(backward[-1]["grads"]) == ["x (line 1)"]


def test_a_retained_value_without_grad_is_named_as_written() -> None:
    run = cli(
        "grad",
        "y = c*2; y = y + x; out = y*3",
        "--x",
        "1",
        "--c",
        "2",
        "--const",
        "c",
        "--retain-grad",
        "y (assignment 1)",
    )
    assert run.exit_code == 2
    assert run.stderr == (
        "Error: --retain-grad y (assignment 1): 'y (assignment 1)' does not require grad (it "
        "depends on no input that does), so it has no gradient to keep\n"
    )
